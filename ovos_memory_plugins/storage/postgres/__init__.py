"""The PostgreSQL engine of the storage seam (:mod:`ovos_memory_plugins.storage.seam`).

* :mod:`~ovos_memory_plugins.storage.postgres.database`: the connection pool (``PgDatabase``),
  the namespace lexeme, the text of errors;
* :mod:`~ovos_memory_plugins.storage.postgres.schema`: the migrations of the memory tables;
* :mod:`~ovos_memory_plugins.storage.postgres.engine`: the documents table (``PgDocuments``),
  ``PgStorage`` and ``open_storage``;
* :mod:`~ovos_memory_plugins.storage.postgres.history`: ``PgHistory``;
* :mod:`~ovos_memory_plugins.storage.postgres.keyword`: ``PgKeywordIndex``;
* :mod:`~ovos_memory_plugins.storage.postgres.vector`: ``PgVectorStore``;
* :mod:`~ovos_memory_plugins.storage.postgres.check`: ``check_server`` (``ovos-memory check``);
* :mod:`~ovos_memory_plugins.storage.postgres.notes`: the notes, sticky-note and summary tables.

``storage.postgres`` was one module (then ``database``): its names are re-exported here for one
release, so ``from ovos_memory_plugins.storage.postgres import PgDatabase`` keeps working.
psycopg is imported only when a connection is made, as before.
"""

from ovos_memory_plugins.storage.postgres.check import check_server
from ovos_memory_plugins.storage.postgres.database import (
    COMPACT_DEADLINE_S,
    PROBE_INTERVAL_S,
    STATS_TTL,
    PgDatabase,
    PgMigration,
    is_postgres_url,
    namespace_lexeme,
    redact_url,
    tsquery_literal,
)
from ovos_memory_plugins.storage.postgres.engine import DEFAULT_NAMESPACE, PgDocuments, PgStorage, open_storage
from ovos_memory_plugins.storage.postgres.history import PgHistory
from ovos_memory_plugins.storage.postgres.keyword import PgKeywordIndex
from ovos_memory_plugins.storage.postgres.schema import MIGRATIONS
from ovos_memory_plugins.storage.postgres.vector import HNSW_MIN_VECTORS, PgVectorStore

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
