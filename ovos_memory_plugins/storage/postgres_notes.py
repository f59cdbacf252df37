"""Kept for one release: the old path of :mod:`ovos_memory_plugins.storage.postgres.notes`.

The engines moved into folders (storage/sqlite/, storage/postgres/); import from the new
module, this one only re-exports its names.
"""

from ovos_memory_plugins.storage.postgres.notes import (
    NOTES_MIGRATIONS,
    SUMMARY_MIGRATIONS,
    PgRewrites,
    search_sql,
)

__all__ = [
    "NOTES_MIGRATIONS",
    "SUMMARY_MIGRATIONS",
    "PgRewrites",
    "search_sql",
]
