"""Indexes over a memory's documents table, their fusion into a hybrid, and the memory made of them.

An index (:class:`~ovos_memory_plugins.storage.seam.Index`, the storage seam's protocol)
finds the documents of the memory's one documents table again::

    prepare(docs)               before the write transaction (the vector index embeds here)
    add(stored, prepared)       inside it: index the stored documents
    remove(stored)/remove_all() inside the forget transaction, before the rows go
    search(query, k, session_id) the best k as MemoryHit (source = doc id), best first

Indexes shipped here and in :mod:`ovos_memory_plugins.storage`:

* the keyword index (:class:`ovos_memory_plugins.storage.sqlite.keyword.SqliteKeywordIndex`);
* :class:`VectorIndex`: an embedder over the engine's
  :class:`~ovos_memory_plugins.storage.seam.VectorStore`; embedder outages leave vectors
  pending for a background retry (writes) or give no hits (reads);
* :class:`HybridIndex` (``a | b``): several indexes as one; writes reach every arm, reads fuse
  the arms that answer (a failing arm is skipped, logged).

:class:`IndexedMemory` is a memory made of indexes over its storage: the keyword backend is
the documents table plus a keyword index; the vector backend the documents table plus a vector
index, and with ``hybrid`` a keyword index too, both over the SAME database. An arm may also
have ``weight(query) -> float``: how much to trust it for this query (the local MiniLM arm
lowers it for text its vocabulary cannot read).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.dates import Clock, Window
from ovos_memory_plugins.embedders import CachedEmbedder, Embedder, embed_documents, embed_queries
from ovos_memory_plugins.errors import BackendError, StorageError
from ovos_memory_plugins.fusion import FUSIONS, fuse, fuse_scores, list_confidence
from ovos_memory_plugins.storage.records import Document, ForgetReport, StoredDocument
from ovos_memory_plugins.storage.seam import DocumentStore, Index, Storage, VectorStore

LOG = logging.getLogger(__name__)

__all__ = [
    "FUSIONS",
    "HybridIndex",
    "Index",
    "IndexBase",
    "IndexedMemory",
    "VectorIndex",
    "fuse_scores",
    "list_confidence",
]


class IndexBase:
    """Gives an index ``|`` (compose into a :class:`HybridIndex`)."""

    def __or__(self, other: Any) -> HybridIndex:
        if not isinstance(other, Index):
            return NotImplemented
        left = list(self.arms) if isinstance(self, HybridIndex) else [self]
        right = list(other.arms) if isinstance(other, HybridIndex) else [other]
        return HybridIndex([*left, *right])


def _tiers(index: Index, removed: int) -> dict[str, int]:
    if isinstance(removed, ForgetReport) and removed.tiers:
        return removed.tiers
    return {f"{index.name}_rows": int(removed)}


# -- the hybrid (fusion itself: ovos_memory_plugins.fusion) -------------------------------


class HybridIndex(IndexBase):
    """Several indexes as one: writes reach every arm, reads fuse the arms that answer.

    Args:
        arms: the indexes, each implementing :class:`~ovos_memory_plugins.storage.seam.Index`.
        weights: one per arm (default 1.0 each); an arm's ``weight(query)``, when it has one,
            multiplies its weight per query.
        fusion: any of :data:`~ovos_memory_plugins.fusion.FUSIONS`: ``"calibrated"`` (the
            default: ``"weighted"`` with each arm's weight times the
            :func:`~ovos_memory_plugins.fusion.list_confidence` of its hits for this query),
            ``"weighted"``, ``"score"``, ``"rrf"``, ``"merge"``, ``"priority"``, ``"interleave"``.
        rrf_k: the rank constant of ``rrf`` and ``score``.
        depth: how many hits each arm is asked for, at least (``k`` when larger).
    """

    def __init__(
        self,
        arms: Sequence[Any],
        weights: Sequence[float] | None = None,
        fusion: str = "calibrated",
        rrf_k: float = 60,
        depth: int = 50,
    ) -> None:
        for i, arm in enumerate(arms):
            if not isinstance(arm, Index):
                raise BackendError(
                    f"arm {i} ({type(arm).__name__}) is not an Index: it needs name, prepare, add, remove, "
                    "remove_all, search, stats and close"
                )
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, not {fusion!r}")
        self.arms: list[Index] = list(arms)
        self.weights = [1.0] * len(self.arms) if weights is None else [float(w) for w in weights]
        if len(self.weights) != len(self.arms):
            raise ValueError(f"got {len(self.weights)} weights for {len(self.arms)} arms")
        self.fusion = fusion
        self.rrf_k = rrf_k
        self.depth = depth

    @property
    def name(self) -> str:
        """The arms' names joined with ``|``."""
        return " | ".join(arm.name for arm in self.arms)

    @property
    def filters_time(self) -> bool:
        """Whether ``search`` takes ``window=``: every arm declares ``filters_time`` (a window
        reaches every arm, so no arm brings hits from outside it)."""
        return bool(self.arms) and all(getattr(arm, "filters_time", False) for arm in self.arms)

    def prepare(self, docs: Sequence[Document]) -> list[Any]:
        """Each arm's preparation."""
        return [arm.prepare(docs) for arm in self.arms]

    def add(self, docs: Sequence[StoredDocument], prepared: Any = None) -> None:
        """Add to every arm (inside the caller's transaction: one failing arm fails the write)."""
        work = prepared if isinstance(prepared, list) else [None] * len(self.arms)
        for arm, p in zip(self.arms, work, strict=True):
            arm.add(docs, p)

    def remove(self, docs: Sequence[StoredDocument]) -> int:
        """Remove from every arm; the count carries each arm's figure in ``.tiers``."""
        tiers: dict[str, int] = {}
        for arm in self.arms:
            tiers.update(_tiers(arm, arm.remove(docs)))
        return ForgetReport(sum(tiers.values()), tiers)

    def remove_all(self) -> int:
        """Empty every arm; the count carries each arm's figure in ``.tiers``."""
        tiers: dict[str, int] = {}
        for arm in self.arms:
            tiers.update(_tiers(arm, arm.remove_all()))
        return ForgetReport(sum(tiers.values()), tiers)

    def stats(self) -> dict[str, Any]:
        """Every arm's figures."""
        out: dict[str, Any] = {}
        for arm in self.arms:
            out.update(arm.stats())
        return out

    def close(self) -> None:
        """Close every arm."""
        for arm in self.arms:
            arm.close()

    def arm_hits(
        self, query: str, k: int, session_id: str | None = None, window: Window | None = None
    ) -> list[list[MemoryHit] | None]:
        """Each arm's hits (None for an arm that failed, logged); with ``window``, each arm's
        hits made in it (every arm filters by time: :attr:`filters_time`)."""
        out: list[list[MemoryHit] | None] = []
        for arm in self.arms:
            try:
                if window is None:
                    out.append(arm.search(query, max(k, self.depth), session_id))
                else:
                    search: Any = arm.search  # declared by filters_time, not by the Index protocol
                    out.append(list(search(query, max(k, self.depth), session_id, window=window)))
            except Exception:  # a read skips a failing arm
                LOG.warning("hybrid index: arm %s failed to search; using the others", arm.name, exc_info=True)
                out.append(None)
        return out

    def search(
        self, query: str, k: int, session_id: str | None = None, *, window: Window | None = None
    ) -> list[MemoryHit]:
        """The arms' hits fused, best first; arms that fail are skipped. ``window``: only
        documents made in ``(since, until)``, in every arm (ValueError unless :attr:`filters_time`)."""
        if k <= 0:
            return []
        if window is not None and not self.filters_time:
            raise ValueError(f"hybrid index {self.name}: not every arm can search within a window of time")
        lists: list[list[MemoryHit]] = []
        weights: list[float] = []
        arms = self.arm_hits(query, k, session_id, window)
        for arm, base, hits in zip(self.arms, self.weights, arms, strict=True):
            if hits is None:
                continue
            weight = base
            per_query = getattr(arm, "weight", None)
            if callable(per_query):
                try:
                    weight *= float(per_query(query))
                except Exception:
                    LOG.warning("hybrid index: weight() of arm %s failed; using %s", arm.name, base, exc_info=True)
            lists.append(hits)
            weights.append(weight if math.isfinite(weight) else 0.0)
        if not lists:
            return []
        fused = fuse(self.fusion, lists, weights=weights, rrf_k=self.rrf_k)
        return fused[:k]


