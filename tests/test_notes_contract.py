"""The conformance kit over the notes backend (archive: the keyword backend, the default)."""

from __future__ import annotations

from typing import Any

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.testing import MemoryContract


class TestNotesContract(MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return NotesMemory(config)
