"""The conformance kit over the package's own stub storage (RAM documents, persisted history)."""

from __future__ import annotations

from typing import Any

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.testing import InMemoryMemory, MemoryContract, exchange


class TestInMemoryContract(MemoryContract):
    survives_restart = False

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return InMemoryMemory(config)


def test_history_survives_a_restart_when_root_is_set(tmp_path) -> None:
    root = str(tmp_path / "m")
    with InMemoryMemory({"root": root}) as mem:
        mem.update_history(exchange("remember the milk", "I will"), "kitchen")
    with InMemoryMemory({"root": root}) as mem:
        assert [m.content for m in mem.get_history("kitchen")] == ["remember the milk", "I will"]
        msgs = mem.build_conversation_context("anything else?", "kitchen")
        assert [m.content for m in msgs] == ["remember the milk", "I will", "anything else?"]