# -- arms ----------------------------------------------------------------------------------


class VectorIndex(IndexBase):
    """Dense vectors: an :class:`Embedder` over the engine's vector store.

    ``prepare`` embeds the new documents before the write transaction; when the embedder fails
    the documents are still stored and their vectors stay pending: :meth:`reembed` (run in the
    background by :meth:`start_background`) fills them in later, as after an embedder switch.
    ``search`` raises :class:`BackendError` when the embedder fails (a hybrid skips the arm; the
    vector backend answers with no hits).

    Args:
        store: where vectors live (the engine's :class:`~ovos_memory_plugins.storage.seam.VectorStore`).
        documents: the memory's documents table (hits read their text there).
        embedder: the active embedder; its ``id`` names the vector space searched.
        min_similarity: hits below this cosine similarity are dropped.
        batch_size: texts per embedding call.
        background: start the background re-embedding thread after a failed embedding.
    """

    name = "vector"

    def __init__(
        self,
        store: VectorStore,
        documents: DocumentStore,
        embedder: Embedder,
        min_similarity: float = 0.0,
        batch_size: int = 64,
        background: bool = True,
    ) -> None:
        self.background = background
        self.store = store
        self.documents = documents
        self.embedder = embedder
        self.space = embedder.id
        self.min_similarity = min_similarity
        self.batch_size = max(1, batch_size)
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._stop = threading.Event()
        self.last_error: str | None = None

    def prepare(self, docs: Sequence[Document]) -> dict[str, Any]:
        """Embed the documents (in batches); an embedder failure leaves them pending (no raise)."""
        if not docs:
            return {}
        try:
            vectors = embed_documents(self.embedder, [d.text for d in docs], self.batch_size)
        except Exception as exc:  # any embedder failure: keep the documents, retry later
            self.last_error = str(exc)
            LOG.warning("vector index: embedding %d document(s) failed (%s); queued for retry", len(docs), exc)
            if self.background:
                self.start_background(first_delay=5.0)
            return {}
        return {d.doc_id: vectors[i] for i, d in enumerate(docs)}

    def add(self, docs: Sequence[StoredDocument], prepared: Any = None) -> None:
        """Store the prepared vectors; a changed text drops the document's old vectors (every space)."""
        changed = [d.key for d in docs if d.changed and not d.new]
        if changed:
            self.store.remove(changed)
        vectors = prepared if isinstance(prepared, dict) else {}
        self.store.put_vectors(self.space, [(d.doc_id, vectors[d.doc_id]) for d in docs if d.doc_id in vectors])

    def remove(self, docs: Sequence[StoredDocument]) -> int:
        """Delete the documents' vectors (every space)."""
        n = self.store.remove([d.key for d in docs])
        tiers = {"vectors": n}
        if isinstance(self.embedder, CachedEmbedder) and self.embedder.cache is not None and docs:
            tiers["embedding_cache"] = self.embedder.forget([d.text for d in docs])
        return ForgetReport(n, tiers)

    def remove_all(self) -> int:
        """Delete every vector."""
        n = self.store.remove_all()
        tiers = {"vectors": n}
        if isinstance(self.embedder, CachedEmbedder) and self.embedder.cache is not None:
            tiers["embedding_cache"] = self.embedder.forget_all()
        return ForgetReport(n, tiers)

    @property
    def filters_time(self) -> bool:
        """Whether ``search`` takes ``window=``: the vector store declares ``filters_time``
        (both engines' stores do: a ``created`` range in the search)."""
        return bool(getattr(self.store, "filters_time", False))

    def search(
        self, query: str, k: int, session_id: str | None = None, *, window: Window | None = None
    ) -> list[MemoryHit]:
        """Nearest documents by cosine similarity (``score``), at or above ``min_similarity``;
        ``window``: only documents made in ``(since, until)`` (ValueError unless :attr:`filters_time`)."""
        if k <= 0 or not query.strip():
            return []
        if window is not None and not self.filters_time:
            raise ValueError(f"vector store {type(self.store).__name__} cannot search within a window of time")
        try:
            q = embed_queries(self.embedder, [query])[0]
        except Exception as exc:
            self.last_error = str(exc)
            raise BackendError(f"embedding the query failed: {exc}") from exc
        if window is None:
            found = self.store.search(self.space, q, k, session_id)
        else:
            search: Any = self.store.search  # declared by filters_time, not by the VectorStore protocol
            found = list(search(self.space, q, k, session_id, window=window))
        found = [(d, s) for d, s in found if s >= self.min_similarity]
        docs = self.documents.get(d for d, _ in found)
        hits = []
        for doc_id, score in found:
            doc = docs.get(doc_id)
            if doc is None:
                continue
            meta = dict(doc.metadata)
            meta.setdefault("session_id", doc.session_id)
            hits.append(MemoryHit(content=doc.text, source=doc_id, score=score, metadata=meta))
        return hits

    def weight(self, query: str) -> float:
        """How far to trust this arm for ``query``, from the embedder's ``coverage(query)`` (the
        share of the query it can read) when it has one: 0 at 60 % or less, 1 at 90 % or more,
        linear between. Without ``coverage``: 1."""
        coverage = getattr(self.embedder, "coverage", None)
        if not callable(coverage):
            return 1.0
        return max(0.0, min(1.0, (float(coverage(query)) - 0.6) / 0.3))

    def stats(self) -> dict[str, Any]:
        """The embedder, pending documents, vectors per space and the search path."""
        out: dict[str, Any] = {
            "embedder": self.embedder.id,
            "pending_vectors": self.pending(),
            "vector_spaces": self.store.spaces(),
            "vector_search": self.store.path,
        }
        if self.last_error:
            out["last_embedder_error"] = self.last_error
        return out

    def close(self) -> None:
        """Stop the background thread."""
        self.stop()

    # -- re-embedding --------------------------------------------------------------------------

    def pending(self) -> int:
        """How many documents have no vector of the active embedder."""
        return self.store.missing_count(self.space)

    def reembed(self, max_docs: int | None = None) -> int:
        """Embed pending documents from their stored text, oldest first; return how many.

        Stops at the first embedder failure (raising it) with the work done so far committed,
        so an interrupted run resumes where it stopped.
        """
        done = 0
        while max_docs is None or done < max_docs:
            limit = self.batch_size if max_docs is None else min(self.batch_size, max_docs - done)
            batch = self.store.missing(self.space, limit)
            if not batch:
                break
            vectors = embed_documents(self.embedder, [text for _, text in batch], self.batch_size)
            done += self.store.put_vectors(self.space, [(doc_id, vectors[i]) for i, (doc_id, _) in enumerate(batch)])
            if self._stop.is_set():
                break
        return done

    def start_background(self, first_delay: float = 0.0) -> None:
        """Re-embed pending documents in a daemon thread, retrying failures with back-off."""
        with self._thread_lock:
            if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(
                target=self._background, args=(first_delay,), name="ovos-memory-reembed", daemon=True
            )
            self._thread.start()

    def _background(self, first_delay: float) -> None:
        delay = max(first_delay, 0.0)
        backoff = 5.0
        while not self._stop.wait(delay):
            try:
                if self.pending() == 0:
                    return
                n = self.reembed(max_docs=self.batch_size * 4)
                LOG.info("vector index: re-embedded %d document(s) with %s", n, self.space)
                self.last_error = None
                backoff = 5.0
                delay = 0.0
            except Exception as exc:  # the embedder is down or the store is closing: retry later
                if self._stop.is_set():
                    return
                self.last_error = str(exc)
                LOG.warning("vector index: re-embedding failed (%s); retrying in %.0f s", exc, backoff)
                delay = backoff
                backoff = min(backoff * 2, 300.0)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the background thread (it finishes its current batch)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until the background thread has finished; return whether it has."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            thread = self._thread
            if thread is None or not thread.is_alive():
                return True
            thread.join(0.05)
        return False


