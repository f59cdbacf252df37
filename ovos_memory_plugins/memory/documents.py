"""Documents: content-derived ids, the one write path (documents table, every index, the
backend's hook, in one transaction), the exchange listeners, search, and forgetting (every
tier). Part of :class:`~ovos_memory_plugins.base.BaseRetrievalMemory`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.common import MemoryHit, dedup_hits, exchange_parts
from ovos_memory_plugins.dates import Window, system_clock
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.memory.state import MemoryState
from ovos_memory_plugins.select import score_cut
from ovos_memory_plugins.storage.records import Compacted, Document, ForgetReport, StoredDocument, check_id
from ovos_memory_plugins.storage.seam import Index, compact_database
from ovos_memory_plugins.text import clean_text, clip_query

LOG = logging.getLogger("ovos_memory_plugins.base")  # the name its records always had

#: The metadata key of an archived exchange naming the exchange recorded before it in its session.
PREVIOUS_EXCHANGE = "previous_exchange"


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:24]


def _index_tiers(index: Index, removed: int) -> dict[str, int]:
    """What an index's ``remove``/``remove_all`` removed, per tier (a ForgetReport names them)."""
    if isinstance(removed, ForgetReport) and removed.tiers:
        return removed.tiers
    return {f"{index.name}_rows": int(removed)}


def search_request(query: Any, top_k: int | None, default_k: int) -> tuple[str, int] | None:
    """A search's query, cleaned and cut, and how many hits it asks for (``default_k`` when
    ``top_k`` is None); None when there is nothing to search (no text, or ``k`` <= 0). The base
    and the composite check a search the same way."""
    k = default_k if top_k is None else int(top_k)
    if k <= 0 or not isinstance(query, str):
        return None
    query = clip_query(query)
    return (query, k) if query.strip() else None


