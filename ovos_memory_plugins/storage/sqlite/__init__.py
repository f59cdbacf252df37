"""The SQLite engine of the storage seam (:mod:`ovos_memory_plugins.storage.seam`).

* :mod:`~ovos_memory_plugins.storage.sqlite.database`: the connection, WAL, migrations (``Database``);
* :mod:`~ovos_memory_plugins.storage.sqlite.schema`: the migrations of a memory's file;
* :mod:`~ovos_memory_plugins.storage.sqlite.documents`: the documents table (``SqliteDocuments``);
* :mod:`~ovos_memory_plugins.storage.sqlite.engine`: ``SqliteStorage``, ``open_sqlite``, ``open_database``;
* :mod:`~ovos_memory_plugins.storage.sqlite.adopt`: the files of earlier releases taken in;
* :mod:`~ovos_memory_plugins.storage.sqlite.history`: the history store;
* :mod:`~ovos_memory_plugins.storage.sqlite.keyword`: the keyword index (FTS5);
* :mod:`~ovos_memory_plugins.storage.sqlite.vector`: the vector store.

``storage.sqlite`` was one module (now ``database``): its names are re-exported here for one
release, so ``from ovos_memory_plugins.storage.sqlite import Database`` keeps working.
"""

from ovos_memory_plugins.storage.sqlite.database import (
    APPLICATION_ID,
    CHUNK,
    COMPACT_WAIT_MS,
    PURGE_WAIT_MS,
    Database,
    Migration,
    chunked,
    foreign_reason,
    fts5_available,
    quote_fts_phrase,
    quote_identifier,
)

__all__ = [
    "APPLICATION_ID",
    "CHUNK",
    "COMPACT_WAIT_MS",
    "PURGE_WAIT_MS",
    "Database",
    "Migration",
    "chunked",
    "foreign_reason",
    "fts5_available",
    "quote_fts_phrase",
    "quote_identifier",
]
