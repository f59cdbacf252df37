"""The PostgreSQL engine: one database shared by many processes, every row keyed by namespace.

Configured with ``"database": "postgresql://user:password@host:port/dbname"`` (libpq's URL; the
password may also come from ``PGPASSWORD`` or ``~/.pgpass``, and every other ``PG*`` variable
libpq reads applies too). Needs the optional extra ``postgres`` (psycopg 3, psycopg_pool,
pgvector) and, in the database, the ``vector`` extension (pgvector).

* :class:`PgDatabase`: a pool of connections (psycopg_pool) with a deadline on everything: the
  connect timeout, the pool's wait for a free connection, and ``statement_timeout`` /
  ``lock_timeout`` / ``idle_in_transaction_session_timeout`` on every connection. An unreachable
  server or a missing extension raises one :class:`~ovos_memory_plugins.errors.StorageError`
  at open, with the URL (password masked) and what to do.
* Versioned, append-only migrations (:class:`PgMigration`), applied under
  ``pg_advisory_xact_lock`` so many processes starting at once apply each step exactly once.
* :class:`PgHistoryStore`: the short-term history, exchange-id chains and the document catalogue
  (same methods as the SQLite :class:`~ovos_memory_plugins.storage.history.HistoryStore`).
* :class:`PgKeywordIndex`: documents plus a ``tsvector`` built from OUR tokens
  (:func:`ovos_memory_plugins.text.tokenize` output, so CJK bigrams, folding, stemming and stop
  words carry over; the ``simple`` configuration never re-parses them), GIN-indexed, ranked with
  the same BM25 formula SQLite FTS5's ``bm25()`` uses (column weights included), over the
  namespace's own document count and frequencies.
* :class:`PgVectorIndex`: pgvector, exact (a scan of the namespace's rows) for small
  namespaces, HNSW (an expression index per dimension) once a namespace is large.

Tables are shared by every memory in the database: ``namespace`` (and ``session_id``) are
indexed columns, and every statement filters on the namespace, so one memory never reads
another's rows.
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ovos_memory_plugins.errors import StorageError

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

LOG = logging.getLogger(__name__)

__all__ = [
    "PgDatabase",
    "PgHistoryStore",
    "PgKeywordIndex",
    "PgMigration",
    "PgVectorIndex",
    "is_postgres_url",
    "redact_url",
    "tsquery_literal",
    "tsvector_literal",
]

#: BM25 parameters, as SQLite FTS5's ``bm25()`` fixes them.
BM25_K1 = 1.2
BM25_B = 0.75
#: Namespaces with fewer documents search every query term (as the SQLite engine does).
PRUNE_MIN_DOCUMENTS = 5_000
#: On larger namespaces, query terms are searched rarest first until their documents add up to this.
PRUNE_POSTINGS = 3_000
#: A namespace's vectors are searched through the HNSW index from this many on (exact below).
HNSW_MIN_VECTORS = 20_000
#: tsvector positions stop at this value (PostgreSQL's limit).
MAX_POSITION = 16_383
#: How long cached document counts stay fresh when other processes may write (seconds).
STATS_TTL = 2.0

_URL_RE = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_postgres_url(value: object) -> bool:
    """Whether a ``database`` value names a PostgreSQL server (``postgresql://`` or ``postgres://``)."""
    return isinstance(value, str) and bool(_URL_RE.match(value.strip()))


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for logs and errors)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://***"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


# -- quoting: the one place tsvector and tsquery literals are written ---------------------------