class IndexedMemory(BaseRetrievalMemory):
    """A memory made of indexes over its storage's documents table (no storage hooks needed).

    The base writes every document to the documents table and to every index registered in
    ``storage.indexes`` (its own, ``self.indexes``, and those of parts sharing the storage) in one
    transaction, and deletes from all of them; a subclass builds its indexes in
    :meth:`_open_indexes` and names the searchable one ``self.index``. When the indexes cannot
    be opened on the memory's file (a broken file), the memory moves to RAM and says so
    (``stats()["storage"]["problem"]``, an ERROR each turn); the constructor never raises.
    """

    persistent: ClassVar[bool] = True
    stores_in_storage: ClassVar[bool] = True
    #: Built over a shared storage (``storage=``), its indexes join the storage's: a composite's
    #: keyword and vector parts index the same documents, written once.
    shares_storage: ClassVar[bool] = True

    def __init__(
        self, config: dict[str, Any] | None = None, *, clock: Clock | None = None, storage: Storage | None = None
    ) -> None:
        super().__init__(config, clock=clock, storage=storage)
        self.index: Index | None = None
        try:
            self.index = self._open_indexes()
        except (StorageError, OSError, Exception) as exc:  # sqlite3.Error and driver errors too
            LOG.exception("%s: cannot open the indexes on %s", type(self).__name__, self.storage.db.location)
            if not self.owns_storage:
                raise  # a shared storage is its owner's to fix (a composite skips this part, and says so)
            self.storage.close()
            self.storage = self._ram_storage(f"cannot open the indexes on {self.storage.db.location} ({exc})")
            self._history = self.storage.history
            self.index = self._open_indexes()
        self.indexes = [self.index] if self.index is not None else []
        arms = getattr(self.index, "arms", [self.index]) if self.index is not None else []
        for arm in arms:  # a hybrid's arms one by one: parts sharing a storage write each table once
            self.storage.register_index(arm)
        retire = getattr(self.storage, "retire_indexes", None)
        if callable(retire) and self.owns_storage:  # over a shared storage, the other parts' indexes live there too
            retire([arm.name for arm in arms])

    def _open_indexes(self) -> Index | None:
        """Build the memory's indexes over ``self.storage``; return the one searched."""
        raise NotImplementedError

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        """Nothing: the base wrote the document to the documents table and to every index."""

    def _search(self, query: str, top_k: int, session_id: str | None, window: Window | None = None) -> list[MemoryHit]:
        """The index's hits; ``window`` only reaches an index that declares ``filters_time``."""
        if self.index is None:
            return []
        if window is None:
            return self.index.search(query, top_k, session_id)
        if not self.filters_time:
            return []
        search: Any = self.index.search  # declared by filters_time, not by the Index protocol
        return list(search(query, top_k, session_id, window=window))

    @property
    def filters_time(self) -> bool:
        """Whether the index searched declares ``filters_time`` (a ``window=`` on ``created``):
        the keyword index of either engine, the vector index over either engine's vector store,
        a hybrid of them."""
        return bool(getattr(self.index, "filters_time", False))

    def _query_window(self, query: str, top_k: int, session_id: str | None, window: Window) -> list[MemoryHit]:
        return self._search(query, top_k, session_id, window)

    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        return self._search(query, top_k, None)

    def _query_session(self, query: str, top_k: int, session_id: str) -> list[MemoryHit]:
        return self._search(query, top_k, session_id)

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        """Every stored document, oldest first, as ``{"id", "text", "session_id", "metadata"}``
        (``ovos-memory export``, the editor). Reads in pages, so a large memory streams."""
        for doc in self.storage.documents.iter():
            yield {"id": doc.doc_id, "text": doc.text, "session_id": doc.session_id, "metadata": doc.metadata}

    def _backend_stats(self) -> dict[str, Any]:
        return {
            "sessions": len(self.storage.documents.sessions()),
            "bytes": self.storage.db.size_bytes(),
            "db_path": self.storage.db.location,
        }
