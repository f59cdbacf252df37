"""Kept for one release: the old path of :mod:`ovos_memory_plugins.storage.sqlite.vector`.

The engines moved into folders (storage/sqlite/, storage/postgres/); import from the new
module, this one only re-exports its names.
"""

from ovos_memory_plugins.storage.sqlite.vector import (
    SEARCH_PATHS,
    SqliteVectorStore,
)

__all__ = [
    "SEARCH_PATHS",
    "SqliteVectorStore",
]
