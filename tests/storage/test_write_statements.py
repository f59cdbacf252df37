"""What a recorded exchange costs on the default SQLite keyword memory (issue 25): one
transaction, one ``PRAGMA data_version``, and no statement whose result is not needed (the
trim runs only when the session can have outgrown its history; the summary is read and written
only when the trim hands it exchanges)."""

from __future__ import annotations

from pathlib import Path

from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.lexical import LexicalMemory


def _pair(user: str, assistant: str) -> list[AgentMessage]:
    return [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]


def test_a_recorded_exchange_is_one_transaction_and_few_statements(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as memory:
        for i in range(40):  # every session past its first trim
            memory.update_history(
                _pair(f"where did I park the car, day {i}?", f"level {i} of the garage."), f"s{i % 2}"
            )
        statements: list[str] = []
        memory.storage.db.conn.set_trace_callback(statements.append)
        writes = 32
        for i in range(writes):
            memory.update_history(_pair(f"what did I cook on day {i}?", f"a soup with {i} carrots."), f"s{i % 2}")
        memory.storage.db.conn.set_trace_callback(None)
    own = [s for s in statements if not s.startswith("--")]  # FTS5's own statements start with a comment
    assert sum(s.startswith("BEGIN") for s in own) == writes
    assert sum(s.startswith("COMMIT") for s in own) == writes
    assert sum("data_version" in s for s in own) == writes
    # BEGIN, the version, two history rows, the session's last id, the document, its terms,
    # COMMIT; a trim and the summary's read and write every fourth exchange of a session
    assert sum(s.startswith("DELETE FROM history") for s in own) == writes // 4
    assert len(own) <= writes * 8 + (writes // 4) * 3
