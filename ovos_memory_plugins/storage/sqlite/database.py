"""The one SQLite layer every SQLite store uses.

* :class:`Database` opens a file (or takes an injected connection), turns on WAL and a busy
  timeout, serialises use of its connection with a lock (one instance serves many threads) and
  offers one transaction helper, :meth:`Database.atomic`.
* Schemas are versioned with append-only named :class:`Migration` lists, one list per store,
  each migration applied in its own transaction together with its bookkeeping row.
* Identifier and FTS5 quoting live here and nowhere else; every value is bound, never formatted.

Every connection turns on ``secure_delete`` (deleted rows are overwritten with zeros, so a
forgotten text does not linger in free pages) and foreign keys. Creating or migrating a schema
is atomic across processes: the check of what is applied and the migrations themselves run in
one ``BEGIN IMMEDIATE`` transaction, so N processes opening one new folder at once never see a
half-made schema and never fall back to RAM.

Durability: WAL with ``synchronous=NORMAL``. A committed write survives a crash of the process
(the acknowledged-means-stored promise); only a power cut may lose the last transactions.
Pass ``synchronous="FULL"`` to trade speed for that too.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.records import Compacted, Migration

LOG = logging.getLogger(__name__)

__all__ = ["Database", "Migration", "chunked", "fts5_available", "quote_fts_phrase", "quote_identifier"]

#: How long a compaction waits for another process's lock before it skips the file (ms).
COMPACT_WAIT_MS = 2_000
#: How long a purge after a delete waits for other connections before leaving the WAL for later.
PURGE_WAIT_MS = 250

#: SQLite's ``PRAGMA application_id`` of the files this package creates ("OMEM"): a file with
#: another program's id is refused, never adopted (files of earlier releases have 0 and are
#: recognised by their ``_migrations`` table).
APPLICATION_ID = 0x4F4D454D

#: Bound parameters per ``IN (...)`` list (SQLite's default limit is 32,766; stay well below).
CHUNK = 500


def chunked(items: Sequence[Any], size: int = CHUNK) -> Iterator[tuple[Sequence[Any], str]]:
    """Slices of ``items`` with the matching ``?,?,...`` placeholder list, for ``IN (...)``."""
    for start in range(0, len(items), size):
        chunk = items[start : start + size]
        yield chunk, ",".join("?" * len(chunk))


def _driver_errors(driver: Any, name: str) -> tuple[type[Exception], ...]:
    """``sqlite3.<name>`` and, when the connection comes from another DB-API driver of SQLite
    (sqlean), that driver's class of the same name."""
    own = getattr(driver, name, None)
    base: type[Exception] = getattr(sqlite3, name)
    if isinstance(own, type) and issubclass(own, Exception) and not issubclass(own, base):
        return (base, own)
    return (base,)


def quote_identifier(name: str) -> str:
    """Quote an SQL identifier (table, column) so any text is a literal name."""
    if "\x00" in name:
        raise ValueError("identifiers cannot contain NUL")
    return '"' + name.replace('"', '""') + '"'


def quote_fts_phrase(term: str) -> str:
    """Quote one term as an FTS5 string so operators and keywords in it are plain text."""
    return '"' + term.replace('"', '""') + '"'


_fts5: bool | None = None


def fts5_available() -> bool:
    """Whether this interpreter's SQLite was built with FTS5."""
    global _fts5
    if _fts5 is None:
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
            _fts5 = True
        except sqlite3.OperationalError:
            _fts5 = False
        finally:
            conn.close()
    return _fts5


def foreign_reason(conn: Any, path: str) -> str | None:
    """Why the database on ``conn`` is not a memory database of this package; None when it is.

    Ours: a new or empty file, a file marked with :data:`APPLICATION_ID`, or one of an earlier
    release (unmarked, with our ``_migrations`` table). Anything else (another program's
    ``application_id`` or ``user_version``, or tables without our bookkeeping table) is
    another program's: a ``db_path`` naming it must not get our tables added, nor its journal
    mode changed.
    """
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if app_id == APPLICATION_ID:
        return None
    if app_id != 0:
        return (
            f"{path} is not a memory database of ovos-memory-plugins (it belongs to another program:"
            f" SQLite application_id {app_id:#010x}); refusing to change it. Point db_path or root elsewhere"
        )
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
            " ORDER BY name"
        )
    ]
    ours = "_migrations" in tables and {"store", "name", "applied_at"} <= {
        r[1] for r in conn.execute("PRAGMA table_info(_migrations)")
    }
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if ours or not (tables or version):
        return None
    held = [f"{len(tables)} table(s) of another program: {', '.join(tables[:5])}"] if tables else []
    held += [f"user_version {version}"] if version else []
    return (
        f"{path} is not a memory database of ovos-memory-plugins (it holds {'; '.join(held)});"
        " refusing to add tables to it. Point db_path or root elsewhere"
    )


