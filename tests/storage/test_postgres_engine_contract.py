"""The storage seam's engine contract, run on PostgreSQL (one namespace per test)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.storage.contract import EngineContract
from ovos_memory_plugins.storage.engine import Storage
from ovos_memory_plugins.storage.registry import open_storage


class TestPostgresContract(EngineContract):
    url = ""

    @pytest.fixture(autouse=True)
    def _url(self, postgres_url: str) -> None:
        type(self).url = postgres_url

    def open(self, where: Path) -> Storage:
        return open_storage(self.url, namespace=f"{where.parent.name}-{where.name}")
