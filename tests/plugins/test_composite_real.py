"""The composite over the package's real backends (lexical, vector with the hashing embedder,
sticky), loaded by entry-point name: the conformance kit, and sticky notes shown once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import OnEveryEngine
from ovos_plugin_manager.agents import find_memory_plugins

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.testing import MemoryContract

LEXICAL, VECTOR, STICKY = "ovos-memory-plugin-lexical", "ovos-memory-plugin-vector", "ovos-memory-plugin-sticky"
INSTALLED = set(find_memory_plugins())
pytestmark = pytest.mark.skipif(
    not {LEXICAL, VECTOR, STICKY} <= INSTALLED, reason="needs the lexical, vector and sticky backends"
)


class TestCompositeOfRealBackendsContract(OnEveryEngine, MemoryContract):
    """The kit on every engine: the three parts over one SQLite file, or one PostgreSQL namespace."""

    survives_restart = True  # lexical and vector keep documents in the storage

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        members = [{"module": LEXICAL}, {"module": VECTOR, "config": {"embedder": "hash"}}, {"module": STICKY}]
        return CompositeMemory(self.engine.memory_config(config, members=members))


def test_sticky_notes_are_shown_once(tmp_path: Path) -> None:
    members = [{"module": LEXICAL}, {"module": STICKY}]
    with CompositeMemory({"root": str(tmp_path), "members": members}) as mem:
        assert list(mem.members) == ["lexical", "sticky"]
        mem.build_conversation_context("remember that my bike is the red one", "s")
        msgs = mem.build_conversation_context("which bike is mine", "s")
        assert sum("my bike is the red one" in m.content for m in msgs) == 1


def test_expand_query_auto_guesses_semantic_members(tmp_path: Path) -> None:
    def expands(embedder: str) -> tuple[bool, str]:
        members = [{"module": LEXICAL}, {"module": VECTOR, "config": {"embedder": embedder}}]
        llm = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}  # never called here
        with CompositeMemory({"root": str(tmp_path / embedder), "members": members, "llm": llm}) as mem:
            return bool(mem._expand), str(mem.members["vector"].embedder.id)

    assert expands("hash")[0]  # the hashing embedder matches words, not meaning
    expand, embedder_id = expands("local")
    if embedder_id == "unavailable":
        pytest.skip("the [local] extra is not installed: no local embedder")
    assert not expand


def test_sessions_and_messages_come_from_the_primary(tmp_path: Path) -> None:
    from ovos_memory_plugins.testing import exchange

    members = [{"module": STICKY}, {"module": LEXICAL}]
    with CompositeMemory({"root": str(tmp_path), "members": members, "primary": "lexical"}) as mem:
        mem.update_history(exchange("the boiler code is 7A", "7A, noted"), "hall")
        assert mem.sessions() == ["hall"] == mem.members["lexical"].sessions()
        assert [m.content for m in mem.messages("hall")] == ["the boiler code is 7A", "7A, noted"]
        assert mem.messages("nobody") == []
