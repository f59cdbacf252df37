"""The keyword backend: conformance kit, every script, stop words, hostile queries, restart,
purge-on-forget, a concurrent second process and the no-FTS5 fallback, on real SQLite files."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import OnEveryEngine
from rank_bm25 import BM25Okapi

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.config import validate_config
from ovos_memory_plugins.lexical import LexicalMemory, split_head
from ovos_memory_plugins.storage.sqlite import database as sqlite_layer
from ovos_memory_plugins.testing import HOSTILE_TEXTS, MemoryContract, exchange
from ovos_memory_plugins.text import query_terms, tokenize


class TestLexicalContract(OnEveryEngine, MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return LexicalMemory(self.engine.memory_config(config))


class NoFTS5Memory(LexicalMemory):
    use_fts5 = False


class TestLexicalFallbackContract(MemoryContract):
    survives_restart = True

    def make_memory(self, config: dict[str, Any]) -> BaseRetrievalMemory:
        return NoFTS5Memory(config)


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    with LexicalMemory({"root": str(tmp_path / "m")}) as m:
        yield m


def _contents(hits: list[Any]) -> list[str]:
    return [h.content for h in hits]


# -- loading and config ------------------------------------------------------------------------


def test_loads_by_name_through_opm(tmp_path: Path) -> None:
    from ovos_plugin_manager.agents import load_memory_plugin

    assert load_memory_plugin("ovos-memory-plugin-lexical") is LexicalMemory
    parsed = validate_config({"lang": "pt-BR", "extra_stopwords": ["ada"]}, plugin="ovos-memory-plugin-lexical")
    assert parsed.options.lang == "pt-BR"


def test_one_file_per_memory_with_db_path(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "mine.db"
    with LexicalMemory({"root": str(tmp_path / "root"), "db_path": str(path)}) as m:
        m.update_history(exchange("my bike is red", "noted"), "s")
        assert m.stats()["db_path"] == str(path)
    assert path.exists()
    assert not (tmp_path / "root" / "history.db").exists()
    with LexicalMemory({"root": str(tmp_path / "m")}) as m:
        assert Path(m.stats()["db_path"]) == tmp_path / "m" / "lexical.db"


def test_bad_options_fall_back(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path), "lang": 7, "head_weight": -1}) as m:
        assert m.options.lang is None and m.options.head_weight == 1.0
        assert len(m.config_problems) == 2


# -- recall ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("我喜欢红色的自行车，每天骑车上班", "你还记得我的自行车是什么颜色吗"),
        ("昨天我在东京买了一台新的相机", "相机在哪里买的"),
        ("先週、京都でお寺を見ました", "京都で何を見ましたか"),
        ("우리 강아지 이름은 초코입니다", "강아지 이름이 뭐였지"),
        ("ฉันชอบกินข้าวมันไก่ที่ร้านใกล้บ้าน", "ข้าวมันไก่ร้านไหน"),
        ("Mi abuela vive en São Paulo y cocina feijoada", "onde vive a avó? Sao Paulo"),
        ("Ich habe am Wochenende den Müllcontainer repariert", "muellcontainer Mullcontainer repariert"),
        ("Nous sommes allés au café près de l'hôpital", "quel cafe pres de l'hopital"),
    ],
)
def test_every_script_is_recalled(mem: LexicalMemory, stored: str, query: str) -> None:
    target = mem.store(stored, "s")
    for i, other in enumerate(["the weather was fine", "天气很好", "今日は晴れ", "날씨가 좋다", "อากาศดี"]):
        mem.store(f"{other} {i}", "s")
    hits = mem.search(query, top_k=3)
    assert hits and hits[0].source == target


def test_two_character_chinese_word_inside_a_sentence(mem: LexicalMemory) -> None:
    doc = mem.store("我今天拿到了数学考试的满分", "s")
    mem.store("我们明天去公园散步", "s")
    assert mem.search("数学", top_k=3)[0].source == doc


def test_stop_word_only_queries_recall_nothing(mem: LexicalMemory) -> None:
    mem.update_history(exchange("what is it that you want to tell me", "I have nothing to tell you"), "s")
    mem.store("a the and of it is", "s")
    for query in ("tell me a joke", "what is it", "the and of", "我们的什么", "o que é isso", "<BOD> Q: A:"):
        assert mem.search(query, top_k=5) == [], query
    msgs = mem.build_conversation_context("tell me a joke", "other")
    assert len(msgs) == 1


def test_unrelated_utterance_recalls_nothing(mem: LexicalMemory) -> None:
    mem.update_history(exchange("my cat Bartholomew is orange", "lovely"), "s")
    mem.update_history(exchange("the boiler code is 4471", "noted"), "s")
    assert mem.search("tell me a joke", top_k=5) == []
    assert mem.search("what colour is Bartholomew", top_k=5)[0].content.startswith("Q: my cat Bartholomew")


def test_relative_cut_drops_weak_hits(mem: LexicalMemory) -> None:
    for i in range(30):
        mem.store(f"note {i} about the garden and the weather", "s")
    strong = mem.store("the saxophone teacher Imelda lives in the garden house", "s")
    hits = mem.search("saxophone teacher Imelda garden", top_k=10)
    assert hits[0].source == strong and len(hits) == 1


def test_labels_are_not_content(mem: LexicalMemory) -> None:
    mem.update_history(exchange("hello", "hi"), "s")
    assert mem.search("Q", top_k=5) == [] and mem.search("A:", top_k=5) == []


@pytest.mark.parametrize("query", HOSTILE_TEXTS)
def test_hostile_queries_are_literal_and_never_raise(mem: LexicalMemory, query: str) -> None:
    mem.store("NEAR AND OR NOT are words too; column:value and a*b", "s")
    assert isinstance(mem.search(query, top_k=3), list)


def test_fts5_syntax_is_matched_literally(mem: LexicalMemory) -> None:
    doc = mem.store("the NEAR group met at the OR theatre", "s")
    mem.store("something else entirely", "s")
    for q in ["NEAR(group theatre)", '"group', "group OR", "theatre*", "body_terms: group", "group^"]:
        hits = mem.search(q, top_k=3)
        assert hits and hits[0].source == doc, q


def test_session_filter_is_in_the_query(mem: LexicalMemory) -> None:
    for i in range(50):
        mem.store(f"the quokka festival report {i}", "crowd")
    mine = mem.store("my quokka festival ticket", "mine")
    assert [h.source for h in mem.search("quokka festival", session_id="mine", top_k=1)] == [mine]
    assert mem.search("quokka", session_id="nobody", top_k=3) == []


def test_metadata_and_upsert(mem: LexicalMemory) -> None:
    a = mem.store("the spare key is under the frog statue", "s", {"ref": "k1"})
    b = mem.store("the spare key is under the frog statue", "s", {"ref": "k2"})
    assert a == b
    hits = mem.search("spare key frog", top_k=5)
    assert len(hits) == 1 and hits[0].metadata["ref"] == "k2" and hits[0].metadata["session_id"] == "s"
    assert mem.stats()["documents"] == 1


def test_previous_turn_gives_context(mem: LexicalMemory) -> None:
    mem.store("Caroline: did you finally repaint the kayak?", "s1")
    reply = mem.store("Melanie: yes, bright yellow, last Tuesday", "s1")
    mem.store("Melanie: I bought bright yellow shoes", "s2")
    hits = mem.search("what colour is the kayak", top_k=5)
    assert reply in [h.source for h in hits]
    # a plain note borrows nothing from the document before it
    with LexicalMemory({"root": str(mem.root) + "-2"}) as other:
        other.store("the kayak is in the garage", "s")
        note = other.store("bright yellow paint is on the shelf", "s")
        assert note not in [h.source for h in other.search("kayak", top_k=5)]


def test_context_weight_zero_turns_it_off(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path), "context_weight": 0}) as m:
        m.store("Caroline: did you repaint the kayak?", "s")
        reply = m.store("Melanie: yes, bright yellow", "s")
        assert reply not in [h.source for h in m.search("kayak", top_k=5)]


def test_ranking_agrees_with_an_independent_rank_bm25_run(mem: LexicalMemory) -> None:
    corpus = [
        "the orange cat sleeps on the sofa",
        "my neighbour's dog chases the orange cat",
        "the boiler code is 4471",
        "we repaired the red bicycle",
        "a cat café opened near the station",
        "the station clock is broken",
        "tuna is the cat's favourite food",
        "the bicycle shop sells red bells",
    ] + [f"filler note number {i} about nothing in particular" for i in range(12)]
    ids = [mem.store(t, "s") for t in corpus]
    query = "orange cat bicycle"
    # no query term is in half of the documents, so FTS5's idf equals rank-bm25's Okapi idf
    reference = BM25Okapi([tokenize(t) for t in corpus], k1=1.2, b=0.75)
    scores = reference.get_scores(query_terms(query))
    expected = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
    mem.settings.retrieval.min_relative_score = 0.0
    hits = mem.search(query, top_k=10)
    assert [ids.index(h.source) for h in hits] == expected
    assert [h.score for h in hits] == pytest.approx([scores[i] for i in expected])


# -- persistence, purge, concurrency -----------------------------------------------------------


def test_restart_keeps_documents_and_history(tmp_path: Path) -> None:
    cfg = {"root": str(tmp_path / "m")}
    with LexicalMemory(cfg) as m:
        m.update_history(exchange("my passport is in the blue drawer", "noted"), "s")
        doc = m.store("自行车放在车库里", "s", {"ref": 1})
    with LexicalMemory(cfg) as m:
        assert m.search("passport", top_k=3)[0].content.startswith("Q: my passport")
        assert m.search("自行车", top_k=3)[0].source == doc
        assert [x.content for x in m.get_history("s")] == ["my passport is in the blue drawer", "noted"]
        assert m.stats()["documents"] == 2


def _file_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.iterdir() if p.is_file())


@pytest.mark.parametrize("how", ["delete", "forget_session", "forget_all"])
def test_forget_purges_text_from_the_file(tmp_path: Path, how: str) -> None:
    root = tmp_path / "m"
    secret, kept = "zanzibarquokka", "keepsake"
    with LexicalMemory({"root": str(root)}) as m:
        for i in range(30):
            m.store(f"{kept} note {i}", "other")
        doc = m.store(f"the vault word is {secret}", "secret-session")
        m.store(f"Melanie: and {secret} again", "secret-session")
        m.store("Caroline: the reply after it", "secret-session")
        assert secret.encode() in _file_bytes(root)
        if how == "delete":
            m.delete([doc, *[h.source for h in m.search(secret, top_k=10)]])
        elif how == "forget_session":
            assert m.forget_session("secret-session") == 3
        else:
            m.forget_all()
        assert m.search(secret, top_k=5) == []
        assert secret.encode() not in _file_bytes(root)
        if how != "forget_all":
            assert m.search(kept, top_k=3)


def test_purge_reaches_context_copies(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with LexicalMemory({"root": str(root)}) as m:
        secret = m.store("Caroline: my pin is zebracrossing99", "s")
        m.store("Melanie: I will not tell anyone", "s")
        m.delete([secret])
        assert m.search("zebracrossing99", top_k=5) == []
        assert b"zebracrossing99" not in _file_bytes(root)


_WRITER = textwrap.dedent(
    """
    import sys
    from ovos_memory_plugins.lexical import LexicalMemory
    root, n = sys.argv[1], int(sys.argv[2])
    m = LexicalMemory({"root": root})
    for i in range(n):
        m.store(f"second process note {i} about walruses", "cli")
        if i % 10 == 0:
            m.search("walruses", top_k=3)
    m.close()
    """
)


def test_a_second_process_writing_the_same_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "m"
    n = 150
    with LexicalMemory({"root": str(root)}) as m:
        m.store("warm up", "s")
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(root), str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        i = 0
        # keep writing until the other process is done, so the two really overlap
        while proc.poll() is None or i < n:
            m.update_history(exchange(f"persona question {i} about penguins", f"answer {i}"), "persona")
            m.build_conversation_context("penguins", "persona")
            i += 1
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert b"locked" not in err
        assert not [r for r in caplog.records if "locked" in r.getMessage()]
        assert m.stats()["documents"] == 1 + n + i
        assert len(m.search("walruses", session_id="cli", top_k=1000)) >= 1
        assert len(m.get_history("persona")) == 10
        assert m.storage.documents.count("cli") == n


# -- no FTS5 ------------------------------------------------------------------------------------


def test_no_fts5_fallback_same_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    monkeypatch.setattr(sqlite_layer, "fts5_available", lambda: False)
    caplog.set_level(logging.WARNING, logger="ovos_memory_plugins.storage.sqlite.keyword")
    with LexicalMemory({"root": str(tmp_path / "m")}) as m:
        assert [r for r in caplog.records if "no FTS5" in r.getMessage()]
        assert len([r for r in caplog.records if "no FTS5" in r.getMessage()]) == 1
        assert m.stats()["fts5"] is False
        a = m.store("my bicycle is red", "s1", {"ref": 1})
        m.store("我喜欢红色自行车", "s2")
        m.store("the weather is nice", "s1")
        hits = m.search("what colour is my bicycle", top_k=3)
        assert hits[0].source == a and hits[0].metadata["ref"] == 1
        assert m.search("自行车", session_id="s1", top_k=3) == []
        assert m.search("tell me a joke", top_k=3) == []
        for q in HOSTILE_TEXTS:
            m.search(q, top_k=2)
        assert m.forget_session("s1") == 2
        assert m.search("bicycle", top_k=3) == []


def test_fts5_index_is_built_for_rows_written_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "m")
    with NoFTS5Memory({"root": root}) as m:
        doc = m.store("the lighthouse keeper is called Morwenna", "s")
    with LexicalMemory({"root": root}) as m:
        assert m.stats()["fts5"] is True
        assert m.search("lighthouse keeper", top_k=3)[0].source == doc


def test_split_head() -> None:
    assert split_head("[7 May 2023] Caroline: hi there") == ("[7 May 2023] Caroline", "hi there")
    assert split_head("[2023/04/23 (Sun) 18:14] how do I") == ("[2023/04/23 (Sun) 18:14]", "how do I")
    assert split_head("Q: hello\nA: hi") == ("", "Q: hello\nA: hi")
    assert split_head("no head here") == ("", "no head here")
    assert split_head("This is a long sentence with many words: really") == (
        "",
        "This is a long sentence with many words: really",
    )


def test_plain_sqlite_reader_sees_the_documents(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as m:
        m.store("readable by any sqlite client", "s")
    conn = sqlite3.connect(tmp_path / "lexical.db")
    try:
        assert conn.execute("SELECT content FROM documents").fetchall() == [("readable by any sqlite client",)]
    finally:
        conn.close()


# -- deferred indexing and pruning ---------------------------------------------------------------


def _integrity_check(m: LexicalMemory) -> None:
    m.keyword._index_pending()
    m.keyword.db.execute("INSERT INTO keyword_fts (keyword_fts, rank) VALUES ('integrity-check', 1)")


def test_deferred_index_stays_consistent(tmp_path: Path) -> None:
    from ovos_memory_plugins.storage import keyword

    with LexicalMemory({"root": str(tmp_path)}) as m:
        ids = [m.store(f"Caroline: batch note {i} about otter {i}", "s") for i in range(keyword.INDEX_BATCH + 5)]
        # the last documents are pending until this search, which indexes them first
        assert m.search("otter 260", top_k=1)[0].source == ids[260]
        pending = m.store("Melanie: a pending note about herons", "s", {"v": 1})
        m.store("Melanie: a pending note about herons", "s", {"v": 2})  # upsert of a pending row
        m.store("Caroline: batch note 3 about otter 3", "s", {"v": 3})  # upsert of an indexed row
        m.delete([ids[0], ids[-1]])  # an indexed row and the one after it in the session
        hits = m.search("herons", top_k=3)
        assert [h.source for h in hits] == [pending] and hits[0].metadata["v"] == 2
        assert m.search("otter 3", top_k=1)[0].metadata["v"] == 3
        _integrity_check(m)


def test_close_indexes_what_is_pending(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as m:
        m.store("the albatross flies far", "s")
    conn = sqlite3.connect(tmp_path / "lexical.db")
    try:
        assert conn.execute("SELECT count(*) FROM keyword_fts_docsize").fetchone() == (1,)
    finally:
        conn.close()


def test_large_memories_prune_common_terms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ovos_memory_plugins.storage import keyword

    monkeypatch.setattr(keyword, "PRUNE_MIN_DOCUMENTS", 20)
    monkeypatch.setattr(keyword, "PRUNE_POSTINGS", 10)
    with LexicalMemory({"root": str(tmp_path)}) as m:
        for i in range(40):
            m.store(f"weather report {i}: cloudy", "s")
        rare = m.store("weather report: a tornado was seen", "s")
        assert m.search("weather tornado", top_k=3)[0].source == rare
        assert dict(m.keyword._prune(keyword.query_counts("weather tornado", m.keyword.settings))) == {"tornado": 1}
        # a query of common terms only still searches its rarest term
        assert m.search("weather", top_k=3)
        _integrity_check(m)


def test_a_corrupt_file_is_left_alone_and_the_memory_still_answers(tmp_path: Path) -> None:
    path = tmp_path / "lexical.db"
    garbage = b"this is not an sqlite database" * 100
    path.write_bytes(garbage)
    with LexicalMemory({"root": str(tmp_path)}) as m:
        m.update_history(exchange("my locker is 88", "noted"), "s")
        assert m.search("locker", top_k=3)
        assert m.build_conversation_context("locker", "s")[-1].content == "locker"
    assert path.read_bytes() == garbage
