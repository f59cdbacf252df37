"""The PostgreSQL engine of the storage seam (:mod:`ovos_memory_plugins.storage.seam`).

* :mod:`~ovos_memory_plugins.storage.postgres.database`: the pool, migrations, documents,
  history, keyword index, vector store and ``PgStorage`` (``open_storage``);
* :mod:`~ovos_memory_plugins.storage.postgres.notes`: the notes, sticky-note and summary tables.

``storage.postgres`` was one module (now ``database``): its names are re-exported here for one
release, so ``from ovos_memory_plugins.storage.postgres import PgDatabase`` keeps working.
psycopg is imported only when a connection is made, as before.
"""

from ovos_memory_plugins.storage.postgres.database import (
    COMPACT_DEADLINE_S,
    DEFAULT_NAMESPACE,
    HNSW_MIN_VECTORS,
    MIGRATIONS,
    PROBE_INTERVAL_S,
    STATS_TTL,
    PgDatabase,
    PgDocuments,
    PgHistory,
    PgKeywordIndex,
    PgMigration,
    PgStorage,
    PgVectorStore,
    check_server,
    is_postgres_url,
    namespace_lexeme,
    open_storage,
    redact_url,
    tsquery_literal,
)

__all__ = [
    "COMPACT_DEADLINE_S",
    "DEFAULT_NAMESPACE",
    "HNSW_MIN_VECTORS",
    "MIGRATIONS",
    "PROBE_INTERVAL_S",
    "STATS_TTL",
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
