"""The SQLite keyword index changes its FTS5 layout with the memory's size (issue 25): a large
memory's index holds no document sizes (FTS5's bm25 would read one per match), a smaller one
keeps them. The change keeps every document, every search's answer and the index's mark (the
highest key FTS5 holds), in this connection and in another one; an index written by an earlier
version (no mark) is marked from its sizes once."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage import keyword
from ovos_memory_plugins.storage.sqlite import keyword as sqlite_keyword

WORDS = ["weather", "report", "cloudy", "sunny", "rain", "wind", "storm", "tornado", "river", "bridge", "market"]
QUERIES = ["tornado over the river bridge", "weather report", "sunny market", "heron", "storm wind rain"]


def _text(rng: random.Random, i: int) -> str:
    return f"Ana: {' '.join(rng.choice(WORDS) for _ in range(rng.randint(3, 10)))} {i}"


def _file(root: Path) -> tuple[bool, int, int]:
    """The index's layout (unsized?), its mark and the highest terms key, read from the file."""
    conn = sqlite3.connect(root / "lexical.db")
    try:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'keyword_fts'").fetchone()[0]
        mark = conn.execute("SELECT CAST(value AS INTEGER) FROM keyword_meta WHERE key = 'fts_upto'").fetchone()
        top = conn.execute("SELECT coalesce(max(id), 0) FROM keyword_terms").fetchone()[0]
        return "columnsize=0" in sql, int(mark[0]) if mark else -1, int(top)
    finally:
        conn.close()


def _ranked(m: LexicalMemory, query: str, **kwargs: object) -> list[tuple[str, float]]:
    return [(h.source, round(h.score, 9)) for h in m.search(query, top_k=15, **kwargs)]  # type: ignore[arg-type]


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_keyword, "UNSIZED_MIN_DOCUMENTS", 40)
    monkeypatch.setattr(sqlite_keyword, "INDEX_BATCH", 8)  # a large memory's search leaves rows to it
    # every match a candidate: what is found then depends on the ranking alone (with the usual 50,
    # the length-free first stage may cut a document at its edge that the sized one keeps)
    monkeypatch.setattr(keyword, "RESCORE_CANDIDATES", 1000)


@pytest.mark.usefixtures("small_threshold")
@pytest.mark.parametrize("large", [False, True], ids=["fts5-k1", "large-memory-k1-and-pruning"])
def test_the_layout_follows_the_size_and_keeps_every_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, large: bool
) -> None:
    if large:  # the large memory's ranking (RESCORE_K1, pruned terms, the vocabulary table) on both
        monkeypatch.setattr(keyword, "PRUNE_MIN_DOCUMENTS", 20)
        monkeypatch.setattr(keyword, "PRUNE_POSTINGS", 30)
    rng = random.Random(5)
    texts = [_text(rng, i) for i in range(60)] + ["Ana: a heron by the river bridge"]
    sized_root, root = tmp_path / "sized", tmp_path / "grown"
    with LexicalMemory({"root": str(root), "retrieval": {"min_relative_score": 0.0}}) as m:
        keys = [m.store(t, f"s{i % 3}") for i, t in enumerate(texts[:30])]
        m.search("weather")  # indexes (and opens the vocabulary table on the sized layout)
        assert _file(root)[0] is False
        keys += [m.store(t, f"s{i % 3}") for i, t in enumerate(texts[30:], 30)]
        m.search("weather")
        unsized, mark, top = _file(root)
        # past 40 documents: no sizes; everything indexed, or (large) up to the last batch of 8
        assert unsized and (mark == top if not large else 0 <= top - mark < 8)
        grown = {q: _ranked(m, q) for q in QUERIES}
        scoped = _ranked(m, "heron tornado", session_id="s0")
    monkeypatch.setattr(sqlite_keyword, "UNSIZED_MIN_DOCUMENTS", 10_000)
    with LexicalMemory({"root": str(sized_root), "retrieval": {"min_relative_score": 0.0}}) as m:
        sized_keys = [m.store(t, f"s{i % 3}") for i, t in enumerate(texts)]
        m.search("weather")
        assert _file(sized_root)[0] is False
        by_key = dict(zip(sized_keys, keys, strict=True))
        for q in QUERIES:
            assert [(by_key[s], score) for s, score in _ranked(m, q)] == grown[q]
        assert [(by_key[s], score) for s, score in _ranked(m, "heron tornado", session_id="s0")] == scoped
    assert grown["heron"][0][0] == keys[-1]


