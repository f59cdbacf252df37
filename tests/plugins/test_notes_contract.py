"""The conformance kit over the notes backend.

With the default (file) store on every engine (the ``engine`` fixture), and with the SQLite store;
both with the archive, the keyword index over the memory's own database.
"""

from __future__ import annotations

from typing import Any

from conftest import OnEveryEngine

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.testing import MemoryContract


class TestNotesContract(OnEveryEngine, MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return NotesMemory(self.engine.memory_config(config))


class TestNotesContractSqliteStore(MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return NotesMemory({**config, "store": "sqlite"})
