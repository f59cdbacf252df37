"""Storage: the only code that touches bytes. One database per memory (see ``seam``).

* :mod:`~ovos_memory_plugins.storage.seam`: the engine-neutral seam (``Database``,
  ``DocumentStore``, ``Index``, ``HistoryStore``, ``VectorStore``, ``Storage``);
* :mod:`~ovos_memory_plugins.storage.records`: the records they pass (``Document``,
  ``StoredDocument``, ``ForgetReport``, ``Note``, ...); ``storage.engine``, the old home of
  both, re-exports them for a release;
* :mod:`~ovos_memory_plugins.storage.registry`: ``open_storage(location)``, the engine chosen by
  the location's URL scheme (a SQLite file otherwise);
* :mod:`~ovos_memory_plugins.storage.sqlite` and :mod:`~ovos_memory_plugins.storage.postgres`:
  the engines, a folder each with one file name per concept (``database``, ``history``,
  ``vector``, ``notes``, ...);
* :mod:`~ovos_memory_plugins.storage.keyword`: the keyword analysis both engines share (each
  engine's index is its folder's ``keyword``);
* ``notes_store``, ``sticky_store``, ``summary_store``, ``embedding_cache``: the engine-neutral
  table stores.
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
