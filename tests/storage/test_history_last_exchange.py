"""The SQLite history writes a session's last exchange id as a ``sessions`` row only when its
messages cannot give it: the id read back (by this connection and by a fresh one) must be the
one the last write named, through stale rows, trims by untagged messages and removals."""

from __future__ import annotations

from pathlib import Path

from ovos_memory_plugins.storage.records import StoredDocument
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.storage.sqlite.history import SqliteHistory


def _rows(history: SqliteHistory) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in history.db.query("SELECT session_id, last_exchange_id FROM sessions")]


def _exchange(history: SqliteHistory, session: str, n: int, keep: int = 10) -> None:
    tag = f"x{n}"
    history.append(
        session, [("user", f"q{n}"), ("assistant", f"a{n}")], keep=keep, last_exchange_id=tag, exchange_ids=[tag, tag]
    )


def _fresh(path: Path, session: str) -> str:
    return SqliteHistory(Database(path)).last_exchange_id(session)


def test_a_tagged_exchange_writes_no_row_and_is_read_back(tmp_path: Path) -> None:
    history = SqliteHistory(Database(tmp_path / "h.db"))
    for n in range(1, 4):
        _exchange(history, "s", n)
        assert history.last_exchange_id("s") == f"x{n}" == _fresh(tmp_path / "h.db", "s")
    assert _rows(history) == []


def test_a_stale_row_of_an_earlier_write_goes(tmp_path: Path) -> None:
    history = SqliteHistory(Database(tmp_path / "h.db"))
    history.append("s", [("user", "q0"), ("assistant", "a0")], keep=10, last_exchange_id="x0")  # untagged: a row
    assert _rows(history) == [("s", "x0")]
    _exchange(SqliteHistory(Database(tmp_path / "h.db")), "s", 1)  # another connection, RAM knows nothing
    assert _rows(history) == [] and history.last_exchange_id("s") == "x1" == _fresh(tmp_path / "h.db", "s")


def test_a_tag_the_trim_takes_is_written_as_a_row(tmp_path: Path) -> None:
    history = SqliteHistory(Database(tmp_path / "h.db"))
    history.append(
        "s", [("user", "q1"), ("assistant", "a1"), ("user", "q2")], keep=1, last_exchange_id="x1",
        exchange_ids=["x1", "x1", None],
    )  # fmt: skip
    assert _rows(history) == [("s", "x1")] and _fresh(tmp_path / "h.db", "s") == "x1"


def test_untagged_messages_that_trim_the_last_tag_keep_the_id(tmp_path: Path) -> None:
    history = SqliteHistory(Database(tmp_path / "h.db"))
    _exchange(history, "s", 1, keep=4)
    for n in range(6):  # messages of no exchange push the tagged ones out
        history.append("s", [("user", f"lonely {n}")], keep=4)
    assert history.db.scalar("SELECT count(*) FROM history WHERE exchange_id IS NOT NULL") == 0
    assert history.last_exchange_id("s") == "x1" == _fresh(tmp_path / "h.db", "s")
    _exchange(history, "s", 2, keep=4)
    assert _rows(history) == [] and _fresh(tmp_path / "h.db", "s") == "x2"


def test_a_forgotten_last_exchange_is_still_the_last_id(tmp_path: Path) -> None:
    """As when the row was always written: the next exchange names the forgotten one as its
    ``previous_exchange`` (so no exchange is joined to the one before a forgotten one)."""
    history = SqliteHistory(Database(tmp_path / "h.db"))
    _exchange(history, "s", 1)
    _exchange(history, "s", 2)
    _exchange(history, "t", 1)
    gone = StoredDocument(1, "x2", "s", "q2 a2", {}, 0.0)
    assert history.remove_exchanges([gone]) == 2
    assert history.last_exchange_id("s") == "x2" == _fresh(tmp_path / "h.db", "s")
    assert history.last_exchange_id("t") == "x1"
    _exchange(history, "s", 3)
    assert history.remove_quoting("s", "q3") == 2
    assert history.last_exchange_id("s") == "x3" == _fresh(tmp_path / "h.db", "s")
    history.clear_session("s")
    assert history.last_exchange_id("s") == "" == _fresh(tmp_path / "h.db", "s")


def test_a_forget_of_many_exchanges_keeps_every_sessions_last_id(tmp_path: Path) -> None:
    """More documents than one statement's chunk: every session's last id is kept before any
    message goes."""
    from ovos_memory_plugins.storage.sqlite.database import CHUNK

    history = SqliteHistory(Database(tmp_path / "h.db"))
    per = CHUNK // 2 + 1
    sessions = {"s": 0, "t": 1000, "u": 2000}  # each its own exchange ids
    for session, first in sessions.items():
        for n in range(first, first + per):
            _exchange(history, session, n, keep=4 * per)
    gone = [
        StoredDocument(0, f"x{n}", s, "", {}, 0.0) for s, first in sessions.items() for n in range(first, first + per)
    ]
    assert history.remove_exchanges(gone) == 6 * per
    for session, first in sessions.items():
        assert _fresh(tmp_path / "h.db", session) == f"x{first + per - 1}"
