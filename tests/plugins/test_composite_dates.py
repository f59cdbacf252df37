"""Time words through the composite (issue 26): a keyword + vector composite on real SQLite files,
dated by the ``clock=`` seam, gives up to half of its places to what was made in the window the
utterance names, through the member that filters by time, as a single memory does."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from ovos_plugin_manager.agents import find_memory_plugins
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.composite import CompositeMemory

pytest.importorskip("dateparser", reason="the dates extra (dateparser) is not installed")
LEXICAL, VECTOR = "ovos-memory-plugin-lexical", "ovos-memory-plugin-vector"
pytestmark = pytest.mark.skipif(
    not {LEXICAL, VECTOR} <= set(find_memory_plugins()), reason="needs the lexical and vector backends"
)

UTC = timezone.utc
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)  # a Wednesday


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _composite(root: Path, clock: Clock, members: list[dict[str, Any]] | None = None) -> CompositeMemory:
    members = members or [{"module": LEXICAL}, {"module": VECTOR, "config": {"embedder": "hash"}}]
    return CompositeMemory({"root": str(root), "max_history": 0, "members": members}, clock=clock)


def _say(mem: CompositeMemory, user: str, assistant: str) -> None:
    pair = [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]
    mem.update_history(pair, "s")


def _fill(mem: CompositeMemory, clock: Clock) -> None:
    clock.now = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    _say(mem, "I planted tulips in the garden", "Lovely, tulips.")
    clock.now = datetime(2026, 12, 1, 18, 30, tzinfo=UTC)
    _say(mem, "I booked the dentist for Friday", "Dentist on Friday, noted.")
    clock.now += timedelta(minutes=2)
    _say(mem, "and the garden needs new tulips bulbs", "Tulip bulbs, noted.")
    clock.now = NOW


def _memories(mem: CompositeMemory, utterance: str) -> list[str]:
    """The prompt's memories' first lines (``- [date] Q: ...``), in order, without the dash."""
    text = "\n".join(m.content for m in mem.build_conversation_context(utterance, "s"))
    return [line[2:] for line in text.splitlines() if line.startswith("- [")]


def test_what_did_i_tell_you_yesterday_brings_yesterdays_exchange_first_dated(tmp_path: Path) -> None:
    clock = Clock(NOW)
    with _composite(tmp_path, clock) as mem:
        _fill(mem, clock)
        assert mem.recall_window("what did I tell you yesterday?") is not None
        lines = _memories(mem, "what did I tell you yesterday?")
        assert lines[0].startswith("[2026-12-01 18:30, yesterday] Q: I booked the dentist for Friday")
        assert not any("planted tulips" in line for line in lines)  # 20 November is not yesterday
        garden = "\n".join(
            m.content for m in mem.build_conversation_context("what did I say about the garden yesterday?", "s")
        )
        assert garden.index("garden needs new tulips") < garden.index("planted tulips")  # yesterday's first
        assert "- [2026-11-20, 12 days ago] Q: I planted tulips" in garden  # the older still shown, dated


def test_an_empty_window_falls_back_to_ordinary_recall(tmp_path: Path) -> None:
    clock = Clock(NOW)
    with _composite(tmp_path / "a", clock) as mem:
        _fill(mem, clock)
        assert mem.recall_window("what did I say about the garden last year?") is not None
        timed = mem.recall("what did I say about the garden last year?", "s", [])
        plain = mem.recall("what did I say about the garden?", "s", [])
    assert [h.source for h in timed] == [h.source for h in plain]


def test_without_a_member_that_filters_by_time_the_words_are_ordinary(tmp_path: Path) -> None:
    clock = Clock(NOW)
    with _composite(tmp_path / "v", clock, [{"module": VECTOR, "config": {"embedder": "hash"}}]) as mem:
        _fill(mem, clock)
        assert mem.recall_window("what did I tell you yesterday?") is None
        assert mem.recall("what did I say about the garden yesterday?", "s", [])  # ordinary hits
    config = {"root": str(tmp_path / "off"), "max_history": 0, "retrieval": {"time_words": False}}
    with CompositeMemory({**config, "members": [{"module": LEXICAL}]}, clock=clock) as off:
        assert off.recall_window("what did I tell you yesterday?") is None
