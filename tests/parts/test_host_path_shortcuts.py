"""The host's path made cheaper (issue 25) still does what it did: the ASCII tokenizer path, the
extractive summary folded lazily (in the transaction of the turn that trims the history), a
search's hit terms answered from what it read. Speed itself is measured by benchmarks/host_path.py, never here."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins import text
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage import keyword
from ovos_memory_plugins.summary import RollingSummary

ASCII_TEXTS = [
    "Don't tell L'AMOUR qu'il it's 12'34 rock'n'roll O'Neil's x' ''",
    "Q: I went hiking with 3 friends on 2023-05-08\nA: <BOD> Sounds great! Hiking is fun.",
    "Caroline: I'm researching adoption agencies (shared an image: a photo of a dog) 7",
    "the a an of to in   on... so!!! __init__ snake_case CamelCase 4x4 v2.0 x_y",
    "",
]


def exchange(user: str, assistant: str) -> list[AgentMessage]:
    return [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]


@pytest.mark.parametrize("sample", ASCII_TEXTS)
def test_ascii_text_gets_the_terms_of_the_general_path(sample: str) -> None:
    # a non-ASCII word sends the whole text down the general (Unicode) path; the ASCII words'
    # terms must be the same either way, for documents and for queries
    tail = " \u00e9t\u00e9"
    assert text.tokenize(sample + tail, unigrams=True) == [*text.tokenize(sample, unigrams=True), "ete"]
    for lang in (None, "de"):
        plain = text.query_terms(sample, lang, extra_stopwords=["caroline"])
        assert text.query_terms(sample + tail, lang, extra_stopwords=["caroline"]) == [*plain, "ete"]


@pytest.mark.parametrize(
    "sample",
    [*ASCII_TEXTS, "yes the blue one", "Casa Pepe please", "是的", "ja, die blaue", "run runs", "\u00e9t\u00e9 oui"],
)
def test_counting_query_terms_early_gives_the_full_count_s_answer(sample: str) -> None:
    # a recorded reply gets the turn before it only with at most four terms: the count stops
    # once it is past the limit, and must answer as the full count would
    for lang in (None, "de"):
        for unigrams in (True, False):
            count = len(set(text.query_terms(sample, lang, unigrams=unigrams)))
            for limit in (0, 1, 3, 4, 8):
                assert text.more_query_terms_than(sample, limit, lang, unigrams=unigrams) is (count > limit)


def test_words_with_digits_do_not_fill_the_tokenizer_caches() -> None:
    text.tokenize("counter 918273645 and 7 of it 2023-05-08 v2")
    assert not {"918273645", "7", "2023", "v2"} & set(text._ascii_index)
    assert text._ascii_index["counter"] == "counter" and text._ascii_index["and"] == "and"


def test_the_extractive_summary_is_folded_in_the_trim_s_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    with LexicalMemory({"root": str(tmp_path), "max_history": 2}) as mem:
        mem.storage.db.conn.set_trace_callback(statements.append)
        for i in range(24):
            mem.update_history(exchange(f"My locker code is {1000 + i}.", f"Noted {i}."), "s")
        mem.storage.db.conn.set_trace_callback(None)
        assert "locker code is 1022" in mem.session_summary("s")  # folded when read
        assert "locker code is 1023" not in mem.session_summary("s")  # still in the window
    inside, folds = False, []
    for sql in statements:
        if sql.startswith("BEGIN"):
            inside = True
        elif sql == "COMMIT":
            inside = False
        elif sql.startswith("INSERT INTO memory_summaries"):
            folds.append(inside)
    # the history (24 messages kept) trims 8 at a time: at the 16th and the 20th exchange (and
    # the 24th), each fold inside that turn's transaction; no fold on the other turns
    assert folds == [True, True, True]
    assert statements.count("COMMIT") == 24  # one commit per recorded exchange


def test_a_failing_fold_loses_neither_the_turn_nor_its_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: RollingSummary, session_id: str, exchanges: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    with LexicalMemory({"root": str(tmp_path), "max_history": 2}) as mem:
        for i in range(15):
            mem.update_history(exchange(f"My locker code is {1000 + i}.", f"Noted {i}."), "s")
        monkeypatch.setattr(RollingSummary, "fold_trimmed", broken)
        with caplog.at_level(logging.ERROR):
            mem.update_history(exchange("My bike is blue.", "Noted."), "s")  # the 16th: a trim
        assert "could not update the summary" in caplog.text
        assert mem.messages("s")[-2].content == "My bike is blue."
        assert any("bike is blue" in h.content for h in mem.search("bike"))


def _fill_large(mem: LexicalMemory, n: int) -> None:
    mem.put_documents(
        (f"d{i}", f"[day {i % 7}] Ana: the weather report {i % 13} river bridge {i}", f"s{i % 4}", None)
        for i in range(n)
    )


@pytest.mark.parametrize("large", [False, True])
def test_hit_terms_from_the_search_equal_a_fresh_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, large: bool
) -> None:
    if large:  # the second ranking's path (terms pruned)
        monkeypatch.setattr(keyword, "PRUNE_MIN_DOCUMENTS", 50)
        monkeypatch.setattr(keyword, "PRUNE_POSTINGS", 40)
    with LexicalMemory({"root": str(tmp_path)}) as mem:
        _fill_large(mem, 200)
        hits = mem.keyword.search("the weather report river 12 bridge", 10)
        assert hits
        ids = [h.source for h in hits]
        remembered = mem.keyword.own_terms(ids)
        mem.keyword._hit_terms = None  # what a read of the file gives
        assert remembered == mem.keyword.own_terms(ids)
        # a write since the search: the terms are read again, not remembered
        mem.keyword.search("the weather report river 12 bridge", 10)
        mem.put_document(ids[0], "Ana: something else entirely", "s0")
        assert mem.keyword.own_terms([ids[0]])[ids[0]] == frozenset({"ana", "someth", "els", "entir"})
