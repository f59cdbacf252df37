"""The engine-neutral storage seam: what a memory needs from a database, and nothing more.

The contract every engine implements (the protocols and the :class:`Storage` bundle); the
records they pass are in :mod:`ovos_memory_plugins.storage.records`, the factory that picks an
engine is :mod:`ovos_memory_plugins.storage.registry`. This module imports neither an engine nor
the registry (``storage/engine.py``, its name before, re-exports all three for a release).

A memory owns ONE database (one SQLite file per memory folder; one PostgreSQL schema keyed by
namespace). Everything the memory keeps lives there, so ``forget`` can find every copy of a
text:

* **documents**: ONE table per memory that every index shares (:class:`DocumentStore`): a
  document is ``doc_id`` (the caller's id, exact), ``session_id``, ``text``, ``metadata`` (a
  JSON object) and ``created`` (seconds since the epoch), plus an engine-assigned integer
  ``key`` (SQLite's rowid) that orders documents by age and that indexes may reference.
  Minimal third-party backends get their catalogue here too (session, metadata, text), so the
  base can always enumerate a session's documents, or all of them, to forget them.
* **indexes** over the documents (:class:`Index`): the keyword index (our own tokens, see
  :mod:`ovos_memory_plugins.storage.keyword`) and the vector index (a :class:`VectorStore` of
  vectors per embedder, driven by :class:`ovos_memory_plugins.index.VectorIndex`). Hybrid is two
  indexes over one database, never two memories.
* **history** (:class:`HistoryStore`): the recent messages per session, the exchange id chain,
  and which history messages an exchange document came from (so deleting the document deletes
  them too).

The write path, as the base runs it (one transaction per batch)::

    prepared = [index.prepare(docs) for index in indexes]      # outside: may embed (slow, network)
    with storage.atomic():
        stored = storage.documents.put(docs)                    # upsert by doc_id
        for index, p in zip(indexes, prepared):
            index.add(stored, p)                                # fast, local, same transaction

and the forget path::

    with storage.atomic():
        found = storage.documents.get(ids)
        for index in indexes: index.remove(list(found.values()))  # before the rows go
        storage.documents.remove(ids)
        storage.history.remove_exchanges(...)
    storage.purge()                                             # make deleted bytes unrecoverable

Implementing a second engine (PostgreSQL): provide objects with the methods of
:class:`Database`, :class:`DocumentStore`, :class:`HistoryStore`, a keyword :class:`Index`
(tokenize with :func:`ovos_memory_plugins.storage.keyword.document_terms` and query with
:func:`ovos_memory_plugins.storage.keyword.query_counts`, so stop words, CJK bigrams and
stemming behave the same) and a :class:`VectorStore`; bundle them in a :class:`Storage` from a
module-level ``open_storage(location, *, namespace="default", **options) -> Storage`` (the base
passes ``namespace``, which keys the memory's rows, and engine options such as
``vector_extension`` that another engine accepts and ignores), and register its URL scheme in
:mod:`ovos_memory_plugins.storage.registry`, whose ``open_storage`` picks the engine by the
location: a ``postgresql://`` URL imports ``ovos_memory_plugins.storage.postgres.database``; anything
else is a SQLite file path. The tables beside the documents (notes, sticky notes, summaries)
come from :class:`Storage`'s methods: an engine whose database runs the package's table stores
declares ``table_stores`` (SQLite and PostgreSQL do), one that keeps its notes elsewhere
overrides the methods, and one that is not a file on this machine declares ``local = False``.
:class:`ovos_memory_plugins.storage.contract.EngineContract` is the test suite an engine
passes (subclass it, implement ``open(where)``). Rules every engine keeps:

* every method may be called from several threads; the engine serialises what it must;
* ``atomic()`` nests (a savepoint inside a transaction); ``put``/``add``/``remove`` are only
  called inside it; reads may run outside;
* schema creation and migration are atomic across processes (SQLite: one ``BEGIN IMMEDIATE``;
  PostgreSQL: ``pg_advisory_xact_lock``); a database that had to fall back to RAM says so
  (``in_ram``, ``fallback_reason``), never silently;
* deleting removes every copy the engine keeps (index shadow tables, vectors), and ``purge()``
  does what the engine can to make deleted bytes unrecoverable; :func:`compact_database` goes
  further when asked (the editor after a delete): an engine whose database declares
  :class:`CompactingDatabase` compacts it now (SQLite: ``VACUUM``), any other is purged;
* ids (``doc_id``, ``session_id``) are exact strings up to :data:`MAX_ID_CHARS` characters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.records import Compacted, Document, KeywordSettings, StoredDocument, StoredMessage

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ovos_memory_plugins.common import MemoryHit
    from ovos_memory_plugins.storage.embedding_cache import EmbeddingCache
    from ovos_memory_plugins.storage.notes_store import DatabaseNotesStore, NotesStore, Rewrites
    from ovos_memory_plugins.storage.sticky_store import StickyStore
    from ovos_memory_plugins.storage.summary_store import SummaryStore

    Vector = npt.NDArray[np.float32]

__all__ = [
    "CompactingDatabase",
    "Database",
    "DocumentStore",
    "HistoryStore",
    "Index",
    "Storage",
    "VectorStore",
    "compact_database",
]


@runtime_checkable
class Database(Protocol):
    """One memory's database connection (pool)."""

    engine: str
    in_ram: bool
    fallback_reason: str | None

    @property
    def location(self) -> str:
        """A file path or a URL without its password (logs, ``stats()``)."""
        ...

    def atomic(self) -> contextlib.AbstractContextManager[Any]:
        """One transaction; nested calls are savepoints."""
        ...

    def size_bytes(self) -> int:
        """Bytes the memory occupies (0 when unknown or in RAM)."""
        ...

    def purge(self) -> None:
        """After deletions: make deleted bytes unrecoverable where the engine can."""
        ...

    def close(self) -> None:
        """Release the connection(s)."""
        ...


