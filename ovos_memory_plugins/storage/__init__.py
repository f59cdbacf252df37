"""Storage: the only code that touches bytes. One database per memory (see ``seam``).

* :mod:`~ovos_memory_plugins.storage.seam`: the engine-neutral seam (``Database``,
  ``DocumentStore``, ``Index``, ``HistoryStore``, ``VectorStore``, ``Storage``);
* :mod:`~ovos_memory_plugins.storage.records`: the records they pass (``Document``,
  ``StoredDocument``, ``ForgetReport``, ``Note``, ...); ``storage.engine``, the old home of
  both, re-exports them for a release;
* :mod:`~ovos_memory_plugins.storage.registry`: ``open_storage(location)``, the engine chosen by
  the location's URL scheme (a SQLite file otherwise);
* :mod:`~ovos_memory_plugins.storage.sqlite.database` and
  :mod:`~ovos_memory_plugins.storage.sqlite.engine`: the SQLite engine (connection, migrations,
  the documents table, files of earlier releases);
* :mod:`~ovos_memory_plugins.storage.keyword`, :mod:`~ovos_memory_plugins.storage.sqlite.vector`,
  :mod:`~ovos_memory_plugins.storage.sqlite.history`: the keyword index, the vector store and the
  history over that one database;
* ``notes_store``, ``sticky_store``: the notes backends' stores.
"""

from ovos_memory_plugins.storage.records import ForgetReport
from ovos_memory_plugins.storage.registry import open_storage
from ovos_memory_plugins.storage.seam import Storage
from ovos_memory_plugins.storage.sqlite.database import (
    Database,
    Migration,
    fts5_available,
    quote_fts_phrase,
    quote_identifier,
)

__all__ = [
    "Database",
    "ForgetReport",
    "Migration",
    "Storage",
    "fts5_available",
    "open_storage",
    "quote_fts_phrase",
    "quote_identifier",
]
