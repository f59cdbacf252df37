"""The SQLite engine of the storage seam (:mod:`ovos_memory_plugins.storage.seam`).

One file per memory holds every table, created by the append-only migrations of the store
``memory`` (applied atomically across processes, see :meth:`Database.migrate`):

* ``documents``: ``id`` (the key: the rowid, so a new document's key is above every other's), ``doc_id`` (unique),
  ``session_id``, ``content``, ``metadata`` (JSON), ``created``;
* ``keyword_terms`` / ``keyword_fts`` / ``keyword_meta``: the keyword index
  (:mod:`ovos_memory_plugins.storage.keyword`);
* ``vector_spaces`` / ``vectors``: the vector index (:mod:`ovos_memory_plugins.storage.sqlite.vector`);
* ``history`` / ``sessions``: the history store (:mod:`ovos_memory_plugins.storage.sqlite.history`).

Index rows reference ``documents(id)`` with ``ON DELETE CASCADE``; the FTS5 index is told
explicitly (its shadow tables cannot cascade), and an index the memory no longer uses is dropped
when the memory opens (:meth:`SqliteStorage.retire_indexes`), so no copy of a text is left in an
index nobody maintains.

Files of earlier releases are migrated on open, once, in the same transaction as the schema:
``lexical_docs`` (the keyword backend's table) and ``vec_documents``/``vec_vectors`` (the vector
backend's) move into ``documents``, ``keyword_terms`` and ``vectors``; the old history
catalogue (``documents`` without text) becomes rows of the new ``documents``. Separate legacy
files (``keyword/lexical.db`` of a hybrid vector memory, a ``history.db`` next to it) are read
and their rows copied in, then the old files are deleted (see :func:`import_legacy_file`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.records import (
    Document,
    KeywordSettings,
    StoredDocument,
    document_time,
    dump_metadata,
    stored_document,
)
from ovos_memory_plugins.storage.seam import Storage
from ovos_memory_plugins.storage.sqlite.database import Database, Migration, chunked

if TYPE_CHECKING:
    from ovos_memory_plugins.storage.embedding_cache import EmbeddingCache

LOG = logging.getLogger(__name__)

__all__ = [
    "MIGRATIONS",
    "SqliteDocuments",
    "SqliteStorage",
    "adopt_shared_file",
    "folder_problem",
    "import_legacy_file",
    "open_database",
    "open_sqlite",
    "storage_for",
]


def folder_problem(folder: Path) -> str | None:
    """Why a memory could not keep its files in ``folder`` (None: it could), found without
    writing anything: the folder, or the nearest of its parents that exists, is not a folder,
    or this process may not write in it (``os.access``: as root only a read-only file system
    says no, as root can write anywhere else)."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # a dangling link: mkdir would fail on it
            return f"{existing} is a link to nothing"
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable by this user"
    return None


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _documents_v1(conn: sqlite3.Connection) -> None:
    old = _columns(conn, "documents")
    legacy_catalogue = bool(old) and "content" not in old
    if legacy_catalogue:  # the history store's catalogue of earlier releases: no text
        conn.execute("DROP INDEX IF EXISTS documents_session")
        conn.execute("ALTER TABLE documents RENAME TO _catalogue_v0")
    conn.execute(
        "CREATE TABLE documents ("
        " id INTEGER PRIMARY KEY,"
        " doc_id TEXT NOT NULL UNIQUE,"
        " session_id TEXT NOT NULL,"
        " content TEXT NOT NULL,"
        " metadata TEXT NOT NULL,"
        " created REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX documents_session ON documents (session_id, id)")
    if legacy_catalogue:
        conn.execute(
            "INSERT INTO documents (doc_id, session_id, content, metadata, created)"
            " SELECT doc_id, session_id, '', metadata, created FROM _catalogue_v0 ORDER BY created, doc_id"
        )
        conn.execute("DROP TABLE _catalogue_v0")


