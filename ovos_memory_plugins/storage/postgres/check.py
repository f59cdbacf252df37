"""The server check of the PostgreSQL engine (``ovos-memory check``, through
:func:`ovos_memory_plugins.storage.registry.check_server`): connect, run one vector query, write
nothing, and name what is wrong."""

from __future__ import annotations

import math

from ovos_memory_plugins.storage.postgres.database import connection_lost, one_line
from ovos_memory_plugins.storage.registry import redact_url

__all__ = ["check_server"]


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
        return [f"cannot connect to PostgreSQL at {path}: {one_line(exc)}"]
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
        if connection_lost(exc, conn):
            return [
                f"the PostgreSQL server at {path} closed the connection while running one vector query"
                f" (pgvector {version}): its backend crashed. A pgvector compiled for another CPU does this"
                " (pgvector's Makefile builds with -march=native unless told `make OPTFLAGS=\"\"`; the server's"
                " log says 'terminated by signal 4: Illegal instruction'): rebuild pgvector on that server's own"
                ' CPU or with OPTFLAGS="" (docs/postgres.md)'
            ]
        if version == "?":
            return [f"the pgvector extension cannot be used in {path}: {one_line(exc)}"]
        return [f"PostgreSQL at {path} could not run a vector query (pgvector {version}): {one_line(exc)}"]
    return []
