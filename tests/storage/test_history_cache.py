"""The SQLite history keeps each session's newest messages and last exchange id in RAM: what it
answers from RAM must equal what the file holds, after its own writes, another connection's
writes, trims, removals and a rolled-back transaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.storage.sqlite.history import CACHED_MESSAGES, SqliteHistory


def _file(history: SqliteHistory, session: str) -> list[tuple[str, str]]:
    rows = history.db.query("SELECT role, content FROM history WHERE session_id = ? ORDER BY id", (session,))
    return [(r[0], r[1]) for r in rows]


def _said(history: SqliteHistory, session: str, limit: int = 1000) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in history.recent(session, limit)]


def test_reads_from_ram_equal_the_file_through_appends_and_trims(tmp_path: Path) -> None:
    history = SqliteHistory(Database(tmp_path / "h.db"))
    for i in range(30):
        history.append("s", [("user", f"q{i}"), ("assistant", f"a{i}")], keep=8, last_exchange_id=f"x{i}", batch=4)
        assert _said(history, "s", 4) == _file(history, "s")[-4:]  # cached after the first read
        assert history.last_exchange_id("s") == f"x{i}"
        assert _said(history, "s") == _file(history, "s")  # a longer read than the entry holds
    expected = _file(history, "s")[-6:]
    statements: list[str] = []
    history.db.conn.set_trace_callback(statements.append)
    assert _said(history, "s", 6) == expected
    assert history.last_exchange_id("s") == "x29"
    history.db.conn.set_trace_callback(None)
    assert not [s for s in statements if "FROM history" in s or "FROM sessions" in s]  # answered from RAM


def test_another_connections_commit_is_seen(tmp_path: Path) -> None:
    mine = SqliteHistory(Database(tmp_path / "h.db"))
    theirs = SqliteHistory(Database(tmp_path / "h.db"))
    mine.append("s", [("user", "q1"), ("assistant", "a1")], keep=10, last_exchange_id="x1")
    assert _said(mine, "s") == [("user", "q1"), ("assistant", "a1")] and mine.last_exchange_id("s") == "x1"
    theirs.append("s", [("user", "q2"), ("assistant", "a2")], keep=10, last_exchange_id="x2")
    assert _said(mine, "s") == _file(theirs, "s") and mine.last_exchange_id("s") == "x2"
    mine.append("s", [("user", "q3"), ("assistant", "a3")], keep=10, last_exchange_id="x3")
    assert _said(theirs, "s") == _said(mine, "s") == _file(mine, "s")
    theirs.clear_session("s")
    assert _said(mine, "s") == [] and mine.last_exchange_id("s") == ""


def test_removals_and_a_rolled_back_append_leave_ram_true(tmp_path: Path) -> None:
    history = SqliteHistory(Database(tmp_path / "h.db"))
    history.append("s", [("user", "tell me about tulips"), ("assistant", "they bloom")], keep=10)
    history.append("s", [("user", "and roses"), ("assistant", "they smell")], keep=10, last_exchange_id="x2")
    assert len(_said(history, "s", 4)) == 4
    assert history.remove_quoting("s", "tulips") == 1
    assert _said(history, "s", 4) == _file(history, "s")
    with pytest.raises(RuntimeError), history.db.atomic():
        history.append("s", [("user", "lost"), ("assistant", "lost too")], keep=10, last_exchange_id="x3")
        raise RuntimeError("the exchange's write failed")
    assert _said(history, "s", 4) == _file(history, "s") and history.last_exchange_id("s") == "x2"
    # a savepoint rolled back inside a transaction that commits
    with history.db.atomic(), pytest.raises(RuntimeError), history.db.atomic():
        history.append("s", [("user", "gone"), ("assistant", "gone too")], keep=10, last_exchange_id="x4")
        raise RuntimeError("one step failed")
    assert _said(history, "s", 4) == _file(history, "s") and history.last_exchange_id("s") == "x2"
    history.clear_all()
    assert _said(history, "s") == [] and history.last_exchange_id("s") == ""


def test_ram_holds_a_bounded_tail(tmp_path: Path) -> None:
    history = SqliteHistory(Database(tmp_path / "h.db"))
    for i in range(CACHED_MESSAGES):
        history.append("s", [("user", f"q{i}"), ("assistant", f"a{i}")], keep=10_000)
    assert _said(history, "s", 8) == _file(history, "s")[-8:]
    history.append("s", [("user", "last"), ("assistant", "one")], keep=10_000)
    assert _said(history, "s", 10_000) == _file(history, "s")  # beyond the tail: read from the file
    assert len(_file(history, "s")) == 2 * CACHED_MESSAGES + 2


def _pair(user: str, assistant: str) -> list[AgentMessage]:
    return [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]


def test_a_recorded_exchange_reads_ram_unchecked_only_while_no_one_else_writes(tmp_path: Path) -> None:
    """A recorded exchange may read the history from RAM without a look at the file's version
    (its transaction looks once, then confirms): while another memory on the same folder writes
    the same session, every exchange is still planned from what the file holds (the replay
    check, the previous exchange, the history), and one exchange reads the version once."""
    with LexicalMemory({"root": str(tmp_path)}) as mine, LexicalMemory({"root": str(tmp_path)}) as theirs:
        for i in range(12):  # calm: RAM is trusted from here on
            mine.update_history(_pair(f"warm {i}?", f"up {i}."), "s")
        looks: list[str] = []
        mine.storage.db.conn.set_trace_callback(lambda s: looks.append(s) if "data_version" in s else None)
        mine.update_history(_pair("what grows in my garden?", "tulips and roses."), "s")
        assert len(looks) == 1  # the transaction's one look
        theirs.update_history(_pair("and in mine?", "only weeds."), "s")
        # the same exchange again, but another memory wrote after it: not a replay, recorded
        mine.update_history(_pair("what grows in my garden?", "tulips and roses."), "s")
        mine.storage.db.conn.set_trace_callback(None)
        said = [(m.role, m.content) for m in mine.storage.history.recent("s", 6)]
        assert said[-6:] == [
            ("user", "what grows in my garden?"),
            ("assistant", "tulips and roses."),
            ("user", "and in mine?"),
            ("assistant", "only weeds."),
            ("user", "what grows in my garden?"),
            ("assistant", "tulips and roses."),
        ]
        assert said == _file(mine.storage.history, "s")[-6:]
        # the exchange names the one the other memory recorded as the one before it
        weeds = mine.exchange_id("s", "and in mine?", "only weeds.")
        garden = mine.exchange_id("s", "what grows in my garden?", "tulips and roses.")
        assert mine.storage.history.last_exchange_id("s") == garden
        stored = mine.storage.documents.get([garden])[garden]
        assert stored.metadata.get("previous_exchange") == weeds
        # and a replay right after its own write is still a replay
        before = len(_file(mine.storage.history, "s"))
        mine.update_history(_pair("what grows in my garden?", "tulips and roses."), "s")
        assert len(_file(mine.storage.history, "s")) == before