class _Atomic:
    """The context manager of :meth:`Database.atomic` (see there): joins, begins or saves."""

    __slots__ = ("db", "kind", "name", "registered", "savepoint")

    def __init__(self, db: Database, savepoint: bool) -> None:
        self.db = db
        self.savepoint = savepoint
        self.kind = 0  # 0: joined the enclosing transaction, 1: began one, 2: a savepoint
        self.name = ""
        self.registered = 0

    def __enter__(self) -> sqlite3.Connection:
        db = self.db
        db.lock.acquire()
        try:
            if db._depth > 0 and not self.savepoint:  # the lock is held: the enclosing block is this thread's
                self.kind = 0
            elif db._depth == 0:
                db._retry(db._begin)
                db._txn_version = None
                self.kind = 1
                db._depth += 1
            else:
                self.kind = 2
                self.name = f"sp{db._depth}"
                db.conn.execute(f"SAVEPOINT {self.name}")
                db._depth += 1
                self.registered = len(db._after_commit)
        except BaseException:
            db.lock.release()
            raise
        return db.conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        db = self.db
        try:
            if self.kind == 1:
                db._depth -= 1
                db._txn_version = None
                if exc_type is not None:
                    db._after_commit.clear()
                    db.conn.execute("ROLLBACK")
                    return
                try:
                    db._retry(db._commit)
                except BaseException:
                    db._after_commit.clear()
                    if db.conn.in_transaction:
                        db.conn.execute("ROLLBACK")
                    raise
                callbacks, db._after_commit = db._after_commit, []
                for callback in callbacks:
                    try:
                        callback()
                    except Exception:  # the transaction is committed: a cache or index catches up later
                        LOG.exception("database %s: a step after the commit failed", db.path)
            elif self.kind == 2:
                db._depth -= 1
                if exc_type is not None:
                    del db._after_commit[self.registered :]  # what the rolled-back steps asked for
                    db.conn.execute(f"ROLLBACK TO {self.name}")
                db.conn.execute(f"RELEASE {self.name}")
        finally:
            db.lock.release()


