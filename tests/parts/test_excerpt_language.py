"""A long memory is shortened around the query's words in the memory's own language.

The excerpt leaves out the stop words of the keyword index's ``lang`` (the same list the index
searches without): a German memory asked a German question keeps the sentence holding the
question's content word, not the sentences that only share "und", "der", "ist" with it.
Real SQLite memories, through ``build_conversation_context``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.shaping import excerpt, excerpt_terms
from ovos_memory_plugins.testing import exchange
from ovos_memory_plugins.vector import VectorMemory

# Each case: the language, a question, the reply's sentence that answers it (content words of
# the question, few of its stop words), sentences that share only stop words with the question
# (many of them: with English stop words they outrank the answer), and neutral filler.
CASES: dict[str, dict[str, Any]] = {
    "de": {
        "query": "Was ist mit dem Geburtstag von meiner Schwester, und wo ist die Feier?",
        "user": "Kannst du mir ein paar Tipps zum Wandern geben? Ich plane eine Tour im Sommer.",
        "answer": "Der Geburtstag deiner Schwester Ana ist am zwölften Mai.",
        "decoy": "Und wo ist das Problem mit dem Wetter, wenn die Sonne von Westen kommt und der Wind dreht?",
        "filler": "Tipp {i}: genug Wasser trinken.",
    },
    "es": {
        "query": "¿Cuándo es el cumpleaños de mi hermana y qué hacemos para la fiesta?",
        "user": "¿Me das unos consejos para caminar por la sierra? Quiero hacer una ruta en verano.",
        "answer": "El cumpleaños de tu hermana Ana es el doce de mayo.",
        "decoy": "Y si el tiempo es malo para la ruta, la vuelta de la montaña es más corta y que segura.",
        "filler": "Consejo {i}: beber bastante agua.",
    },
}


def reply(case: dict[str, Any]) -> str:
    """A long reply: an opening, filler, eight stop-word-only sentences, the answer, filler."""
    fill = [case["filler"].format(i=i) for i in range(12)]
    decoys = []
    for i in range(8):
        decoys += [case["decoy"], fill[i]]
    return " ".join(["Gerne! / ¡Claro!", *fill, *decoys, case["answer"], *fill])


def memory_block(messages: list[Any]) -> str:
    return "\n".join(str(getattr(m, "content", "")) for m in messages[:-1])


@pytest.mark.parametrize("lang", sorted(CASES))
def test_english_stop_words_would_lose_the_answer(lang: str) -> None:
    # the premise of the tests below: with English stop words the decoys win the budget
    case = CASES[lang]
    text = f"Q: {case['user']}\nA: {reply(case)}"
    assert case["answer"] not in excerpt(text, excerpt_terms(case["query"]), 1000)
    assert case["answer"] in excerpt(text, excerpt_terms(case["query"], lang), 1000)


@pytest.mark.parametrize("lang", sorted(CASES))
def test_a_keyword_memory_keeps_the_sentence_with_the_content_word(tmp_path: Path, lang: str) -> None:
    case = CASES[lang]
    with LexicalMemory({"root": str(tmp_path), "lang": lang}) as mem:
        mem.update_history(exchange(case["user"], reply(case)), "walk")
        block = memory_block(mem.build_conversation_context(case["query"], "later"))
    assert case["answer"] in block
    assert case["decoy"] not in block and "\u2026" in block  # shortened, around the answer


def test_extra_stopwords_are_left_out_too(tmp_path: Path) -> None:
    # the persona's own name is a stop word of the index; the excerpt does not chase it either
    case = CASES["de"]
    with LexicalMemory({"root": str(tmp_path), "lang": "de", "extra_stopwords": ["Wetter", "Sonne"]}) as mem:
        assert {"wetter", "sonn", "sonne"}.isdisjoint(mem.excerpt_terms("Wetter und Sonne, Geburtstag"))
        assert mem.excerpt_terms(case["query"]) == excerpt_terms(case["query"], "de")


def test_a_hybrid_vector_memory_uses_its_keyword_index_language(tmp_path: Path) -> None:
    case = CASES["es"]
    config = {"root": str(tmp_path), "embedder": "hash", "hybrid": True, "keyword": {"lang": "es"}}
    with VectorMemory(config) as mem:
        assert mem.excerpt_terms(case["query"]) == excerpt_terms(case["query"], "es")
        mem.update_history(exchange(case["user"], reply(case)), "walk")
        block = memory_block(mem.build_conversation_context(case["query"], "later"))
    assert case["answer"] in block and case["decoy"] not in block


def test_a_composite_shortens_in_its_keyword_members_language(tmp_path: Path) -> None:
    case = CASES["de"]
    members = [{"name": "kw", "module": "ovos-memory-plugin-lexical", "config": {"lang": "de"}}]
    with CompositeMemory({"root": str(tmp_path), "members": members}) as mem:
        mem.update_history(exchange(case["user"], reply(case)), "walk")
        block = memory_block(mem.build_conversation_context(case["query"], "later"))
    assert case["answer"] in block and case["decoy"] not in block


def test_english_is_unchanged(tmp_path: Path) -> None:
    query = "When is the birthday of my sister, and where is the party?"
    assert excerpt_terms(query) == excerpt_terms(query, "en") == excerpt_terms(query, None)
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        assert mem.excerpt_terms(query) == excerpt_terms(query)
