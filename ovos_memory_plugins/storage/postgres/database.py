"""The PostgreSQL engine of the storage seam: one database shared by many processes and devices.

Configured with ``"database": "postgresql://user:password@host:port/dbname"`` (libpq's URL; the
password may also come from ``PGPASSWORD`` or ``~/.pgpass``, and every other ``PG*`` variable
libpq reads applies too). Needs the optional extra ``postgres`` (psycopg 3, psycopg_pool,
pgvector) and, in the database, the ``vector`` extension (pgvector). See ``docs/postgres.md``.

What :func:`open_storage` returns implements :mod:`ovos_memory_plugins.storage.seam` (the same
seam as the SQLite engine), for one memory = one ``namespace``:

* :class:`PgDatabase`: a pool of connections (psycopg_pool) with a deadline on everything: the
  connect timeout, the wait for a free connection, and ``statement_timeout`` / ``lock_timeout``
  / ``idle_in_transaction_session_timeout`` on every connection. An unreachable server or a
  missing extension raises one :class:`~ovos_memory_plugins.errors.StorageError` at open, naming
  the URL (user and password masked) and what to do. ``atomic()`` binds one pooled connection to the
  calling thread for the transaction; nested calls are savepoints on it.
* Versioned, append-only migrations (:class:`PgMigration`), applied in one transaction under
  ``pg_advisory_xact_lock``, so many processes starting at once apply each step exactly once.
* :class:`PgDocuments`: the memory's one documents table (``memory_documents``).
* :class:`PgKeywordIndex`: a ``tsvector`` built from OUR tokens
  (:func:`ovos_memory_plugins.storage.keyword.document_terms`: CJK bigrams, folding, stemming;
  queries through :func:`~ovos_memory_plugins.storage.keyword.query_counts`, so stop words are the
  same), written as a literal so PostgreSQL never re-parses them, GIN-indexed, and ranked with
  the formula of SQLite FTS5's ``bm25()`` (column weights included: body A, head B, context C)
  over the namespace's own document count and frequencies (``memory_keyword_df``, kept exact by
  every write in its transaction, so a search reads them instead of counting postings). On
  large namespaces it prunes query terms and ranks the best candidates again on every term
  exactly as the SQLite index does (:meth:`PgKeywordIndex.search_terms`).
* :class:`PgVectorStore`: pgvector, exact for small namespaces, HNSW (an expression index per
  dimension, built concurrently in the background) once a namespace is large.
* :class:`PgHistory`: recent messages, exchange-id chains, and which messages an exchange
  document came from.

Every table is shared by the memories of the database; ``namespace`` (and ``session_id``) are
indexed columns and every statement filters on the namespace, so one memory never reads
another's rows. Deleting a document deletes its index rows in the same transaction
(``ON DELETE CASCADE``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ovos_memory_plugins.common import MemoryHit, exchange_parts
from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.keyword import (
    BM25_B,
    BM25_K1,
    MAX_TERM_REPEAT,
    PRUNE_MIN_DOCUMENTS,
    PRUNE_POSTINGS,
    RESCORE_CANDIDATES,
    RESCORE_K1,
    bm25_scores,
    document_terms,
    query_counts,
)
from ovos_memory_plugins.storage.records import (
    Compacted,
    Document,
    KeywordSettings,
    Migration,
    StoredDocument,
    StoredMessage,
    document_time,
    dump_metadata,
)
from ovos_memory_plugins.storage.registry import redact_url
from ovos_memory_plugins.storage.seam import Storage
from ovos_memory_plugins.storage.tables import pg_lexeme as _lexeme
from ovos_memory_plugins.storage.tables import tsquery_literal

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt
    import psycopg
    from psycopg_pool import ConnectionPool

    from ovos_memory_plugins.storage.postgres.notes import PgRewrites

    Vector = npt.NDArray[np.float32]

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

# The BM25 constants, the cap on a repeated query term, the size from which terms are pruned,
# the posting budget and the number of candidates ranked again are the SQLite keyword index's
# own (BM25_K1, BM25_B, MAX_TERM_REPEAT, PRUNE_MIN_DOCUMENTS, PRUNE_POSTINGS, RESCORE_CANDIDATES,
# imported above), so both engines return the same documents in the same order at every size.
# The budget was 1,000 here: measured among 93,681 documents (benchmarks/postgres_bench.py,
# docs/benchmarks.md), LoCoMo R@10 41.3 against SQLite's 57.4, and identical to it with 3,000,
# for about 2 ms more server CPU per search per 1,000 postings.
#: While the server is unreachable, a background thread tries one direct connection this often
#: (seconds; the first try sooner): calls fail at once meanwhile, and resume within about this
#: long after the server is back, instead of when the doubling back-off and the pool's own
#: reconnection back-off both run out (26.7 s after a 15 s outage, before).
PROBE_INTERVAL_S = 0.5

#: A namespace's vectors are searched through the HNSW index from this many on (exact below).
HNSW_MIN_VECTORS = 20_000
#: How long cached figures (document count, average length) stay fresh (seconds).
STATS_TTL = 30.0
#: The default namespace when none is given.
DEFAULT_NAMESPACE = "default"

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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


#: SQLSTATEs of a server that ended every session (class 08, connection exceptions, is matched by
#: its prefix): an administrator's or a crash's shutdown, a server still starting or stopping.
_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})


def _connection_lost(exc: BaseException, conn: psycopg.Connection[Any] | None) -> bool:
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

    detail = _one_line(exc)
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


# -- the server check (``ovos-memory check``) ---------------------------------------------------

#: One query through pgvector's distance functions on 64-dimensional vectors (long enough for its
#: SIMD loops): cosine, Euclidean and inner product.
_VECTOR_PROBE = (
    "WITH probe AS (SELECT array_agg(i::real ORDER BY i)::vector AS v,"
    " array_agg((65 - i)::real ORDER BY i)::vector AS w FROM generate_series(1, 64) AS i)"
    " SELECT v <=> w, v <-> w, v <#> w FROM probe"
)


def check_server(url: str, *, connect_timeout: float = 3.0, statement_timeout: float = 5.0) -> list[str]:
    """Connect to ``url`` and run one vector query; the problems found, ``[]`` when it works.

    Writes nothing: the ``vector`` extension is created, when it is not yet, inside a
    transaction that is rolled back. A backend that dies during the query (a pgvector compiled
    for another CPU is killed by SIGILL, "Illegal instruction") is named as such, not as a lost
    connection. Each step is bounded by ``connect_timeout`` and ``statement_timeout`` (seconds).
    """
    try:
        import psycopg
    except ImportError:
        return ["a postgresql:// database needs the 'postgres' extra: pip install 'ovos-memory-plugins[postgres]'"]
    path = redact_url(url)
    ms = max(int(statement_timeout * 1000), 1)
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=max(math.ceil(connect_timeout), 1),
            application_name="ovos-memory check",
            options=f"-c statement_timeout={ms} -c lock_timeout={ms}",
        )
    except psycopg.Error as exc:
        return [f"cannot connect to PostgreSQL at {path}: {_one_line(exc)}"]
    version = "?"
    try:
        with conn, conn.transaction(force_rollback=True):
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            if row is None:
                conn.execute("CREATE EXTENSION vector")
                row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            version = str(row[0]) if row else "?"
            conn.execute(_VECTOR_PROBE).fetchone()
    except psycopg.Error as exc:
        if _connection_lost(exc, conn):
            return [
                f"the PostgreSQL server at {path} closed the connection while running one vector query"
                f" (pgvector {version}): its backend crashed. A pgvector compiled for another CPU does this"
                " (pgvector's Makefile builds with -march=native unless told `make OPTFLAGS=\"\"`; the server's"
                " log says 'terminated by signal 4: Illegal instruction'): rebuild pgvector on that server's own"
                ' CPU or with OPTFLAGS="" (docs/postgres.md)'
            ]
        if version == "?":
            return [f"the pgvector extension cannot be used in {path}: {_one_line(exc)}"]
        return [f"PostgreSQL at {path} could not run a vector query (pgvector {version}): {_one_line(exc)}"]
    return []


# -- the database ----------------------------------------------------------------------------


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


#: Whether the planner still believes ``memory_documents`` empty (``ANALYZE`` saw it so: after a
#: ``forget_all``, by the background VACUUM or autovacuum) although it has grown past 8 pages.
_STALE_STATISTICS = (
    "SELECT c.reltuples = 0 AND pg_relation_size(c.oid) > 8 * current_setting('block_size')::int"
    " FROM pg_class c WHERE c.oid = 'memory_documents'::regclass"
)

#: The tables a batch writes, analysed again when their statistics are stale.
_BATCH_TABLES = (
    "memory_documents",
    "memory_keywords",
    "memory_keyword_df",
    "memory_keyword_postings",
    "memory_vectors",
)


def _refresh_stale_statistics(conn: psycopg.Connection[Any]) -> None:
    """Before a batch of documents: ``ANALYZE`` the tables a batch writes when the planner still
    believes them empty. A connection keeps a generic plan for a statement it runs often; one made
    while the tables were analysed empty scans a whole table where an index finds one row, so
    every write of a bulk load after a ``forget_all`` cost more than the one before (measured: from
    1,741 to 263 documents/s within 8,000 documents, until autovacuum analysed the tables again).
    ``ANALYZE`` invalidates those plans. One cheap read per batch otherwise; a user who does not
    own the tables gets PostgreSQL's warning and the batch goes on."""
    row = conn.execute(_STALE_STATISTICS).fetchone()
    if row is not None and row[0]:
        for table in _BATCH_TABLES:
            conn.execute(f"ANALYZE {table}")


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
            raise StorageError(f"cannot use PostgreSQL at {self.path}: {_one_line(exc)}") from exc
        self.vector = vector
        self.connect_timeout = connect_timeout
        self._probing = False
        self._stop = threading.Event()
        try:
            self.pool: ConnectionPool[psycopg.Connection[Any]] = self._open_pool()
        except Exception as exc:
            raise StorageError(f"cannot open a connection pool to {self.path}: {_one_line(exc)}") from exc

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
                f"the pgvector extension is missing in {conn.info.dbname}: {how} ({_one_line(exc)})"
            ) from exc

    # -- execution ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _pooled(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection from the pool; psycopg and pool failures become :class:`StorageError`.

        Only a lost connection (see :func:`_connection_lost`), or no connection within
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
            if _connection_lost(exc, conn):
                self._backoff()
                raise StorageError(f"lost the connection to PostgreSQL at {self.path}: {_one_line(exc)}") from exc
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
                LOG.debug("PostgreSQL at %s: still unreachable (%s)", self.path, _one_line(exc))
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
        with self._pooled() as conn:
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
        with self._pooled() as conn:
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
            with self._pooled() as conn:
                conn.execute(f"SET statement_timeout = {max(int(COMPACT_DEADLINE_S * 1000), 1)}")
                try:
                    tables = [r[0] for r in conn.execute(_MEMORY_TABLES).fetchall()]
                    if tables:
                        conn.execute(sql.SQL("VACUUM {}").format(sql.SQL(", ").join(map(sql.Identifier, tables))))
                except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
                    problem = _one_line(exc)  # a busy table, not a lost server: no back-off
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
            with self._pooled() as conn:
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