@runtime_checkable
class CompactingDatabase(Protocol):
    """A :class:`Database` that can compact itself now (SQLite: ``VACUUM`` and a WAL truncation;
    PostgreSQL: ``VACUUM`` of the memory tables, waited for)."""

    def compact(self) -> Compacted:
        """Make deleted rows unrecoverable in this database; say whether it was done."""
        ...


def compact_database(db: Database) -> Compacted:
    """Make deleted rows unrecoverable in ``db`` as far as its engine can, now.

    A database that declares :class:`CompactingDatabase` compacts itself (SQLite: ``VACUUM``
    then ``wal_checkpoint(TRUNCATE)``, a busy file skipped and reported; PostgreSQL: ``VACUUM``
    of every memory table, waited for within a deadline, a lock held past it reported); any
    other engine gets :meth:`Database.purge`. An in-RAM database has nothing to compact.
    """
    if db.in_ram:
        return Compacted()
    if isinstance(db, CompactingDatabase):
        return db.compact()
    db.purge()
    return Compacted([db.location])


@runtime_checkable
class DocumentStore(Protocol):
    """The memory's one documents table."""

    def put(self, docs: Sequence[Document]) -> list[StoredDocument]:
        """Insert or replace by ``doc_id`` (a replaced document keeps its key and ``created``);
        return them as stored, in input order (a repeated id: its last version)."""
        ...

    def get(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]:
        """The stored documents among ``doc_ids`` (unknown ids are left out)."""
        ...

    def by_keys(self, keys: Iterable[int]) -> dict[int, StoredDocument]:
        """The stored documents with these keys."""
        ...

    def ids(self, session_id: str | None = None) -> list[str]:
        """The ids of a session's documents (None: every document's), oldest first."""
        ...

    def ids_with_text(self, session_id: str, text: str) -> list[str]:
        """The ids of a session's documents whose text is exactly ``text``, oldest first (the
        copies of one text stored under other ids)."""
        ...

    def iter(self, batch: int = 500) -> Iterator[StoredDocument]:
        """Every document, oldest first, read in pages."""
        ...

    def count(self, session_id: str | None = None) -> int:
        """How many documents (of a session)."""
        ...

    def made_between(
        self, since: float, until: float, limit: int, session_id: str | None = None
    ) -> list[StoredDocument]:
        """The newest ``limit`` documents (of a session) made in ``[since, until)`` (their
        ``created``, seconds since the epoch), newest first."""
        ...

    def sessions(self) -> list[str]:
        """Every session that has documents, sorted."""
        ...

    def remove(self, doc_ids: Sequence[str]) -> int:
        """Delete by id; return how many existed. Call every index's ``remove`` first."""
        ...

    def remove_all(self) -> int:
        """Delete every document; return how many existed. Call every index's ``remove_all`` first."""
        ...

    def set_created(self, items: Sequence[tuple[str, float]]) -> None:
        """Set the ``created`` (seconds since the epoch) of documents by ``(doc_id, created)``:
        a copy keeps its source's times (``storage.migrate``). Only inside ``atomic()``."""
        ...