def _lexeme(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(columns: Sequence[Sequence[str]]) -> str:
    """A ``tsvector`` literal holding exactly these terms, column by column.

    Column 0 is weight A, column 1 weight B, column 2 weight C, column 3 weight D. Positions run
    on across columns (so a term's count in a column is its number of positions with that
    column's label). Nothing is re-parsed: the terms are our tokenizer's, as they are.
    """
    labels = "ABCD"
    positions: dict[str, list[str]] = {}
    pos = 0
    for col, terms in enumerate(columns[:4]):
        for term in terms:
            if not term:
                continue
            pos = min(pos + 1, MAX_POSITION)
            positions.setdefault(term, []).append(f"{pos}{labels[col]}")
    return " ".join(f"{_lexeme(t)}:{','.join(p)}" for t, p in positions.items())


def tsquery_literal(terms: Iterable[str]) -> str:
    """A ``tsquery`` that matches a document holding any of the terms (each a literal lexeme)."""
    return " | ".join(_lexeme(t) for t in dict.fromkeys(terms) if t)


# -- the database ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PgMigration:
    """One schema step. ``name`` is recorded once applied; never rename or reorder applied steps."""

    name: str
    apply: Callable[[psycopg.Connection[Any]], None]


class PgDatabase:
    """A pool of connections to one PostgreSQL database, every statement under a deadline.

    Args:
        url: ``postgresql://user:password@host:port/dbname``; anything libpq accepts.
        connect_timeout: seconds to wait for the server when connecting (and at open).
        statement_timeout: seconds any one statement may run.
        pool_timeout: seconds to wait for a free connection of the pool.
        max_connections: the pool's size (per process).
        vector: require the ``vector`` extension (created when missing and allowed).

    Raises:
        StorageError: the server cannot be reached, refuses us, or lacks the extension; the
            message names the URL (password masked) and what to do.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        statement_timeout: float = 10.0,
        pool_timeout: float = 10.0,
        max_connections: int = 4,
        vector: bool = True,
    ) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise StorageError(
                "a postgresql:// database needs the 'postgres' extra: pip install 'ovos-memory-plugins[postgres]'"
            ) from exc
        self.url = url
        self.path = redact_url(url)
        self.statement_timeout = statement_timeout
        self.pool_timeout = pool_timeout
        self.lock = threading.RLock()
        self._closed = False
        ms = max(int(statement_timeout * 1000), 1)
        self._kwargs: dict[str, Any] = {
            "connect_timeout": max(math.ceil(connect_timeout), 1),
            "application_name": "ovos-memory",
            "options": (
                f"-c statement_timeout={ms} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={ms * 3}"
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
                version = conn.info.server_version
                if vector:
                    self._ensure_vector(conn)
        except psycopg.Error as exc:
            raise StorageError(f"cannot use PostgreSQL at {self.path}: {_one_line(exc)}") from exc
        self.server_version = version
        self.vector = vector
        configure = _register_vector if vector else None
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            kwargs=self._kwargs,
            min_size=1,
            max_size=max(max_connections, 1),
            timeout=pool_timeout,
            open=False,
            configure=configure,
            check=ConnectionPool.check_connection,
            reconnect_timeout=max(connect_timeout * 6, 30.0),
            name="ovos-memory",
        )
        try:
            self.pool.open(wait=True, timeout=max(connect_timeout * 2, 1.0))
        except Exception as exc:
            self.pool.close()
            raise StorageError(f"cannot open a connection pool to {self.path}: {_one_line(exc)}") from exc

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
                how = (
                    "install pgvector on the server (the postgresql-NN-pgvector package), then CREATE EXTENSION vector;"
                )
            raise StorageError(
                f"the pgvector extension is missing in {conn.info.dbname}: {how} ({_one_line(exc)})"
            ) from exc

    # -- execution ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit mode (each statement its own transaction)."""
        import psycopg
        from psycopg_pool import PoolTimeout

        if self._closed:
            raise StorageError(f"database {self.path} is closed")
        try:
            with self.pool.connection(timeout=self.pool_timeout) as conn:
                conn.autocommit = True
                yield conn
        except PoolTimeout as exc:
            raise StorageError(f"no connection to {self.path} within {self.pool_timeout:g} s: {exc}") from exc
        except psycopg.errors.QueryCanceled as exc:
            raise StorageError(f"a statement on {self.path} ran past its deadline: {_one_line(exc)}") from exc
        except psycopg.OperationalError as exc:
            raise StorageError(f"PostgreSQL at {self.path} failed: {_one_line(exc)}") from exc

    @contextlib.contextmanager
    def atomic(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on one pooled connection: commits on success, rolls back on error."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run one statement in its own transaction; return the affected row count."""
        with self.connection() as conn:
            return conn.execute(sql, params).rowcount

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

    def size_bytes(self, namespace: str | None = None) -> int:
        """Bytes the memory tables take on the server (all namespaces: they share tables)."""
        return int(
            self.scalar(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " WHERE c.relkind = 'r' AND c.relname LIKE 'memory\\_%%'"
            )
            or 0
        )

    def close(self) -> None:
        """Close the pool (idempotent)."""
        with self.lock:
            if not self._closed:
                self._closed = True
                self.pool.close(timeout=2.0)


def _register_vector(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


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
        " metadata jsonb NOT NULL DEFAULT '{}',"
        " created double precision NOT NULL,"
        " UNIQUE (namespace, doc_id))",
        "CREATE INDEX memory_documents_session ON memory_documents (namespace, session_id, id)",
        # the keyword index: our tokens as a tsvector (A body, B head, C context), its token count
        "CREATE TABLE memory_keywords ("
        " id bigint PRIMARY KEY REFERENCES memory_documents (id) ON DELETE CASCADE,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " terms tsvector NOT NULL,"
        " length integer NOT NULL,"
        " ctx_id bigint)",
        "CREATE INDEX memory_keywords_terms ON memory_keywords USING gin (terms)",
        "CREATE INDEX memory_keywords_namespace ON memory_keywords (namespace, session_id)",
        "CREATE INDEX memory_keywords_ctx ON memory_keywords (ctx_id) WHERE ctx_id IS NOT NULL",
        # vectors, one per (embedder space, document)
        "CREATE TABLE memory_vectors ("
        " id bigint NOT NULL REFERENCES memory_documents (id) ON DELETE CASCADE,"
        " space text NOT NULL,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " dims integer NOT NULL,"
        " embedding vector NOT NULL,"
        " PRIMARY KEY (id, space))",
        "CREATE INDEX memory_vectors_namespace ON memory_vectors (namespace, space, session_id)",
        # short-term history, exchange-id chains, and the catalogue of backends without sessions
        "CREATE TABLE memory_history ("
        " id bigserial PRIMARY KEY,"
        " namespace text NOT NULL,"
        " session_id text NOT NULL,"
        " role text NOT NULL,"
        " content text NOT NULL,"
        " created double precision NOT NULL)",
        "CREATE INDEX memory_history_session ON memory_history (namespace, session_id, id)",
        "CREATE TABLE memory_sessions ("
        " namespace text NOT NULL, session_id text NOT NULL, last_exchange_id text NOT NULL,"
        " PRIMARY KEY (namespace, session_id))",
        "CREATE TABLE memory_catalogue ("
        " namespace text NOT NULL, doc_id text NOT NULL, session_id text NOT NULL,"
        " metadata jsonb NOT NULL, created double precision NOT NULL,"
        " PRIMARY KEY (namespace, doc_id))",
        "CREATE INDEX memory_catalogue_session ON memory_catalogue (namespace, session_id)",
    ):
        conn.execute(sql)


MIGRATIONS = [PgMigration("0001_documents_keywords_vectors_history", _v1)]


def open_database(url: str, **kwargs: Any) -> PgDatabase:
    """Open ``url`` and bring its schema up to date (raises :class:`StorageError`)."""
    db = PgDatabase(url, **kwargs)
    try:
        db.migrate("core", MIGRATIONS)
    except Exception:
        db.close()
        raise
    return db


def _json(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, ensure_ascii=False, default=str)


def _loads(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        loaded = json.loads(value)
        return loaded if isinstance(loaded, dict) else {}
    return {}


@dataclass(frozen=True)
class StoredMessage:
    """A message read back from the history store."""

    role: str
    content: str


class PgHistoryStore:
    """History, exchange-id chains and the document catalogue of one namespace."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace

    def append(
        self, session_id: str, messages: Sequence[tuple[str, str]], keep: int, last_exchange_id: str | None = None
    ) -> None:
        """Append ``(role, content)`` messages and trim the session to its newest ``keep``."""
        ns, now = self.namespace, time.time()
        with self.db.atomic() as conn:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memory_history (namespace, session_id, role, content, created)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    [(ns, session_id, role, content, now) for role, content in messages],
                )
            if last_exchange_id is not None:
                conn.execute(
                    "INSERT INTO memory_sessions (namespace, session_id, last_exchange_id) VALUES (%s, %s, %s)"
                    " ON CONFLICT (namespace, session_id) DO UPDATE SET last_exchange_id = excluded.last_exchange_id",
                    (ns, session_id, last_exchange_id),
                )
            conn.execute(
                "DELETE FROM memory_history WHERE namespace = %s AND session_id = %s AND id <= ("
                " SELECT id FROM memory_history WHERE namespace = %s AND session_id = %s"
                " ORDER BY id DESC LIMIT 1 OFFSET %s)",
                (ns, session_id, ns, session_id, max(keep, 0)),
            )

    def recent(self, session_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a session, oldest first."""
        rows = self.db.query(
            "SELECT role, content FROM memory_history WHERE namespace = %s AND session_id = %s"
            " ORDER BY id DESC LIMIT %s",
            (self.namespace, session_id, max(limit, 0)),
        )
        return [StoredMessage(r[0], r[1]) for r in reversed(rows)]

    def last_exchange_id(self, session_id: str) -> str:
        """The id of the session's newest exchange document, ``""`` when it has none."""
        value = self.db.scalar(
            "SELECT last_exchange_id FROM memory_sessions WHERE namespace = %s AND session_id = %s",
            (self.namespace, session_id),
        )
        return str(value) if value is not None else ""

    def sessions(self) -> list[str]:
        """Every session that has history."""
        rows = self.db.query(
            "SELECT DISTINCT session_id FROM memory_history WHERE namespace = %s ORDER BY session_id",
            (self.namespace,),
        )
        return [r[0] for r in rows]

    def clear_session(self, session_id: str) -> int:
        """Delete a session's history; return how many messages went."""
        with self.db.atomic() as conn:
            n = conn.execute(
                "DELETE FROM memory_history WHERE namespace = %s AND session_id = %s", (self.namespace, session_id)
            ).rowcount
            conn.execute(
                "DELETE FROM memory_sessions WHERE namespace = %s AND session_id = %s", (self.namespace, session_id)
            )
        return int(n)

    def clear_all(self) -> int:
        """Delete all of the namespace's history; return how many messages went."""
        with self.db.atomic() as conn:
            n = conn.execute("DELETE FROM memory_history WHERE namespace = %s", (self.namespace,)).rowcount
            conn.execute("DELETE FROM memory_sessions WHERE namespace = %s", (self.namespace,))
        return int(n)

    def message_count(self) -> int:
        """How many messages the history holds."""
        return int(self.db.scalar("SELECT count(*) FROM memory_history WHERE namespace = %s", (self.namespace,)) or 0)

    # -- document catalogue ------------------------------------------------------------------

    def put_document(self, doc_id: str, session_id: str, metadata: dict[str, Any]) -> None:
        """Record (or replace) a document's session and metadata."""
        self.db.execute(
            "INSERT INTO memory_catalogue (namespace, doc_id, session_id, metadata, created)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, doc_id) DO UPDATE"
            " SET session_id = excluded.session_id, metadata = excluded.metadata",
            (self.namespace, doc_id, session_id, _json(metadata), time.time()),
        )

    def documents(self, doc_ids: Iterable[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """``doc_id -> (session_id, metadata)`` for the known ids among ``doc_ids``."""
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return {}
        rows = self.db.query(
            "SELECT doc_id, session_id, metadata FROM memory_catalogue WHERE namespace = %s AND doc_id = ANY(%s)",
            (self.namespace, ids),
        )
        return {r[0]: (r[1], _loads(r[2])) for r in rows}

    def session_documents(self, session_id: str) -> list[str]:
        """The ids of a session's documents."""
        rows = self.db.query(
            "SELECT doc_id FROM memory_catalogue WHERE namespace = %s AND session_id = %s",
            (self.namespace, session_id),
        )
        return [r[0] for r in rows]

    def all_documents(self) -> list[str]:
        """The ids of every catalogued document."""
        return [
            r[0] for r in self.db.query("SELECT doc_id FROM memory_catalogue WHERE namespace = %s", (self.namespace,))
        ]

    def document_count(self) -> int:
        """How many documents the catalogue holds."""
        return int(self.db.scalar("SELECT count(*) FROM memory_catalogue WHERE namespace = %s", (self.namespace,)) or 0)

    def drop_documents(self, doc_ids: Iterable[str]) -> None:
        """Forget catalogue rows."""
        ids = list(doc_ids)
        if ids:
            self.db.execute(
                "DELETE FROM memory_catalogue WHERE namespace = %s AND doc_id = ANY(%s)", (self.namespace, ids)
            )


# -- documents and the keyword index ---------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """One search result: the document and its score (higher is better)."""

    doc_id: str
    session_id: str
    content: str
    metadata: dict[str, Any]
    score: float


class PgDocuments:
    """The namespace's rows of ``memory_documents``: the one documents table its indexes share."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace

    def put(
        self, conn: psycopg.Connection[Any], doc_id: str, text: str, session_id: str, metadata: dict[str, Any]
    ) -> tuple[int, bool]:
        """Insert or replace a document inside the caller's transaction; ``(row id, was new)``."""
        row = conn.execute(
            "INSERT INTO memory_documents (namespace, doc_id, session_id, content, metadata, created)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, doc_id) DO UPDATE"
            " SET session_id = excluded.session_id, content = excluded.content, metadata = excluded.metadata"
            " RETURNING id, (xmax = 0)",
            (self.namespace, doc_id, session_id, text, _json(metadata), time.time()),
        ).fetchone()
        assert row is not None
        return int(row[0]), bool(row[1])

    def get(self, doc_ids: Sequence[str]) -> dict[str, tuple[str, str, dict[str, Any]]]:
        """``doc_id -> (text, session_id, metadata)`` for the known ids."""
        if not doc_ids:
            return {}
        rows = self.db.query(
            "SELECT doc_id, content, session_id, metadata FROM memory_documents WHERE namespace = %s"
            " AND doc_id = ANY(%s)",
            (self.namespace, list(doc_ids)),
        )
        return {r[0]: (r[1], r[2], _loads(r[3])) for r in rows}

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Delete documents (their keyword and vector rows go with them), in one transaction."""
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return 0
        with self.db.atomic() as conn:
            return int(
                conn.execute(
                    "DELETE FROM memory_documents WHERE namespace = %s AND doc_id = ANY(%s)", (self.namespace, ids)
                ).rowcount
            )

    def delete_all(self) -> int:
        """Delete every document of the namespace, in one transaction."""
        with self.db.atomic() as conn:
            return int(conn.execute("DELETE FROM memory_documents WHERE namespace = %s", (self.namespace,)).rowcount)

    def session_ids(self, session_id: str) -> list[str]:
        """The ids of a session's documents."""
        rows = self.db.query(
            "SELECT doc_id FROM memory_documents WHERE namespace = %s AND session_id = %s ORDER BY id",
            (self.namespace, session_id),
        )
        return [r[0] for r in rows]

    def count(self) -> int:
        """How many documents the namespace holds."""
        return int(self.db.scalar("SELECT count(*) FROM memory_documents WHERE namespace = %s", (self.namespace,)) or 0)

    def session_count(self) -> int:
        """How many sessions have documents."""
        return int(
            self.db.scalar(
                "SELECT count(DISTINCT session_id) FROM memory_documents WHERE namespace = %s", (self.namespace,)
            )
            or 0
        )

    def iter(self, page: int = 500) -> Iterator[dict[str, Any]]:
        """Every document, oldest first, as ``{"id", "text", "session_id", "metadata"}``, in pages."""
        last = 0
        while True:
            rows = self.db.query(
                "SELECT id, doc_id, content, session_id, metadata FROM memory_documents"
                " WHERE namespace = %s AND id > %s ORDER BY id LIMIT %s",
                (self.namespace, last, page),
            )
            if not rows:
                return
            for r in rows:
                yield {"id": r[1], "text": r[2], "session_id": r[3], "metadata": _loads(r[4])}
            last = int(rows[-1][0])


class PgKeywordIndex:
    """Keyword recall over ``memory_keywords``: our tokens in a GIN-indexed ``tsvector``, BM25-ranked.

    A document's terms come in up to three columns (body, head, context), weighted like FTS5's
    ``bm25(fts, 1.0, head_weight, context_weight)``: a term's frequency in a document is the
    sum of its column weights, the length is all of its tokens, and IDF, average length and
    document count are the namespace's.

    Args:
        db: the database.
        namespace: the memory.
        weights: the weight of columns A, B, C (body, head, context).
    """

    def __init__(self, db: PgDatabase, namespace: str, weights: Sequence[float] = (1.0, 1.0, 0.4)) -> None:
        self.db = db
        self.namespace = namespace
        self.documents = PgDocuments(db, namespace)
        self.weights = tuple(float(w) for w in weights) + (1.0,) * (4 - len(weights))
        self._stats: tuple[float, int, float] | None = None
        self._df: dict[str, tuple[int, int]] = {}
        self._writes = 0

    # -- writing -----------------------------------------------------------------------------

    def put(
        self,
        doc_id: str,
        text: str,
        session_id: str,
        metadata: dict[str, Any],
        columns: Sequence[Sequence[str]],
        *,
        context_from_previous: bool = False,
    ) -> None:
        """Store (or replace) a document and its terms in one transaction.

        Args:
            columns: the terms of the body, the head (date, speaker) and, when
                ``context_from_previous`` is false, the context.
            context_from_previous: a dialogue turn: its context column is the body terms of the
                session's previous document (looked up in the same statement), as the SQLite
                engine does.
        """
        cols = [list(c) for c in columns]
        while len(cols) < 3:
            cols.append([])
        with self.db.atomic() as conn:
            row_id, new = self.documents.put(conn, doc_id, text, session_id, metadata)
            ctx_id: int | None = None
            if new and context_from_previous:
                prev = conn.execute(
                    "SELECT k.id, d.content FROM memory_keywords k JOIN memory_documents d ON d.id = k.id"
                    " WHERE k.namespace = %s AND k.session_id = %s AND k.id < %s ORDER BY k.id DESC LIMIT 1",
                    (self.namespace, session_id, row_id),
                ).fetchone()
                if prev is not None:
                    ctx_id = int(prev[0])
                    cols[2] = list(_body_terms_of(prev[1]))
            elif not new:
                old = conn.execute("SELECT ctx_id FROM memory_keywords WHERE id = %s", (row_id,)).fetchone()
                if old is not None and old[0] is not None:
                    ctx_id = int(old[0])
                    prev_text = conn.execute("SELECT content FROM memory_documents WHERE id = %s", (ctx_id,)).fetchone()
                    cols[2] = list(_body_terms_of(prev_text[0])) if prev_text else []
            length = sum(len(c) for c in cols[:3])
            conn.execute(
                "INSERT INTO memory_keywords (id, namespace, session_id, terms, length, ctx_id)"
                " VALUES (%s, %s, %s, %s::tsvector, %s, %s) ON CONFLICT (id) DO UPDATE"
                " SET session_id = excluded.session_id, terms = excluded.terms, length = excluded.length,"
                " ctx_id = excluded.ctx_id",
                (row_id, self.namespace, session_id, tsvector_literal(cols), length, ctx_id),
            )
        self._writes += 1

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Delete documents and take their words out of the turns that hold them as context."""
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return 0
        with self.db.atomic() as conn:
            gone = [
                int(r[0])
                for r in conn.execute(
                    "DELETE FROM memory_documents WHERE namespace = %s AND doc_id = ANY(%s) RETURNING id",
                    (self.namespace, ids),
                ).fetchall()
            ]
            if gone:
                # heirs: strip the context column (weight C) of turns whose context was deleted
                conn.execute(
                    "UPDATE memory_keywords SET terms = ts_filter(terms, '{a,b}'),"
                    " length = length(ts_filter(terms, '{a,b}')), ctx_id = NULL WHERE ctx_id = ANY(%s)",
                    (gone,),
                )
        self._writes += 1
        self._df.clear()
        return len(gone)

    def delete_all(self) -> int:
        """Delete every document of the namespace, in one transaction."""
        self._writes += 1
        self._df.clear()
        return self.documents.delete_all()

    # -- searching ---------------------------------------------------------------------------

    def _namespace_stats(self) -> tuple[int, float]:
        """``(document count, average length)`` of the namespace, cached for ``STATS_TTL`` s."""
        now = time.monotonic()
        if self._stats is None or now - self._stats[0] > STATS_TTL or self._writes:
            row = self.db.query(
                "SELECT count(*), coalesce(avg(length), 0) FROM memory_keywords WHERE namespace = %s",
                (self.namespace,),
            )[0]
            self._stats = (now, int(row[0]), float(row[1]))
            self._writes = 0
        return self._stats[1], self._stats[2]

    def _frequencies(self, terms: list[str], n: int) -> dict[str, int]:
        """How many of the namespace's documents hold each term (cached while it grows < 10%)."""
        out: dict[str, int] = {}
        todo: list[str] = []
        for term in terms:
            cached = self._df.get(term)
            if cached is not None and n <= cached[1] * 1.1 and n >= cached[1] * 0.9:
                out[term] = cached[0]
            else:
                todo.append(term)
        if todo:
            rows = self.db.query(
                "SELECT t, (SELECT count(*) FROM memory_keywords k WHERE k.namespace = %s"
                "  AND k.terms @@ q.query) FROM unnest(%s::text[], %s::tsquery[]) AS q(t, query)",
                (self.namespace, todo, [_lexeme(t) for t in todo]),
            )
            if len(self._df) > 50_000:
                self._df.clear()
            for term, freq in rows:
                out[term] = int(freq)
                self._df[term] = (int(freq), n)
        return out

    def search(self, counts: Counter[str], top_k: int, session_id: str | None = None) -> list[Found]:
        """The best ``top_k`` documents for weighted query terms, best first (BM25, as FTS5)."""
        if not counts or top_k <= 0:
            return []
        n, avgdl = self._namespace_stats()
        if n == 0:
            return []
        df = self._frequencies(list(counts), n)
        # another process's deletes may leave a cached frequency above the fresh count
        df = {t: min(f, n) for t, f in df.items()}
        terms = [t for t in counts if df.get(t, 0) > 0]
        if n >= PRUNE_MIN_DOCUMENTS:
            terms = _prune(terms, df, n)
        if not terms:
            return []
        weights = []
        for t in terms:
            idf = math.log((n - df[t] + 0.5) / (df[t] + 0.5))
            weights.append(counts[t] * (idf if idf > 0 else 1e-6))
        wa, wb, wc, wd = self.weights
        session_filter = " AND k.session_id = %(session)s" if session_id is not None else ""
        sql = (
            "WITH q AS (SELECT * FROM unnest(%(terms)s::text[], %(weights)s::float8[]) AS q(term, w)),"
            " cand AS (SELECT k.id, k.terms, k.length FROM memory_keywords k"
            "  WHERE k.namespace = %(ns)s" + session_filter + " AND k.terms @@ %(query)s::tsquery),"
            " scored AS (SELECT c.id, sum(q.w * f.freq * %(k1p)s"
            "   / (f.freq + %(k1)s * (1 - %(b)s + %(b)s * c.length / %(avgdl)s))) AS score"
            "  FROM cand c CROSS JOIN LATERAL ("
            "   SELECT u.lexeme, (SELECT sum(CASE w WHEN 'A' THEN %(wa)s WHEN 'B' THEN %(wb)s"
            "     WHEN 'C' THEN %(wc)s ELSE %(wd)s END) FROM unnest(u.weights) AS w) AS freq"
            "   FROM unnest(c.terms) AS u WHERE u.lexeme = ANY(%(terms)s::text[])) AS f"
            "  JOIN q ON q.term = f.lexeme GROUP BY c.id ORDER BY score DESC, c.id DESC LIMIT %(k)s)"
            " SELECT d.doc_id, d.session_id, d.content, d.metadata, s.score FROM scored s"
            " JOIN memory_documents d ON d.id = s.id ORDER BY s.score DESC, s.id DESC"
        )
        rows = self.db.query(
            sql,
            {
                "terms": terms,
                "weights": weights,
                "ns": self.namespace,
                "session": session_id,
                "query": tsquery_literal(terms),
                "k1": BM25_K1,
                "k1p": BM25_K1 + 1,
                "b": BM25_B,
                "avgdl": max(avgdl, 1e-9),
                "wa": wa,
                "wb": wb,
                "wc": wc,
                "wd": wd,
                "k": int(top_k),
            },
        )
        return [Found(r[0], r[1], r[2], _loads(r[3]), float(r[4])) for r in rows]

    def count(self) -> int:
        """How many documents the keyword index holds for the namespace."""
        return int(self.db.scalar("SELECT count(*) FROM memory_keywords WHERE namespace = %s", (self.namespace,)) or 0)


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


def _body_terms_of(text: str) -> list[str]:
    """The body terms of a stored text (the context a following turn carries)."""
    from ovos_memory_plugins.text import tokenize

    head_re = re.compile(r"^\s*((?:\[[^\]\n]{0,80}\]\s*)*)(?:([^\s:\[\]][^:\n]{0,40}?):(?=\s))?")
    m = head_re.match(text)
    body = text
    if m is not None:
        label = m.group(2)
        if label is not None and (len(label.split()) > 4 or label.strip() in ("Q", "A")):
            label = None
        if m.group(1) or label is not None:
            body = text[(m.end() if label is not None else m.end(1)) :].strip()
    return tokenize(body, unigrams=True)


# -- vectors ---------------------------------------------------------------------------------


class PgVectorIndex:
    """Nearest neighbours with pgvector over ``memory_vectors`` (cosine similarity).

    Exact for small namespaces (a scan of the namespace's rows); from ``HNSW_MIN_VECTORS`` on,
    through an HNSW expression index per dimension (``embedding::vector(N)``, partial on
    ``dims = N``), built once (``CREATE INDEX CONCURRENTLY``, in the background, under an
    advisory lock) and searched with pgvector's iterative scan so filters do not starve it.
    """

    def __init__(self, db: PgDatabase, namespace: str, space: str) -> None:
        self.db = db
        self.namespace = namespace
        self.space = space
        self._count: tuple[float, int] | None = None
        self._ann: set[int] = set()
        self._building = False

    def put(self, items: Sequence[tuple[str, Sequence[float]]]) -> int:
        """Store vectors for existing documents (by doc id); return how many documents matched."""
        if not items:
            return 0
        import numpy as np

        ids = [d for d, _ in items]
        vecs = [np.asarray(v, dtype=np.float32) for _, v in items]
        with self.db.atomic() as conn:
            rows = conn.execute(
                "SELECT doc_id, id, session_id FROM memory_documents WHERE namespace = %s AND doc_id = ANY(%s)",
                (self.namespace, ids),
            ).fetchall()
            known = {r[0]: (int(r[1]), r[2]) for r in rows}
            data = [
                (known[d][0], self.space, self.namespace, known[d][1], int(v.shape[0]), v)
                for d, v in zip(ids, vecs, strict=True)
                if d in known
            ]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memory_vectors (id, space, namespace, session_id, dims, embedding)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id, space) DO UPDATE"
                    " SET embedding = excluded.embedding, dims = excluded.dims, session_id = excluded.session_id",
                    data,
                )
        self._count = None
        return len(data)

    def count(self) -> int:
        """How many vectors the namespace holds in this space (cached for ``STATS_TTL`` s)."""
        now = time.monotonic()
        if self._count is None or now - self._count[0] > STATS_TTL:
            n = self.db.scalar(
                "SELECT count(*) FROM memory_vectors WHERE namespace = %s AND space = %s", (self.namespace, self.space)
            )
            self._count = (now, int(n or 0))
        return self._count[1]

    def missing(self, limit: int = 64) -> list[tuple[str, str]]:
        """``(doc_id, text)`` of documents without a vector in this space (pending embeddings)."""
        rows = self.db.query(
            "SELECT d.doc_id, d.content FROM memory_documents d WHERE d.namespace = %s AND NOT EXISTS ("
            " SELECT 1 FROM memory_vectors v WHERE v.id = d.id AND v.space = %s) ORDER BY d.id LIMIT %s",
            (self.namespace, self.space, limit),
        )
        return [(r[0], r[1]) for r in rows]

    def search(self, query: Sequence[float], top_k: int, session_id: str | None = None) -> list[Found]:
        """The ``top_k`` documents nearest to ``query``, best first; score = cosine similarity."""
        import numpy as np

        if top_k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        dims = int(q.shape[0])
        session_filter = " AND v.session_id = %(session)s" if session_id is not None else ""
        params = {"ns": self.namespace, "space": self.space, "q": q, "k": int(top_k), "session": session_id}
        large = self.count() >= HNSW_MIN_VECTORS
        if large and self._has_ann(dims):
            with self.db.atomic() as conn:
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                conn.execute("SET LOCAL hnsw.ef_search = 100")
                rows = conn.execute(
                    "SELECT doc_id, session_id, content, metadata, score FROM ("
                    f" SELECT d.doc_id, d.session_id, d.content, d.metadata,"
                    f"  1 - (v.embedding::vector({dims}) <=> %(q)s) AS score"
                    " FROM memory_vectors v JOIN memory_documents d ON d.id = v.id"
                    f" WHERE v.dims = {dims} AND v.namespace = %(ns)s AND v.space = %(space)s" + session_filter + ""
                    f" ORDER BY v.embedding::vector({dims}) <=> %(q)s LIMIT %(k)s) AS hits ORDER BY score DESC",
                    params,
                ).fetchall()
        else:
            if large:
                self._build_ann_soon(dims)
            rows = self.db.query(
                "SELECT d.doc_id, d.session_id, d.content, d.metadata, 1 - (v.embedding <=> %(q)s) AS score"
                " FROM memory_vectors v JOIN memory_documents d ON d.id = v.id"
                " WHERE v.namespace = %(ns)s AND v.space = %(space)s" + session_filter + ""
                " ORDER BY v.embedding <=> %(q)s, v.id LIMIT %(k)s",
                params,
            )
        return [Found(r[0], r[1], r[2], _loads(r[3]), float(r[4])) for r in rows]

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

        Runs ``CREATE INDEX CONCURRENTLY`` (writers go on) without a statement deadline; one
        process at a time (an advisory lock; the others return at once). Set
        ``maintenance_work_mem`` high (``"1GB"``) for a fast build: see ``docs/postgres.md``.
        """
        name = f"memory_vectors_hnsw_{int(dims)}"
        try:
            with self.db.connection() as conn:
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
            LOG.warning("PgVectorIndex: could not build the HNSW index %s (%s); exact search goes on", name, exc)
            return False
        finally:
            self._building = False
        return self._has_ann(dims)