class Database:
    """A SQLite database shared by the threads of one process.

    Args:
        path: the file (its folder is created), or ``":memory:"``.
        connection: use this connection instead of opening ``path`` (a test seam, or a
            connection from another sqlite3 module such as sqlean's). The caller keeps it
            configured; WAL and the busy timeout are still applied.
        busy_timeout_ms: how long a write waits for another process's lock.
        synchronous: ``"NORMAL"`` (default, survives process crashes) or ``"FULL"``.

    Attributes:
        engine: ``"sqlite"`` (the engine-neutral seam names engines; see ``storage.seam``).
        in_ram: True for an in-memory database (nothing survives the process).
        fallback_reason: why this database is in RAM although a file was wanted (else None).
    """

    engine = "sqlite"

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        connection: sqlite3.Connection | None = None,
        busy_timeout_ms: int = 10_000,
        synchronous: str = "NORMAL",
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError("synchronous must be 'NORMAL' or 'FULL'")
        self.path = str(path)
        if "\x00" in self.path:
            raise StorageError("a database path cannot contain a NUL character")
        self.in_ram = self.path == ":memory:"
        self.fallback_reason: str | None = None
        self.lock = threading.RLock()
        self._depth = 0
        #: ``PRAGMA data_version`` as read inside the open transaction (None: not read yet): it
        #: cannot change before the commit (BEGIN IMMEDIATE holds the write lock, and the
        #: connection's own commits leave it as it is), so a transaction reads it once.
        self._txn_version: int | None = None
        self._after_commit: list[Callable[[], None]] = []
        self._closed = False
        self.busy_timeout_ms = busy_timeout_ms
        injected = connection is not None
        if connection is None:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            try:
                connection = sqlite3.connect(
                    self.path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
                )
            except sqlite3.Error as exc:
                raise StorageError(f"cannot open database {self.path}: {exc}") from exc
        self.conn = connection
        # an injected connection may come from another DB-API driver of SQLite (sqlean, which can
        # load sqlite-vec): its exceptions are its own classes, not subclasses of sqlite3's
        driver = sys.modules.get(type(connection).__module__)
        self._locked_errors: tuple[type[Exception], ...] = _driver_errors(driver, "OperationalError")
        database_errors = _driver_errors(driver, "DatabaseError")
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # before WAL is turned on (and before the stdlib's Row, which another driver's rows
            # reject): another program's file stays exactly as it was
            reason = None if self.in_ram else self._retry(lambda: foreign_reason(self.conn, self.path))
            if reason is not None:
                raise StorageError(reason)
            self.conn.row_factory = sqlite3.Row
            if self.path != ":memory:":
                self._retry(lambda: self.conn.execute("PRAGMA journal_mode = WAL"))
            self.conn.execute(f"PRAGMA synchronous = {synchronous}")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute("PRAGMA secure_delete = ON")
        except BaseException as exc:
            # a connection this constructor opened is closed here (a full disk fails the WAL
            # switch): nobody else holds it, and the garbage collector may not run for a while
            if not injected:
                with contextlib.suppress(Exception):
                    self.conn.close()
            if isinstance(exc, database_errors):
                raise StorageError(f"cannot use database {self.path}: {exc}") from exc
            raise

    # -- execution ---------------------------------------------------------------------------

    def _retry(self, call: Callable[[], Any]) -> Any:
        """Run ``call``, retrying while another process holds the lock past the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000 * 3
        delay = 0.01
        while True:
            try:
                return call()
            except self._locked_errors as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() > deadline:
                    raise StorageError(f"database {self.path} stayed locked: {exc}") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def _commit(self) -> None:
        self.conn.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """Run one statement (inside the current transaction, if any)."""
        with self.lock:
            return self._retry(lambda: self.conn.execute(sql, params))  # type: ignore[no-any-return]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for many rows (call it inside :meth:`atomic` for one commit)."""
        with self.lock:
            self._retry(lambda: self.conn.executemany(sql, rows))

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        """Run a statement and fetch every row."""
        with self.lock:
            return self._retry(lambda: self.conn.execute(sql, params).fetchall())  # type: ignore[no-any-return]

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        """The first column of the first row, or ``None``."""
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    def atomic(self, savepoint: bool = True) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One transaction (``BEGIN IMMEDIATE``), or a SAVEPOINT when already inside one.

        Holds the database lock for the whole block, so a block is atomic for the threads of
        this process too. Commits on success, rolls back on any exception and re-raises it.
        ``savepoint=False`` joins an enclosing transaction as it is (cheaper; for steps whose
        failure fails the whole transaction anyway): the store's own writes use it.
        (A small class rather than a generator: a turn's write enters it several times.)
        """
        return _Atomic(self, savepoint)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction of :meth:`atomic` is open (what it reads may still roll back)."""
        return self._depth > 0

    def on_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the current transaction commits (dropped if it, or the
        savepoint it was registered in, rolls back);
        at once when no transaction is open. For RAM caches that must follow the file."""
        with self.lock:
            if self._depth == 0:
                callback()
            else:
                self._after_commit.append(callback)

    # -- schema ------------------------------------------------------------------------------

    def migrate(self, store: str, migrations: Sequence[Migration]) -> list[str]:
        """Apply the migrations of ``store`` not yet applied, in order; return their names.

        Atomic across processes: the bookkeeping table, the check of what is applied and every
        pending migration run inside one ``BEGIN IMMEDIATE`` transaction (the write lock is
        taken before anything is read), so a second process opening the same new file waits,
        then finds everything applied. A failing migration rolls back with all the others.
        """
        with self.lock:
            done = self._applied(store)
            if all(m.name in done for m in migrations):
                return []  # the common case: nothing to do, no write lock taken
            applied: list[str] = []
            with self.atomic() as conn:
                self._claim(conn)
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS _migrations ("
                    " store TEXT NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL,"
                    " PRIMARY KEY (store, name))"
                )
                done = {r[0] for r in conn.execute("SELECT name FROM _migrations WHERE store = ?", (store,))}
                for migration in migrations:
                    if migration.name in done:
                        continue
                    migration.apply(conn)
                    conn.execute(
                        "INSERT INTO _migrations (store, name, applied_at) VALUES (?, ?, ?)",
                        (store, migration.name, time.time()),
                    )
                    applied.append(migration.name)
            return applied

    def _claim(self, conn: sqlite3.Connection) -> None:
        """Inside the write transaction of :meth:`migrate`: refuse a file that is not ours
        (:func:`foreign_reason`, checked again under the lock), else mark it ours."""
        reason = foreign_reason(conn, self.path)
        if reason is not None:
            raise StorageError(reason)
        if int(conn.execute("PRAGMA application_id").fetchone()[0]) != APPLICATION_ID:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def _applied(self, store: str) -> set[str]:
        if not self.table_exists("_migrations"):
            return set()
        return {r[0] for r in self.query("SELECT name FROM _migrations WHERE store = ?", (store,))}

    def applied(self, store: str) -> set[str]:
        """The names of the migrations of ``store`` applied to this database."""
        with self.lock:
            return self._applied(store)

    def changes(self) -> int | None:
        """How many rows this connection has inserted, updated or deleted since it opened
        (``total_changes``; read in RAM, no statement), None when the driver does not say. With
        :meth:`data_version` (other connections' commits) it tells whether anything was written
        since a look."""
        total = getattr(self.conn, "total_changes", None)
        return int(total) if isinstance(total, int) else None

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes when another connection commits (a cache
        keyed on it notices other processes' writes). Read once per transaction (it cannot change
        inside one: see ``_txn_version``)."""
        with self.lock:
            if self._depth > 0:
                if self._txn_version is None:
                    self._txn_version = self._read_version()
                return self._txn_version
            return int(self._retry(self._read_version) or 0)

    def _read_version(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0] or 0)

    def purge(self) -> None:
        """After deleting: checkpoint and truncate the WAL, so no copy of a deleted page stays
        in it (``secure_delete`` already zeroes the pages in the main file).

        Waits at most :data:`PURGE_WAIT_MS` for other connections: a forget must not stall
        behind another process's long read. A WAL that stays busy is logged and truncated by
        the next purge or compaction (the deleted rows are already gone from every query).
        """
        if self.in_ram:
            return
        with self.lock:
            if self._closed or self._depth > 0:
                return
            reason = self._truncate_wal(PURGE_WAIT_MS)
            if reason is not None:
                LOG.warning("database %s: deleted, but the WAL is not truncated yet (%s)", self.path, reason)

    def compact(self) -> Compacted:
        """Rewrite the file without its free pages (``VACUUM``) and empty the WAL
        (``wal_checkpoint(TRUNCATE)``), so no deleted row can be read back from either; the
        engine-neutral entry is :func:`~ovos_memory_plugins.storage.seam.compact_database`.

        ``secure_delete`` already zeroes deleted rows in place, but a page freed whole keeps
        what the WAL wrote and FTS5 segments are merged lazily; VACUUM leaves none of them.
        A file another process keeps busy (a write lock, or a long read that blocks the WAL
        truncation) is skipped after :data:`COMPACT_WAIT_MS`: logged, and reported in
        ``skipped``; the next compaction retries it. Returns nothing for an in-RAM database.
        """
        if self.in_ram:
            return Compacted()
        with self.lock:
            if self._closed:
                return self._compact_skipped("the database is closed")
            if self._depth > 0:  # VACUUM cannot run inside a transaction: this thread holds one
                return self._compact_skipped("a transaction is open on this connection")
            reason = self._truncate_wal(COMPACT_WAIT_MS, vacuum=True)
            if reason is not None:
                return self._compact_skipped(reason)
        return Compacted([self.path])

    def _truncate_wal(self, wait_ms: int, *, vacuum: bool = False) -> str | None:
        """``VACUUM`` (when asked) and truncate the WAL, waiting at most ``wait_ms`` for other
        connections; None when done, else why not. The caller holds :attr:`lock`, outside a
        transaction."""
        self.conn.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
        try:
            if vacuum:
                self.conn.execute("VACUUM")
            busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except self._locked_errors as exc:
            return str(exc)
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        return "another connection is still reading the write-ahead log" if busy is not None and busy[0] else None

    def _compact_skipped(self, reason: str) -> Compacted:
        LOG.warning("database %s: deleted, but not compacted yet (%s); the next compaction retries", self.path, reason)
        return Compacted(skipped={self.path: reason})

    def table_exists(self, name: str) -> bool:
        """Whether a table (or virtual table) of that name exists."""
        return bool(self.scalar("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)))

    def size_bytes(self) -> int:
        """Bytes on disk: the database file plus its WAL (0 for an in-memory database)."""
        if self.path == ":memory:":
            return 0
        total = 0
        for suffix in ("", "-wal"):
            p = Path(self.path + suffix)
            if p.exists():
                total += p.stat().st_size
        return total

    @property
    def location(self) -> str:
        """Where the data lives, for logs and ``stats()``."""
        return self.path

    def close(self) -> None:
        """Close the connection; later calls raise :class:`StorageError`."""
        with self.lock:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(Exception):  # sqlean's errors are not sqlite3's
                    self.conn.close()