# -- schema ----------------------------------------------------------------------------------


def _v1(conn: psycopg.Connection[Any]) -> None:
    for sql in (
        # every memory's documents: the one table every index of a memory shares
        "CREATE TABLE memory_documents ("
        " id bigserial PRIMARY KEY,"
        " namespace text NOT NULL,"
        " doc_id text NOT NULL,"
        " session_id text NOT NULL,"
        " content text NOT NULL,"
        " metadata text NOT NULL DEFAULT '{}',"
        " created double precision NOT NULL,"
        " UNIQUE (namespace, doc_id))",
        "CREATE INDEX memory_documents_session ON memory_documents (namespace, session_id, id)",
        # the keyword index: per document, each term's counts in body, head and context
        # ({"term": body | head << 8 | context << 16}), the same terms as a tsvector (GIN: which documents hold a term),
        # and the token count
        "CREATE TABLE memory_keywords ("
        " id bigint PRIMARY KEY REFERENCES memory_documents (id) ON DELETE CASCADE,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " tf jsonb NOT NULL,"
        " terms tsvector NOT NULL,"
        " length integer NOT NULL,"
        " ctx_id bigint)"
        # rows stay uncompressed up to a page: ranking reads tf once per query term, and a
        # compressed tf would be decompressed every time
        " WITH (toast_tuple_target = 8160)",
        "CREATE INDEX memory_keywords_terms ON memory_keywords USING gin (terms)",
        "CREATE INDEX memory_keywords_namespace ON memory_keywords (namespace, session_id, id) INCLUDE (length)",
        "CREATE INDEX memory_keywords_ctx ON memory_keywords (ctx_id) WHERE ctx_id IS NOT NULL",
        # vectors: one per (embedder space, document)
        "CREATE TABLE memory_vector_spaces ("
        " namespace text NOT NULL, space text NOT NULL, dims integer NOT NULL,"
        " created double precision NOT NULL, PRIMARY KEY (namespace, space))",
        "CREATE TABLE memory_vectors ("
        " id bigint NOT NULL REFERENCES memory_documents (id) ON DELETE CASCADE,"
        " space text NOT NULL,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " dims integer NOT NULL,"
        " embedding vector NOT NULL,"
        " PRIMARY KEY (id, space))",
        "CREATE INDEX memory_vectors_namespace ON memory_vectors (namespace, space, session_id)",
        # short-term history, the exchange-id chains
        "CREATE TABLE memory_history ("
        " id bigserial PRIMARY KEY,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " role text NOT NULL,"
        " content text NOT NULL,"
        " created double precision NOT NULL,"
        " exchange_id text)",
        "CREATE INDEX memory_history_session ON memory_history (namespace, session_id, id)",
        "CREATE INDEX memory_history_exchange ON memory_history (namespace, exchange_id) WHERE exchange_id IS NOT NULL",
        "CREATE TABLE memory_sessions ("
        " namespace text NOT NULL, session_id text NOT NULL, last_exchange_id text NOT NULL,"
        " PRIMARY KEY (namespace, session_id))",
    ):
        conn.execute(sql)


def _v2(conn: psycopg.Connection[Any]) -> None:
    """Every keyword row carries its namespace's lexeme (see :func:`namespace_lexeme`)."""
    conn.execute("SET LOCAL statement_timeout = 0")  # one pass over the keyword rows, once
    namespaces = [r[0] for r in conn.execute("SELECT DISTINCT namespace FROM memory_keywords").fetchall()]
    for namespace in namespaces:
        conn.execute(
            "UPDATE memory_keywords SET terms = terms || array_to_tsvector(ARRAY[%s::text]) WHERE namespace = %s",
            (namespace_lexeme(namespace), namespace),
        )


def _v3(conn: psycopg.Connection[Any]) -> None:
    """A short pending list for the keyword GIN index: new rows' entries wait in an unsorted list
    that every search scans in full, up to ``gin_pending_list_limit`` (4 MB by default); measured
    at 100,000 documents right after 5,000 writes, that nearly doubled a turn's server time.
    128 kB keeps a search's scan short and still batches the index's inserts (without a list,
    ``fastupdate = off``, a write cost 0.3 ms more server time, measured the same way)."""
    conn.execute("ALTER INDEX memory_keywords_terms SET (fastupdate = on, gin_pending_list_limit = 128)")
    conn.execute("SELECT gin_clean_pending_list('memory_keywords_terms'::regclass)")


def _v4(conn: psycopg.Connection[Any]) -> None:
    """Document frequencies kept on write: ``memory_keyword_df`` holds, per namespace and term,
    how many of the namespace's keyword rows hold the term (the keys of their ``tf``), so a
    search reads a term's frequency with one index lookup instead of counting its postings.
    Filled here from the rows written before it, under a SHARE lock (writers wait for the
    migration, so the counts start exact); from then on every write of the keyword index
    updates it in its own transaction (:class:`PgKeywordIndex`). Idempotent: deleting this
    step's row from ``memory_migrations`` and starting a process counts everything again."""
    conn.execute("SET LOCAL statement_timeout = 0")  # one pass over the keyword rows, once
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_keyword_df ("
        " namespace text NOT NULL, term text NOT NULL, df integer NOT NULL,"
        " PRIMARY KEY (namespace, term))"
        # every write updates the rows of its terms: room on the page for HOT updates
        " WITH (fillfactor = 70)"
    )
    conn.execute("LOCK TABLE memory_keywords IN SHARE MODE")
    conn.execute("DELETE FROM memory_keyword_df")
    conn.execute(
        "INSERT INTO memory_keyword_df (namespace, term, df)"
        " SELECT k.namespace, t.term, count(*) FROM memory_keywords k"
        " CROSS JOIN LATERAL jsonb_object_keys(k.tf) AS t(term) GROUP BY 1, 2"
    )


def _v5(conn: psycopg.Connection[Any]) -> None:
    """Documents by when they were made: time words read a window's newest documents
    (``made_between``) and filter searches by ``created``, as the SQLite file's index on it does."""
    conn.execute("CREATE INDEX IF NOT EXISTS memory_documents_created ON memory_documents (namespace, created)")


def _v6(conn: psycopg.Connection[Any]) -> None:
    """Keyword postings: one row per (namespace, term, document) with the term's packed counts
    (``tf``, as in ``memory_keywords.tf``) and the document's token count, under one covering
    primary key, so a search scores its candidates by an index-only scan of its terms' ranges
    instead of reading every candidate's wide keyword row (its ``jsonb`` and ``tsvector``).
    Nothing per term is repeated here: document frequencies stay in ``memory_keyword_df``.
    Filled from the rows written before it under a SHARE lock on ``memory_keywords`` (writers
    wait), the key built after the rows (sorted, compact); from then on every write of the
    keyword index changes it in the same statement or transaction (:class:`PgKeywordIndex`).
    Idempotent: deleting this step's row from ``memory_migrations`` and starting a process
    builds it again."""
    conn.execute("SET LOCAL statement_timeout = 0")  # one pass over the keyword rows, once
    conn.execute("LOCK TABLE memory_keywords IN SHARE MODE")
    conn.execute("DROP TABLE IF EXISTS memory_keyword_postings")
    conn.execute(
        "CREATE TABLE memory_keyword_postings ("
        " id bigint NOT NULL, tf integer NOT NULL, length integer NOT NULL,"
        " namespace text NOT NULL, term text NOT NULL)"
        # insert-mostly: vacuumed often enough that most pages are all-visible (index-only scans)
        " WITH (autovacuum_vacuum_insert_scale_factor = 0.05)"
    )
    conn.execute(
        "INSERT INTO memory_keyword_postings (id, tf, length, namespace, term)"
        " SELECT k.id, e.value::int, k.length, k.namespace, e.key FROM memory_keywords k"
        " CROSS JOIN LATERAL jsonb_each(k.tf) AS e ORDER BY k.namespace, e.key, k.id"
    )
    conn.execute(
        "ALTER TABLE memory_keyword_postings ADD CONSTRAINT memory_keyword_postings_pkey"
        " PRIMARY KEY (namespace, term, id) INCLUDE (tf, length)"
    )
    conn.execute("ANALYZE memory_keyword_postings")


#: The schema. Append only; never rename or reorder an applied step.
MIGRATIONS = [
    PgMigration("0001_documents_keywords_vectors_history", _v1),
    PgMigration("0002_keyword_namespace_lexeme", _v2),
    PgMigration("0003_keyword_index_short_pending_list", _v3),
    PgMigration("0004_keyword_document_frequencies", _v4),
    PgMigration("0005_documents_created", _v5),
    PgMigration("0006_keyword_postings", _v6),
]


# -- documents -------------------------------------------------------------------------------


def _loads(value: Any) -> dict[str, Any]:
    try:
        loaded = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


_SELECT = "SELECT id, doc_id, session_id, content, metadata, created FROM memory_documents"


def _row_document(row: Sequence[Any], changed: bool = False) -> StoredDocument:
    return StoredDocument(
        key=int(row[0]),
        doc_id=row[1],
        session_id=row[2],
        text=row[3],
        metadata=_loads(row[4]),
        created=float(row[5]),
        changed=changed,
    )