class DocumentsMixin(MemoryState):
    """Ids, storing, search and forgetting (:class:`~ovos_memory_plugins.base.BaseRetrievalMemory`'s part)."""

    # -- ids ---------------------------------------------------------------------------------

    @staticmethod
    def document_id(session_id: str, text: str) -> str:
        """The id ``store`` gives a text: derived from the session and the content only."""
        return "d-" + _digest(session_id, text)

    @staticmethod
    def exchange_id(session_id: str, user: str, assistant: str) -> str:
        """The id of an exchange: derived from its session and its two turns only.

        Every copy of one exchange gets the same id wherever it is recorded (each member of a
        composite, several processes writing one session in any order, a transcript imported
        again), so a delete by that id reaches every copy, and the same exchange said again
        later in the session is one document (its ``time`` the latest). Which exchange came
        before it is kept in its metadata (``previous_exchange``, see :meth:`follows`).
        """
        return "x-" + _digest(session_id, user, assistant)

    @staticmethod
    def chained_exchange_id(session_id: str, previous_exchange_id: str, user: str, assistant: str) -> str:
        """The id earlier releases gave an exchange: its content and the id of the exchange
        before it in the memory's own history (so copies recorded in another order got other
        ids). Only :meth:`follows` still computes it, to join exchanges recorded back then."""
        return "x-" + _digest(session_id, previous_exchange_id, user, assistant)

    # -- public API: documents ---------------------------------------------------------------

    def store(self, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None) -> str:
        """Store a document and return its id (the same text in the same session upserts).

        Raises ``ValueError`` for empty or non-text input or an unacceptable session id, and
        :class:`StorageError` (or the backend's own error) when storage fails.
        """
        return self.store_many([text], session_id, metadata)[0]

    def store_many(
        self, texts: Iterable[str], session_id: str = "default", metadata: dict[str, Any] | None = None
    ) -> list[str]:
        """Store several documents in one transaction (the vector index embeds them in batches);
        return their ids, in order. Raises like :meth:`store`, before anything is written."""
        session_id = check_id(session_id, "session_id")
        docs = []
        for text in texts:
            if not isinstance(text, str):
                raise ValueError(f"text must be a string, not {type(text).__name__}")
            text = clean_text(text)
            if not text.strip():
                raise ValueError("cannot store empty text")
            docs.append(Document(self.document_id(session_id, text), text, session_id, dict(metadata or {})))
        self._write_documents(docs)
        return [d.doc_id for d in docs]

    def put_document(
        self, doc_id: str, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None
    ) -> None:
        """Store a document under a given id (import, migration, a composite's members).

        Unlike ``store`` the id is the caller's: an export imported into an empty root gets
        back the same ids, so the same searches return the same results.
        """
        self.put_documents([(doc_id, text, session_id, metadata)])

    def put_documents(self, docs: Iterable[tuple[str, str, str, dict[str, Any] | None]]) -> int:
        """Store ``(doc_id, text, session_id, metadata)`` documents under their ids in one
        transaction (import, ingest, benchmarks); return how many. Raises ``ValueError`` for a
        bad id or empty text before anything is written."""
        batch = []
        for doc_id, text, session_id, metadata in docs:
            if not isinstance(doc_id, str) or not doc_id:
                raise ValueError("doc_id must be a non-empty string")
            doc_id = check_id(doc_id, "doc_id")
            if not isinstance(text, str) or not clean_text(text).strip():
                raise ValueError("cannot store empty text")
            batch.append(Document(doc_id, clean_text(text), check_id(session_id, "session_id"), dict(metadata or {})))
        self._write_documents(batch)
        return len(batch)

    def now(self) -> float:
        """The memory's time now (:attr:`clock`), in seconds since the epoch."""
        if self.clock is system_clock:  # its timestamp, whole microseconds, without the time zone look-up
            return round(time.time() * 1_000_000) / 1_000_000
        return self.clock().timestamp()

    @property
    def memory_lang(self) -> str | None:
        """The memory's language (its keyword index's ``lang``; None: English): the words the
        prompt's dates are said in."""
        return self.keyword_settings.lang if self.keyword_settings is not None else None

    def _write_documents(self, docs: Sequence[Document]) -> list[StoredDocument]:
        """The one write path: documents table, every index and the backend's hook, in one
        transaction. A document without ``metadata["time"]`` is dated now (the clock)."""
        if not docs:
            return []
        if any("time" not in d.metadata for d in docs):
            stamp = self.now()
            docs = [d if "time" in d.metadata else replace(d, metadata={**d.metadata, "time": stamp}) for d in docs]
        with self._lock:
            prepared = self._prepare_documents(docs)
            with self.storage.atomic():
                stored = self._put_prepared(docs, prepared)
            self._tell_exchanges(stored)
            return stored

    def add_exchange_listener(self, listener: Callable[[StoredDocument], None]) -> None:
        """Call ``listener(exchange)`` for every exchange document this memory writes (a turn
        recorded by ``update_history``, an exchange imported or copied in), once the write's
        transaction is done, in write order, under the memory's lock: a listener keeps it short
        (the notes' digest only queues the exchange). A listener that raises is logged; the
        write stands."""
        self._exchange_listeners.append(listener)

    def _tell_exchanges(self, stored: Sequence[StoredDocument]) -> None:
        for doc in stored:
            if doc.metadata.get("kind") != "exchange":
                continue
            for listener in list(self._exchange_listeners):
                try:
                    listener(doc)
                except Exception:
                    LOG.exception("%s: an exchange listener failed for %s", type(self).__name__, doc.doc_id)

    def _prepare_documents(self, docs: Sequence[Document]) -> list[Any]:
        """Every index's work for ``docs`` done before the transaction (it may embed: slow, network)."""
        return [index.prepare(docs) for index in self.storage.indexes] if docs else []

    def _put_prepared(self, docs: Sequence[Document], prepared: Sequence[Any]) -> list[StoredDocument]:
        """Write prepared documents to the documents table, every index and the backend's hook
        (inside the caller's transaction)."""
        if not docs:
            return []
        stored = self.storage.documents.put(docs)
        for index, work in zip(self.storage.indexes, prepared, strict=True):
            index.add(stored, work)
        for doc in docs:
            self._store_document(doc.doc_id, doc.text, doc.session_id, dict(doc.metadata))
        return stored

    @property
    def filters_time(self) -> bool:
        """Whether :meth:`search` can keep to a window of time (``window=``): the memory's index
        filters on the documents' ``created`` in its query (the keyword, vector and hybrid indexes
        of either engine: :class:`~ovos_memory_plugins.index.IndexedMemory`)."""
        return False

    def _query_window(self, query: str, top_k: int, session_id: str | None, window: Window) -> list[MemoryHit]:
        """The best hits made in ``window`` (only called when :attr:`filters_time`)."""
        return []

    def search(
        self, query: str, session_id: str | None = None, top_k: int | None = None, *, window: Window | None = None
    ) -> list[MemoryHit]:
        """The memories best matching ``query``, best first, deduplicated.

        Args:
            query: any text; it is cleaned and cut to ``text.MAX_QUERY_CHARS`` characters.
            session_id: only that session's documents (None: every session's).
            top_k: how many at most (default ``retrieval.max_num_results``).
            window: only documents made in ``(since, until)`` (seconds since the epoch, ``until``
                excluded), filtered by the storage's query; ValueError when the memory cannot
                (:attr:`filters_time` False).
        """
        asked = search_request(query, top_k, self.settings.retrieval.max_num_results)
        if asked is None:
            return []
        query, k = asked
        if session_id is not None:
            session_id = check_id(session_id, "session_id")
        if window is not None and not self.filters_time:
            raise ValueError(f"{type(self).__name__} cannot search within a window of time")
        with self._lock:
            if window is not None:
                hits = self._query_window(query, k, session_id, window)
            elif session_id is None:
                hits = self._query_backend(query, k)
            elif self.tracks_sessions:
                hits = self._query_session(query, k, session_id)
            else:
                hits = self._query_widening(query, k, session_id)
            if not self.tracks_sessions:
                hits = self._with_catalogue_metadata(hits)
        return self._cut(dedup_hits(hits))[:k]

    def _query_widening(self, query: str, k: int, session_id: str) -> list[MemoryHit]:
        """Session filter for backends without ``_query_session``: widen until found or exhausted."""
        total = self.storage.documents.count()
        fetch = k
        while True:
            hits = self._query_backend(query, fetch)
            known = self.storage.documents.get(h.source for h in hits)
            own = [h for h in hits if h.source in known and known[h.source].session_id == session_id]
            if len(own) >= k or len(hits) < fetch or fetch > total:
                return own
            fetch = min(fetch * 4, total + 1)

    def _with_catalogue_metadata(self, hits: list[MemoryHit]) -> list[MemoryHit]:
        known = self.storage.documents.get(h.source for h in hits)
        for hit in hits:
            if not hit.metadata and hit.source in known:
                hit.metadata = dict(known[hit.source].metadata)
        return hits

    def _cut(self, hits: list[MemoryHit]) -> list[MemoryHit]:
        """Apply ``retrieval.min_score`` and the relative cut-off (``retrieval.min_relative_score``,
        else the backend's ``default_min_relative_score``): :func:`~ovos_memory_plugins.select.score_cut`."""
        r = self.settings.retrieval
        relative = r.min_relative_score if r.min_relative_score is not None else self.default_min_relative_score
        return score_cut(hits, r.min_score, relative)

    # -- forgetting --------------------------------------------------------------------------

    def _can_delete(self) -> bool:
        return self.stores_in_storage or self._can("_delete_documents")

    @property
    def can_delete(self) -> bool:
        """Whether ``delete``/``forget_*`` can remove documents (front-ends: show a delete button)."""
        return self._can_delete()

    def _forget_documents(self, ids: Sequence[str]) -> Counter[str]:
        """Delete documents from every tier (inside the caller's transaction); what went, per tier."""
        tiers: Counter[str] = Counter()
        found = list(self.storage.documents.get(ids).values())
        for index in self.storage.indexes:
            for name, n in _index_tiers(index, index.remove(found)).items():
                tiers[name] += n
        if self._can("_delete_documents") and ids:
            tiers["backend"] += int(self._delete_documents(list(ids)) or 0)
        tiers["documents"] += self.storage.documents.remove(ids)
        tiers["history_messages"] += self.storage.history.remove_exchanges(found)
        if self._summary is not None:
            # the running summary of a session may quote any of its exchanges that left the
            # window (in a model's words too): it goes with them, and is rebuilt from later turns
            for session in sorted({d.session_id for d in found if exchange_parts(d.text) is not None}):
                tiers["summaries"] += self._summary.forget(session)
        return tiers

    def _report(self, tiers: Counter[str]) -> ForgetReport:
        self.storage.db.purge()
        return ForgetReport(max(tiers["documents"], tiers["backend"]), dict(tiers))

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id from every tier (documents, indexes, the exchange's history
        messages, the running summary of an exchange's session, the backend's own store);
        return how many existed, as a
        :class:`~ovos_memory_plugins.storage.records.ForgetReport` (an int with ``.tiers``).
        Raises if the backend cannot delete."""
        ids = [check_id(d, "doc_id") for d in dict.fromkeys(doc_ids)]
        if not self._can_delete():
            raise BackendError(f"{type(self).__name__} cannot delete documents (no _delete_documents hook)")
        with self._lock:
            with self.storage.atomic():
                tiers = self._forget_documents(ids)
            return self._report(tiers)

    def documents(self, doc_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The stored documents among ``doc_ids``, as ``{"id", "text", "session_id",
        "metadata"}`` (ids not stored are left out): what a composite deletes copies of."""
        ids = [check_id(d, "doc_id") for d in dict.fromkeys(doc_ids)]
        with self._lock:
            found = self.storage.documents.get(ids)
        return [
            {"id": d.doc_id, "text": d.text, "session_id": d.session_id, "metadata": dict(d.metadata)}
            for d in (found[i] for i in ids if i in found)
        ]

    def copies_of(self, session_id: str, text: str) -> list[str]:
        """The ids of ``session_id``'s documents whose text is exactly ``text``: one exchange
        recorded by earlier releases under another id in each member of a composite (their ids
        were chained on each member's own history), so a delete by the id one member lists can
        reach the others' copies."""
        session_id = check_id(session_id, "session_id")
        with self._lock:
            return self.storage.documents.ids_with_text(session_id, text)

    def forget_session(self, session_id: str) -> int:
        """Delete a session's documents (every tier) and history; return how many documents
        went (a :class:`~ovos_memory_plugins.storage.records.ForgetReport`)."""
        session_id = check_id(session_id, "session_id")
        with self._lock:
            catalogued = self.storage.documents.ids(session_id)
            ids = list(dict.fromkeys([*catalogued, *self._session_document_ids(session_id)]))
            if ids and not self._can_delete():
                raise BackendError(f"{type(self).__name__} cannot delete documents (no _delete_documents hook)")
            with self.storage.atomic():
                tiers = self._forget_documents(ids) if ids else Counter()
                tiers["history_messages"] += self.storage.history.clear_session(session_id)
                if self._summary is not None:
                    tiers["summaries"] += self._summary.forget(session_id)
            return self._report(tiers)

    def _session_document_ids(self, session_id: str) -> list[str]:
        """The ids of a session's documents: the catalogue's, plus what a backend that keeps
        sessions itself reports (override to add documents the base never saw)."""
        return self.storage.documents.ids(session_id)

    def forget_all(self) -> int:
        """Delete every document (every tier) and all history; return how many documents went
        (a :class:`~ovos_memory_plugins.storage.records.ForgetReport`)."""
        with self._lock:
            if not self._can_delete() and not self._can("_delete_all") and self.storage.documents.count():
                raise BackendError(f"{type(self).__name__} cannot delete documents (no _delete_documents hook)")
            tiers: Counter[str] = Counter()
            with self.storage.atomic():
                for index in self.storage.indexes:
                    for name, n in _index_tiers(index, index.remove_all()).items():
                        tiers[name] += n
                if self._can("_delete_all"):
                    tiers["backend"] += int(self._delete_all() or 0)
                elif self._can("_delete_documents"):
                    ids = self.storage.documents.ids()
                    if ids:
                        tiers["backend"] += int(self._delete_documents(ids) or 0)
                tiers["documents"] += self.storage.documents.remove_all()
                tiers["history_messages"] += self.storage.history.clear_all()
                if self._summary is not None:
                    tiers["summaries"] += self._summary.forget()
            return self._report(tiers)

    def exclusive(self) -> contextlib.AbstractContextManager[Any]:
        """The memory's lock, as a ``with`` block: nothing else runs on this memory inside it. A
        caller that runs several calls of several memories as one (a composite's forget over
        parts sharing one storage, in one transaction) takes every part's lock first, then the
        transaction, the order each memory takes them in."""
        return self._lock

    def compact(self) -> Compacted:
        """Make deleted rows unrecoverable in the memory's database now (the
        :class:`~ovos_memory_plugins.protocols.Compactable` protocol; the editor calls it after
        every delete): SQLite ``VACUUM`` and a WAL truncation, PostgreSQL ``VACUUM`` of the
        memory's tables. Returns the locations done; a busy file is logged, left out and named in
        ``skipped`` (every forget already purges; this also rewrites the file without free pages).

        Not under the memory's lock: the database serialises what it must (SQLite holds its
        connection's lock), and turns go on while a PostgreSQL VACUUM runs or waits."""
        return compact_database(self.storage.db)

    @property
    def compaction_locations(self) -> frozenset[str] | None:
        """Where :meth:`compact` works (:class:`~ovos_memory_plugins.protocols.LocatedCompactable`):
        the location of the memory's one database (none in RAM), so a composite compacts a
        database its members share once. A subclass that overrides :meth:`compact` (data of
        its own elsewhere) names its locations here too; one that does not gets None (not
        known: a composite always calls its :meth:`compact`)."""
        cls = type(self)
        if cls.compact is not DocumentsMixin.compact and (
            cls.compaction_locations is DocumentsMixin.compaction_locations
        ):
            return None
        db = self.storage.db
        return frozenset() if db.in_ram else frozenset({db.location})

    def sessions(self) -> list[str]:
        """Every session with recorded history, sorted (operators, the editor)."""
        with self._lock:
            return self.storage.history.sessions()

    def messages(self, session_id: str) -> list[AgentMessage]:
        """Every message kept for a session, oldest first, unanswered ones included.

        The history keeps the newest ``max(2 * max_history + 4, 24)`` messages per session; older
        exchanges live on as documents (``search``, ``iter_documents`` where the backend lists).
        """
        return [message for message, _ in self.dated_messages(session_id)]

    def dated_messages(self, session_id: str) -> list[tuple[AgentMessage, float | None]]:
        """:meth:`messages`, each with when it was recorded (seconds since the epoch, the
        memory's clock; None when the store does not say): the editor's conversation view."""
        with self._lock:
            stored = self.storage.history.recent(check_id(session_id, "session_id"), 1_000_000)
        return [(AgentMessage(role=MessageRole(m.role), content=m.content), m.created) for m in stored]

    @property
    def storage_problem(self) -> str | None:
        """Why nothing this memory learns outlives the process (:class:`~ovos_memory_plugins.
        protocols.StorageStatus`): its database could not be opened and it fell back to RAM
        (logged as an ERROR when it happened and on every recorded turn); None when it keeps
        what it learns, or keeps it in RAM by configuration."""
        reason = self.storage.db.fallback_reason
        return f"nothing is being kept: {reason}" if reason else None
