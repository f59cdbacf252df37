"""The PostgreSQL engine of the storage seam (:mod:`ovos_memory_plugins.storage.seam`).

* :mod:`~ovos_memory_plugins.storage.postgres.database`: the connection pool (``PgDatabase``),
  the namespace lexeme, the text of errors;
* :mod:`~ovos_memory_plugins.storage.postgres.schema`: the migrations of the memory tables;
* :mod:`~ovos_memory_plugins.storage.postgres.documents`: the documents table (``PgDocuments``);
* :mod:`~ovos_memory_plugins.storage.postgres.engine`: ``PgStorage`` and ``open_storage``;
* :mod:`~ovos_memory_plugins.storage.postgres.history`: ``PgHistory``;
* :mod:`~ovos_memory_plugins.storage.postgres.keyword`: ``PgKeywordIndex``;
* :mod:`~ovos_memory_plugins.storage.postgres.vector`: ``PgVectorStore``;
* :mod:`~ovos_memory_plugins.storage.postgres.check`: ``check_server`` (``ovos-memory check``);
* :mod:`~ovos_memory_plugins.storage.postgres.notes`: the notes, sticky-note and summary tables.

``storage.postgres`` was one module (then ``database``): its names are re-exported here for one
release, so ``from ovos_memory_plugins.storage.postgres import PgDatabase`` keeps working.
psycopg is imported only when a connection is made, as before.
"""

from ovos_memory_plugins.storage.postgres.database import *  # noqa: F403  (the moved names too)
from ovos_memory_plugins.storage.postgres.database import COMPACT_DEADLINE_S, PROBE_INTERVAL_S, STATS_TTL
from ovos_memory_plugins.storage.postgres.database import __all__ as _database_names
from ovos_memory_plugins.storage.postgres.engine import DEFAULT_NAMESPACE
from ovos_memory_plugins.storage.postgres.vector import HNSW_MIN_VECTORS

#: What the one module ``storage.postgres`` exported: the names ``database`` still exports
#: (its own and those that moved out of it) and a few constants beside them.
__all__ = [
    *_database_names,
    "COMPACT_DEADLINE_S",
    "DEFAULT_NAMESPACE",
    "HNSW_MIN_VECTORS",
    "PROBE_INTERVAL_S",
    "STATS_TTL",
]
