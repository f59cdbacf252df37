"""``{"type": "opm", ...}``: any OVOS text embeddings plugin (``opm.embeddings.text``)."""

from __future__ import annotations

from typing import Any

from ovos_memory_plugins.embedders.openai_compatible import (
    DEFAULT_EMBED_TIMEOUT,
    DEFAULT_QUERY_TIMEOUT,
    positive_number,
    required_name,
    service_guard,
)
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.guard import (
    DEFAULT_BACKOFF_MAX_S,
    DEFAULT_BACKOFF_S,
    ServiceUnavailable,
)

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
        query_timeout: the total deadline of a query's embedding (the turn waits for it);
            at most ``timeout``.
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
        query_timeout: float = DEFAULT_QUERY_TIMEOUT,
    ) -> None:
        self.module = required_name(module, "module", "a plugin name")
        self.config = dict(config or {})
        self.guard = service_guard(f"embeddings plugin {module}", timeout, backoff_s, backoff_max_s)
        self.timeout = self.guard.deadline_s
        self.query_timeout = min(positive_number(query_timeout, "query_timeout"), self.timeout)
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
        return self._call(texts, self.timeout)

    def embed_queries(self, texts: list[str]) -> list[Any]:
        """Like :meth:`embed`, within ``query_timeout`` (the plugin embeds queries and
        documents alike)."""
        return self._call(texts, self.query_timeout)

    def _call(self, texts: list[str], deadline_s: float) -> list[Any]:
        try:
            return self.guard.call_within(deadline_s, self._embed, list(texts))
        except ServiceUnavailable:
            raise
        except Exception as exc:
            raise BackendError(f"embeddings plugin {self.module!r} failed: {exc}") from exc
