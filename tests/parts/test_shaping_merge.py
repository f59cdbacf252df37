"""Consecutive exchanges of one conversation recalled together become one memory in the prompt."""

from __future__ import annotations

from pathlib import Path

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.shaping import merge_adjacent
from ovos_memory_plugins.testing import exchange


def chain(a: MemoryHit, b: MemoryHit) -> bool:
    """``b`` follows ``a`` when its source is ``a``'s plus one letter (a stand-in for real ids)."""
    return b.source == a.source + "+"


def test_merge_adjacent_joins_runs_in_time_order_and_keeps_the_rest() -> None:
    first = MemoryHit("Q: one\nA: 1", "x", 2.0, {"context_before": "before x", "context_after": "one+"})
    second = MemoryHit("Q: two\nA: 2", "x+", 9.0, {"context_before": "A: 1", "context_after": "after x+"})
    alone = MemoryHit("Q: other\nA: 3", "y", 5.0, {"session_id": "s"})
    hits = [second, alone, first]  # best first, as select_hits returns them
    merged = merge_adjacent(hits, chain)
    assert [h.source for h in merged] == ["x", "y"]  # the run ranks where its best exchange did
    run = merged[0]
    assert run.content == "Q: one\nA: 1\nQ: two\nA: 2"
    assert run.score == 9.0 and run.metadata["sources"] == ["x", "x+"]
    # the outer neighbours stay; the inner ones are the run's own text
    assert run.metadata["context_before"] == "before x" and run.metadata["context_after"] == "after x+"
    assert merged[1] is alone
    assert [h.source for h in hits] == ["x+", "y", "x"] and "sources" not in first.metadata  # untouched


def test_merge_adjacent_without_neighbours_changes_nothing() -> None:
    hits = [MemoryHit("a", "1", 3.0), MemoryHit("b", "3", 2.0)]
    assert merge_adjacent(hits, chain) == hits
    assert merge_adjacent([], chain) == []


def test_a_run_of_three_is_one_memory() -> None:
    hits = [MemoryHit("c", "x++", 1.0), MemoryHit("a", "x", 3.0), MemoryHit("b", "x+", 2.0)]
    merged = merge_adjacent(hits, chain)
    assert len(merged) == 1 and merged[0].content == "a\nb\nc" and merged[0].metadata["sources"] == ["x", "x+", "x++"]


def test_recorded_neighbours_are_one_memory_in_the_prompt(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path / "mem")}) as mem:
        mem.update_history(
            exchange("I am planning a trip to Kyoto in April.", "Kyoto in April has cherry blossoms."), "s"
        )
        mem.update_history(exchange("Which Kyoto temples open early?", "Kiyomizu-dera opens at six."), "s")
        mem.update_history(exchange("I also adopted a cat named Miso.", "Lovely."), "s")
        mem.update_history(exchange("Book a Kyoto ryokan for the trip.", "Done, Ryokan Yachiyo."), "other")
        history = mem.get_history("new")
        hits = mem.recall("Kyoto trip temples", "new", history)
        joined = [h for h in hits if "sources" in h.metadata]
        assert len(joined) == 1
        assert joined[0].content.index("planning a trip") < joined[0].content.index("temples open early")
        # an exchange of another session is never joined to them, even when it matches
        assert any("ryokan" in h.content and "sources" not in h.metadata for h in hits)
        text = "\n".join(m.content for m in mem.build_conversation_context("Kyoto trip temples", "new")[:-1])
        chunk = next(line for line in text.splitlines() if "planning a trip" in line)
        # one chunk: the second exchange is an indented continuation line, not a memory of its own
        assert chunk.startswith("- ")
        assert any(line.startswith("  ") and "temples open early" in line for line in text.splitlines())


def test_exchanges_with_one_between_them_are_not_joined(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path / "mem")}) as mem:
        mem.update_history(exchange("My Kyoto trip starts in April.", "Noted."), "s")
        mem.update_history(exchange("I adopted a cat named Miso.", "Lovely."), "s")
        mem.update_history(exchange("The Kyoto trip ends in May.", "Noted."), "s")
        hits = mem.recall("Kyoto trip", "new", [])
        assert len(hits) == 2 and not any("sources" in h.metadata for h in hits)


def test_neighbours_join_after_a_restart(tmp_path: Path) -> None:
    root = str(tmp_path / "mem")
    with LexicalMemory({"root": root}) as mem:
        mem.update_history(exchange("My Kyoto trip starts in April.", "Noted."), "s")
    with LexicalMemory({"root": root}) as mem:  # the next exchange is recorded by a new process
        mem.update_history(exchange("The Kyoto trip ends in May.", "Noted."), "s")
    with LexicalMemory({"root": root}) as mem:
        hits = mem.recall("Kyoto trip", "new", [])
        assert len(hits) == 1 and hits[0].content.index("starts in April") < hits[0].content.index("ends in May")


def test_a_composite_joins_its_members_neighbouring_exchanges(tmp_path: Path) -> None:
    from ovos_memory_plugins.composite import CompositeMemory

    cfg = {"root": str(tmp_path / "c"), "members": [{"module": "ovos-memory-plugin-lexical"}]}
    with CompositeMemory(cfg) as mem:
        mem.update_history(
            exchange("I am planning a trip to Kyoto in April.", "Kyoto in April has cherry blossoms."), "s"
        )
        mem.update_history(exchange("Which Kyoto temples open early?", "Kiyomizu-dera opens at six."), "s")
        mem.update_history(exchange("I also adopted a cat named Miso.", "Lovely."), "s")
        hits = mem.recall("Kyoto trip temples", "new", [])
        joined = [h for h in hits if "sources" in h.metadata]
        assert len(joined) == 1 and len(joined[0].metadata["sources"]) >= 2
        assert joined[0].content.index("planning a trip") < joined[0].content.index("temples open early")


def test_the_shaping_steps_are_still_importable_from_select() -> None:
    """They lived in ``select``: the old import path gives the same objects."""
    from ovos_memory_plugins import select, shaping

    for name in shaping.__all__:
        assert getattr(select, name) is getattr(shaping, name), name