@runtime_checkable
class Index(Protocol):
    """A way to find documents of the memory's documents table again.

    ``prepare`` runs before the write transaction (it may be slow: embedding) and must not
    raise for a service failure (it returns what it could, e.g. no vectors, and the index
    catches up later); ``add``/``remove``/``remove_all`` run inside it and must be local.

    An index that can keep a search to a window of time declares ``filters_time = True`` and
    then takes ``search(query, k, session_id, *, window=(since, until))``: only documents whose
    ``created`` is in ``[since, until)`` (seconds since the epoch), filtered in its query (the
    time words of a turn, docs/recall.md). Both engines' keyword indexes do, the vector index
    over a store that does, and a hybrid whose every arm does; an index without it is searched
    without windows.
    """

    @property
    def name(self) -> str:
        """A short label (``"keyword"``, ``"vector"``)."""
        ...

    def prepare(self, docs: Sequence[Document]) -> Any:
        """Work to do before the transaction (embedding); the result is passed to ``add``."""
        ...

    def add(self, docs: Sequence[StoredDocument], prepared: Any) -> None:
        """Index stored documents (only those with ``changed`` need work)."""
        ...

    def remove(self, docs: Sequence[StoredDocument]) -> int:
        """Take documents out of the index (before their rows go); return index rows removed."""
        ...

    def remove_all(self) -> int:
        """Empty the index; return index rows removed."""
        ...

    def search(self, query: str, k: int, session_id: str | None = None) -> list[MemoryHit]:
        """The best ``k`` documents (only ``session_id``'s when given), best first; each hit's
        ``source`` is the doc id and its metadata carries ``session_id``."""
        ...

    def stats(self) -> dict[str, Any]:
        """Figures for ``stats()``."""
        ...

    def close(self) -> None:
        """Finish pending work (deferred indexing) and stop threads."""
        ...


