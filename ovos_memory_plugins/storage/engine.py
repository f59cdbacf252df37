"""The storage seam's old home, kept importable for a release: import from its new homes.

* the contract (``Database``, ``DocumentStore``, ``Index``, ``HistoryStore``, ``VectorStore``,
  ``Storage``, ``compact_database``): :mod:`ovos_memory_plugins.storage.seam`;
* the records (``Document``, ``StoredDocument``, ``StoredMessage``, ``KeywordSettings``,
  ``ForgetReport``, ``Compacted``, ``check_id``, ...): :mod:`ovos_memory_plugins.storage.records`;
* the factory ``open_storage``: :mod:`ovos_memory_plugins.storage.registry` (a
  DeprecationWarning when taken from here).

Nothing in the package imports this module, so the contract imports no engine and no import
circle runs through it.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from ovos_memory_plugins.storage.records import (
    MAX_ID_CHARS,
    Compacted,
    Document,
    ForgetReport,
    KeywordSettings,
    StoredDocument,
    StoredMessage,
    check_id,
    document_time,
    dump_metadata,
)
from ovos_memory_plugins.storage.seam import (
    CompactingDatabase,
    Database,
    DocumentStore,
    HistoryStore,
    Index,
    Storage,
    VectorStore,
    compact_database,
)

__all__ = [
    "MAX_ID_CHARS",
    "Compacted",
    "CompactingDatabase",
    "Database",
    "Document",
    "DocumentStore",
    "ForgetReport",
    "HistoryStore",
    "Index",
    "KeywordSettings",
    "Storage",
    "StoredDocument",
    "StoredMessage",
    "VectorStore",
    "check_id",
    "compact_database",
    "document_time",
    "dump_metadata",
]


def __getattr__(name: str) -> Any:
    """``engine.open_storage``, the factory's old home, kept importable for a release."""
    if name == "open_storage":
        warnings.warn(
            "ovos_memory_plugins.storage.engine.open_storage moved to ovos_memory_plugins.storage.registry"
            " (or ovos_memory_plugins.storage.open_storage); the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module("ovos_memory_plugins.storage.registry").open_storage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
