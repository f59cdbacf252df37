"""The lazy extractive summary (trimmed in batches, the rest folded when a turn reads the history)
gives the text the eager fold gave (one fold per exchange leaving the window), at every step, on
both engines; an eager summary left by an earlier release is taken over without folding an
exchange twice; the history trims in batches and returns what it trimmed. Real SQLite files;
the PostgreSQL cases on a throwaway server (tests/pg_server.py)."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.registry import open_storage
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.storage.summary_store import SummaryStore
from ovos_memory_plugins.summary import RollingSummary, fold_extractive
from ovos_memory_plugins.testing import exchange

_ns = itertools.count()


def eager_reference(pairs: list[tuple[str, str]], window: int, max_chars: int) -> Iterator[str]:
    """The summary after each exchange, as the eager fold wrote it: the exchange ``window``
    places back folded in when a new one arrives (what 0.1.0's ``RollingSummary.fold`` did)."""
    summary = ""
    for i in range(len(pairs)):
        if i >= window:
            summary = fold_extractive(summary, [pairs[i - window]], max_chars)
        yield summary


def dialogue(n: int) -> list[tuple[str, str]]:
    """Varied exchanges: long and short user turns, low-signal ones ("ok thanks"), repeats."""
    out = []
    for i in range(n):
        if i % 7 == 3:
            out.append(("ok thanks", "You're welcome."))
        elif i % 5 == 0:
            out.append((f"My sister number {i} lives in Lisbon and " + "works as a nurse " * (i % 11), f"Noted {i}."))
        else:
            out.append((f"Fact {i}: the locker code is {1000 + i}.", f"Got it, {i}."))
    return out


def _memory(where: Any, **config: Any) -> LexicalMemory:
    if isinstance(where, Path):
        return LexicalMemory({"root": str(where), **config})
    return LexicalMemory({"database": where, "namespace": f"lazy-{next(_ns)}", **config})


@pytest.mark.parametrize(("max_history", "max_chars", "steps"), [(10, 600, 1200), (2, 300, 200), (7, 90, 200)])
def test_the_lazy_summary_equals_the_eager_fold_at_every_step(
    tmp_path: Path, max_history: int, max_chars: int, steps: int
) -> None:
    pairs = dialogue(steps)
    expected = list(eager_reference(pairs, max_history // 2, max_chars))
    config = {"max_history": max_history, "summary": {"max_chars": max_chars}}
    with _memory(tmp_path, **config) as mem:
        assert mem.storage.history.trims_in_batches
        for i, (user, assistant) in enumerate(pairs):
            mem.update_history(exchange(user, assistant), "s")
            assert mem.session_summary("s") == expected[i], f"step {i}"
            if i % 97 == 0:  # the turn's own read gives the same block
                system = "\n".join(m.content for m in mem.build_conversation_context("hello", "s"))
                assert expected[i].splitlines()[-1:] == [] or expected[i].splitlines()[-1] in system
        stored = mem.storage.history.recent("s", 1000)
        assert 24 <= len(stored) < 24 + 8  # trimmed in batches of 8 messages
    with _memory(tmp_path, **config) as mem:  # a restart reads the same
        assert mem.session_summary("s") == expected[-1]


def test_the_lazy_summary_equals_the_eager_fold_on_postgresql(postgres_url: str) -> None:
    pairs = dialogue(150)
    expected = list(eager_reference(pairs, 5, 600))
    with _memory(postgres_url) as mem:
        assert mem.storage.history.trims_in_batches
        for i, (user, assistant) in enumerate(pairs):
            mem.update_history(exchange(user, assistant), "s")
            assert mem.session_summary("s") == expected[i], f"step {i}"
        assert 24 <= len(mem.storage.history.recent("s", 1000)) < 24 + 8


def test_single_message_hosts_get_the_same_summary(tmp_path: Path) -> None:
    pairs = dialogue(120)
    expected = list(eager_reference(pairs, 5, 600))
    with _memory(tmp_path) as mem:
        for i, (user, assistant) in enumerate(pairs):
            user_msg, assistant_msg = exchange(user, assistant)
            mem.update_history([user_msg], "s")
            mem.update_history([assistant_msg], "s")
            assert mem.session_summary("s") == expected[i], f"step {i}"


def test_an_earlier_release_s_eager_summary_is_taken_over_without_folding_twice(tmp_path: Path) -> None:
    pairs = dialogue(80)
    expected = list(eager_reference(pairs, 5, 600))
    with _memory(tmp_path) as mem:
        for user, assistant in pairs[:40]:
            mem.update_history(exchange(user, assistant), "s")
        path = Path(mem.storage.db.location)
    # as 0.1.0 left it: the summary of every exchange outside the window, ``covered`` unknown (-1)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE memory_summaries SET summary = ?, covered = -1 WHERE session_id = 's'", (expected[39],))
    conn.close()
    with _memory(tmp_path) as mem:
        assert mem.session_summary("s") == expected[39]  # as stored
        for i in range(40, 80):
            mem.update_history(exchange(*pairs[i]), "s")
            assert mem.session_summary("s") == expected[i], f"step {i}"


def test_a_model_s_summary_stays_eager(tmp_path: Path) -> None:
    class Model:
        def complete(self, messages: Any, **kwargs: Any) -> str:
            return "- the model's line"

        def close(self) -> None:
            pass

    db = Database(tmp_path / "s.db")
    try:
        summary = RollingSummary(SummaryStore(db), llm=Model())
        assert not summary.lazy
        summary.fold("s", [("My bike is blue.", "Noted.")])
        assert summary.store.state("s") == ("- the model's line", 1, -1)  # complete as it is
        assert summary.text_with("s", [("Something else.", "Ok.")]) == "- the model's line"
    finally:
        db.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_history_trims_in_batches_and_returns_what_it_trimmed(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = str(tmp_path / "h.db") if engine == "sqlite" else request.getfixturevalue("postgres_url")
    storage = open_storage(where, namespace=f"trim-{next(_ns)}")
    try:
        history = storage.history
        trimmed: list[Any] = []
        for i in range(10):
            with storage.atomic():
                got = history.append("s", [("user", f"q{i}"), ("assistant", f"a{i}")], keep=6, batch=4)
            trimmed.append([(m.role, m.content) for m in got])
        # 10 messages at the 5th call: trimmed to 6; again at the 7th and the 9th
        assert [len(t) for t in trimmed] == [0, 0, 0, 0, 4, 0, 4, 0, 4, 0]
        assert trimmed[4] == [("user", "q0"), ("assistant", "a0"), ("user", "q1"), ("assistant", "a1")]
        assert [m.content for m in history.recent("s", 100)] == ["q6", "a6", "q7", "a7", "q8", "a8", "q9", "a9"]
        # batch 1: every call past keep trims, as before
        with storage.atomic():
            history.append("t", [("user", "lone"), ("user", "q"), ("assistant", "a")], keep=1)
        assert [m.content for m in history.recent("t", 10)] == ["a"]
        with storage.atomic():
            got = history.append("t", [("user", "q2"), ("assistant", "a2")], keep=2)
        assert [m.content for m in got] == ["a"]
    finally:
        storage.close()
