"""The ``Index`` protocol and its ``|`` composition into a fused hybrid.

An :class:`Index` keeps documents by id and finds them again::

    add(docs)                      insert or replace (upsert by doc id)
    remove(ids)                    delete by id (unknown ids are ignored)
    search(query, k, session_id)   the best ``k`` as MemoryHit (source = doc id), best first

``a | b`` builds a :class:`HybridIndex`: writes reach every arm (each arm is tried even when
another fails; the failures are then raised together), reads skip a failing arm (logged) and
fuse the others' lists. Arms shipped here:

* :class:`VectorIndex`: a :class:`~ovos_memory_plugins.storage.vector_store.VectorStore` and an
  embedder; embedder outages queue vectors for retry (writes) or give no hits (reads).
* :class:`MemoryIndex`: any :class:`~ovos_memory_plugins.base.BaseRetrievalMemory` (the keyword
  backend, for one) through its storage hooks.

Bring your own arm (pgvector, Elasticsearch, ...) by implementing the three methods and a
``name``; subclass :class:`IndexBase` to get ``|``. An arm may also have ``weight(query) ->
float``: how much to trust it for this query (the local MiniLM arm lowers it for text its
vocabulary cannot read).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.common import MemoryHit, fuse_rrf, fuse_weighted, normalize_content
from ovos_memory_plugins.embedders import Embedder, embed_documents, embed_queries
from ovos_memory_plugins.errors import BackendError, StorageError
from ovos_memory_plugins.storage.vector_store import VectorStore

LOG = logging.getLogger(__name__)

__all__ = [
    "FUSIONS",
    "HybridIndex",
    "Index",
    "IndexBase",
    "IndexDocument",
    "MemoryIndex",
    "VectorIndex",
    "fuse_scores",
]


@dataclass(frozen=True)
class IndexDocument:
    """A document as indexes see it."""

    doc_id: str
    text: str
    session_id: str = "default"
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Index(Protocol):
    """Anything that keeps documents by id and finds them again (see the module docstring)."""

    @property
    def name(self) -> str:
        """A short label for logs (``"vector"``, ``"keyword"``)."""
        ...

    def add(self, docs: Sequence[IndexDocument]) -> None:
        """Insert or replace documents by id."""
        ...

    def remove(self, ids: Sequence[str]) -> None:
        """Delete documents by id."""
        ...

    def search(self, query: str, k: int, session_id: str | None = None) -> list[MemoryHit]:
        """The best ``k`` documents (only ``session_id``'s when given), best first."""
        ...


class IndexBase:
    """Gives an index ``|`` (compose into a :class:`HybridIndex`)."""

    def __or__(self, other: Any) -> HybridIndex:
        if not isinstance(other, Index):
            return NotImplemented
        left = list(self.arms) if isinstance(self, HybridIndex) else [self]
        right = list(other.arms) if isinstance(other, HybridIndex) else [other]
        return HybridIndex([*left, *right])


# -- fusion --------------------------------------------------------------------------------


def fuse_scores(lists: Sequence[Sequence[MemoryHit]], weights: Sequence[float], rrf_k: float = 60) -> list[MemoryHit]:
    """Score-aware fusion: per list, a hit earns ``weight * (0.5 * rank part + 0.5 * score part)``.

    The rank part is ``(rrf_k + 1) / (rrf_k + rank)`` (1 for the top hit); the score part is the
    hit's score divided by the list's best score (so a list whose top hit barely matches and
    whose runners-up are near ties gives them little, while a confident list keeps a clear
    winner). Documents are keyed by normalised content, as in :func:`fuse_rrf`.
    """
    scores: dict[str, float] = {}
    first: dict[str, MemoryHit] = {}
    order: list[str] = []
    for weight, hits in zip(weights, lists, strict=True):
        if not hits or weight <= 0:
            continue
        best = max(h.score for h in hits)
        seen: set[str] = set()
        for rank, hit in enumerate(hits, start=1):
            key = normalize_content(hit.content)
            if key in seen:
                continue
            seen.add(key)
            rank_part = (rrf_k + 1) / (rrf_k + rank)
            score_part = hit.score / best if best > 0 else 0.0
            if key not in first:
                first[key] = hit
                order.append(key)
                scores[key] = 0.0
            scores[key] += weight * (0.5 * rank_part + 0.5 * max(score_part, 0.0))
    position = {key: i for i, key in enumerate(order)}
    ranked = sorted(order, key=lambda key: (-scores[key], position[key]))
    out = []
    for key in ranked:
        hit = first[key]
        out.append(MemoryHit(content=hit.content, source=hit.source, score=scores[key], metadata=dict(hit.metadata)))
    return out


#: Fusion methods a :class:`HybridIndex` accepts.
FUSIONS = ("weighted", "score", "rrf")


class HybridIndex(IndexBase):
    """Several indexes as one: writes reach every arm, reads fuse the arms that answer.

    Args:
        arms: the indexes, each implementing :class:`Index`.
        weights: one per arm (default 1.0 each); an arm's ``weight(query)``, when it has one,
            multiplies its weight per query.
        fusion: ``"weighted"`` (the default: each list's scores min-max normalised, weighted and
            summed, :func:`~ovos_memory_plugins.common.fuse_weighted`), ``"score"``
            (:func:`fuse_scores`) or ``"rrf"`` (weighted reciprocal rank fusion).
        rrf_k: the rank constant of both fusions.
        depth: how many hits each arm is asked for, at least (``k`` when larger).
    """

    def __init__(
        self,
        arms: Sequence[Any],
        weights: Sequence[float] | None = None,
        fusion: str = "weighted",
        rrf_k: float = 60,
        depth: int = 50,
    ) -> None:
        for i, arm in enumerate(arms):
            if not isinstance(arm, Index):
                raise BackendError(
                    f"arm {i} ({type(arm).__name__}) is not an Index: it needs name, add, remove and search"
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

    def _each(self, what: str, call: Any) -> None:
        failures = []
        for arm in self.arms:
            try:
                call(arm)
            except Exception as exc:  # an arm's own error type is unknown; every arm is still tried
                LOG.exception("hybrid index: %s failed on arm %s", what, arm.name)
                failures.append(f"{arm.name}: {exc}")
        if failures:
            raise BackendError(f"hybrid index: {what} failed on {len(failures)} arm(s): " + "; ".join(failures))

    def add(self, docs: Sequence[IndexDocument]) -> None:
        """Add to every arm; raise :class:`BackendError` after trying all if any failed."""
        self._each("add", lambda arm: arm.add(docs))

    def remove(self, ids: Sequence[str]) -> None:
        """Remove from every arm; raise :class:`BackendError` after trying all if any failed."""
        self._each("remove", lambda arm: arm.remove(ids))

    def arm_hits(self, query: str, k: int, session_id: str | None = None) -> list[list[MemoryHit] | None]:
        """Each arm's hits (None for an arm that failed, logged)."""
        out: list[list[MemoryHit] | None] = []
        for arm in self.arms:
            try:
                out.append(arm.search(query, max(k, self.depth), session_id))
            except Exception:  # a read skips a failing arm
                LOG.warning("hybrid index: arm %s failed to search; using the others", arm.name, exc_info=True)
                out.append(None)
        return out

    def search(self, query: str, k: int, session_id: str | None = None) -> list[MemoryHit]:
        """The arms' hits fused, best first; arms that fail are skipped."""
        if k <= 0:
            return []
        lists: list[list[MemoryHit]] = []
        weights: list[float] = []
        for arm, base, hits in zip(self.arms, self.weights, self.arm_hits(query, k, session_id), strict=True):
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
        if self.fusion == "rrf":
            fused = fuse_rrf(lists, k=self.rrf_k, weights=weights)
        elif self.fusion == "weighted":
            fused = fuse_weighted(lists, weights=weights)
        else:
            fused = fuse_scores(lists, weights, rrf_k=self.rrf_k)
        return fused[:k]


# -- arms ----------------------------------------------------------------------------------


class VectorIndex(IndexBase):
    """Dense vectors: a :class:`VectorStore` and an :class:`Embedder`.

    ``add`` always keeps the documents; when the embedder fails their vectors stay pending and
    :meth:`reembed` (run in the background by :meth:`start_background`) fills them in later,
    as it does after an embedder switch. ``search`` raises :class:`BackendError` when the
    embedder fails (a hybrid skips the arm; the vector backend answers with no hits).

    Args:
        store: where documents and vectors live.
        embedder: the active embedder; its ``id`` names the vector space searched.
        min_similarity: hits below this cosine similarity are dropped.
        batch_size: texts per embedding call when re-embedding.
        background: start the background re-embedding thread after a failed ``add``.
    """

    name = "vector"

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        min_similarity: float = 0.0,
        batch_size: int = 64,
        background: bool = True,
    ) -> None:
        self.background = background
        self.store = store
        self.embedder = embedder
        self.space = embedder.id
        self.min_similarity = min_similarity
        self.batch_size = max(1, batch_size)
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._stop = threading.Event()
        self.last_error: str | None = None

    def add(self, docs: Sequence[IndexDocument]) -> None:
        """Keep the documents, then embed them; an embedder failure leaves them pending."""
        for doc in docs:
            self.store.put_document(doc.doc_id, doc.session_id, doc.text, dict(doc.metadata))
        try:
            vectors = embed_documents(self.embedder, [d.text for d in docs], self.batch_size)
        except Exception as exc:  # any embedder failure: keep the documents, retry later
            self.last_error = str(exc)
            LOG.warning("vector index: embedding %d document(s) failed (%s); queued for retry", len(docs), exc)
            if self.background:
                self.start_background(first_delay=5.0)
            return
        self.store.put_vectors(self.space, [(d.doc_id, vectors[i]) for i, d in enumerate(docs)])

    def remove(self, ids: Sequence[str]) -> None:
        """Delete documents and all their vectors."""
        self.store.delete(list(ids))

    def search(self, query: str, k: int, session_id: str | None = None) -> list[MemoryHit]:
        """Nearest documents by cosine similarity (``score``), at or above ``min_similarity``."""
        if k <= 0 or not query.strip():
            return []
        try:
            q = embed_queries(self.embedder, [query])[0]
        except Exception as exc:
            self.last_error = str(exc)
            raise BackendError(f"embedding the query failed: {exc}") from exc
        try:
            found = self.store.search(self.space, q, k, session_id)
        except StorageError:
            raise
        found = [(d, s) for d, s in found if s >= self.min_similarity]
        docs = self.store.documents(d for d, _ in found)
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


class MemoryIndex(IndexBase):
    """Any :class:`~ovos_memory_plugins.base.BaseRetrievalMemory` as an index arm.

    Writes go through its ``put_document`` with the caller's doc ids (so ids agree across arms);
    reads through its public ``search``, so its own session filter and scoring apply.
    """

    def __init__(self, memory: Any, name: str = "keyword") -> None:
        self.memory = memory
        self._name = name

    @property
    def name(self) -> str:
        """The label given at construction."""
        return self._name

    def add(self, docs: Sequence[IndexDocument]) -> None:
        """Store each document under its id."""
        for doc in docs:
            self.memory.put_document(doc.doc_id, doc.text, doc.session_id, dict(doc.metadata))

    def remove(self, ids: Sequence[str]) -> None:
        """Delete by id."""
        self.memory.delete(list(ids))

    def search(self, query: str, k: int, session_id: str | None = None) -> list[MemoryHit]:
        """The memory's own search."""
        return list(self.memory.search(query, session_id=session_id, top_k=k))
