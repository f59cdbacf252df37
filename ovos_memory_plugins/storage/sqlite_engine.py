"""Kept for one release: the old path of :mod:`ovos_memory_plugins.storage.sqlite.engine`.

The engines moved into folders (storage/sqlite/, storage/postgres/); import from the new
module, this one only re-exports its names.
"""

from ovos_memory_plugins.storage.sqlite.engine import (
    MIGRATIONS,
    SqliteDocuments,
    SqliteStorage,
    adopt_shared_file,
    folder_problem,
    import_legacy_file,
    open_database,
    open_sqlite,
    storage_for,
)

__all__ = [
    "MIGRATIONS",
    "SqliteDocuments",
    "SqliteStorage",
    "adopt_shared_file",
    "folder_problem",
    "import_legacy_file",
    "open_database",
    "open_sqlite",
    "storage_for",
]