@pytest.mark.usefixtures("small_threshold")
def test_forgetting_below_half_brings_the_sizes_back(tmp_path: Path) -> None:
    rng = random.Random(6)
    with LexicalMemory({"root": str(tmp_path), "retrieval": {"min_relative_score": 0.0}}) as m:
        keys = [m.store(_text(rng, i), "s") for i in range(50)]
        heron = m.store("Ana: a heron by the river bridge", "s")
        m.search("weather")
        assert _file(tmp_path)[0] is True
        m.delete(keys[:25])  # 26 left: above half (20), the layout stays
        assert _file(tmp_path)[0] is True
        m.delete(keys[25:35])  # 16 left
        unsized, mark, top = _file(tmp_path)
        assert not unsized and mark == top
        assert [h.source for h in m.search("heron", top_k=3)] == [heron]
        left = {h.source for h in m.search("weather report storm wind rain sunny market", top_k=100)}
        assert left <= set(keys[35:]) | {heron} and not left & set(keys[:35])
        assert m.keyword.count() == 16


@pytest.mark.usefixtures("small_threshold")
def test_another_connection_follows_the_change(tmp_path: Path) -> None:
    rng = random.Random(8)
    config = {"root": str(tmp_path), "retrieval": {"min_relative_score": 0.0}}
    with LexicalMemory(config) as writer, LexicalMemory(config) as reader:
        for i in range(20):
            writer.store(_text(rng, i), "s")
        assert reader.search("weather") and reader.keyword.unsized() is False
        for i in range(20, 60):
            writer.store(_text(rng, i), "s")
        heron = writer.store("Ana: a heron by the river bridge", "s")
        writer.search("weather")
        assert _file(tmp_path)[0] is True
        assert [h.source for h in reader.search("heron", top_k=3)] == [heron]
        assert reader.keyword.unsized() is True
        assert _ranked(reader, "storm wind rain") == _ranked(writer, "storm wind rain")


def test_a_file_without_a_mark_is_marked_from_its_sizes(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as m:
        keys = [m.store(f"Ana: note {i} about the river", "s") for i in range(12)]
    conn = sqlite3.connect(tmp_path / "lexical.db")
    with conn:  # as an earlier version wrote it: no mark, the index's highest key read from its sizes
        conn.execute("DELETE FROM keyword_meta WHERE key = 'fts_upto'")
    conn.close()
    with LexicalMemory({"root": str(tmp_path)}) as m:
        assert _file(tmp_path)[1:] == (_file(tmp_path)[2], _file(tmp_path)[2])
        new = m.store("Ana: a heron by the river", "s")
        assert m.search("heron", top_k=1)[0].source == new
        assert len(m.search("river", top_k=50)) == len(keys) + 1


@pytest.mark.usefixtures("small_threshold")
def test_a_rebuild_that_fails_keeps_the_old_layout_and_every_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(9)
    real_create = sqlite_keyword.SqliteKeywordIndex._create_fts

    def busy(self: object, conn: sqlite3.Connection, *, unsized: bool) -> None:
        raise sqlite3.OperationalError("database is locked")  # another process holds the file

    with LexicalMemory({"root": str(tmp_path), "retrieval": {"min_relative_score": 0.0}}) as m:
        keys = [m.store(_text(rng, i), "s") for i in range(30)]
        m.search("weather")
        monkeypatch.setattr(sqlite_keyword.SqliteKeywordIndex, "_create_fts", busy)
        keys += [m.store(_text(rng, i), "s") for i in range(30, 60)]
        heron = m.store("Ana: a heron by the river bridge", "s")
        assert [h.source for h in m.search("heron", top_k=3)] == [heron]  # the search still answers
        unsized, mark, top = _file(tmp_path)
        assert not unsized and mark == top  # the DROP was rolled back with the failed rebuild
        assert "could not change the index's layout yet" in caplog.text
        assert {h.source for h in m.search("weather report storm wind rain sunny market", top_k=100)} >= set(keys)
        monkeypatch.setattr(sqlite_keyword.SqliteKeywordIndex, "_create_fts", real_create)
        m.store("Ana: one more note about the market", "t")
        m.search("weather")  # the next write's indexing tries again
        assert _file(tmp_path)[0] is True
        assert [h.source for h in m.search("heron", top_k=3)] == [heron]  # another session: no context