def _keyword_v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE keyword_terms ("
        " id INTEGER PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,"
        " body_terms TEXT NOT NULL, head_terms TEXT NOT NULL, ctx_terms TEXT NOT NULL, ctx_id INTEGER)"
    )
    # no index on ctx_id: it would cost every store; a delete scans for the turns that held its words
    conn.execute("CREATE TABLE keyword_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def _vector_v1(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE vector_spaces (space TEXT PRIMARY KEY, dimension INTEGER NOT NULL, created REAL)")
    conn.execute(
        "CREATE TABLE vectors ("
        " id INTEGER PRIMARY KEY,"
        " space TEXT NOT NULL REFERENCES vector_spaces (space) ON DELETE CASCADE,"
        " doc INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,"
        " vector BLOB NOT NULL, UNIQUE (space, doc))"
    )
    conn.execute("CREATE INDEX vectors_doc ON vectors (doc)")


def _move_old_documents(conn: sqlite3.Connection, table: str, text: str, order: str) -> int | None:
    """Copy the rows of an earlier release's documents ``table`` (its ``text`` column, in
    ``order``) into ``documents``, upserting by doc id; return how many it held, None when the
    file has no such table. ``table``, ``text`` and ``order`` are this module's constants."""
    if not _columns(conn, table):
        return None
    n = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    conn.execute(
        "INSERT INTO documents (doc_id, session_id, content, metadata, created)"
        f" SELECT doc_id, session_id, {text}, metadata, created FROM {table} WHERE true ORDER BY {order}"
        " ON CONFLICT (doc_id) DO UPDATE SET session_id = excluded.session_id, content = excluded.content,"
        " metadata = excluded.metadata"
    )
    return n


def _from_lexical_docs(conn: sqlite3.Connection) -> None:
    """The keyword backend's ``lexical_docs`` (text, session, metadata and terms in one row)."""
    n = _move_old_documents(conn, "lexical_docs", "content", "rowid")
    if n is None:
        return
    conn.execute(
        "INSERT OR REPLACE INTO keyword_terms (id, body_terms, head_terms, ctx_terms, ctx_id)"
        " SELECT d.id, l.body_terms, l.head_terms, l.ctx_terms, c.id FROM lexical_docs l"
        " JOIN documents d ON d.doc_id = l.doc_id"
        " LEFT JOIN lexical_docs lc ON lc.rowid = l.ctx_rowid LEFT JOIN documents c ON c.doc_id = lc.doc_id"
    )
    version = None
    if _columns(conn, "lexical_meta"):
        row = conn.execute("SELECT value FROM lexical_meta WHERE key = 'tokenizer'").fetchone()
        version = row[0] if row else None
        conn.execute("DROP TABLE lexical_meta")
    if version is not None:
        conn.execute("INSERT OR REPLACE INTO keyword_meta (key, value) VALUES ('tokenizer', ?)", (version,))
    with contextlib.suppress(sqlite3.OperationalError):  # no FTS5 in this SQLite: the table is unreadable
        conn.execute("DROP TABLE IF EXISTS lexical_fts")
    conn.execute("DROP TABLE lexical_docs")
    LOG.info("storage: moved %d document(s) of the keyword backend's table into the shared documents table", n)