#: Insert or replace one document; returns its key, its creation time and whether its text or
#: session changed (the row as it was is read in the same snapshot).
_DOCUMENT_PUT = (
    "WITH old AS (SELECT session_id, content FROM memory_documents"
    "  WHERE namespace = %(ns)s AND doc_id = %(doc)s),"
    " up AS (INSERT INTO memory_documents (namespace, doc_id, session_id, content, metadata, created)"
    "  VALUES (%(ns)s, %(doc)s, %(session)s, %(text)s, %(meta)s, %(now)s)"
    "  ON CONFLICT (namespace, doc_id) DO UPDATE SET session_id = excluded.session_id,"
    "  content = excluded.content, metadata = excluded.metadata RETURNING id, created, (xmax = 0) AS inserted)"
    " SELECT up.id, up.created, NOT EXISTS (SELECT 1 FROM old WHERE old.session_id = %(session)s"
    "  AND old.content = %(text)s), up.inserted FROM up"
)


class PgDocuments:
    """The namespace's rows of ``memory_documents`` (see :class:`~ovos_memory_plugins.storage.seam.DocumentStore`)."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace

    def put(self, docs: Sequence[Document]) -> list[StoredDocument]:
        """Insert or replace by ``doc_id``; a replaced document keeps its key and ``created``.

        One statement per document: the row as it was (same snapshot) tells whether the text or
        session changed.
        """
        out: dict[str, StoredDocument] = {}
        now = time.time()
        rows = [
            {
                "ns": self.namespace,
                "doc": doc.doc_id,
                "session": doc.session_id,
                "text": doc.text,
                "meta": dump_metadata(doc.metadata),
                "now": document_time(doc.metadata, now),
            }
            for doc in docs
        ]
        results: list[Any] = []
        with self.db.transaction() as conn, conn.cursor() as cur:
            if len(rows) == 1:  # the common case (one exchange): no pipeline round trips
                results.append(cur.execute(_DOCUMENT_PUT, rows[0]).fetchone())
            else:
                _refresh_stale_statistics(conn)
                cur.executemany(_DOCUMENT_PUT, rows, returning=True)
                while True:
                    results.append(cur.fetchone())
                    if not cur.nextset():
                        break
        for doc, row in zip(docs, results, strict=True):
            assert row is not None  # RETURNING always yields the row
            prior = out.get(doc.doc_id)
            out[doc.doc_id] = StoredDocument(
                int(row[0]),
                doc.doc_id,
                doc.session_id,
                doc.text,
                dict(doc.metadata),
                float(row[1]),
                bool(row[2]) or (prior is not None and prior.changed),
                bool(row[3]) or (prior is not None and prior.new),
            )
        return list(out.values())

    def get(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]:
        """The stored documents among ``doc_ids``."""
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return {}
        rows = self.db.query(f"{_SELECT} WHERE namespace = %s AND doc_id = ANY(%s)", (self.namespace, ids))
        return {r[1]: _row_document(r) for r in rows}

    def by_keys(self, keys: Iterable[int]) -> dict[int, StoredDocument]:
        """The stored documents with these keys."""
        wanted = list(dict.fromkeys(int(k) for k in keys))
        if not wanted:
            return {}
        rows = self.db.query(f"{_SELECT} WHERE namespace = %s AND id = ANY(%s)", (self.namespace, wanted))
        return {int(r[0]): _row_document(r) for r in rows}

    def ids(self, session_id: str | None = None) -> list[str]:
        """The ids of a session's documents (None: all), oldest first."""
        if session_id is None:
            rows = self.db.query(
                "SELECT doc_id FROM memory_documents WHERE namespace = %s ORDER BY id", (self.namespace,)
            )
        else:
            rows = self.db.query(
                "SELECT doc_id FROM memory_documents WHERE namespace = %s AND session_id = %s ORDER BY id",
                (self.namespace, session_id),
            )
        return [r[0] for r in rows]

    def ids_with_text(self, session_id: str, text: str) -> list[str]:
        """The ids of a session's documents whose text is exactly ``text``, oldest first."""
        rows = self.db.query(
            "SELECT doc_id FROM memory_documents WHERE namespace = %s AND session_id = %s AND content = %s ORDER BY id",
            (self.namespace, session_id, text),
        )
        return [r[0] for r in rows]

    def iter(self, batch: int = 500) -> Iterator[StoredDocument]:
        """Every document, oldest first, in pages of ``batch``."""
        last = 0
        while True:
            rows = self.db.query(
                f"{_SELECT} WHERE namespace = %s AND id > %s ORDER BY id LIMIT %s",
                (self.namespace, last, int(batch)),
            )
            if not rows:
                return
            for row in rows:
                yield _row_document(row)
            last = int(rows[-1][0])

    def count(self, session_id: str | None = None) -> int:
        """How many documents (of a session)."""
        if session_id is None:
            value = self.db.scalar("SELECT count(*) FROM memory_documents WHERE namespace = %s", (self.namespace,))
        else:
            value = self.db.scalar(
                "SELECT count(*) FROM memory_documents WHERE namespace = %s AND session_id = %s",
                (self.namespace, session_id),
            )
        return int(value or 0)

    def made_between(
        self, since: float, until: float, limit: int, session_id: str | None = None
    ) -> list[StoredDocument]:
        """The newest ``limit`` documents made in ``[since, until)`` (``created``), newest first."""
        where = " AND session_id = %s" if session_id is not None else ""
        params: tuple[Any, ...] = (self.namespace, float(since), float(until))
        if session_id is not None:
            params = (*params, session_id)
        rows = self.db.query(
            f"{_SELECT} WHERE namespace = %s AND created >= %s AND created < %s{where}"
            " ORDER BY created DESC, id DESC LIMIT %s",
            (*params, int(limit)),
        )
        return [_row_document(r) for r in rows]

    def sessions(self) -> list[str]:
        """Every session that has documents, sorted."""
        rows = self.db.query(
            "SELECT DISTINCT session_id FROM memory_documents WHERE namespace = %s ORDER BY session_id",
            (self.namespace,),
        )
        return [r[0] for r in rows]

    def remove(self, doc_ids: Sequence[str]) -> int:
        """Delete by id (keyword and vector rows cascade); return how many existed."""
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return 0
        with self.db.transaction() as conn:
            return int(
                conn.execute(
                    "DELETE FROM memory_documents WHERE namespace = %s AND doc_id = ANY(%s)", (self.namespace, ids)
                ).rowcount
            )

    def remove_all(self) -> int:
        """Delete every document of the namespace; return how many existed."""
        with self.db.transaction() as conn:
            return int(conn.execute("DELETE FROM memory_documents WHERE namespace = %s", (self.namespace,)).rowcount)

    def set_created(self, items: Sequence[tuple[str, float]]) -> None:
        """Set the ``created`` of these documents (by doc id); inside :meth:`PgDatabase.atomic`."""
        if items:
            self.db.executemany(
                "UPDATE memory_documents SET created = %s WHERE namespace = %s AND doc_id = %s",
                [(created, self.namespace, doc_id) for doc_id, created in items],
            )


# -- history ---------------------------------------------------------------------------------


_HISTORY_INSERT = (
    "INSERT INTO memory_history (namespace, session_id, role, content, created, exchange_id)"
    " SELECT %(ns)s, %(session)s, m.role, m.content, %(now)s, m.exchange_id"
    " FROM unnest(%(roles)s::text[], %(contents)s::text[], %(ids)s::text[]) WITH ORDINALITY"
    " AS m(role, content, exchange_id, n) ORDER BY m.n"
)
#: The trim of :meth:`PgHistory.append` (as SQLite's): once the session holds ``keep + batch``
#: messages, every message older than its newest ``keep`` goes; the trimmed rows come back. The
#: offsets count the rows the statement sees (an insert in the same statement is not seen).
_HISTORY_TRIM = (
    " DELETE FROM memory_history WHERE namespace = %(ns)s AND session_id = %(session)s"
    " AND EXISTS (SELECT 1 FROM memory_history WHERE namespace = %(ns)s AND session_id = %(session)s"
    "  ORDER BY id DESC LIMIT 1 OFFSET %(full)s)"
    " AND id <= (SELECT id FROM memory_history WHERE namespace = %(ns)s AND session_id = %(session)s"
    "  ORDER BY id DESC LIMIT 1 OFFSET %(offset)s)"
    " RETURNING id, role, content, created"
)


def _trim_params(keep: int, batch: int, unseen: int) -> dict[str, Any]:
    """The offsets of :data:`_HISTORY_TRIM` when ``unseen`` new messages are not visible to it."""
    return {"offset": keep - unseen, "full": keep + max(batch, 1) - 1 - unseen}


