"""The two alternatives a comparison question names (``select.alternatives``), in every language
the package supports, and the clauses that are not a list of alternatives (issue 26)."""

from __future__ import annotations

import pytest

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.select import alternatives, alternatives_first


@pytest.mark.parametrize(
    ("lang", "question", "pair"),
    [
        (
            "en",
            "Which device did I set up first, the smart thermostat or the mesh network system?",
            ("the smart thermostat", "the mesh network system"),
        ),
        (
            None,
            "Who did I meet first, the woman selling jam or the tourist from Australia?",
            ("the woman selling jam", "the tourist from Australia"),
        ),
        (
            "de",
            "Was habe ich zuerst eingerichtet, das Thermostat oder das Mesh-System?",
            ("das Thermostat", "das Mesh-System"),
        ),
        ("es", "¿Qué instalé primero, el termostato o la red mallada?", ("el termostato", "la red mallada")),
        (
            "fr",
            "Qu'ai-je installé en premier, le thermostat ou le réseau maillé ?",
            ("le thermostat", "le réseau maillé"),
        ),
        ("pt-BR", "O que instalei primeiro, o termostato ou a rede mesh?", ("o termostato", "a rede mesh")),
        ("it", "Cosa ho installato prima, il termostato o la rete mesh?", ("il termostato", "la rete mesh")),
        (
            "nl",
            "Wat heb ik eerst geïnstalleerd, de thermostaat of het mesh-netwerk?",
            ("de thermostaat", "het mesh-netwerk"),
        ),
        ("zh", "我先安装的是哪个，智能恒温器还是网状网络系统？", ("智能恒温器", "网状网络系统")),
    ],
)
def test_the_alternatives_of_a_comparison_question(lang: str | None, question: str, pair: tuple[str, str]) -> None:
    assert alternatives(question, lang) == pair


@pytest.mark.parametrize(
    "text",
    [
        "What areas of the U.S. has John been to or is planning to go to?",  # no comma before it
        "Was September good for Nate? Answer yes or no.",  # the comma's clause ended before it
        "Would Tim enjoy reading books by C. S. Lewis or John Greene?",
        "What did I buy for the party, and when?",  # no "or"
        "Which came first, the order or ?",  # nothing after it
    ],
)
def test_no_alternatives(text: str) -> None:
    assert alternatives(text, "en") is None


def test_an_or_word_of_another_language_is_not_one() -> None:
    assert alternatives("Which did I buy first, the cup of tea?", "en") is None  # "of" is Dutch for "or"
    assert alternatives("Wat kocht ik eerst, de thee of de koffie?", "nl") == ("de thee", "de koffie")
    assert alternatives("Welches zuerst, der Tee or der Kaffee?", "de") is None


def test_alternatives_first_puts_each_pick_first_once() -> None:
    a, b, c = (MemoryHit(content=t, source=t, score=s) for t, s in (("a", 9.0), ("b", 5.0), ("c", 1.0)))
    assert [h.source for h in alternatives_first([c, b], [a, b, c], 2)] == ["c", "b"]
    assert [h.source for h in alternatives_first([c], [a, b, c], 3)] == ["c", "a", "b"]
    assert alternatives_first([], [a, b], 0) == []
