"""Caches of an embedder's vectors: the query LRU of the process and a memory's stored
document vectors (:class:`CachedEmbedder`)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ovos_memory_plugins.embedders.protocol import Embedder, Matrix, check_embedder, embed_documents, embed_queries
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.storage.embedding_cache import text_digest

LOG = logging.getLogger(__name__)

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
