"""Storage shared by every backend: the SQLite layer and the stores built on it."""

from ovos_memory_plugins.storage.sqlite import Database, Migration, fts5_available, quote_fts_phrase, quote_identifier

__all__ = ["Database", "Migration", "fts5_available", "quote_fts_phrase", "quote_identifier"]
