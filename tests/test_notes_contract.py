"""The conformance kit over the notes backend.

Twice: with the default archive (the keyword backend, on disk), and with the kit's RAM stub as
the archive (passed through the ``archive=`` seam), so the notes side is checked on its own.
"""

from __future__ import annotations

from typing import Any

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.testing import InMemoryMemory, MemoryContract


class TestNotesContract(MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return NotesMemory(config)


class TestNotesContractRamArchive(MemoryContract):
    survives_restart = False

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return NotesMemory(config, archive=InMemoryMemory({}))
