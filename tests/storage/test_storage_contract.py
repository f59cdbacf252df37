"""The storage engine contract (ovos_memory_plugins.storage.contract) on every engine.

``TestEngineContract`` runs once per engine (the ``engine`` fixture: a SQLite file, a PostgreSQL
namespace of the test's own); ``TestSqliteRamContract`` is SQLite's own ``:memory:`` database.
"""

from __future__ import annotations

from pathlib import Path

from conftest import OnEveryEngine

from ovos_memory_plugins.storage.contract import EngineContract
from ovos_memory_plugins.storage.engine import Storage
from ovos_memory_plugins.storage.registry import open_storage


class TestEngineContract(OnEveryEngine, EngineContract):
    def open(self, where: Path) -> Storage:
        storage: Storage = self.engine.open_storage()
        return storage


class TestSqliteRamContract(EngineContract):
    def open(self, where: Path) -> Storage:
        return open_storage(":memory:")
