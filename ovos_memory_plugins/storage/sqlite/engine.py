"""The SQLite engine of the storage seam (:mod:`ovos_memory_plugins.storage.seam`): opening a
memory's file (:func:`open_sqlite`, :func:`open_database`, sqlite-vec loaded when asked) and
the :class:`SqliteStorage` over it, which hands out every table.

One file per memory holds every table: the documents table
(:mod:`ovos_memory_plugins.storage.sqlite.documents`), created with the keyword and vector
indexes by the store ``memory``'s migrations (:mod:`ovos_memory_plugins.storage.sqlite.schema`),
the keyword index (:mod:`ovos_memory_plugins.storage.sqlite.keyword`), the vector index
(:mod:`ovos_memory_plugins.storage.sqlite.vector`) and the history
(:mod:`ovos_memory_plugins.storage.sqlite.history`).

Index rows reference ``documents(id)`` with ``ON DELETE CASCADE``; the FTS5 index is told
explicitly (its shadow tables cannot cascade), and an index the memory no longer uses is dropped
when the memory opens (:meth:`SqliteStorage.retire_indexes`), so no copy of a text is left in an
index nobody maintains.

Files of earlier releases are taken in on open (:mod:`ovos_memory_plugins.storage.sqlite.adopt`).
This module was the whole engine: ``MIGRATIONS``, ``SqliteDocuments``, ``adopt_shared_file`` and
``import_legacy_file`` are still importable from it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.records import KeywordSettings
from ovos_memory_plugins.storage.seam import Storage
from ovos_memory_plugins.storage.sqlite.adopt import adopt_shared_file, import_legacy_file
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.storage.sqlite.documents import SqliteDocuments
from ovos_memory_plugins.storage.sqlite.schema import MIGRATIONS

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
