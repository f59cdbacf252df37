"""The PostgreSQL engine of the storage seam: one database shared by many processes and devices.

Configured with ``"database": "postgresql://user:password@host:port/dbname"`` (libpq's URL; the
password may also come from ``PGPASSWORD`` or ``~/.pgpass``, and every other ``PG*`` variable
libpq reads applies too). Needs the optional extra ``postgres`` (psycopg 3, psycopg_pool,
pgvector) and, in the database, the ``vector`` extension (pgvector). See ``docs/postgres.md``.

This module is the database: :class:`PgDatabase`, a pool of connections (psycopg_pool) with a
deadline on everything: the connect timeout, the wait for a free connection, and
``statement_timeout`` / ``lock_timeout`` / ``idle_in_transaction_session_timeout`` on every
connection. An unreachable server or a missing extension raises one
:class:`~ovos_memory_plugins.errors.StorageError` at open, naming the URL (user and password
masked) and what to do. ``atomic()`` binds one pooled connection to the calling thread for the
transaction; nested calls are savepoints on it. Beside it: :func:`is_postgres_url`,
:func:`namespace_lexeme` and the text of the errors a server answers with.

The rest of the engine is one module per concept, as in ``storage/sqlite/`` (the list is in
:mod:`ovos_memory_plugins.storage.postgres`): ``schema`` (the migrations, applied by
:meth:`PgDatabase.migrate`), ``engine`` (the documents table, ``PgStorage``, ``open_storage``:
what implements :mod:`ovos_memory_plugins.storage.seam` for one memory = one ``namespace``),
``history``, ``keyword``, ``vector``, ``check`` (the server check) and ``notes``.

Every table is shared by the memories of the database; ``namespace`` (and ``session_id``) are
indexed columns and every statement filters on the namespace, so one memory never reads
another's rows. Deleting a document deletes its index rows in the same transaction
(``ON DELETE CASCADE``).

This module was the whole engine: the names that moved out of it are still importable from it
for one release (``from ovos_memory_plugins.storage.postgres.database import PgStorage``),
imported from their new module on first use, so that this module, which every other one of the
engine imports, imports none of them.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import math
import re
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.records import Compacted, Migration
from ovos_memory_plugins.storage.registry import redact_url
from ovos_memory_plugins.storage.tables import tsquery_literal

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    # the names that moved out (see the end of this module), for type checkers only: at run
    # time they are imported on first use (the modules they moved to import this one)
    from ovos_memory_plugins.storage.postgres.check import check_server
    from ovos_memory_plugins.storage.postgres.documents import PgDocuments
    from ovos_memory_plugins.storage.postgres.engine import PgStorage, open_storage
    from ovos_memory_plugins.storage.postgres.history import PgHistory
    from ovos_memory_plugins.storage.postgres.keyword import PgKeywordIndex
    from ovos_memory_plugins.storage.postgres.schema import MIGRATIONS
    from ovos_memory_plugins.storage.postgres.vector import PgVectorStore

LOG = logging.getLogger(__name__)

__all__ = [
    "MIGRATIONS",
    "PgDatabase",
    "PgDocuments",
    "PgHistory",
    "PgKeywordIndex",
    "PgMigration",
    "PgStorage",
    "PgVectorStore",
    "check_server",
    "is_postgres_url",
    "namespace_lexeme",
    "open_storage",
    "redact_url",
    "tsquery_literal",
]

#: While the server is unreachable, a background thread tries one direct connection this often
#: (seconds; the first try sooner): calls fail at once meanwhile, and resume within about this
#: long after the server is back, instead of when the doubling back-off and the pool's own
#: reconnection back-off both run out (26.7 s after a 15 s outage, before).
PROBE_INTERVAL_S = 0.5

#: How long cached figures (document count, average length) stay fresh (seconds).
STATS_TTL = 30.0

_URL_RE = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_postgres_url(value: object) -> bool:
    """Whether a ``database`` value names a PostgreSQL server (``postgresql://`` or ``postgres://``)."""
    return isinstance(value, str) and bool(_URL_RE.match(value.strip()))


# -- quoting: the namespace lexeme (tsquery literals: storage.tables, shared with the notes) -----


def namespace_lexeme(namespace: str) -> str:
    """The lexeme every keyword row of ``namespace`` carries in ``terms``: a query ANDs it with
    its words, so the GIN index itself keeps to the namespace (no postings of other namespaces
    are fetched and thrown away). Starts with a space, which none of our tokens holds; a hash
    keeps it short whatever the namespace. Statements still filter on the ``namespace`` column
    too, so a hash collision could never mix memories."""
    import hashlib

    return " ns:" + hashlib.blake2b(namespace.encode("utf-8"), digest_size=8).hexdigest()


# -- the text of errors -----------------------------------------------------------------------


def one_line(exc: BaseException) -> str:
    """An exception's text on one line (its type's name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


#: SQLSTATEs of a server that ended every session (class 08, connection exceptions, is matched by
#: its prefix): an administrator's or a crash's shutdown, a server still starting or stopping.
_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})


def connection_lost(exc: BaseException, conn: psycopg.Connection[Any] | None) -> bool:
    """Whether ``exc`` means the connection or the server is at fault (so calls back off).

    By the server's SQLSTATE when it sent one: class 08 (connection exception) and 57P01-57P03
    (admin or crash shutdown, cannot connect now). Without a SQLSTATE: a client-side
    ``OperationalError`` (a connect that failed, a connection the server closed) or an error
    on a connection that is now broken or closed. Everything else, ``OperationalError``
    subclasses included (``LockNotAvailable`` 55P03, deadlocks and serialization failures 40xxx,
    ``QueryCanceled`` 57014, out of disk 53xxx), is an answer from a working server.
    """
    import psycopg

    state = getattr(exc, "sqlstate", None)
    if state:
        return str(state).startswith("08") or state in _SERVER_GONE
    if isinstance(exc, psycopg.OperationalError):
        return True
    return conn is not None and (conn.broken or conn.closed)


def _answered_error(path: str, exc: BaseException) -> str:
    """The message of a :class:`StorageError` for an error a working server answered with."""
    from psycopg import errors

    detail = one_line(exc)
    state = str(getattr(exc, "sqlstate", None) or "")
    if isinstance(exc, errors.LockNotAvailable):
        return f"a statement on {path} waited past lock_timeout for a lock another session holds: {detail}"
    if isinstance(exc, errors.DeadlockDetected):
        return f"a transaction on {path} was rolled back to break a deadlock: {detail}"
    if state.startswith("40"):  # class 40, transaction rollback: a serialization failure and its kin
        why = "serialization failure" if isinstance(exc, errors.SerializationFailure) else type(exc).__name__
        return f"a transaction on {path} was rolled back ({why}, {state}): {detail}"
    if isinstance(exc, errors.QueryCanceled):
        return f"a statement on {path} ran past its deadline: {detail}"
    return f"PostgreSQL at {path}: {detail}"


def load_metadata(value: Any) -> dict[str, Any]:
    """A stored ``metadata`` value (JSON text, or decoded already) as a dict; ``{}`` when it is none."""
    try:
        loaded = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


# -- the database -----------------------------------------------------------------------------


#: One schema step (the record both engines' migrations are).
PgMigration = Migration


#: Seconds :meth:`PgDatabase.compact` waits for its ``VACUUM`` at most.
COMPACT_DEADLINE_S = 60.0
#: The memory tables of the connection's schema (every store's: documents, indexes, history,
#: summaries, notes, sticky notes), for :meth:`PgDatabase.compact`.
_MEMORY_TABLES = (
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.relkind = 'r' AND c.relname LIKE 'memory\\_%' AND n.nspname = current_schema() ORDER BY 1"
)

#: The tables a forget deletes from (the background VACUUM after it; those that exist: the
#: summaries' table is created by the first memory with the rolling summary on).
_FORGET_TABLES = (
    "memory_documents",
    "memory_keywords",
    "memory_keyword_df",
    "memory_keyword_postings",
    "memory_vectors",
    "memory_history",
    "memory_summaries",
)


class PgDatabase:
    """A pool of connections to one PostgreSQL database, every statement under a deadline.

    Args:
        url: ``postgresql://user:password@host:port/dbname``; anything libpq accepts.
        connect_timeout: seconds to wait for the server when connecting (and at open).
        statement_timeout: seconds any one statement may run (and wait for a lock).
        pool_timeout: seconds to wait for a free connection of the pool.
        max_connections: the pool's size (per process).
        vector: require the ``vector`` extension (created when missing and allowed).

    Raises:
        StorageError: the server cannot be reached, refuses us, or lacks the extension; the
            message names the URL (user and password masked) and what to do.
    """

    engine = "postgresql"
    in_ram = False
    fallback_reason: str | None = None

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 3.0,
        statement_timeout: float = 5.0,
        pool_timeout: float = 3.0,
        max_connections: int = 4,
        vector: bool = True,
    ) -> None:
        try:
            import psycopg
            import psycopg_pool  # noqa: F401  (the extra's pool: a clear error here, not at the first pool)
            from psycopg.conninfo import conninfo_to_dict
        except ImportError as exc:
            raise StorageError(
                "a postgresql:// database needs the 'postgres' extra: pip install 'ovos-memory-plugins[postgres]'"
            ) from exc
        self.url = url
        self.path = redact_url(url)
        self.statement_timeout = statement_timeout
        self.pool_timeout = pool_timeout
        self.max_connections = max(max_connections, 1)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._closed = False
        self._vacuuming = False
        self._failures = 0
        self._in_use = 0  # pooled connections lent to calls now
        ms = max(int(statement_timeout * 1000), 1)
        try:  # options the URL brings (?options=-c%20synchronous_commit%3Doff) come after ours: they win
            own_options = str(conninfo_to_dict(url).get("options") or "")
        except psycopg.Error:
            own_options = ""
        self._kwargs: dict[str, Any] = {
            "connect_timeout": max(math.ceil(connect_timeout), 1),
            "application_name": "ovos-memory",
            "options": (
                f"-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={ms * 3}"
                + (f" {own_options}" if own_options else "")
            ),
            # a server that vanishes without closing the connection: give up instead of hanging
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": ms * 2,
        }
        # one direct connection first: a clear error for an unreachable server or a missing
        # extension, before the pool's background workers start retrying
        try:
            with psycopg.connect(url, autocommit=True, **self._kwargs) as conn:
                self.server_version = conn.info.server_version
                if vector:
                    self._ensure_vector(conn)
        except psycopg.Error as exc:
            raise StorageError(f"cannot use PostgreSQL at {self.path}: {one_line(exc)}") from exc
        self.vector = vector
        self.connect_timeout = connect_timeout
        self._probing = False
        self._stop = threading.Event()
        try:
            self.pool: ConnectionPool[psycopg.Connection[Any]] = self._open_pool()
        except Exception as exc:
            raise StorageError(f"cannot open a connection pool to {self.path}: {one_line(exc)}") from exc

    def _open_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        """A new pool with its first connection made (raises what connecting raised)."""
        from psycopg_pool import ConnectionPool

        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.url,
            kwargs={**self._kwargs, "autocommit": True},
            min_size=1,
            max_size=self.max_connections,
            timeout=self.pool_timeout,
            open=False,
            configure=_register_vector if self.vector else None,
            # no ping per checkout (a round trip each): a connection that broke fails its call
            # once (a StorageError, then the back-off) and the pool replaces it
            reconnect_timeout=max(self.connect_timeout * 6, 30.0),
            name="ovos-memory",
        )
        try:
            pool.open(wait=True, timeout=max(self.connect_timeout * 2, 1.0))
        except BaseException:
            pool.close(timeout=0.5)
            raise
        return pool

    @property
    def location(self) -> str:
        """The URL without its password."""
        return self.path

    @staticmethod
    def _ensure_vector(conn: psycopg.Connection[Any]) -> None:
        import psycopg

        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            return
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
            if available:
                how = "run CREATE EXTENSION vector; in this database as its owner or a superuser"
            else:
                how = "install pgvector on the server (postgresql-NN-pgvector), then CREATE EXTENSION vector;"
            raise StorageError(
                f"the pgvector extension is missing in {conn.info.dbname}: {how} ({one_line(exc)})"
            ) from exc

    # -- execution ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def pooled(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection from the pool (never the calling thread's transaction: for statements that
        run outside one, such as ``VACUUM``); psycopg and pool failures become :class:`StorageError`.

        Only a lost connection (see :func:`connection_lost`), or no connection within
        ``pool_timeout`` while not every one of the pool's was lent to a call, starts the back-off;
        any other error (a lock not granted within ``lock_timeout``, a deadlock, a serialization
        failure, a statement past its deadline, a bad statement, every connection busy with other
        calls) fails this call only: the server is up, so the next call tries it again at once.
        """
        import psycopg
        from psycopg_pool import PoolTimeout

        if self._closed:
            raise StorageError(f"database {self.path} is closed")
        if self._probing:  # the server was lost: fail at once instead of waiting for the pool on every call
            raise StorageError(
                f"PostgreSQL at {self.path} is unreachable; calls resume as soon as it answers again"
                f" (trying every {PROBE_INTERVAL_S:g} s)"
            )
        conn: psycopg.Connection[Any] | None = None
        try:
            with self.pool.connection(timeout=self.pool_timeout) as conn:
                with self._lock:
                    self._in_use += 1
                try:
                    yield conn
                finally:
                    with self._lock:
                        self._in_use -= 1
        except PoolTimeout as exc:
            if self._in_use >= self.max_connections:  # busy serving this process's other calls: up
                raise StorageError(
                    f"every one of the {self.max_connections} pooled connections to {self.path}"
                    f" stayed busy with other calls for {self.pool_timeout:g} s"
                ) from exc
            self._backoff()
            raise StorageError(f"no connection to {self.path} within {self.pool_timeout:g} s") from exc
        except psycopg.Error as exc:
            if connection_lost(exc, conn):
                self._backoff()
                raise StorageError(f"lost the connection to PostgreSQL at {self.path}: {one_line(exc)}") from exc
            self._failures = 0  # the server answered: it is up
            raise StorageError(_answered_error(self.path, exc)) from exc
        else:
            self._failures = 0

    def _backoff(self) -> None:
        """After a lost connection (or no free one in time): refuse calls at once until the
        server answers a direct connection again (:meth:`_probe`, in the background, every
        :data:`PROBE_INTERVAL_S`), then resume on a new pool. Without the probe, the pool
        would wait out its own reconnection back-off (up to 16 s) after the server is back."""
        self._failures += 1
        if self._closed:  # a background step (VACUUM) cut short by close(): nothing to report
            return
        with self._lock:
            if self._probing or self._closed:
                return
            self._probing = True
        LOG.warning(
            "PostgreSQL at %s: connection failed; calls fail fast until it answers again (trying every %g s)",
            self.path,
            PROBE_INTERVAL_S,
        )
        threading.Thread(target=self._probe, name="ovos-memory-pg-probe", daemon=True).start()

    def _probe(self) -> None:
        """Until the server answers (or :meth:`close`): one direct connection per
        :data:`PROBE_INTERVAL_S` (each within ``connect_timeout``); then a new pool replaces the
        one whose connections died with the server, and calls resume."""
        import psycopg

        tries = 0
        while not self._stop.wait(PROBE_INTERVAL_S / 2 if tries == 0 else PROBE_INTERVAL_S):
            tries += 1
            try:
                psycopg.connect(self.url, autocommit=True, **self._kwargs).close()
                pool = self._open_pool()
            except Exception as exc:  # still down (or not yet accepting): try again
                LOG.debug("PostgreSQL at %s: still unreachable (%s)", self.path, one_line(exc))
                continue
            with self._lock:
                closed = self._closed
                if not closed:
                    old, self.pool = self.pool, pool
                    self._failures = 0
                    self._probing = False
            if closed:
                pool.close(timeout=0.5)
                return
            old.close(timeout=0.5)
            LOG.warning("PostgreSQL at %s: reachable again after %d tries; calls resume", self.path, tries)
            return
        with self._lock:
            self._probing = False

    @property
    def in_transaction(self) -> bool:
        """Whether the calling thread is inside :meth:`atomic`."""
        return getattr(self._local, "conn", None) is not None

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The calling thread's transaction connection, else a pooled one in autocommit mode."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self.pooled() as conn:
            yield conn

    @contextlib.contextmanager
    def atomic(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction, bound to the calling thread; nested calls are savepoints.

        Commits on success, rolls back on any exception and re-raises it (psycopg errors as
        :class:`StorageError`).
        """
        current = getattr(self._local, "conn", None)
        if current is not None:
            with current.transaction():
                yield current
            return
        with self.pooled() as conn:
            self._local.conn = conn
            try:
                with conn.transaction():
                    yield conn
            finally:
                self._local.conn = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """Join the calling thread's transaction (no savepoint: two round trips saved), or begin one.

        The engine's own multi-statement writes use this; a failure inside aborts the whole
        enclosing transaction, which its ``atomic()`` then rolls back.
        """
        if getattr(self._local, "conn", None) is not None:
            yield self._local.conn
            return
        with self.atomic() as conn:
            yield conn

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run one statement; return the affected row count."""
        with self.connection() as conn:
            return conn.execute(sql, params).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for many rows (in the current transaction, if any)."""
        if not rows:
            return
        with self.connection() as conn, conn.cursor() as cur:
            cur.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Run a statement and fetch every row (tuples)."""
        with self.connection() as conn:
            return conn.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        """The first column of the first row, or ``None``."""
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    def delete_rows(self, tables: Sequence[str], where: str, params: Sequence[Any]) -> int:
        """Delete the rows ``where`` selects (with ``params``) from each of ``tables``, in that
        order, in one transaction; return how many went from the first."""
        with self.transaction() as conn:
            counts = [conn.execute(f"DELETE FROM {table} WHERE {where}", params).rowcount for table in tables]
        return int(counts[0])

    def sessions(self, table: str, namespace: str) -> list[str]:
        """Every session of ``namespace`` that has rows in ``table``, sorted."""
        rows = self.query(
            f"SELECT DISTINCT session_id FROM {table} WHERE namespace = %s ORDER BY session_id", (namespace,)
        )
        return [r[0] for r in rows]

    # -- schema ------------------------------------------------------------------------------

    def migrate(self, store: str, migrations: Sequence[PgMigration]) -> list[str]:
        """Apply ``store``'s migrations not applied yet, in order; return their names.

        The whole check-and-apply runs in one transaction under an advisory lock, so processes
        starting at once wait for each other and each step is applied exactly once.
        """
        with self.atomic() as conn:
            conn.execute("SET LOCAL statement_timeout = '120s'")
            conn.execute("SET LOCAL lock_timeout = '120s'")
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('ovos_memory_migrations'))")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS memory_migrations ("
                " store text NOT NULL, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),"
                " PRIMARY KEY (store, name))"
            )
            done = {r[0] for r in conn.execute("SELECT name FROM memory_migrations WHERE store = %s", (store,))}
            applied: list[str] = []
            for migration in migrations:
                if migration.name in done:
                    continue
                migration.apply(conn)
                conn.execute("INSERT INTO memory_migrations (store, name) VALUES (%s, %s)", (store, migration.name))
                applied.append(migration.name)
        return applied

    def applied(self, store: str) -> set[str]:
        """The names of ``store``'s applied migrations."""
        return {r[0] for r in self.query("SELECT name FROM memory_migrations WHERE store = %s", (store,))}

    # -- figures and life cycle --------------------------------------------------------------

    def size_bytes(self) -> int:
        """Bytes the memory tables take on the server (every namespace's: they share tables)."""
        return int(
            self.scalar(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relkind = 'r' AND c.relname LIKE 'memory\\_%%' AND n.nspname = current_schema()"
            )
            or 0
        )

    def compact(self) -> Compacted:
        """``VACUUM`` every memory table of the schema now (every namespace's: they share the
        tables), and wait for it, at most :data:`COMPACT_DEADLINE_S` (a lock another session
        holds is waited for as long as any statement's lock: ``statement_timeout``).

        Returns the location when the VACUUM finished: every row deleted before it began that
        no transaction still open could see is gone from the tables and their indexes, its
        space free for reuse. A row an older open transaction can still see stays until the
        next VACUUM; freed bytes are not zeroed (docs/postgres.md says what that means). A
        VACUUM that failed or ran past the deadline: the location is in ``skipped`` with why.
        """
        import psycopg
        from psycopg import sql

        problem = ""
        try:
            with self.pooled() as conn:
                conn.execute(f"SET statement_timeout = {max(int(COMPACT_DEADLINE_S * 1000), 1)}")
                try:
                    tables = [r[0] for r in conn.execute(_MEMORY_TABLES).fetchall()]
                    if tables:
                        conn.execute(sql.SQL("VACUUM {}").format(sql.SQL(", ").join(map(sql.Identifier, tables))))
                except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
                    problem = one_line(exc)  # a busy table, not a lost server: no back-off
                finally:
                    conn.execute("RESET statement_timeout")
        except StorageError as exc:
            problem = str(exc)
        if problem:
            LOG.warning("PostgreSQL: could not compact %s (%s); the next compact tries again", self.path, problem)
            return Compacted(skipped={self.location: problem})
        return Compacted([self.location])

    def purge(self) -> None:
        """After deletions: ``VACUUM`` the memory tables in the background, so the dead rows'
        space is reclaimed (see docs/postgres.md for what that does and does not erase);
        :meth:`compact` does it now and waits."""
        with self._lock:
            if self._vacuuming or self._closed:
                return
            self._vacuuming = True
        threading.Thread(target=self._vacuum, name="ovos-memory-vacuum", daemon=True).start()

    def _vacuum(self) -> None:
        try:
            with self.pooled() as conn:
                conn.execute("SET statement_timeout = '300s'")
                try:
                    tables = [r[0] for r in conn.execute(_MEMORY_TABLES).fetchall() if r[0] in _FORGET_TABLES]
                    conn.execute(f"VACUUM (SKIP_LOCKED) {', '.join(tables)}")
                finally:
                    conn.execute("RESET statement_timeout")
        except Exception as exc:  # autovacuum does it later anyway
            if self._closed:
                return
            LOG.warning("PostgreSQL: VACUUM after a delete failed (%s); autovacuum will reclaim the space", exc)
        finally:
            self._vacuuming = False

    def close(self) -> None:
        """Close the pool (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self.pool.close(timeout=2.0)


def _register_vector(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)


# -- the names that moved out -----------------------------------------------------------------


#: The names that moved to the engine's other modules, by module (under ``storage/postgres/``):
#: kept importable from here for one release, imported on first use. Beside the engine's own,
#: the names the old module imported from elsewhere (the keyword index's constants, records).
_HOMES = {
    "check": "check_server",
    "schema": "MIGRATIONS",
    "engine": "DEFAULT_NAMESPACE PgStorage open_storage Storage",
    "documents": "PgDocuments Document StoredDocument document_time dump_metadata",
    "history": "PgHistory StoredMessage exchange_parts",
    "keyword": "PgKeywordIndex KeywordSettings MemoryHit bm25_scores document_terms query_counts"
    " BM25_B BM25_K1 MAX_TERM_REPEAT PRUNE_MIN_DOCUMENTS PRUNE_POSTINGS RESCORE_CANDIDATES RESCORE_K1",
    "vector": "HNSW_MIN_VECTORS PgVectorStore",
}
_MOVED = {name: home for home, names in _HOMES.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    """A name that moved out of this module, read from its new module (so a test that patches
    it there is seen here too)."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"ovos_memory_plugins.storage.postgres.{home}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MOVED))
