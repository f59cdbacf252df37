"""Questions about when and in what order (issue 26): a comparison question ("which did I set
up first, the thermostat or the mesh network?") gives each alternative's best match a place,
and the words that ask for an order ("the order of ..., from earliest to latest") do not rank
exchanges that share only them above the evidence. Real keyword and hybrid memories on their
own SQLite files, fed through the host's ``update_history`` and asked through
``build_conversation_context``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.vector import VectorMemory

BACKENDS: dict[str, tuple[type[Any], dict[str, Any]]] = {
    "keyword": (LexicalMemory, {}),
    "hybrid": (VectorMemory, {"embedder": "hash", "hybrid": True}),
    "composite": (
        CompositeMemory,
        {
            "members": [
                {"module": "ovos-memory-plugin-lexical"},
                {"module": "ovos-memory-plugin-vector", "config": {"embedder": "hash"}},
            ]
        },
    ),
}


def _say(mem: BaseRetrievalMemory, session: str, user: str, assistant: str) -> None:
    mem.update_history(
        [
            AgentMessage(role=MessageRole.USER, content=user),
            AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
        ],
        session,
    )


FILLER = [(f"day{i}", f"For lunch on day {i} I had soup with {i} slices of bread.", "Tasty.") for i in range(20)]


def _prompt(mem: BaseRetrievalMemory, utterance: str) -> str:
    return "\n".join(m.content for m in mem.build_conversation_context(utterance, "asked")[:-1])


DEVICES = [
    ("wifi", "Which device do I set up first? The first device I set up, which one first?", "The router first."),
    ("wifi", "Which device first: set up the device I use first, the first device?", "The laptop first."),
    ("wifi", "Set up which device first? First the device, then set up the rest.", "First, as a rule."),
    ("thermostat", "I installed the smart thermostat in the hallway today.", "Nice, it will save energy."),
    ("mesh", "The new mesh network system arrived and is running.", "Good, no more dead spots."),
]


@pytest.fixture(params=sorted(BACKENDS))
def devices(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    yield request.param, {"root": str(tmp_path / "m"), "max_history": 0}


def _memory(kind: str, where: dict[str, Any], **retrieval: Any) -> Any:
    cls, extra = BACKENDS[kind]
    return cls({**where, **extra, "retrieval": {"max_num_results": 2, **retrieval}})


def test_each_alternative_of_a_comparison_question_gets_a_place(devices: tuple[str, dict[str, Any]]) -> None:
    kind, where = devices
    question = "Which device did I set up first, the smart thermostat or the mesh network system?"
    with _memory(kind, where) as mem:
        for session, user, assistant in [*FILLER, *DEVICES]:
            _say(mem, session, user, assistant)
        prompt = _prompt(mem, question)
        assert "smart thermostat in the hallway" in prompt
        assert "new mesh network system arrived" in prompt
    with _memory(kind, where, alternatives=False) as mem:  # the ordinary ranking alone
        prompt = _prompt(mem, question)
        if kind == "keyword":  # the exchanges sharing "device", "set up", "first" outrank one or both
            assert "smart thermostat in the hallway" not in prompt or "new mesh network system arrived" not in prompt


def test_or_without_a_list_of_alternatives_changes_nothing(tmp_path: Path) -> None:
    where = {"root": str(tmp_path / "m"), "max_history": 0}
    question = "Which device did I set up first or later?"  # no comma: not two alternatives
    with _memory("keyword", where) as mem:
        for session, user, assistant in [*FILLER, *DEVICES]:
            _say(mem, session, user, assistant)
        on = _prompt(mem, question)
    with _memory("keyword", where, alternatives=False) as mem:
        assert _prompt(mem, question) == on


RACES = [
    (
        "menu",
        "What is the latest order I placed? Put the three orders in order, latest first.",
        "Your latest order: pizza.",
    ),
    ("tri", "I finished the Spring Sprint Triathlon this morning!", "Congratulations on the triathlon."),
    ("run", "Today I ran the Midsummer 5K run, my second race event.", "Well done on the 5K race."),
]


def test_the_words_asking_for_an_order_do_not_outrank_the_evidence(devices: tuple[str, dict[str, Any]]) -> None:
    kind, where = devices
    with _memory(kind, where, max_num_results=1) as mem:
        for session, user, assistant in [*FILLER, *RACES]:
            _say(mem, session, user, assistant)
        prompt = _prompt(mem, "What is the order of the three race events, from earliest to latest?")
        assert "Midsummer 5K run" in prompt
        assert "latest order I placed" not in prompt
        # a query of nothing else keeps them: "order" is then what it asks about
        assert "latest order I placed" in _prompt(mem, "What was my latest order?")


def test_order_words_of_every_supported_language(tmp_path: Path) -> None:
    from ovos_memory_plugins.select import ORDER_WORDS, without_order_words

    assert set(ORDER_WORDS) == {"en", "de", "es", "fr", "pt", "it", "nl", "zh"}
    assert without_order_words("In welcher Reihenfolge, von der frühesten?", "de").split() == [
        "In",
        "welcher",
        ",",
        "von",
        "der",
        "?",
    ]
    assert "orden" not in without_order_words("¿En qué orden, cronológicamente?", "es")
    assert "ordre" not in without_order_words("Dans quel ordre chronologique ?", "fr")
    assert "顺序" not in without_order_words("按时间顺序，最早的是什么活动？", "zh")
    assert without_order_words("What did I order?", "de") == "What did I order?"  # German words only
