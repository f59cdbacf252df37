"""One recall path (issue #28, stage 3): a composite of one keyword member chooses the prompt's
memories as the keyword memory alone does, on real SQLite files: the same exchanges, the same
questions, the same memories (the own-term check, the prompt's relative cut, the history
window left out), through ``recall`` and through the composite's early turn alike."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from ovos_plugin_manager.agents import find_memory_plugins
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.testing import exchange

LEXICAL = "ovos-memory-plugin-lexical"
pytestmark = pytest.mark.skipif(LEXICAL not in find_memory_plugins(), reason="needs the lexical backend")

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=timezone.utc)

EXCHANGES = [
    ("My sister's birthday is on the 3rd of May.", "I'll remember that."),
    # indexed with the birthday words as the turn before it: found by them, not about them
    ("I am allergic to peanuts.", "Noted, no peanuts for you."),
    ("I adopted a cat named Miso.", "Miso is a lovely name."),
    ("I bought tickets for the Lisbon jazz festival.", "Nice."),
    ("The festival parking was awful.", "Nice."),
    ("My flat in Lisbon is small.", "Nice."),
    ("I collect old jazz records.", "Nice."),
    ("Miso knocked my jazz records off the shelf.", "Oh no, poor records."),
]
GREEK = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
FILLERS = [(f"Filler note {w} about my day.", "Nice to know.") for w in GREEK]
# one strong match among weak ones, each followed by a filler that holds its words as context
FESTIVAL = [
    *FILLERS[:6],
    *(
        pair
        for text, filler in zip(
            [
                "I bought tickets for the Lisbon jazz festival.",
                "The festival parking was awful.",
                "My flat in Lisbon is small.",
                "I collect old jazz records.",
            ],
            FILLERS[6:],
            strict=True,
        )
        for pair in ((text, "Nice."), filler)
    ),
]

QUESTIONS = [
    "When is my sister's birthday?",  # the peanut exchange holds the words only as context
    "Lisbon jazz festival",  # one strong match: the weak ones fall under the relative cut
    "What is my cat called?",
    "What happened to my jazz records?",
    "What do I collect?",
    "What came first, the cat Miso or the festival tickets?",  # two alternatives: a place each
]


@contextmanager
def _pair(
    tmp_path: Path, exchanges: list[tuple[str, str]] = EXCHANGES, **config: Any
) -> Iterator[tuple[LexicalMemory, CompositeMemory]]:
    """The keyword memory alone and a composite of one keyword member, fed the same exchanges."""
    single = LexicalMemory({"root": str(tmp_path / "single"), **config}, clock=lambda: NOW)
    composite = CompositeMemory(
        {"root": str(tmp_path / "composite"), "members": [{"module": LEXICAL}], **config}, clock=lambda: NOW
    )
    with single, composite:
        for user, assistant in exchanges:
            single.update_history(exchange(user, assistant), "s")
            composite.update_history(exchange(user, assistant), "s")
        yield single, composite


def _contents(hits: list[Any]) -> list[str]:
    return [h.content for h in hits]


def _memory_text(msgs: list[AgentMessage]) -> str:
    """The prompt's recalled memories: each ``- [date] ...`` line and its continuation lines (the
    single memory's rolling summary of the turns that left its window is not recall's)."""
    kept: list[str] = []
    inside = False
    for line in "\n".join(m.content for m in msgs[:-1]).splitlines():
        inside = line.startswith("- [") or (inside and line.startswith("  ") and not line.startswith("  - "))
        if inside:
            kept.append(line)
    return "\n".join(kept)


@pytest.mark.parametrize("question", QUESTIONS)
def test_a_one_member_composite_recalls_what_the_keyword_memory_recalls(tmp_path: Path, question: str) -> None:
    with _pair(tmp_path) as (single, composite):
        alone = _contents(single.recall(question, "new", []))
        assert alone, question
        assert _contents(composite.recall(question, "new", [])) == alone
        # the composite's early turn (the searches started before the history is read) too
        assert _memory_text(composite.build_conversation_context(question, "new")) == _memory_text(
            single.build_conversation_context(question, "new")
        )


def test_a_hit_without_the_questions_own_words_stays_out_of_both(tmp_path: Path) -> None:
    with _pair(tmp_path) as (single, composite):
        question = "When is my sister's birthday?"
        # the keyword member's search finds the peanut exchange by its context words ...
        assert any("peanut" in h.content for h in composite.search(question))
        # ... and neither prompt carries it (the composite's did before the one path)
        for mem in (single, composite):
            text = _memory_text(mem.build_conversation_context(question, "new"))
            assert "3rd of May" in text and "peanut" not in text


def test_the_weak_matches_fall_under_the_prompts_relative_cut_in_both(tmp_path: Path) -> None:
    with _pair(tmp_path, FESTIVAL) as (single, composite):
        for mem in (single, composite):
            text = _memory_text(mem.build_conversation_context("Lisbon jazz festival", "new"))
            assert "tickets" in text
            assert "parking" not in text and "flat in Lisbon" not in text and "Filler" not in text
        assert _contents(composite.recall("Lisbon jazz festival", "new", [])) == _contents(
            single.recall("Lisbon jazz festival", "new", [])
        )


def test_an_explicit_min_relative_score_governs_both(tmp_path: Path) -> None:
    with _pair(tmp_path, FESTIVAL, retrieval={"min_relative_score": 0.0}) as (single, composite):
        alone = _contents(single.recall("Lisbon jazz festival", "new", []))
        assert any("parking" in c for c in alone)  # no cut: the weak matches come back
        assert _contents(composite.recall("Lisbon jazz festival", "new", [])) == alone


def test_what_the_history_window_shows_is_left_out_of_both(tmp_path: Path) -> None:
    window = [
        AgentMessage(role=MessageRole.USER, content="I adopted a cat named Miso."),
        AgentMessage(role=MessageRole.ASSISTANT, content="Miso is a lovely name."),
    ]
    with _pair(tmp_path) as (single, composite):
        question = "What did Miso do?"
        assert any("adopted a cat" in c for c in _contents(single.recall(question, "new", [])))
        alone = _contents(single.recall(question, "s", window))
        assert alone and not any("adopted a cat" in c for c in alone)
        assert _contents(composite.recall(question, "s", window)) == alone
        # on the host's path: the session's own window shows its latest exchanges
        with_window = _memory_text(single.build_conversation_context(question, "s"))
        assert with_window and "knocked" not in with_window  # the window shows it already
        assert _memory_text(composite.build_conversation_context(question, "s")) == with_window
