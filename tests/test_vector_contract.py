"""The conformance kit over the vector backend (hash embedder), vector-only and hybrid."""

from __future__ import annotations

from typing import Any

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.testing import MemoryContract
from ovos_memory_plugins.vector import VectorMemory


class TestVectorContract(MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return VectorMemory({"embedder": "hash", **config})


class TestHybridContract(MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return VectorMemory({"embedder": "hash", "hybrid": True, **config})
