"""benchmarks/persona_path.py: how it counts what reached the prompt, on a real memory."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ovos_memory_plugins.lexical import LexicalMemory

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "persona_path.py"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH.parent))  # it imports its sibling recall.py
    spec = importlib.util.spec_from_file_location("persona_path_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "persona_path_under_test", module)
    spec.loader.exec_module(module)
    return module


def test_joined_neighbours_count_as_one_memory_and_two_exchanges(bench: ModuleType, tmp_path: Path) -> None:
    unit = bench.Unit("u")
    trip = [
        bench.Exchange("I am planning a trip to Kyoto in April.", "Kyoto in April has cherry blossoms.", {"t1"}),
        bench.Exchange("Which Kyoto temples open early?", "Kiyomizu-dera opens at six.", {"t2"}),
        bench.Exchange("I adopted a cat named Miso.", "Lovely.", {"t3"}),
    ]
    unit.sessions = [("s", trip), ("other", [bench.Exchange("Book a Kyoto ryokan.", "Done, Ryokan Yachiyo.", {"r"})])]
    unit.asks = [bench.Ask("Kyoto temples", {"t2"}, "single")]
    with LexicalMemory({"root": str(tmp_path / "mem")}) as mem:
        bench.feed(mem, unit)
        prompt = mem.build_conversation_context("Kyoto temples", "new")
    injected, memories, text = bench._injected(prompt, unit)
    assert sorted(tag for ex in injected for tag in ex.tags) == ["r", "t1", "t2"]  # three exchanges ...
    assert sorted(sorted(m) for m in memories) == [["r"], ["t1", "t2"]]  # ... in two memories
    assert "Kiyomizu-dera opens at six" in text  # the memory text it read


def test_the_tally_reports_exchanges_and_memories(bench: ModuleType, tmp_path: Path) -> None:
    unit = bench.Unit("u")
    unit.sessions = [
        (
            "s",
            [
                bench.Exchange("My Kyoto trip starts in April.", "Noted.", {"a"}),
                bench.Exchange("The Kyoto trip ends in May.", "Noted.", {"b"}),
            ],
        )
    ]
    unit.asks = [bench.Ask("When does my Kyoto trip end?", {"b"}, "single")]
    tally = bench.evaluate(LexicalMemory, {}, iter([unit]), None)
    row = tally.row()
    assert row["hit"] == 100.0 and row["inj/q"] == 2 and row["precision"] == 50.0
    assert row["mem/q"] == 1 and row["irr mem/q"] == 0 and row["mem prec"] == 100.0
    assert row["CPU p95"] >= 0


def test_answer_kept_counts_what_shortening_a_long_memory_left(bench: ModuleType) -> None:
    filler = " ".join(f"Beach number {i} has soft sand and calm water." for i in range(60))
    reply = f"Great choice! {filler} The Waikiki hotel books out early. The ferry leaves at nine."
    unit = bench.Unit("u")
    unit.sessions = [("s", [bench.Exchange("I will stay on Oahu for my Hawaii trip.", reply, {"a"})])]
    unit.asks = [
        bench.Ask("Where do I stay in Hawaii?", {"a"}, "single", answer="Oahu"),  # in the kept opening
        bench.Ask("Which hotel books out early in Hawaii?", {"a"}, "single", answer="Waikiki"),  # a matching sentence
        bench.Ask("When does the boat go for my Hawaii trip?", {"a"}, "single", answer="at nine"),  # cut away
    ]
    row = bench.evaluate(LexicalMemory, {}, iter([unit]), None).row()
    assert row["hit"] == 100.0
    assert row["ans kept"] == pytest.approx(200 / 3)
    whole = bench.evaluate(LexicalMemory, {"context": {"memory_chars": 0}}, iter([unit]), None).row()
    assert whole["ans kept"] == 100.0 and whole["ctx chars/q"] > row["ctx chars/q"] + 1000


def test_sessions_are_fed_at_their_dates_and_counted_dated(bench: ModuleType) -> None:
    unit = bench.Unit("u")
    unit.sessions = [
        ("old", [bench.Exchange("I stream on Tuesdays.", "Tuesdays, noted.", {"a"})]),
        ("new", [bench.Exchange("I moved my stream to Thursdays.", "Thursdays, noted.", {"b"})]),
    ]
    unit.dates = {"old": bench.parse_date("2023/04/23 (Sun) 18:14"), "new": bench.parse_date("8:00 pm on 8 May, 2023")}
    unit.asks = [bench.Ask("When do I stream?", {"a", "b"}, "knowledge-update", "Thursdays", unit.dates["new"] + 86400)]
    tally = bench.evaluate(LexicalMemory, {}, iter([unit]), None)
    kind = tally.per_type["knowledge-update"]
    assert kind["rel mem"] == 2 and kind["dated"] == 2  # both memories carry their session's date
    assert kind["newest asked"] == 1 and kind["newest 1st"] == 1  # the update ranked first
    assert kind["ans in prompt"] == 1
    undated = bench.evaluate(LexicalMemory, {}, iter([unit]), None, dates=False).per_type["knowledge-update"]
    assert undated["dated"] == 0  # dated today, not at the sessions' dates