@runtime_checkable
class HistoryStore(Protocol):
    """Recent messages per session and the exchange-id chain.

    A store that declares ``trims_in_batches = True`` (both engines') takes ``append(...,
    batch=n)``: it trims only once the session holds ``keep + n`` messages (then down to
    ``keep``) and returns the messages it trimmed, oldest first. The base folds those into the
    rolling summary in the same transaction, and the rest from the history a turn reads (the lazy fold,
    :mod:`ovos_memory_plugins.summary`); with a store that does not, it folds each exchange as
    it leaves the window.

    Optional (SQLite's): ``tail(session_id, limit, trusted=False) -> (messages, last exchange
    id, token)``, what a recorded exchange reads first, in one look; with ``trusted`` it may
    answer from RAM unchecked and return a non-None ``token``, which ``confirm(token) -> bool``
    checks as the first statement of the write's transaction (False: another connection
    committed since, and the base plans the exchange again without writing).
    """

    def append(
        self,
        session_id: str,
        messages: Sequence[tuple[str, str]],
        keep: int,
        last_exchange_id: str | None = None,
        exchange_ids: Sequence[str | None] | None = None,
        *,
        created: float | None = None,
        batch: int = 1,
    ) -> Sequence[StoredMessage] | None:
        """Append ``(role, content)`` messages (``exchange_ids[i]``: the exchange document message
        ``i`` belongs to, or None), made at ``created`` (seconds since the epoch; None: now), and
        trim the session to its newest ``keep``. ``batch`` is passed only to a store that declares
        ``trims_in_batches``, which returns the trimmed messages (see the class docs)."""
        ...

    def recent(self, session_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a session, oldest first, each with its ``created``."""
        ...

    def tag_exchange(self, session_id: str, exchange_id: str) -> None:
        """Mark the session's last user message as part of ``exchange_id`` too (single-message hosts)."""
        ...

    def last_exchange_id(self, session_id: str) -> str:
        """The id of the session's newest exchange document, ``""`` when none."""
        ...

    def sessions(self) -> list[str]:
        """Every session with history, sorted."""
        ...

    def remove_exchanges(self, docs: Sequence[StoredDocument]) -> int:
        """Delete the history messages the given exchange documents came from; return how many."""
        ...

    def remove_quoting(self, session_id: str, text: str) -> int:
        """Delete the session's user messages that quote ``text`` (case folded) and the
        exchanges they belong to (a note told in the conversation, now forgotten); return how many."""
        ...

    def clear_session(self, session_id: str) -> int:
        """Delete a session's history; return how many messages went."""
        ...

    def clear_all(self) -> int:
        """Delete all history; return how many messages went."""
        ...

    def message_count(self) -> int:
        """How many messages the history holds."""
        ...


@runtime_checkable
class VectorStore(Protocol):
    """Vectors per embedder id (a *space*) for the documents table, with exact search.

    A store that declares ``filters_time = True`` takes ``search(..., *, window=(since,
    until))``: only documents whose ``created`` is in ``[since, until)`` (both engines' stores).
    """

    path: str

    def dimension(self, space: str) -> int | None:
        """The dimension recorded for a space, or None if it has no vectors yet."""
        ...

    def put_vectors(self, space: str, items: Sequence[tuple[str, Vector]]) -> int:
        """Store unit vectors for existing documents (by doc id); return how many were stored.
        Raises StorageError on a dimension mismatch with the space."""
        ...

    def missing(self, space: str, limit: int = 64) -> list[tuple[str, str]]:
        """Up to ``limit`` ``(doc_id, text)`` without a vector in ``space``, oldest first."""
        ...

    def missing_count(self, space: str) -> int:
        """How many documents have no vector in ``space``."""
        ...

    def spaces(self) -> dict[str, int]:
        """Vectors stored per space."""
        ...

    def drop_space(self, space: str) -> int:
        """Delete a space's vectors; return how many went."""
        ...

    def remove(self, keys: Sequence[int]) -> int:
        """Delete every vector of these document keys (every space); return how many."""
        ...

    def remove_all(self) -> int:
        """Delete every vector; return how many."""
        ...

    def search(self, space: str, query: Vector, k: int, session_id: str | None = None) -> list[tuple[str, float]]:
        """``(doc_id, cosine similarity)`` of the ``k`` nearest, best first; ties: smaller doc id."""
        ...

    def iter_vectors(self, space: str, batch: int = 500) -> Iterator[list[tuple[str, Vector]]]:
        """Every vector of ``space`` as ``(doc_id, vector)``, oldest document first, in batches
        (``storage.migrate`` copies them, never re-embedding)."""
        ...


@dataclass
class Storage:
    """Everything one memory keeps, over one database: build indexes with the factories, and
    take every other table from it (as sqlite-utils' ``Database`` hands out tables).

    The documents table and the history are attributes; the indexes come from
    :meth:`keyword_index` and :meth:`vector_store` (those a memory maintains are registered in
    :attr:`indexes`, which several memories over one storage share: a composite's parts); the
    tables beside them from :meth:`notes` (curated notes), :meth:`sticky` (sticky notes),
    :meth:`summaries` (the rolling summary), :meth:`embedding_cache` and :meth:`rewrites` (the
    notes' undo history). A plugin asks the storage for them and never opens a database or
    checks which engine runs; what an engine is is declared (:attr:`local`, :attr:`table_stores`).
    """

    db: Database
    documents: DocumentStore
    history: HistoryStore
    #: ``keyword_index(settings) -> Index`` for this engine.
    keyword_factory: Any
    #: ``vector_store(search_path) -> VectorStore`` for this engine.
    vector_factory: Any
    #: The memory's namespace: it keys the memory's rows where memories share one database
    #: (PostgreSQL); ``"default"`` in a SQLite file, which holds one memory.
    namespace: str = "default"
    #: The indexes over these documents that every write and every forget reaches, registered
    #: by the memories built over this storage (:meth:`register_index`). A memory of its own
    #: registers its own; the parts of a composite share one storage, so an exchange one part
    #: records reaches the keyword and the vector index alike, and a forget removes it from both.
    indexes: list[Index] = field(default_factory=list)
    #: The folder of the memory this storage is the one storage of, where its parts keep what
    #: lives beside the database (the curated notes' ``MEMORY.md`` and undo history): set by a
    #: composite for its parts (``<root>``, beside ``composite.db``). None: each memory keeps
    #: such files under its own ``root``.
    folder: Path | None = None

    #: The storage is a file on this machine (SQLite): what the memory keeps beside it under its
    #: ``root`` (``MEMORY.md``, the notes' undo history, files of earlier releases to move in)
    #: belongs with it. False for a database several servers share (PostgreSQL): everything is
    #: kept in the database, nothing under one machine's ``root``.
    local: ClassVar[bool] = True
    #: The engine's database takes the package's table stores (notes, sticky notes, summaries:
    #: the same statements on SQLite and PostgreSQL, :class:`~ovos_memory_plugins.storage.tables.TableAccess`).
    #: Another engine leaves it False (those methods refuse with :class:`StorageError`) or
    #: overrides them.
    table_stores: ClassVar[bool] = False

    def _tables(self, what: str) -> None:
        if not self.table_stores:
            raise StorageError(f"the {type(self.db).__name__} engine keeps no {what}")

    def notes(self) -> DatabaseNotesStore:
        """The curated-notes table of this memory (``memory_notes``: active and retired notes, in
        order). Raises :class:`StorageError` when it cannot be created."""
        self._tables("notes tables")
        from ovos_memory_plugins.storage.notes_store import DatabaseNotesStore

        return DatabaseNotesStore(db=self.db, namespace=self.namespace)

    def sticky(self) -> StickyStore:
        """The sticky-note tables of this memory (notes and last-ask records)."""
        self._tables("sticky-note tables")
        from ovos_memory_plugins.storage.sticky_store import StickyStore

        return StickyStore(self.db, self.namespace)

    def summaries(self) -> SummaryStore:
        """The rolling summaries of this memory's sessions."""
        self._tables("rolling-summary table")
        from ovos_memory_plugins.storage.summary_store import SummaryStore

        return SummaryStore(self.db, self.namespace)

    def rewrites(self, root: Path) -> Rewrites:
        """Where the notes' previous bodies (``undo``) and the last dream's time are kept: files
        under ``root`` for a :attr:`local` storage (an engine that is not overrides this)."""
        from ovos_memory_plugins.storage.notes_store import FileRewrites

        return FileRewrites(root)

    def embedding_cache(self) -> EmbeddingCache | None:
        """The content-hash embedding cache in this memory's database; None when the engine
        keeps none (PostgreSQL). Raises :class:`StorageError` when it cannot be created."""
        return None

    def holds(self, tables: str) -> bool:
        """Whether this memory's database may already hold rows of ``tables`` (``"notes"``,
        ``"sticky"``, ``"summaries"``), asked without creating them (copying out of a file that
        never had them creates nothing in it). True where the engine does not say."""
        return True

    def notes_store(self, kind: str, root: Path, *, database_file: Path | None = None) -> NotesStore:
        """The curated notes of a memory that keeps them in ``kind`` (``"file"``: ``MEMORY.md``
        under ``root``; ``"sqlite"``: :meth:`notes`), after moving in what earlier releases and
        the other kind left (see :func:`ovos_memory_plugins.storage.notes_store.adopt_notes`)."""
        from ovos_memory_plugins.storage.notes_store import adopt_notes

        return adopt_notes(self, kind, root, database_file=database_file)

    def sticky_store(self, root: Path) -> StickyStore:
        """:meth:`sticky`, after moving in the ``sticky.db`` an earlier release kept under
        ``root`` (a :attr:`local` storage on disk only; see
        :func:`ovos_memory_plugins.storage.sticky_store.import_sticky_file`)."""
        store = self.sticky()
        if self.local and not self.db.in_ram and not self.db.fallback_reason:
            from ovos_memory_plugins.storage.sticky_store import import_sticky_file

            import_sticky_file(store, root / "sticky.db")
        return store

    def register_index(self, index: Index) -> bool:
        """Add ``index`` to :attr:`indexes`: every later write and forget over this storage
        reaches it. One index per ``name``: the tables are the storage's (one keyword index, one
        vector store), so a second index of a name (a second keyword part with other query
        settings) reads them with its own settings and is not written twice. Returns whether
        it was added."""
        if any(known is index or known.name == index.name for known in self.indexes):
            return False
        self.indexes.append(index)
        return True

    def atomic(self) -> contextlib.AbstractContextManager[Any]:
        """One transaction over everything the memory keeps."""
        return self.db.atomic()

    def keyword_index(self, settings: KeywordSettings) -> Index:
        """The engine's keyword index over this memory's documents."""
        return self.keyword_factory(settings)  # type: ignore[no-any-return]

    def vector_store(self, search: str = "auto") -> VectorStore:
        """The engine's vector store over this memory's documents."""
        return self.vector_factory(search)  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the database."""
        self.db.close()
