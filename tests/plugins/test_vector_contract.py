"""The conformance kit over the vector backend (hash embedder), vector-only and hybrid."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import OnEveryEngine

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.storage.sqlite.engine import open_database
from ovos_memory_plugins.testing import MemoryContract
from ovos_memory_plugins.vector import VectorMemory


class TestVectorContract(OnEveryEngine, MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return VectorMemory({"embedder": "hash", **self.engine.memory_config(config)})


class TestHybridContract(OnEveryEngine, MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return VectorMemory({"embedder": "hash", "hybrid": True, **self.engine.memory_config(config)})


def _sqlite_vec_loads() -> bool:
    db, ext = open_database(":memory:", True)
    db.close()
    return ext is not None


@pytest.mark.skipif(not _sqlite_vec_loads(), reason="no sqlite3 module here can load extensions (install sqlean-py)")
class TestVectorSqliteVecContract(MemoryContract):
    """The whole contract on the sqlite-vec path (a sqlean connection where the stdlib cannot load it)."""

    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        mem = VectorMemory({"embedder": "hash", "vector_search": "sqlite-vec", **config})
        assert mem.vector_store.path == "sqlite-vec"
        return mem
