"""The SQLite history keeps each session's newest messages and last exchange id in RAM: what it
answers from RAM must equal what the file holds, after its own writes, another connection's
writes, trims, removals and a rolled-back transaction."""

from __future__ import annotations

from pathlib import Path

import pytest

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
