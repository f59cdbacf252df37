"""``{"type": "openai", ...}``: any OpenAI-compatible ``/embeddings`` endpoint, through the
``openai`` package, each call under a total deadline and a back-off."""

from __future__ import annotations

import hashlib
import math
import os
from typing import Any

from ovos_memory_plugins.errors import BackendError, ConfigError
from ovos_memory_plugins.guard import (
    DEFAULT_BACKOFF_MAX_S,
    DEFAULT_BACKOFF_S,
    CallGuard,
    ServiceUnavailable,
    capped_http_client,
)

# -- OpenAI-compatible -----------------------------------------------------------------------


#: The default total deadline of one request to an embedding server or plugin, in seconds
#: (documents: a turn's exchange, and the background re-embedding's batches).
DEFAULT_EMBED_TIMEOUT = 10.0
#: The default total deadline of a query's embedding, in seconds: the turn waits for it before
#: anything is spoken, so a hung server costs a voice turn this once (then the back-off), not
#: :data:`DEFAULT_EMBED_TIMEOUT`.
DEFAULT_QUERY_TIMEOUT = 1.5
#: Bytes of an embedding server's reply read at most: a batch of 64 vectors of 3,072 floats as
#: JSON is about 4 MB; a longer body fails the request (docs/reliability.md, "Limits").
MAX_REPLY_BYTES = 32 * 1024 * 1024


def positive_number(value: Any, key: str, zero: bool = False) -> float:
    """``value`` as a float > 0 (>= 0 with ``zero``), else a :class:`ConfigError` naming the key."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < 0 or (number == 0 and not zero):
        expected = "a number >= 0" if zero else "a number > 0"
        raise ConfigError([f"key 'embedder.{key}': {value!r} is not accepted; expected {expected}"])
    return number


def required_name(value: Any, key: str, what: str) -> str:
    """``value`` if it is a non-empty string, else a :class:`ConfigError` naming ``embedder.<key>``."""
    if not isinstance(value, str) or not value:
        raise ConfigError([f"key 'embedder.{key}': {value!r} is not accepted; expected {what}"])
    return value


def service_guard(name: str, timeout: Any, backoff_s: Any, backoff_max_s: Any) -> CallGuard:
    """The total deadline and back-off of the calls to one service, from the embedder's keys
    (each checked: a :class:`ConfigError` names the bad one)."""
    return CallGuard(
        name,
        positive_number(timeout, "timeout"),
        backoff_s=positive_number(backoff_s, "backoff_s", zero=True),
        backoff_max_s=positive_number(backoff_max_s, "backoff_max_s", zero=True),
    )


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint, through the ``openai`` package.

    Args:
        model: the model name the server knows.
        base_url: e.g. ``http://127.0.0.1:8080/v1``; default ``OVOS_MEMORY_EMBEDDING_BASE_URL``,
            then ``OPENAI_BASE_URL``, then the openai package's default (api.openai.com).
        api_key: default ``OVOS_MEMORY_EMBEDDING_API_KEY``, then ``OPENAI_API_KEY``, then
            ``"none"`` (local servers ignore it).
        dimensions: ask the server for shorter vectors (text-embedding-3 models); None for the
            model's own size.
        batch_size: texts per request.
        timeout: the total deadline of one request of documents in seconds (connecting,
            waiting and reading together: a server that trickles its reply is cut off at the
            deadline). A failed request is not retried here (the vector backend keeps the
            document and embeds it later).
        query_timeout: the total deadline of a query's embedding (the turn waits for it
            before the reply is spoken); at most ``timeout``.
        backoff_s, backoff_max_s: after a failure, requests fail at once for ``backoff_s``
            seconds, doubling per consecutive failure up to ``backoff_max_s``
            (:class:`~ovos_memory_plugins.guard.CallGuard`).
        query_prefix, document_prefix: text put before queries and documents (e5 models want
            ``"query: "`` and ``"passage: "``).
        client: an ``openai.OpenAI`` to use instead of building one (a test seam).
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = DEFAULT_EMBED_TIMEOUT,
        query_prefix: str = "",
        document_prefix: str = "",
        client: Any = None,
        backoff_s: float = DEFAULT_BACKOFF_S,
        backoff_max_s: float = DEFAULT_BACKOFF_MAX_S,
        query_timeout: float = DEFAULT_QUERY_TIMEOUT,
    ) -> None:
        self.model = required_name(model, "model", "a model name")
        if dimensions is not None and int(dimensions) < 1:
            raise ConfigError([f"key 'embedder.dimensions': {dimensions!r} is not accepted; expected an integer >= 1"])
        self.dimensions = int(dimensions) if dimensions is not None else None
        self.batch_size = max(1, int(batch_size))
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.base_url = base_url or _env("OVOS_MEMORY_EMBEDDING_BASE_URL", "OPENAI_BASE_URL")
        self.guard = service_guard(
            f"embedding server {self.base_url or 'api.openai.com'}", timeout, backoff_s, backoff_max_s
        )
        self.timeout = self.guard.deadline_s
        self.query_timeout = min(positive_number(query_timeout, "query_timeout"), self.timeout)
        key = api_key or _env("OVOS_MEMORY_EMBEDDING_API_KEY", "OPENAI_API_KEY") or "none"
        if client is None:
            import openai

            client = openai.OpenAI(
                base_url=self.base_url,
                api_key=key,
                timeout=self.timeout * 2,  # the guard's total deadline comes first (counted as a timeout)
                max_retries=0,
                http_client=capped_http_client(MAX_REPLY_BYTES),
            )
        self._client = client
        dim = str(self.dimensions) if self.dimensions is not None else "native"
        prefixes = ""
        if query_prefix or document_prefix:
            prefixes = ":" + hashlib.sha256(f"{query_prefix}\x00{document_prefix}".encode()).hexdigest()[:8]
        self.id = f"openai:{model}:{dim}{prefixes}"

    def _request(self, texts: list[str], deadline_s: float) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            kwargs: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
            if self.dimensions is not None:
                kwargs["dimensions"] = self.dimensions
            try:
                reply = self.guard.call_within(deadline_s, self._client.embeddings.create, **kwargs)
                data = sorted(reply.data, key=lambda item: item.index)
                vectors = [list(item.embedding) for item in data]
            except ServiceUnavailable:
                raise
            except Exception as exc:  # the openai package raises many types; all mean "no vectors"
                raise BackendError(f"embedding request to {self.base_url or 'the OpenAI API'} failed: {exc}") from exc
            if len(vectors) != len(batch):
                raise BackendError(f"embedding server returned {len(vectors)} vectors for {len(batch)} texts")
            out.extend(vectors)
        return out

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Document vectors (``document_prefix`` + text)."""
        return self._request([self.document_prefix + t for t in texts], self.timeout)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors (``query_prefix`` + text), within ``query_timeout``."""
        return self._request([self.query_prefix + t for t in texts], self.query_timeout)
