"""The conformance kit over the notes backend.

Twice: with the file store and with the SQLite store; both with the archive, the keyword index
over the memory's own database.
"""

from __future__ import annotations

from typing import Any

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.testing import MemoryContract


class TestNotesContract(MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return NotesMemory(config)


class TestNotesContractSqliteStore(MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return NotesMemory({**config, "store": "sqlite"})