class PgHistory:
    """History and exchange-id chains of one namespace
    (see :class:`~ovos_memory_plugins.storage.seam.HistoryStore`)."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace

    #: :meth:`append` takes ``batch`` and returns the messages it trimmed (the seam's
    #: :class:`~ovos_memory_plugins.storage.seam.HistoryStore`).
    trims_in_batches = True

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
    ) -> list[StoredMessage]:
        """Append ``(role, content)`` messages (made at ``created``, default now); once the
        session holds ``keep + batch`` messages or more, trim it to its newest ``keep``; return
        the trimmed messages, oldest first."""
        ns, now = self.namespace, time.time() if created is None else created
        ids = list(exchange_ids) if exchange_ids is not None else [None] * len(messages)
        keep = max(keep, 0)
        params = {
            "ns": ns,
            "session": session_id,
            "roles": [r for r, _ in messages],
            "contents": [c for _, c in messages],
            "ids": ids,
            "now": now,
            "last": last_exchange_id,
        }
        if keep < len(messages):  # a window smaller than one call's messages: keep the simple path
            with self.db.transaction() as conn:
                conn.execute(_HISTORY_INSERT, params)
                rows = conn.execute(_HISTORY_TRIM, {**params, **_trim_params(keep, batch, 0)}).fetchall()
            return [StoredMessage(r[1], r[2], float(r[3])) for r in sorted(rows, key=lambda r: int(r[0]))]
        # one statement: insert, move the chain, trim (the base records a turn's messages and
        # its exchange document in one transaction, so one durable commit covers both)
        with self.db.connection() as conn:
            rows = conn.execute(
                "WITH ins AS (" + _HISTORY_INSERT + " RETURNING id),"
                " chain AS (INSERT INTO memory_sessions (namespace, session_id, last_exchange_id)"
                "  SELECT %(ns)s, %(session)s, %(last)s WHERE %(last)s::text IS NOT NULL"
                "  ON CONFLICT (namespace, session_id) DO UPDATE SET last_exchange_id = excluded.last_exchange_id)"
                + _HISTORY_TRIM,
                {**params, **_trim_params(keep, batch, len(messages))},
            ).fetchall()
        return [StoredMessage(r[1], r[2], float(r[3])) for r in sorted(rows, key=lambda r: int(r[0]))]

    def tag_exchange(self, session_id: str, exchange_id: str) -> None:
        """Mark the session's last untagged user message as part of ``exchange_id``."""
        with self.db.connection() as conn:
            conn.execute(
                "UPDATE memory_history SET exchange_id = %s WHERE id = (SELECT id FROM memory_history"
                " WHERE namespace = %s AND session_id = %s AND role = 'user' AND exchange_id IS NULL"
                " ORDER BY id DESC LIMIT 1)",
                (exchange_id, self.namespace, session_id),
            )

    def recent(self, session_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a session, oldest first, each with its ``created``."""
        rows = self.db.query(
            "SELECT role, content, created FROM memory_history WHERE namespace = %s AND session_id = %s"
            " ORDER BY id DESC LIMIT %s",
            (self.namespace, session_id, max(limit, 0)),
        )
        return [StoredMessage(r[0], r[1], float(r[2])) for r in reversed(rows)]

    def last_exchange_id(self, session_id: str) -> str:
        """The id of the session's newest exchange document, ``""`` when it has none."""
        value = self.db.scalar(
            "SELECT last_exchange_id FROM memory_sessions WHERE namespace = %s AND session_id = %s",
            (self.namespace, session_id),
        )
        return str(value) if value is not None else ""

    def sessions(self) -> list[str]:
        """Every session that has history, sorted."""
        rows = self.db.query(
            "SELECT DISTINCT session_id FROM memory_history WHERE namespace = %s ORDER BY session_id",
            (self.namespace,),
        )
        return [r[0] for r in rows]

    def remove_exchanges(self, docs: Sequence[StoredDocument]) -> int:
        """Delete the messages the given exchange documents were recorded from; return how many."""
        if not docs:
            return 0
        n = 0
        with self.db.transaction() as conn:
            n += conn.execute(
                "DELETE FROM memory_history WHERE namespace = %s AND exchange_id = ANY(%s)",
                (self.namespace, [d.doc_id for d in docs]),
            ).rowcount
            for doc in docs:
                parts = exchange_parts(doc.text)
                if parts is None:
                    continue
                n += conn.execute(
                    "DELETE FROM memory_history WHERE namespace = %s AND session_id = %s AND exchange_id IS NULL"
                    " AND ((role = 'user' AND content = %s) OR (role = 'assistant' AND content = %s))",
                    (self.namespace, doc.session_id, parts[0], parts[1]),
                ).rowcount
        return n

    def remove_quoting(self, session_id: str, text: str) -> int:
        """Delete the session's user messages that quote ``text`` (case folded) and the
        exchanges they belong to; return how many messages went."""
        if not text.strip():
            return 0
        quoting = "namespace = %s AND session_id = %s AND role = 'user' AND strpos(lower(content), lower(%s)) > 0"
        with self.db.transaction() as conn:
            n = conn.execute(
                "DELETE FROM memory_history WHERE namespace = %s AND session_id = %s AND exchange_id IN"
                f" (SELECT exchange_id FROM memory_history WHERE {quoting} AND exchange_id IS NOT NULL)",
                (self.namespace, session_id, self.namespace, session_id, text),
            ).rowcount
            n += conn.execute(
                f"DELETE FROM memory_history WHERE {quoting}", (self.namespace, session_id, text)
            ).rowcount
        return int(n)

    def clear_session(self, session_id: str) -> int:
        """Delete a session's history; return how many messages went."""
        with self.db.transaction() as conn:
            n = conn.execute(
                "DELETE FROM memory_history WHERE namespace = %s AND session_id = %s", (self.namespace, session_id)
            ).rowcount
            conn.execute(
                "DELETE FROM memory_sessions WHERE namespace = %s AND session_id = %s", (self.namespace, session_id)
            )
        return int(n)

    def clear_all(self) -> int:
        """Delete all of the namespace's history; return how many messages went."""
        with self.db.transaction() as conn:
            n = conn.execute("DELETE FROM memory_history WHERE namespace = %s", (self.namespace,)).rowcount
            conn.execute("DELETE FROM memory_sessions WHERE namespace = %s", (self.namespace,))
        return int(n)

    def message_count(self) -> int:
        """How many messages the history holds."""
        return int(self.db.scalar("SELECT count(*) FROM memory_history WHERE namespace = %s", (self.namespace,)) or 0)


# -- the keyword index -----------------------------------------------------------------------


class PgKeywordIndex:
    """Keyword recall over ``memory_keywords`` (see :class:`~ovos_memory_plugins.storage.engine.Index`).

    Per document: ``tf``, each term's count in the body, the head (date, speaker) and, for a
    dialogue turn, the context (the body terms of the session's previous document), packed in
    one number per term, ``{"term": body | head << 8 | context << 16}`` (8 bits each);
    ``terms``, the same terms as a ``tsvector`` built with ``array_to_tsvector`` (no parsing, no
    stemming, no stop words: ours are already applied),
    GIN-indexed, which finds the documents holding any query term; ``length``, the token count.

    Ranking is FTS5's ``bm25(fts, 1.0, head_weight, context_weight)`` written out in SQL: a
    term's frequency in a document is ``body + head_weight * head + context_weight * context``,
    the length is all its tokens, IDF uses the namespace's document count and frequencies.

    From :data:`~ovos_memory_plugins.storage.keyword.PRUNE_MIN_DOCUMENTS` documents on, as in the
    SQLite index: query terms in more than half the documents are left out and the rest are
    searched rarest first until their documents add up to
    :data:`~ovos_memory_plugins.storage.keyword.PRUNE_POSTINGS`; when a term
    was left out, the best :data:`~ovos_memory_plugins.storage.keyword.RESCORE_CANDIDATES` that
    the kept terms find are ranked again on every query term by
    :func:`~ovos_memory_plugins.storage.keyword.bm25_scores` (one statement finds them and reads
    their counts of every query term, their lengths and their documents), so both engines
    return the same documents in the same order with the same scores.

    Document frequencies live in ``memory_keyword_df`` (namespace, term, df): every write here
    (add, replace, remove, a turn losing its context, ``remove_all``) changes the rows of its
    terms in the same transaction, in term order (concurrent writers wait, never deadlock), and
    deletes rows that reach 0; a search reads its terms' rows with one indexed lookup
    (:meth:`frequencies`). Keyword rows must be deleted through this class: a cascade from
    ``memory_documents`` alone would leave the counts behind.
    """

    #: Its ``search`` takes ``window=``: a ``(since, until)`` range of the documents' ``created``.
    filters_time: ClassVar[bool] = True

    def __init__(
        self, db: PgDatabase, namespace: str, settings: KeywordSettings | None = None, *, postings: bool = True
    ) -> None:
        self.db = db
        self.namespace = namespace
        self.settings = settings or KeywordSettings()
        #: Score from ``memory_keyword_postings`` (an index-only scan of the query terms' ranges);
        #: False: from the candidates' keyword rows found through the GIN index, the path before
        #: migration 0006, which ranks alike (kept as the reference the tests hold it to).
        self.postings = postings
        self._lexeme = namespace_lexeme(namespace)
        #: (refreshed at, document count, total tokens) of the namespace
        self._stats: tuple[float, int, int] | None = None

    @property
    def name(self) -> str:
        """``"keyword"``."""
        return "keyword"

    # -- writing -----------------------------------------------------------------------------

    def prepare(self, docs: Sequence[Document]) -> dict[str, tuple[dict[str, int], int, bool]]:
        """Tokenize before the transaction: ``doc_id -> (term counts, token count, is a turn)``."""
        out = {}
        for doc in docs:
            body, head, turn = document_terms(doc.text)
            counts: dict[str, list[int]] = {}
            length = 0
            for column, terms in enumerate((body.split(), head.split())):
                for term in terms:
                    counts.setdefault(term, [0, 0])[column] += 1
                    length += 1
            out[doc.doc_id] = ({t: _pack(a, b, 0) for t, (a, b) in counts.items()}, length, turn)
        return out

    def add(self, docs: Sequence[StoredDocument], prepared: Any = None) -> None:
        """Store the terms of new or changed documents (inside the write transaction).

        A turn takes the body terms of the session's previous indexed document as its context,
        merged in the same statement.
        """
        todo = [d for d in docs if d.changed]
        if not todo:
            return
        terms: dict[str, tuple[dict[str, int], int, bool]] = dict(prepared or {})
        missing = [d for d in todo if d.doc_id not in terms]
        if missing:
            terms.update(self.prepare([Document(d.doc_id, d.text, d.session_id, d.metadata) for d in missing]))
        context_on = self.settings.context_weight > 0
        rows = []
        tokens = 0
        for doc in todo:
            tf, length, turn = terms[doc.doc_id]
            tokens += length
            rows.append(
                {
                    "id": doc.key,
                    "ns": self.namespace,
                    "session": doc.session_id,
                    "tf": json.dumps(tf, ensure_ascii=False),
                    "length": length,
                    "turn": bool(turn and context_on),
                    "nslex": self._lexeme,
                }
            )
        with self.db.transaction() as conn, conn.cursor() as cur:
            if len(rows) == 1:  # one statement writes the row and its terms' frequencies
                emptied = [r[0] for r in cur.execute(_KEYWORD_ADD_ONE, rows[0]).fetchall()]
                if emptied:
                    _drop_emptied(conn, self.namespace, emptied)
            else:  # the rows' terms as they were, the rows, then one sorted update for them all
                keys = [d.key for d in todo]
                delta: Counter[str] = Counter()
                for term, count in cur.execute(_KEYWORD_TERMS, (keys,)).fetchall():
                    delta[term] -= int(count)
                cur.execute(_POSTINGS_DELETE, {"ns": self.namespace, "keys": keys})
                cur.executemany(_KEYWORD_ADD, rows)
                cur.execute(_POSTINGS_INSERT, {"ns": self.namespace, "keys": keys})
                _apply_frequencies(conn, self.namespace, delta, added=keys)
        if self._stats is not None:  # keep the figures current without a count
            at, n, total = self._stats
            self._stats = (at, n + len(rows), total + tokens)

    def remove(self, docs: Sequence[StoredDocument]) -> int:
        """Take documents out of the index and their words out of other turns' context, and
        their terms out of the namespace's document frequencies (one transaction)."""
        keys = [d.key for d in docs]
        if not keys:
            return 0
        delta: Counter[str] = Counter()
        n = 0
        with self.db.transaction() as conn:
            for term, change in conn.execute(_KEYWORD_DELETE, {"ns": self.namespace, "keys": keys}).fetchall():
                if term is None:  # the row count
                    n = int(change)
                else:
                    delta[term] -= int(change)
            for term, change in conn.execute(
                _KEYWORD_DROP_CONTEXT, {"ns": self.namespace, "keys": keys, "nslex": self._lexeme}
            ).fetchall():
                delta[term] += int(change)
            _apply_frequencies(conn, self.namespace, delta)
        self._stats = None
        return n

    def remove_all(self) -> int:
        """Empty the namespace's index and its document frequencies; return how many rows went."""
        with self.db.transaction() as conn:
            n = conn.execute("DELETE FROM memory_keywords WHERE namespace = %s", (self.namespace,)).rowcount
            conn.execute("DELETE FROM memory_keyword_postings WHERE namespace = %s", (self.namespace,))
            conn.execute(_DF_DELETE_NAMESPACE, (self.namespace, self.namespace))
        self._stats = None
        return int(n)

    def frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """How many of the namespace's indexed documents hold each term (0: none), read from
        ``memory_keyword_df``, which every write keeps exact in its own transaction."""
        wanted = list(dict.fromkeys(terms))
        if not wanted:
            return {}
        rows = self.db.query(
            "SELECT term, df FROM memory_keyword_df WHERE namespace = %s AND term = ANY(%s)",
            (self.namespace, wanted),
        )
        found = {str(r[0]): max(int(r[1]), 0) for r in rows}
        return {t: found.get(t, 0) for t in wanted}

    # -- searching ---------------------------------------------------------------------------

    def _namespace_stats(self, refresh: bool = False) -> tuple[int, float]:
        """``(document count, average length)`` of the namespace: counted at most every
        ``STATS_TTL`` seconds (or when ``refresh``), this process's own writes added in between."""
        now = time.monotonic()
        if refresh or self._stats is None or now - self._stats[0] > STATS_TTL:
            row = self.db.query(
                "SELECT count(*), coalesce(sum(length), 0) FROM memory_keywords WHERE namespace = %s",
                (self.namespace,),
            )[0]
            self._stats = (now, int(row[0]), int(row[1]))
        n, tokens = self._stats[1], self._stats[2]
        return n, (tokens / n if n else 0.0)

    def search(
        self, query: str, k: int, session_id: str | None = None, *, window: tuple[float, float] | None = None
    ) -> list[MemoryHit]:
        """The best ``k`` documents for ``query`` (only ``session_id``'s when given), best first;
        with ``window`` (``(since, until)``, seconds since the epoch), only documents made in it."""
        return self.search_terms(query_counts(query, self.settings), k, session_id, window)

    def search_terms(
        self, counts: Counter[str], k: int, session_id: str | None = None, window: tuple[float, float] | None = None
    ) -> list[MemoryHit]:
        """Rank by weighted query terms (BM25 as FTS5 computes it; on a large namespace, pruned
        and then rescored as the class docstring says); ``window``: only documents whose
        ``created`` is in ``[since, until)`` (the namespace's statistics stay the whole namespace's,
        as in the SQLite index).

        Every term's document frequency is read from ``memory_keyword_df`` (one indexed lookup
        per term, kept exact by every write), so the first search of a fresh process costs what
        any other does, and every search weighs its terms by their current counts.
        """
        if not counts or k <= 0:
            return []
        n, avgdl = self._namespace_stats()
        if n == 0:  # empty when last counted: other processes may have written since
            n, avgdl = self._namespace_stats(refresh=True)
            if n == 0:
                return []
        df = self.frequencies(counts)
        if any(f > n for f in df.values()):  # the namespace grew by other processes' writes since
            n, avgdl = self._namespace_stats(refresh=True)
            df = {t: min(f, n) for t, f in df.items()}
        terms = [t for t in counts if df.get(t, 0) > 0]
        if not terms:
            return []
        if n < PRUNE_MIN_DOCUMENTS:
            return self._ranked(self._rank(counts, terms, df, n, avgdl, k, session_id, window=window))
        kept = _prune(terms, df, n)
        if len(kept) < len(terms):  # terms were left out: every term ranks again
            return self._rescored(counts, kept, terms, df, n, avgdl, k, session_id, window)
        return self._ranked(self._rank(counts, kept, df, n, avgdl, k, session_id, window=window))

    def _rank(
        self,
        counts: Counter[str],
        terms: list[str],
        df: dict[str, int],
        n: int,
        avgdl: float,
        k: int,
        session_id: str | None,
        read_counts: Sequence[str] = (),
        window: tuple[float, float] | None = None,
    ) -> list[tuple[Any, ...]]:
        """The best ``k`` documents by BM25 over ``terms``, best first, as rows ``(doc_id,
        session_id, content, metadata, score)``; with ``read_counts``, each row goes on with the
        document's token count and the packed counts (``tf``) of those terms, read in the same
        statement (what :func:`~ovos_memory_plugins.storage.keyword.bm25_scores` needs)."""
        weights = []
        for t in terms:
            idf = math.log((n - df[t] + 0.5) / (df[t] + 0.5))
            weights.append(min(counts[t], MAX_TERM_REPEAT) * (idf if idf > 0 else 1e-6))
        params: dict[str, Any] = {
            "ns": self.namespace,
            "session": session_id,
            "query": f"{_lexeme(self._lexeme)} & ({tsquery_literal(terms)})",
            **self._bm25_params(avgdl, k, n),
        }
        # one expression per query term over the candidate's counts (no join, no grouping):
        # j<i> its packed counts, f<i> its weighted frequency
        counts_of, freqs, parts = [], [], []
        for i, (term, weight) in enumerate(zip(terms, weights, strict=True)):
            params[f"t{i}"], params[f"w{i}"] = term, weight
            counts_of.append(f"(k.tf -> %(t{i})s)::int AS j{i}")
            freqs.append(
                f"coalesce((j.j{i} & 255) + %(wb)s * ((j.j{i} >> 8) & 255) + %(wc)s * (j.j{i} >> 16), 0) AS f{i}"
            )
            parts.append(f"%(w{i})s * f.f{i} * %(k1p)s / (f.f{i} + n.norm)")
        carried, read = "", ""
        if read_counts:  # the few winners' counts of every term, looked up after the LIMIT
            carried = ", k.length, k.tf"
            for i, term in enumerate(read_counts):
                params[f"r{i}"] = term
            read = ", s.length, " + ", ".join(f"(s.tf -> %(r{i})s)::int" for i in range(len(read_counts)))
        if self.postings:
            return self._rank_postings(terms, params, counts_of, freqs, parts, read_counts, session_id, window)
        session_filter = " AND k.session_id = %(session)s" if session_id is not None else ""
        if window is not None:  # the candidate's document (its primary key) made in the window
            params["since"], params["until"] = float(window[0]), float(window[1])
            session_filter += (
                " AND EXISTS (SELECT 1 FROM memory_documents w WHERE w.id = k.id"
                " AND w.created >= %(since)s AND w.created < %(until)s)"
            )
        return self.db.query(
            "SELECT d.doc_id, d.session_id, d.content, d.metadata, s.score" + read + " FROM ("
            " SELECT k.id, " + " + ".join(parts) + " AS score" + carried + " FROM memory_keywords k"
            " CROSS JOIN LATERAL (SELECT %(k1)s * (1 - %(b)s + %(b)s * k.length / %(avgdl)s) AS norm) AS n"
            # OFFSET 0: evaluated once per row, not inlined into every use (PostgreSQL would
            # repeat each jsonb lookup six times per term: half the statement's time)
            " CROSS JOIN LATERAL (SELECT " + ", ".join(counts_of) + " OFFSET 0) AS j"
            " CROSS JOIN LATERAL (SELECT " + ", ".join(freqs) + " OFFSET 0) AS f"
            # the namespace's lexeme in the tsquery keeps the GIN lookup to the namespace, and
            # leaves the planner no other index to pick, even in a cached generic plan (a filter
            # on the namespace column here once made it scan a large namespace's whole btree
            # range); the join below checks the column, so a hash collision could never leak
            " WHERE k.terms @@ %(query)s::tsquery" + session_filter + " ORDER BY score DESC, k.id LIMIT %(k)s) AS s"
            " JOIN memory_documents d ON d.id = s.id AND d.namespace = %(ns)s ORDER BY s.score DESC, s.id",
            params,
        )

    def _rank_postings(
        self,
        terms: list[str],
        params: dict[str, Any],
        counts_of: list[str],
        freqs: list[str],
        parts: list[str],
        read_counts: Sequence[str],
        session_id: str | None,
        window: tuple[float, float] | None,
    ) -> list[tuple[Any, ...]]:
        """:meth:`_rank` from ``memory_keyword_postings``: the query terms' postings (an
        index-only scan of the covering primary key), one row per candidate with its counts of
        each term (``j<i>``, NULL where it lacks the term) and its length, then the very
        expressions of the GIN path in the same term order, so every score is the same number.
        A session or a window is checked per candidate by its key (the keyword rows' index on
        ``(namespace, session_id, id)``; the documents' primary key)."""
        params["terms"] = terms
        pivot = ", ".join(f"max(p.tf) FILTER (WHERE p.term = %(t{i})s) AS j{i}" for i in range(len(counts_of)))
        where = ""
        if session_id is not None:
            where += (
                " AND EXISTS (SELECT 1 FROM memory_keywords m WHERE m.namespace = %(ns)s"
                " AND m.session_id = %(session)s AND m.id = j.id)"
            )
        if window is not None:
            params["since"], params["until"] = float(window[0]), float(window[1])
            where += (
                " AND EXISTS (SELECT 1 FROM memory_documents w WHERE w.id = j.id"
                " AND w.created >= %(since)s AND w.created < %(until)s)"
            )
        read, joined = "", ""
        if read_counts:  # the few winners' counts of every term, from their keyword rows
            for i, term in enumerate(read_counts):
                params[f"r{i}"] = term
            read = ", r.length, " + ", ".join(f"(r.tf -> %(r{i})s)::int" for i in range(len(read_counts)))
            joined = " JOIN memory_keywords r ON r.id = s.id"
        return self.db.query(
            "SELECT d.doc_id, d.session_id, d.content, d.metadata, s.score" + read + " FROM ("
            " SELECT j.id, " + " + ".join(parts) + " AS score FROM ("
            "  SELECT p.id, max(p.length) AS length, " + pivot + " FROM memory_keyword_postings p"
            "  WHERE p.namespace = %(ns)s AND p.term = ANY(%(terms)s::text[]) GROUP BY p.id) AS j"
            " CROSS JOIN LATERAL (SELECT %(k1)s * (1 - %(b)s + %(b)s * j.length / %(avgdl)s) AS norm) AS n"
            " CROSS JOIN LATERAL (SELECT " + ", ".join(freqs) + " OFFSET 0) AS f"
            " WHERE true" + where + " ORDER BY score DESC, j.id LIMIT %(k)s) AS s"
            " JOIN memory_documents d ON d.id = s.id AND d.namespace = %(ns)s"
            + joined
            + " ORDER BY s.score DESC, s.id",
            params,
        )

    @staticmethod
    def _ranked(rows: list[tuple[Any, ...]]) -> list[MemoryHit]:
        return [_hit(r[0], r[1], r[2], r[3], float(r[4])) for r in rows]

    def _rescored(
        self,
        counts: Counter[str],
        kept: list[str],
        terms: list[str],
        df: dict[str, int],
        n: int,
        avgdl: float,
        k: int,
        session_id: str | None,
        window: tuple[float, float] | None = None,
    ) -> list[MemoryHit]:
        """The best :data:`~ovos_memory_plugins.storage.keyword.RESCORE_CANDIDATES` matches of
        the kept terms, ranked again on every query term (``terms``) by
        :func:`~ovos_memory_plugins.storage.keyword.bm25_scores`, as the SQLite index ranks
        them; found, with their counts and documents, in one statement."""
        fetch = max(k, RESCORE_CANDIDATES)
        found = self._rank(counts, kept, df, n, avgdl, fetch, session_id, read_counts=terms, window=window)
        if not found:
            return []
        every = Counter({t: counts[t] for t in terms})
        columns = [_columns(terms, r[6:], int(r[5])) for r in found]
        scores = bm25_scores(every, columns, df, n, avgdl, self.settings.column_weights, k1=RESCORE_K1)
        best = sorted(range(len(found)), key=lambda i: (-scores[i], -float(found[i][4])))[:k]
        return [_hit(found[i][0], found[i][1], found[i][2], found[i][3], scores[i]) for i in best]

    def _bm25_params(self, avgdl: float, k: int, n: int) -> dict[str, Any]:
        """The ranking statements' BM25 constants and field weights, and the result count; a
        namespace of ``n`` >= PRUNE_MIN_DOCUMENTS documents ranks with ``k1`` = RESCORE_K1, as
        the SQLite index does (docs/lexical.md)."""
        s = self.settings
        k1 = RESCORE_K1 if n >= PRUNE_MIN_DOCUMENTS else BM25_K1
        return {
            "k1": k1,
            "k1p": k1 + 1,
            "b": BM25_B,
            "avgdl": max(avgdl, 1e-9),
            "wb": float(s.head_weight),
            "wc": float(s.context_weight),
            "k": int(k),
        }

    def count(self) -> int:
        """How many documents the keyword index holds for the namespace."""
        return int(self.db.scalar("SELECT count(*) FROM memory_keywords WHERE namespace = %s", (self.namespace,)) or 0)

    def stats(self) -> dict[str, Any]:
        """``keyword_rows`` and how ranking is done."""
        return {"keyword_rows": self.count(), "ranking": "bm25 over tsvector (PostgreSQL)"}

    def close(self) -> None:
        """Nothing pending: every add is indexed in its own transaction."""


#: One document's keyword row; a turn merges the body counts of the session's previous document
#: in as its context, in the same statement.
_KEYWORD_ADD = (
    "INSERT INTO memory_keywords (id, namespace, session_id, tf, terms, length, ctx_id)"
    " SELECT %(id)s, %(ns)s, %(session)s, m.tf,"
    "  array_to_tsvector(ARRAY(SELECT jsonb_object_keys(m.tf)) || %(nslex)s::text),"
    "  %(length)s + coalesce(p.body, 0), p.id"
    " FROM (SELECT 1) AS one"
    " LEFT JOIN LATERAL (SELECT k.id, k.tf, (SELECT sum(e.value::int & 255) FROM jsonb_each(k.tf) AS e) AS body"
    "  FROM memory_keywords k WHERE %(turn)s AND k.namespace = %(ns)s AND k.session_id = %(session)s"
    "  AND k.id < %(id)s ORDER BY k.id DESC LIMIT 1) AS p ON true"
    " CROSS JOIN LATERAL (SELECT coalesce(jsonb_object_agg(x.t, x.v), '{}'::jsonb) AS tf FROM ("
    "  SELECT u.t, sum(u.v) AS v FROM ("
    "   SELECT e.key AS t, e.value::int AS v FROM jsonb_each(%(tf)s::jsonb) AS e"
    "   UNION ALL SELECT e.key, (e.value::int & 255) << 16 FROM jsonb_each(coalesce(p.tf, '{}'::jsonb)) AS e"
    "    WHERE e.value::int & 255 > 0) AS u GROUP BY u.t) AS x) AS m"
    " ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, tf = excluded.tf, terms = excluded.terms,"
    " length = excluded.length, ctx_id = excluded.ctx_id"
)

#: One document's row, and how it changes the namespace's document frequencies (``delta``: +1 for
#: each term its row gained, -1 for each it lost), the row as it was read in the same snapshot (the
#: document's own row in ``memory_documents``, locked by the put before it, keeps other writers
#: of that document out until the commit).
_KEYWORD_WRITE = (
    "WITH old AS (SELECT tf FROM memory_keywords WHERE id = %(id)s),"
    " ins AS (" + _KEYWORD_ADD + " RETURNING tf, length),"
    " delta AS (SELECT x.t, sum(x.d)::int AS d FROM ("
    "  SELECT jsonb_object_keys(ins.tf) AS t, 1 AS d FROM ins"
    "  UNION ALL SELECT jsonb_object_keys(old.tf), -1 FROM old) AS x GROUP BY x.t HAVING sum(x.d) <> 0),"
    # its postings, three disjoint sets (no row is touched twice by the statement): the terms it
    # lost go, those it kept take the new counts and length, the new ones are inserted (a plain
    # insert: a new document, the usual write, has only these)
    " plost AS (DELETE FROM memory_keyword_postings p USING delta"
    "  WHERE delta.d < 0 AND p.namespace = %(ns)s AND p.term = delta.t AND p.id = %(id)s),"
    " pkept AS (UPDATE memory_keyword_postings p SET tf = e.value::int, length = ins.length"
    "  FROM old, ins CROSS JOIN LATERAL jsonb_each(ins.tf) AS e"
    "  WHERE old.tf ? e.key AND p.namespace = %(ns)s AND p.term = e.key AND p.id = %(id)s),"
    " pnew AS (INSERT INTO memory_keyword_postings (id, tf, length, namespace, term)"
    "  SELECT %(id)s, e.value::int, ins.length, %(ns)s, e.key FROM ins CROSS JOIN LATERAL jsonb_each(ins.tf) AS e"
    "  WHERE NOT EXISTS (SELECT 1 FROM old WHERE old.tf ? e.key))"
)

#: Add to the namespace's document frequencies, in term order (every writer locks the rows it
#: changes in the same order: concurrent writers wait for each other, never deadlock); returns
#: the terms whose frequency fell to 0 or below (their rows are deleted next).
_DF_UPSERT = (
    " up AS (INSERT INTO memory_keyword_df AS f (namespace, term, df)"
    "  SELECT %(ns)s, c.t, c.d FROM {changes} AS c ORDER BY c.t"
    "  ON CONFLICT (namespace, term) DO UPDATE SET df = f.df + excluded.df RETURNING f.term, f.df)"
    " SELECT term FROM up WHERE df <= 0"
)

#: One document: its row and its terms' frequencies in one statement.
_KEYWORD_ADD_ONE = _KEYWORD_WRITE + "," + _DF_UPSERT.format(changes="delta")

#: How many of the given keyword rows hold each term (a batch's rows before it replaces them).
_KEYWORD_TERMS = (
    "SELECT t.term, count(*) FROM memory_keywords k CROSS JOIN LATERAL jsonb_object_keys(k.tf) AS t(term)"
    " WHERE k.id = ANY(%s) GROUP BY t.term"
)

#: Apply changes to the frequencies: +1 for each term of the keyword rows ``added`` (their keys,
#: as they are now), plus ``changes`` for ``terms`` (two arrays), summed per term.
_DF_APPLY = (
    "WITH changes AS (SELECT x.t, sum(x.d)::int AS d FROM ("
    "  SELECT t.term AS t, 1 AS d FROM memory_keywords k CROSS JOIN LATERAL jsonb_object_keys(k.tf) AS t(term)"
    "  WHERE k.id = ANY(%(added)s)"
    "  UNION ALL SELECT c.t, c.d FROM unnest(%(terms)s::text[], %(changes)s::int[]) AS c(t, d)) AS x"
    " GROUP BY x.t HAVING sum(x.d) <> 0)," + _DF_UPSERT.format(changes="changes")
)

#: Delete the postings of keyword rows (their keys), before the rows are written again (a batch).
_POSTINGS_DELETE = (
    "DELETE FROM memory_keyword_postings p USING (SELECT k.id, jsonb_object_keys(k.tf) AS t FROM memory_keywords k"
    " WHERE k.id = ANY(%(keys)s)) AS o WHERE p.namespace = %(ns)s AND p.term = o.t AND p.id = o.id"
)

#: Write the postings of keyword rows (their keys) as the rows are now (a batch, after its rows).
_POSTINGS_INSERT = (
    "INSERT INTO memory_keyword_postings (id, tf, length, namespace, term)"
    " SELECT k.id, e.value::int, k.length, %(ns)s, e.key"
    " FROM memory_keywords k CROSS JOIN LATERAL jsonb_each(k.tf) AS e WHERE k.id = ANY(%(keys)s) ORDER BY e.key, k.id"
)

#: Delete documents' keyword rows and their postings; returns ``(NULL, rows deleted)`` and, per
#: term, how many of the deleted rows held it.
_KEYWORD_DELETE = (
    "WITH gone AS (DELETE FROM memory_keywords WHERE namespace = %(ns)s AND id = ANY(%(keys)s) RETURNING id, tf),"
    " pgone AS (DELETE FROM memory_keyword_postings p USING gone CROSS JOIN LATERAL jsonb_object_keys(gone.tf) AS o(t)"
    "  WHERE p.namespace = %(ns)s AND p.term = o.t AND p.id = gone.id)"
    " SELECT NULL::text, count(*) FROM gone"
    " UNION ALL SELECT t.term, count(*) FROM gone CROSS JOIN LATERAL jsonb_object_keys(gone.tf) AS t(term)"
    " GROUP BY t.term"
)

#: Turns whose context document went: their context counts go, and terms only it held; returns
#: ``(term, change)`` for the frequencies, as :data:`_KEYWORD_WRITE` does.
_KEYWORD_DROP_CONTEXT = (
    "WITH up AS (UPDATE memory_keywords k SET tf = m.tf,"
    " terms = array_to_tsvector(ARRAY(SELECT jsonb_object_keys(m.tf)) || %(nslex)s::text),"
    " length = m.length, ctx_id = NULL"
    " FROM (SELECT h.id, h.tf AS old,"
    "  coalesce(jsonb_object_agg(e.key, e.value::int & 65535) FILTER (WHERE e.value::int & 65535 > 0),"
    "   '{}'::jsonb) AS tf,"
    "  coalesce(sum((e.value::int & 255) + ((e.value::int >> 8) & 255)), 0) AS length"
    "  FROM memory_keywords h LEFT JOIN LATERAL jsonb_each(h.tf) AS e ON true"
    "  WHERE h.namespace = %(ns)s AND h.ctx_id = ANY(%(keys)s) GROUP BY h.id) AS m"
    " WHERE k.id = m.id RETURNING k.id, k.length, m.old, k.tf AS new),"
    # their postings: the terms they lost go, the others take the new counts and length
    " plost AS (DELETE FROM memory_keyword_postings p USING up CROSS JOIN LATERAL jsonb_object_keys(up.old) AS o(t)"
    "  WHERE NOT up.new ? o.t AND p.namespace = %(ns)s AND p.term = o.t AND p.id = up.id),"
    " pnew AS (INSERT INTO memory_keyword_postings AS p (id, tf, length, namespace, term)"
    "  SELECT up.id, e.value::int, up.length, %(ns)s, e.key FROM up CROSS JOIN LATERAL jsonb_each(up.new) AS e"
    "  ON CONFLICT (namespace, term, id) DO UPDATE SET tf = excluded.tf, length = excluded.length)"
    " SELECT x.t, sum(x.d)::int FROM ("
    "  SELECT jsonb_object_keys(up.new) AS t, 1 AS d FROM up"
    "  UNION ALL SELECT jsonb_object_keys(up.old), -1 FROM up) AS x GROUP BY x.t HAVING sum(x.d) <> 0"
)


#: Delete a namespace's frequencies, locking the rows in term order first, as every writer does
#: (a plain DELETE would lock them in the table's order and could deadlock with a writer).
_DF_DELETE_NAMESPACE = (
    "DELETE FROM memory_keyword_df f USING (SELECT term FROM memory_keyword_df WHERE namespace = %s"
    " ORDER BY term FOR UPDATE) AS o WHERE f.namespace = %s AND f.term = o.term"
)


def _apply_frequencies(
    conn: psycopg.Connection[Any], namespace: str, delta: Counter[str], added: Sequence[int] = ()
) -> None:
    """Add ``delta`` and the terms of the keyword rows ``added`` to the namespace's document
    frequencies (in term order, one statement) and delete the rows that fell to 0."""
    changed = [(t, d) for t, d in delta.items() if d]
    if not changed and not added:
        return
    params = {
        "ns": namespace,
        "added": list(added),
        "terms": [t for t, _ in changed],
        "changes": [d for _, d in changed],
    }
    emptied = [r[0] for r in conn.execute(_DF_APPLY, params).fetchall()]
    if emptied:
        _drop_emptied(conn, namespace, emptied)


def _drop_emptied(conn: psycopg.Connection[Any], namespace: str, terms: list[str]) -> None:
    """Delete frequency rows at 0: a forgotten document's words leave nothing behind."""
    conn.execute(
        "DELETE FROM memory_keyword_df WHERE namespace = %s AND term = ANY(%s) AND df <= 0", (namespace, terms)
    )


def _pack(body: int, head: int, context: int) -> int:
    """A term's counts in one number (what ``tf`` stores): 8 bits each, body lowest."""
    return min(body, 255) | min(head, 255) << 8 | min(context, 255) << 16


#: Stands for a document's tokens that are no query term in the columns handed to ``bm25_scores``
#: (they count toward its length only); no token is a control character.
_OTHER = "\x00"


def _columns(terms: Sequence[str], packed: Sequence[int | None], length: int) -> tuple[str, str, str]:
    """A document's body, head and context columns as ``bm25_scores`` reads them (terms joined
    by spaces), from the packed counts of the query's terms and its token count: each query
    term as often as it occurs, and a stand-in for each other token (BM25 reads nothing else
    of them than how many there are)."""
    cols: tuple[list[str], list[str], list[str]] = ([], [], [])
    tokens = 0
    for term, value in zip(terms, packed, strict=True):
        if not value:
            continue
        for column, shift in enumerate((0, 8, 16)):
            times = (value >> shift) & 255
            if times:
                cols[column].extend([term] * times)
                tokens += times
    cols[0].extend([_OTHER] * max(length - tokens, 0))
    return " ".join(cols[0]), " ".join(cols[1]), " ".join(cols[2])


def _hit(doc_id: str, session_id: str, content: str, metadata: Any, score: float) -> MemoryHit:
    meta = _loads(metadata)
    meta.setdefault("session_id", session_id)
    return MemoryHit(content=content, source=doc_id, score=score, metadata=meta)


def _prune(terms: list[str], df: dict[str, int], n: int) -> list[str]:
    """Rarest terms first until their documents add up to ``PRUNE_POSTINGS`` (at least one kept);
    terms in more than half of the documents are left out (BM25 gives them no weight anyway)."""
    kept: list[str] = []
    postings = 0
    for term in sorted(terms, key=lambda t: df[t]):
        freq = df[term]
        if kept and (freq > n // 2 or postings + freq > PRUNE_POSTINGS):
            break
        kept.append(term)
        postings += freq
    return kept


# -- vectors ---------------------------------------------------------------------------------


class PgVectorStore:
    """Vectors per embedder space with pgvector (see :class:`~ovos_memory_plugins.storage.engine.VectorStore`).

    Exact search (a scan of the namespace's rows of the space) below ``HNSW_MIN_VECTORS``; from
    there on, through an HNSW expression index per dimension (``embedding::vector(N)``, partial
    on ``dims = N``), built once with ``CREATE INDEX CONCURRENTLY`` in the background under an
    advisory lock, and searched with pgvector's iterative scan so the namespace filter cannot
    starve it.
    """

    #: Its ``search`` takes ``window=``: a ``(since, until)`` range of the documents' ``created``.
    filters_time: ClassVar[bool] = True

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace
        self.path = "pgvector"  # the search path, as the SQLite store names "numpy" or "sqlite-vec"
        self._counts: dict[str, tuple[float, int]] = {}
        self._ann: set[int] = set()
        self._building = False

    def dimension(self, space: str) -> int | None:
        """The dimension recorded for a space, or None."""
        value = self.db.scalar(
            "SELECT dims FROM memory_vector_spaces WHERE namespace = %s AND space = %s", (self.namespace, space)
        )
        return int(value) if value is not None else None

    def put_vectors(self, space: str, items: Sequence[tuple[str, Vector]]) -> int:
        """Store vectors for existing documents (by doc id); return how many were stored."""
        import numpy as np

        if not items:
            return 0
        vecs = [(d, np.asarray(v, dtype=np.float32).ravel()) for d, v in items]
        dims = {int(v.shape[0]) for _, v in vecs}
        if len(dims) != 1:
            raise StorageError(f"vectors of one batch differ in dimension: {sorted(dims)}")
        dim = dims.pop()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO memory_vector_spaces (namespace, space, dims, created) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (namespace, space) DO NOTHING",
                (self.namespace, space, dim, time.time()),
            )
            known_dim = conn.execute(
                "SELECT dims FROM memory_vector_spaces WHERE namespace = %s AND space = %s", (self.namespace, space)
            ).fetchone()
            if known_dim is not None and int(known_dim[0]) != dim:
                raise StorageError(f"space {space!r} holds {known_dim[0]}-dimensional vectors, not {dim}")
            rows = conn.execute(
                "SELECT doc_id, id, session_id FROM memory_documents WHERE namespace = %s AND doc_id = ANY(%s)",
                (self.namespace, [d for d, _ in vecs]),
            ).fetchall()
            known = {r[0]: (int(r[1]), r[2]) for r in rows}
            data = [(known[d][0], space, self.namespace, known[d][1], dim, v) for d, v in vecs if d in known]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memory_vectors (id, space, namespace, session_id, dims, embedding)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id, space) DO UPDATE"
                    " SET embedding = excluded.embedding, dims = excluded.dims, session_id = excluded.session_id",
                    data,
                )
        self._counts.pop(space, None)
        return len(data)

    def missing(self, space: str, limit: int = 64) -> list[tuple[str, str]]:
        """Up to ``limit`` ``(doc_id, text)`` without a vector in ``space``, oldest first."""
        rows = self.db.query(
            "SELECT d.doc_id, d.content FROM memory_documents d WHERE d.namespace = %s AND NOT EXISTS ("
            " SELECT 1 FROM memory_vectors v WHERE v.id = d.id AND v.space = %s) ORDER BY d.id LIMIT %s",
            (self.namespace, space, int(limit)),
        )
        return [(r[0], r[1]) for r in rows]

    def missing_count(self, space: str) -> int:
        """How many documents have no vector in ``space``."""
        value = self.db.scalar(
            "SELECT count(*) FROM memory_documents d WHERE d.namespace = %s AND NOT EXISTS ("
            " SELECT 1 FROM memory_vectors v WHERE v.id = d.id AND v.space = %s)",
            (self.namespace, space),
        )
        return int(value or 0)

    def spaces(self) -> dict[str, int]:
        """Vectors stored per space."""
        rows = self.db.query(
            "SELECT s.space, (SELECT count(*) FROM memory_vectors v WHERE v.namespace = s.namespace"
            " AND v.space = s.space) FROM memory_vector_spaces s WHERE s.namespace = %s ORDER BY s.space",
            (self.namespace,),
        )
        return {r[0]: int(r[1]) for r in rows}

    def drop_space(self, space: str) -> int:
        """Delete a space's vectors; return how many went."""
        with self.db.transaction() as conn:
            n = conn.execute(
                "DELETE FROM memory_vectors WHERE namespace = %s AND space = %s", (self.namespace, space)
            ).rowcount
            conn.execute(
                "DELETE FROM memory_vector_spaces WHERE namespace = %s AND space = %s", (self.namespace, space)
            )
        self._counts.pop(space, None)
        return int(n)

    def remove(self, keys: Sequence[int]) -> int:
        """Delete every vector of these document keys (every space); return how many."""
        if not keys:
            return 0
        n = self.db.execute(
            "DELETE FROM memory_vectors WHERE namespace = %s AND id = ANY(%s)", (self.namespace, list(keys))
        )
        self._counts.clear()
        return int(n)

    def remove_all(self) -> int:
        """Delete every vector of the namespace; return how many."""
        with self.db.transaction() as conn:
            n = conn.execute("DELETE FROM memory_vectors WHERE namespace = %s", (self.namespace,)).rowcount
            conn.execute("DELETE FROM memory_vector_spaces WHERE namespace = %s", (self.namespace,))
        self._counts.clear()
        return int(n)

    def iter_vectors(self, space: str, batch: int = 500) -> Iterator[list[tuple[str, Vector]]]:
        """The namespace's vectors of ``space`` as ``(doc_id, vector)``, oldest document first, in
        batches (``storage.migrate`` copies them out)."""
        last = 0
        while True:
            rows = self.db.query(
                "SELECT v.id, d.doc_id, v.embedding FROM memory_vectors v JOIN memory_documents d ON d.id = v.id"
                " WHERE v.namespace = %s AND v.space = %s AND v.id > %s ORDER BY v.id LIMIT %s",
                (self.namespace, space, last, int(batch)),
            )
            if not rows:
                return
            yield [(r[1], r[2].to_numpy().astype("float32")) for r in rows]
            last = int(rows[-1][0])

    def count(self, space: str) -> int:
        """How many vectors the namespace holds in ``space`` (cached for ``STATS_TTL`` s)."""
        now = time.monotonic()
        cached = self._counts.get(space)
        if cached is None or now - cached[0] > STATS_TTL:
            value = self.db.scalar(
                "SELECT count(*) FROM memory_vectors WHERE namespace = %s AND space = %s", (self.namespace, space)
            )
            cached = (now, int(value or 0))
            self._counts[space] = cached
        return cached[1]

    def search(
        self,
        space: str,
        query: Vector,
        k: int,
        session_id: str | None = None,
        *,
        window: tuple[float, float] | None = None,
    ) -> list[tuple[str, float]]:
        """``(doc_id, cosine similarity)`` of the ``k`` nearest, best first; ties: smaller doc id;
        with ``window``, only documents made in ``[since, until)`` (their ``created``)."""
        import numpy as np

        if k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).ravel()
        dims = int(q.shape[0])
        session_filter = " AND v.session_id = %(session)s" if session_id is not None else ""
        params: dict[str, Any] = {"ns": self.namespace, "space": space, "q": q, "k": int(k), "session": session_id}
        if window is not None:
            session_filter += " AND d.namespace = %(ns)s AND d.created >= %(since)s AND d.created < %(until)s"
            params["since"], params["until"] = float(window[0]), float(window[1])
        large = self.count(space) >= HNSW_MIN_VECTORS
        # a window of time is searched exactly, its documents found by their `created`: an HNSW
        # scan filtered to a few days of a large namespace can stop (hnsw.max_scan_tuples) before
        # it reaches them
        if large and window is None and self._has_ann(dims):
            with self.db.transaction() as conn:
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                conn.execute("SET LOCAL hnsw.ef_search = 100")
                rows = conn.execute(
                    "SELECT doc_id, score FROM ("
                    f" SELECT d.doc_id, 1 - (v.embedding::vector({dims}) <=> %(q)s) AS score"
                    " FROM memory_vectors v JOIN memory_documents d ON d.id = v.id"
                    f" WHERE v.dims = {dims} AND v.namespace = %(ns)s AND v.space = %(space)s"
                    + session_filter
                    + f" ORDER BY v.embedding::vector({dims}) <=> %(q)s LIMIT %(k)s) AS hits"
                    " ORDER BY score DESC, doc_id",
                    params,
                ).fetchall()
        else:
            if large:
                self._build_ann_soon(dims)
            rows = self.db.query(
                "SELECT d.doc_id, 1 - (v.embedding <=> %(q)s) AS score"
                " FROM memory_vectors v JOIN memory_documents d ON d.id = v.id"
                " WHERE v.namespace = %(ns)s AND v.space = %(space)s"
                + session_filter
                + " ORDER BY v.embedding <=> %(q)s, d.doc_id LIMIT %(k)s",
                params,
            )
        return [(r[0], float(r[1])) for r in rows]

    def _has_ann(self, dims: int) -> bool:
        if dims in self._ann:
            return True
        valid = self.db.scalar(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s",
            (f"memory_vectors_hnsw_{dims}",),
        )
        if valid:
            self._ann.add(dims)
        return bool(valid)

    def _build_ann_soon(self, dims: int) -> None:
        if self._building:
            return
        self._building = True
        threading.Thread(target=self.build_ann_index, args=(dims,), name="ovos-memory-hnsw", daemon=True).start()

    def build_ann_index(self, dims: int, maintenance_work_mem: str | None = None) -> bool:
        """Build the HNSW index for ``dims``-dimensional vectors unless it exists; True when valid.

        ``CREATE INDEX CONCURRENTLY`` (writers go on), without a statement deadline, one process
        at a time (an advisory lock; the others return at once). Give it ``maintenance_work_mem``
        (``"1GB"``) for a fast build: see docs/postgres.md.
        """
        name = f"memory_vectors_hnsw_{int(dims)}"
        try:
            with self.db._pooled() as conn:
                got = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (name,)).fetchone()
                if not got or not got[0]:
                    return False
                try:
                    conn.execute("SET statement_timeout = 0")
                    if maintenance_work_mem:
                        conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (maintenance_work_mem,))
                    invalid = conn.execute(
                        "SELECT NOT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
                        " WHERE c.relname = %s",
                        (name,),
                    ).fetchone()
                    if invalid and invalid[0]:
                        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                    conn.execute(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memory_vectors"
                        f" USING hnsw ((embedding::vector({int(dims)})) vector_cosine_ops) WHERE dims = {int(dims)}"
                    )
                finally:
                    conn.execute("RESET statement_timeout")
                    conn.execute("RESET maintenance_work_mem")
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (name,))
        except Exception as exc:
            LOG.warning("PostgreSQL: could not build the HNSW index %s (%s); exact search goes on", name, exc)
            return False
        finally:
            self._building = False
        return self._has_ann(dims)