def _from_vec_documents(conn: sqlite3.Connection) -> None:
    """The vector backend's ``vec_documents`` / ``vec_spaces`` / ``vec_vectors``."""
    n = _move_old_documents(conn, "vec_documents", "text", "created, doc_id")
    if n is None:
        return
    if _columns(conn, "vec_spaces"):
        conn.execute(
            "INSERT OR IGNORE INTO vector_spaces (space, dimension, created)"
            " SELECT embedder_id, dimension, created FROM vec_spaces"
        )
    if _columns(conn, "vec_vectors"):
        conn.execute(
            "INSERT OR REPLACE INTO vectors (space, doc, vector)"
            " SELECT v.embedder_id, d.id, v.vector FROM vec_vectors v JOIN documents d ON d.doc_id = v.doc_id"
            " WHERE v.embedder_id IN (SELECT space FROM vector_spaces)"
        )
    for table in ("vec_vectors", "vec_spaces", "vec_documents"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    LOG.info("storage: moved %d document(s) of the vector backend's tables into the shared documents table", n)


def _created_from_time(conn: sqlite3.Connection) -> None:
    """A document's ``created`` is when it was made: its ``metadata.time`` where it has one
    (earlier releases stored the time of the write, so an ingested transcript's exchanges were
    all dated the day of the ingest; recall's time windows filter on ``created``, and read a
    window's newest documents through the index on it)."""
    conn.execute("CREATE INDEX IF NOT EXISTS documents_created ON documents (created)")
    conn.execute(
        "UPDATE documents SET created = json_extract(metadata, '$.time')"
        " WHERE json_valid(metadata) AND json_type(metadata, '$.time') IN ('integer', 'real')"
        " AND json_extract(metadata, '$.time') > 0"
    )


#: The schema of a memory's file. Append only; never rename or reorder an applied step.
MIGRATIONS = [
    Migration("0001_documents", _documents_v1),
    Migration("0002_keyword_index", _keyword_v1),
    Migration("0003_vector_index", _vector_v1),
    Migration("0004_from_lexical_docs", _from_lexical_docs),
    Migration("0005_from_vec_documents", _from_vec_documents),
    Migration("0006_documents_created_from_time", _created_from_time),
]


def _row_document(row: Any, changed: bool = True) -> StoredDocument:
    return StoredDocument(
        key=int(row[0]),
        doc_id=row[1],
        session_id=row[2],
        text=row[3],
        metadata=json.loads(row[4]),
        created=float(row[5]),
        changed=changed,
    )


_SELECT = "SELECT id, doc_id, session_id, content, metadata, created FROM documents"


class SqliteDocuments:
    """The documents table (see :class:`ovos_memory_plugins.storage.seam.DocumentStore`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, docs: Sequence[Document]) -> list[StoredDocument]:
        """Insert or replace by ``doc_id``; a replaced document keeps its key and ``created``."""
        out: dict[str, StoredDocument] = {}
        now = time.time()
        with self.db.atomic(savepoint=False) as conn:
            for doc in docs:
                meta = dump_metadata(doc.metadata)
                made = document_time(doc.metadata, now)
                cur = conn.execute(
                    "INSERT INTO documents (doc_id, session_id, content, metadata, created) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (doc_id) DO NOTHING",
                    (doc.doc_id, doc.session_id, doc.text, meta, made),
                )
                prior = out.get(doc.doc_id)
                if cur.rowcount:
                    out[doc.doc_id] = stored_document(doc, int(cur.lastrowid or 0), made, True, True, prior)
                    continue
                old = conn.execute(
                    "SELECT id, session_id, content, created FROM documents WHERE doc_id = ?", (doc.doc_id,)
                ).fetchone()
                changed = old[1] != doc.session_id or old[2] != doc.text
                conn.execute(
                    "UPDATE documents SET session_id = ?, content = ?, metadata = ? WHERE id = ?",
                    (doc.session_id, doc.text, meta, old[0]),
                )
                out[doc.doc_id] = stored_document(doc, int(old[0]), float(old[3]), changed, False, prior)
        return list(out.values())

    def get(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]:
        """The stored documents among ``doc_ids``."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, StoredDocument] = {}
        for chunk, marks in chunked(ids):
            for row in self.db.query(f"{_SELECT} WHERE doc_id IN ({marks})", chunk):
                out[row[1]] = _row_document(row, False)
        return out

    def by_keys(self, keys: Iterable[int]) -> dict[int, StoredDocument]:
        """The stored documents with these keys."""
        wanted = list(dict.fromkeys(int(k) for k in keys))
        out: dict[int, StoredDocument] = {}
        for chunk, marks in chunked(wanted):
            for row in self.db.query(f"{_SELECT} WHERE id IN ({marks})", chunk):
                out[int(row[0])] = _row_document(row, False)
        return out

    def ids(self, session_id: str | None = None) -> list[str]:
        """The ids of a session's documents (None: all), oldest first."""
        if session_id is None:
            return [r[0] for r in self.db.query("SELECT doc_id FROM documents ORDER BY id")]
        return [
            r[0] for r in self.db.query("SELECT doc_id FROM documents WHERE session_id = ? ORDER BY id", (session_id,))
        ]

    def ids_with_text(self, session_id: str, text: str) -> list[str]:
        """The ids of a session's documents whose text is exactly ``text``, oldest first."""
        rows = self.db.query(
            "SELECT doc_id FROM documents WHERE session_id = ? AND content = ? ORDER BY id", (session_id, text)
        )
        return [r[0] for r in rows]

    def iter(self, batch: int = 500) -> Iterator[StoredDocument]:
        """Every document, oldest first, in pages of ``batch``."""
        last = 0
        while True:
            rows = self.db.query(f"{_SELECT} WHERE id > ? ORDER BY id LIMIT ?", (last, int(batch)))
            if not rows:
                return
            for row in rows:
                yield _row_document(row, False)
            last = int(rows[-1][0])

    def count(self, session_id: str | None = None) -> int:
        """How many documents (of a session)."""
        if session_id is None:
            return int(self.db.scalar("SELECT count(*) FROM documents") or 0)
        return int(self.db.scalar("SELECT count(*) FROM documents WHERE session_id = ?", (session_id,)) or 0)

    def made_between(
        self, since: float, until: float, limit: int, session_id: str | None = None
    ) -> list[StoredDocument]:
        """The newest ``limit`` documents made in ``[since, until)`` (``created``), newest first."""
        where = " AND session_id = ?" if session_id is not None else ""
        params: tuple[Any, ...] = (float(since), float(until), *((session_id,) if session_id is not None else ()))
        rows = self.db.query(
            f"{_SELECT} WHERE created >= ? AND created < ?{where} ORDER BY created DESC, id DESC LIMIT ?",
            (*params, int(limit)),
        )
        return [_row_document(r) for r in rows]

    def sessions(self) -> list[str]:
        """Every session that has documents, sorted."""
        return [r[0] for r in self.db.query("SELECT DISTINCT session_id FROM documents ORDER BY session_id")]

    def remove(self, doc_ids: Sequence[str]) -> int:
        """Delete by id (index rows cascade); return how many existed."""
        ids = list(dict.fromkeys(doc_ids))
        n = 0
        with self.db.atomic(savepoint=False) as conn:
            for chunk, marks in chunked(ids):
                n += conn.execute(f"DELETE FROM documents WHERE doc_id IN ({marks})", chunk).rowcount
        return n

    def remove_all(self) -> int:
        """Delete every document; return how many existed."""
        with self.db.atomic(savepoint=False) as conn:
            return int(conn.execute("DELETE FROM documents").rowcount)

    def set_created(self, items: Sequence[tuple[str, float]]) -> None:
        """Set the ``created`` of these documents (by doc id); inside :meth:`Database.atomic`."""
        if items:
            self.db.executemany(
                "UPDATE documents SET created = ? WHERE doc_id = ?", [(created, doc_id) for doc_id, created in items]
            )


class SqliteStorage(Storage):
    """:class:`~ovos_memory_plugins.storage.seam.Storage` over one SQLite :class:`Database`."""

    db: Database
    #: Notes, sticky notes and summaries are tables of the file (``storage.tables``).
    table_stores: ClassVar[bool] = True
    #: The tables :meth:`holds` looks for, by the name a caller asks with.
    HELD_TABLES: ClassVar[dict[str, tuple[str, ...]]] = {
        "notes": ("memory_notes",),
        "sticky": ("memory_sticky_notes",),
        "summaries": ("memory_summaries", "summaries"),
    }

    def __init__(self, db: Database, vector_driver: str | None = None) -> None:
        from ovos_memory_plugins.storage.sqlite.history import SqliteHistory

        db.migrate("memory", MIGRATIONS)
        super().__init__(
            db=db,
            documents=SqliteDocuments(db),
            history=SqliteHistory(db),
            keyword_factory=self._keyword,
            vector_factory=self._vectors,
        )
        self.vector_driver = vector_driver

    def _keyword(self, settings: KeywordSettings) -> Any:
        from ovos_memory_plugins.storage.sqlite.keyword import SqliteKeywordIndex

        return SqliteKeywordIndex(self.db, settings)

    def _vectors(self, search: str) -> Any:
        from ovos_memory_plugins.storage.sqlite.vector import SqliteVectorStore

        return SqliteVectorStore(self.db, search, self.vector_driver)

    def embedding_cache(self) -> EmbeddingCache:
        """The content-hash embedding cache (table ``embedding_cache`` of the file)."""
        from ovos_memory_plugins.storage.embedding_cache import EmbeddingCache

        try:
            return EmbeddingCache(self.db)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot use database {self.db.path}: {exc}") from exc

    def holds(self, tables: str) -> bool:
        """Whether the file has the tables of ``tables`` (``"notes"``, ``"sticky"``, ``"summaries"``)."""
        return any(self.db.table_exists(name) for name in self.HELD_TABLES.get(tables, (tables,)))

    def retire_indexes(self, active: Iterable[str]) -> None:
        """Drop the rows of indexes this memory no longer maintains (``"keyword"``,
        ``"vector"``), so no copy of a text stays in an index nobody updates on delete."""
        keep = set(active)
        if "keyword" not in keep and self.db.scalar("SELECT 1 FROM keyword_terms LIMIT 1"):
            with self.db.atomic() as conn:
                conn.execute("DELETE FROM keyword_terms")
                with contextlib.suppress(sqlite3.OperationalError):
                    conn.execute("DROP TABLE IF EXISTS keyword_fts")
            LOG.info("storage: %s: dropped the keyword index this memory no longer uses", self.db.path)
        elif "keyword" not in keep and self.db.table_exists("keyword_fts"):
            with self.db.atomic() as conn, contextlib.suppress(sqlite3.OperationalError):
                conn.execute("DROP TABLE IF EXISTS keyword_fts")


def _load_sqlite_vec(conn: Any) -> bool:
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        conn.execute("SELECT vec_version()").fetchone()
        return True
    except Exception as exc:  # ImportError, AttributeError, the driver's OperationalError
        LOG.debug("sqlite-vec did not load on %s: %s", type(conn).__module__, exc)
        return False


def open_database(path: str | Path, vector_extension: bool = False) -> tuple[Database, str | None]:
    """Open a SQLite database; with ``vector_extension``, on a connection with sqlite-vec loaded.

    Returns the database and the driver that loaded sqlite-vec (``"sqlite3"`` or ``"sqlean"``),
    or None when it is not loaded (then the connection is the stdlib's).
    """
    path = str(path)
    if "\x00" in path:
        raise StorageError("a database path cannot contain a NUL character")
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    if vector_extension:
        drivers: list[tuple[str, Any]] = [("sqlite3", sqlite3)]
        try:
            import sqlean

            drivers.append(("sqlean", sqlean))
        except ImportError:
            pass
        for name, module in drivers:
            try:
                conn = module.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
            except Exception as exc:
                raise StorageError(f"cannot open database {path}: {exc}") from exc
            if hasattr(conn, "enable_load_extension") and _load_sqlite_vec(conn):
                try:
                    db = Database(path, connection=conn)
                except StorageError:
                    conn.close()
                    raise
                # Database installs the stdlib's Row, which another driver's cursors reject
                db.conn.row_factory = getattr(module, "Row", None)
                return db, name
            conn.close()
    return Database(path), None


def _read_legacy(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of an earlier release's file worth keeping (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        out: dict[str, list[tuple[Any, ...]]] = {}
        if "lexical_docs" in tables:
            out["documents"] = [
                tuple(r)
                for r in conn.execute(
                    "SELECT doc_id, session_id, content, metadata, created FROM lexical_docs ORDER BY rowid"
                )
            ]
        if "history" in tables:
            out["history"] = [
                tuple(r) for r in conn.execute("SELECT session_id, role, content, created FROM history ORDER BY id")
            ]
        if "sessions" in tables:
            out["sessions"] = [tuple(r) for r in conn.execute("SELECT session_id, last_exchange_id FROM sessions")]
        if "documents" in tables and "content" not in _columns(conn, "documents"):
            out["catalogue"] = [
                tuple(r) for r in conn.execute("SELECT doc_id, session_id, metadata, created FROM documents")
            ]
        return out
    finally:
        conn.close()


def _current_memory(path: Path) -> bool:
    """Whether ``path`` is a memory database of this release (its schema is the store ``memory``)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = '_migrations'").fetchone():
            return False
        return bool(conn.execute("SELECT 1 FROM _migrations WHERE store = 'memory' LIMIT 1").fetchone())
    finally:
        conn.close()


def _remove_file(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(str(path) + suffix)


def import_legacy_file(storage: SqliteStorage, path: Path) -> int:
    """Copy the documents and history of an earlier release's separate file into ``storage``,
    once (recorded as a migration of the store ``legacy``), then delete the old file.

    Handles ``keyword/lexical.db`` (the hybrid's old keyword arm: its documents, with text) and
    ``history.db`` (history, exchange chains, catalogue). Nothing is deleted before the copy
    is committed; a document already present keeps the stored version. Returns how many rows
    were copied.
    """
    db = storage.db
    name = f"import:{path.name}:{path.parent.name}"
    if not path.exists() or name in db.applied("legacy"):
        if path.exists() and name in db.applied("legacy"):
            _remove_file(path)
        return 0
    try:
        if _current_memory(path):  # another memory's database of this release (sticky notes, notes): not ours
            LOG.info("storage: %s is another memory's database, not an earlier release's file; left alone", path)
            return 0
        rows = _read_legacy(path)
    except sqlite3.Error as exc:
        LOG.error("storage: cannot read the earlier file %s (%s); it is left in place", path, exc)
        return 0
    copied = 0

    def apply(conn: sqlite3.Connection) -> None:
        nonlocal copied
        for doc_id, session_id, content, metadata, created in rows.get("documents", []):
            copied += conn.execute(
                "INSERT OR IGNORE INTO documents (doc_id, session_id, content, metadata, created)"
                " VALUES (?, ?, ?, ?, ?)",
                (doc_id, session_id, content, metadata, created),
            ).rowcount
        for doc_id, session_id, metadata, created in rows.get("catalogue", []):
            copied += conn.execute(
                "INSERT OR IGNORE INTO documents (doc_id, session_id, content, metadata, created)"
                " VALUES (?, ?, '', ?, ?)",
                (doc_id, session_id, metadata, created),
            ).rowcount
        history = rows.get("history", [])
        if history:
            # earlier history first, so the newest messages stay the newest
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS _keep AS SELECT * FROM history WHERE 0")
            conn.execute("DELETE FROM temp._keep")
            conn.execute("INSERT INTO temp._keep SELECT * FROM history")
            conn.execute("DELETE FROM history")
            conn.executemany("INSERT INTO history (session_id, role, content, created) VALUES (?, ?, ?, ?)", history)
            cols = ", ".join(c for c in _columns(conn, "history") if c != "id")
            conn.execute(f"INSERT INTO history ({cols}) SELECT {cols} FROM temp._keep ORDER BY id")
            conn.execute("DROP TABLE temp._keep")
            copied += len(history)
        for session_id, last in rows.get("sessions", []):
            conn.execute(
                "INSERT OR IGNORE INTO sessions (session_id, last_exchange_id) VALUES (?, ?)", (session_id, last)
            )

    db.migrate("legacy", [Migration(name, apply)])
    LOG.warning(
        "storage: copied %d row(s) of the earlier file %s into %s; deleting the old file", copied, path, db.path
    )
    _remove_file(path)
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # keyword/ when empty
    return copied


def storage_for(db: Any) -> SqliteStorage:
    """The storage over an already open :class:`Database` (migrated); raises :class:`StorageError`."""
    if not isinstance(db, Database):
        raise StorageError(f"not a database: {type(db).__name__}")
    try:
        return SqliteStorage(db)
    except sqlite3.Error as exc:
        raise StorageError(f"cannot use database {db.path}: {exc}") from exc


def open_sqlite(
    location: str | Path,
    *,
    vector_extension: bool = False,
    adopt: Path | None = None,
    legacy: Sequence[Path] = (),
    **ignored: Any,
) -> SqliteStorage:
    """Open (creating and migrating) a memory's SQLite file.

    ``adopt``: the file earlier releases shared between namespaces, copied to ``location``
    first when that does not exist yet (:func:`adopt_shared_file`); ``legacy``: separate files
    of earlier releases whose rows move in (:func:`import_legacy_file`). Other options (meant
    for other engines, such as ``namespace``) are ignored. Raises :class:`StorageError` when the
    file cannot be opened or migrated.
    """
    try:
        if adopt is not None and str(location) != ":memory:" and Path(adopt) != Path(location):
            adopt_shared_file(Path(adopt), Path(location))
        db, driver = open_database(location, vector_extension)
    except OSError as exc:
        raise StorageError(f"cannot open database {location}: {exc}") from exc
    try:
        storage = SqliteStorage(db, driver)
        for path in legacy:
            import_legacy_file(storage, Path(path))
    except (StorageError, sqlite3.Error, OSError) as exc:
        db.close()
        raise StorageError(f"cannot use database {location}: {exc}") from exc
    return storage


def adopt_shared_file(shared: Path, target: Path) -> bool:
    """Give a namespace its own copy of the file earlier releases shared under one ``root``.

    Earlier releases put ``{"root": R, "namespace": "ava"}`` and ``{"root": R, "namespace":
    "bob"}`` in the same ``R/<file>``; now each namespace has ``R/<namespace>/<file>``. The
    first time a namespace opens and its file does not exist yet, the shared file is copied
    (SQLite's backup API, consistent even while another process writes it) to the new place:
    the persona keeps every memory it could see before, and nothing is lost. The shared file
    stays where it is (it is still what a config without a namespace opens); a WARNING says so,
    once per namespace. Safe with many processes: the copy is linked into place only if no
    other process got there first.
    """
    if target.exists() or not shared.is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.adopt-{os.getpid()}-{time.monotonic_ns()}")
    try:
        source = sqlite3.connect(f"file:{shared}?mode=ro", uri=True)
        try:
            copy = sqlite3.connect(temp)
            try:
                source.backup(copy)
            finally:
                copy.close()
        finally:
            source.close()
        try:
            os.link(temp, target)
        except FileExistsError:
            return False
    except sqlite3.Error as exc:
        LOG.error("storage: cannot copy the shared file %s to %s (%s); starting empty", shared, target, exc)
        return False
    finally:
        _remove_file(temp)
    LOG.warning(
        "storage: %s was shared by every namespace under one root in earlier releases; copied it to %s "
        "for this namespace (nothing is lost). The shared file stays in place; delete it once every "
        "persona that used it has opened its own copy.",
        shared,
        target,
    )
    return True
