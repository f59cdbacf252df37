"""Kept for one release: the old path of :mod:`ovos_memory_plugins.storage.sqlite.history`.

The engines moved into folders (storage/sqlite/, storage/postgres/); import from the new
module, this one only re-exports its names.
"""

from ovos_memory_plugins.storage.sqlite.history import (
    MIGRATIONS,
    SqliteHistory,
    StoredMessage,
)

__all__ = [
    "MIGRATIONS",
    "SqliteHistory",
    "StoredMessage",
]
