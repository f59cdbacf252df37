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

# ``X as X``: each name is re-exported, for code written against earlier releases
from ovos_memory_plugins.storage.records import MAX_ID_CHARS as MAX_ID_CHARS
from ovos_memory_plugins.storage.records import Compacted as Compacted
from ovos_memory_plugins.storage.records import Document as Document
from ovos_memory_plugins.storage.records import ForgetReport as ForgetReport
from ovos_memory_plugins.storage.records import KeywordSettings as KeywordSettings
from ovos_memory_plugins.storage.records import StoredDocument as StoredDocument
from ovos_memory_plugins.storage.records import StoredMessage as StoredMessage
from ovos_memory_plugins.storage.records import check_id as check_id
from ovos_memory_plugins.storage.records import document_time as document_time
from ovos_memory_plugins.storage.records import dump_metadata as dump_metadata
from ovos_memory_plugins.storage.seam import CompactingDatabase as CompactingDatabase
from ovos_memory_plugins.storage.seam import Database as Database
from ovos_memory_plugins.storage.seam import DocumentStore as DocumentStore
from ovos_memory_plugins.storage.seam import HistoryStore as HistoryStore
from ovos_memory_plugins.storage.seam import Index as Index
from ovos_memory_plugins.storage.seam import Storage as Storage
from ovos_memory_plugins.storage.seam import VectorStore as VectorStore
from ovos_memory_plugins.storage.seam import compact_database as compact_database


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
