"""The storage engine contract (ovos_memory_plugins.storage.contract) on the SQLite engine."""

from __future__ import annotations

from pathlib import Path

from ovos_memory_plugins.storage.contract import EngineContract
from ovos_memory_plugins.storage.engine import Storage
from ovos_memory_plugins.storage.registry import open_storage


class TestSqliteFileContract(EngineContract):
    def open(self, where: Path) -> Storage:
        return open_storage(where / "memory.db")


class TestSqliteRamContract(EngineContract):
    def open(self, where: Path) -> Storage:
        return open_storage(":memory:")