# -- the storage bundle ----------------------------------------------------------------------


class PgStorage(Storage):
    """:class:`~ovos_memory_plugins.storage.seam.Storage` for one namespace of a PostgreSQL database."""

    db: PgDatabase
    #: A database several servers share: notes, undo history and markers live in it, not under ``root``.
    local: ClassVar[bool] = False
    #: Notes, sticky notes and summaries are tables of the database (``storage.tables``).
    table_stores: ClassVar[bool] = True

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        db.migrate("memory", MIGRATIONS)
        super().__init__(
            db=db,
            documents=PgDocuments(db, namespace),
            history=PgHistory(db, namespace),
            keyword_factory=self._keyword,
            vector_factory=self._vectors,
        )
        self.namespace = namespace

    def _keyword(self, settings: KeywordSettings) -> PgKeywordIndex:
        return PgKeywordIndex(self.db, self.namespace, settings)

    def _vectors(self, search: str = "auto") -> PgVectorStore:
        return PgVectorStore(self.db, self.namespace)

    def rewrites(self, root: Path) -> PgRewrites:
        """The notes' previous bodies and last dream of the namespace, in the database (``root`` unused)."""
        from ovos_memory_plugins.storage.postgres.notes import PgRewrites

        return PgRewrites(self.db, self.namespace)

    def retire_indexes(self, active: Iterable[str]) -> None:
        """Drop the namespace's rows of indexes this memory no longer maintains (``"keyword"``,
        ``"vector"``), so no copy of a text stays in an index nobody updates on delete."""
        keep = set(active)
        with self.db.transaction() as conn:
            if "keyword" not in keep:
                conn.execute("DELETE FROM memory_keywords WHERE namespace = %s", (self.namespace,))
                conn.execute("DELETE FROM memory_keyword_postings WHERE namespace = %s", (self.namespace,))
                conn.execute(_DF_DELETE_NAMESPACE, (self.namespace, self.namespace))
            if "vector" not in keep:
                conn.execute("DELETE FROM memory_vectors WHERE namespace = %s", (self.namespace,))
                conn.execute("DELETE FROM memory_vector_spaces WHERE namespace = %s", (self.namespace,))


def open_storage(location: str, *, namespace: str = DEFAULT_NAMESPACE, **options: Any) -> PgStorage:
    """Open one memory (``namespace``) of the PostgreSQL database at ``location`` (a URL).

    ``options``: ``connect_timeout``, ``statement_timeout``, ``pool_timeout``,
    ``max_connections`` (see :class:`PgDatabase`); SQLite-only options (``vector_extension``,
    ``legacy``) are ignored. Raises :class:`StorageError` when the database cannot be used.
    """
    known = {"connect_timeout", "statement_timeout", "pool_timeout", "max_connections"}
    db = PgDatabase(location, **{k: v for k, v in options.items() if k in known})
    try:
        return PgStorage(db, namespace)
    except Exception:
        db.close()
        raise
