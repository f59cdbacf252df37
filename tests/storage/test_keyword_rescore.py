"""On a large memory the pruned terms only find candidates; every query term still ranks them, with a
sooner-saturating term frequency (``RESCORE_K1``)."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage import keyword

WORDS = [
    "weather",
    "report",
    "cloudy",
    "sunny",
    "rain",
    "wind",
    "storm",
    "tornado",
    "city",
    "river",
    "bridge",
    "market",
    "garden",
]


def fill(m: LexicalMemory) -> None:
    rng = random.Random(7)
    for i in range(120):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        m.store(f"[day {i % 9}] Ana: {text}", f"s{i % 5}")


def test_bm25_scores_equal_the_index_on_every_term(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LexicalMemory({"root": str(tmp_path), "retrieval": {"min_relative_score": 0.0}}) as m:
        fill(m)
        query = "tornado over the river bridge, and the weather report"
        exact = m.search(query, top_k=200)  # no pruning below PRUNE_MIN_DOCUMENTS: FTS5's own scores
        monkeypatch.setattr(keyword, "PRUNE_MIN_DOCUMENTS", 20)
        monkeypatch.setattr(keyword, "PRUNE_POSTINGS", 40)
        monkeypatch.setattr(keyword, "RESCORE_CANDIDATES", 1000)
        monkeypatch.setattr(keyword, "RESCORE_K1", keyword.BM25_K1)  # FTS5's own saturation: its own scores
        counts = keyword.query_counts(query, m.keyword.settings)
        assert len(m.keyword._prune(counts)) < len(counts)  # terms are left out ...
        rescored = m.search(query, top_k=200)
        # ... yet every document the kept terms found has the score the unpruned index gives it
        by_id = {h.source: h.score for h in exact}
        assert rescored and all(h.score == pytest.approx(by_id[h.source], rel=1e-9) for h in rescored)
        assert [h.source for h in rescored] == [h.source for h in exact if h.source in {r.source for r in rescored}]
        # session-scoped searches rank the same way
        scoped = m.search(query, session_id="s1", top_k=50)
        assert scoped and all(h.score == pytest.approx(by_id[h.source], rel=1e-9) for h in scoped)


def test_a_left_out_term_still_orders_what_the_rare_terms_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword, "PRUNE_MIN_DOCUMENTS", 20)
    monkeypatch.setattr(keyword, "PRUNE_POSTINGS", 10)
    with LexicalMemory({"root": str(tmp_path)}) as m:
        for i in range(40):
            m.store(f"filler note {i}", "s")
        for i in range(12):
            m.store(f"weather report {i}: cloudy", "s")
        m.store("a tornado was seen", "s")  # shorter: without "weather" it would rank first
        both = m.store("weather: a tornado was seen", "s")
        hits = m.search("weather tornado", top_k=2)
        counts = keyword.query_counts("weather tornado", m.keyword.settings)
        assert dict(m.keyword._prune(counts)) == {"tornado": 1}  # "weather" finds nothing ...
        assert hits[0].source == both  # ... but ranks the two tornado documents
        assert hits[0].score > hits[1].score


def test_the_averages_record_is_read(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path)}) as m:
        m.store("one two three", "s")
        m.store("four five", "s")
        m.search("one", top_k=1)  # indexes what is pending
        assert m.keyword._averages() == (2, 2.5)


def test_bm25_scores_match_an_independent_computation() -> None:
    """The fast path (a substring test, then an exact count between spaces) against a plain
    split-and-count BM25, on terms that are substrings of other terms and repeated neighbours."""
    rows = [
        ("art party art art", "ana", "smart"),
        ("party", "", ""),
        ("", "art", "art art"),
        ("cart", "ana art", ""),
        ("\x00 \x00 art \x00", "", ""),  # stand-ins for other tokens (PostgreSQL's columns)
    ]
    counts = Counter({"art": 2, "ana": 1, "missing": 1})
    df = {"art": 3, "ana": 2}
    weights = (1.0, 2.0, 0.4)
    n, avg = 40, 3.5
    for k1 in (keyword.BM25_K1, keyword.RESCORE_K1):
        expected = []
        for cols in rows:
            length = sum(len(c.split()) for c in cols)
            norm = k1 * (1 - keyword.BM25_B + keyword.BM25_B * length / avg)
            score = 0.0
            for term, times in counts.items():
                tf = sum(w * c.split().count(term) for c, w in zip(cols, weights, strict=True))
                if tf:
                    idf = max(math.log((n - df.get(term, 0) + 0.5) / (df.get(term, 0) + 0.5)), 1e-6)
                    score += min(times, keyword.MAX_TERM_REPEAT) * idf * tf * (k1 + 1) / (tf + norm)
            expected.append(score)
        got = keyword.bm25_scores(counts, rows, df, n, avg, weights, k1=k1)
        assert got == pytest.approx(expected, rel=1e-12)
    assert keyword.bm25_scores(counts, rows, df, n, avg, weights)[1] == 0.0  # "party" holds no "art"


def test_large_memories_rank_with_the_rescoring_saturation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above PRUNE_MIN_DOCUMENTS every search is ranked again with RESCORE_K1, pruned or not: a
    text holding both query words outranks one that repeats one of them (FTS5's k1 = 1.2 puts the
    repeating one first); below it, FTS5 ranks alone."""
    query = "ferry timetable"
    repeat = "ferry ferry ferry ferry ferry ferry tickets"
    both = "ferry timetable for the islands, tickets"
    with LexicalMemory({"root": str(tmp_path), "retrieval": {"min_relative_score": 0.0}}) as m:
        for i in range(30):
            m.store(f"filler note number {i} about gardens", "s")
        for i in range(4):
            m.store(f"the timetable {i} of the museum", "s")
        m.store(repeat, "s")
        m.store(both, "s")
        small = [h.content for h in m.search(query, top_k=2)]
        monkeypatch.setattr(keyword, "PRUNE_MIN_DOCUMENTS", 20)
        counts = keyword.query_counts(query, m.keyword.settings)
        assert m.keyword._prune(counts) == counts  # nothing pruned: still ranked again
        large = [h.content for h in m.search(query, top_k=2)]
        monkeypatch.setattr(keyword, "RESCORE_K1", keyword.BM25_K1)
        fts_saturation = [h.content for h in m.search(query, top_k=2)]
    assert small == fts_saturation == [repeat, both]
    assert large == [both, repeat]


def test_large_memories_score_as_bm25_with_the_rescoring_saturation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FTS5 with scaled column weights ranks a large memory as bm25 with RESCORE_K1: with no term
    pruned, its scores (times the constant) equal bm25_scores' from the stored terms; with terms
    pruned, the second ranking gives the same scores."""
    query = "tornado over the river bridge, and the weather report"
    rng = random.Random(11)
    vocabulary = WORDS + [f"word{i}" for i in range(30)]
    with LexicalMemory({"root": str(tmp_path), "retrieval": {"min_relative_score": 0.0}}) as m:
        for i in range(120):
            text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 14)))
            m.store(f"[day {i % 9}] Ana: {text}", f"s{i % 5}")
        m.search("warm up", top_k=1)  # index what is pending
        monkeypatch.setattr(keyword, "PRUNE_MIN_DOCUMENTS", 20)
        index = m.keyword
        counts = keyword.query_counts(query, index.settings)
        rows = index.db.query(
            "SELECT d.doc_id, t.body_terms, t.head_terms, t.ctx_terms FROM keyword_terms t"
            " JOIN documents d ON d.id = t.id ORDER BY t.id"
        )
        averages = index._averages()
        assert averages is not None
        n, avg = averages
        df = {t: sum(t in f"{r[1]} {r[2]} {r[3]}".split() for r in rows) for t in counts}
        weights = (1.0, float(index.settings.head_weight), float(index.settings.context_weight))
        expected = keyword.bm25_scores(counts, [r[1:] for r in rows], df, n, avg, weights, k1=keyword.RESCORE_K1)
        by_id = {r[0]: score for r, score in zip(rows, expected, strict=True) if score > 0}
        assert index._prune(counts) == counts  # nothing pruned: FTS5 ranks alone, with scaled weights
        whole = m.search(query, top_k=200)
        assert len(whole) == len(by_id)
        assert all(h.score == pytest.approx(by_id[h.source], rel=1e-9) for h in whole)
        assert [h.score for h in whole] == sorted((h.score for h in whole), reverse=True)
        monkeypatch.setattr(keyword, "PRUNE_POSTINGS", 40)
        monkeypatch.setattr(keyword, "RESCORE_CANDIDATES", 1000)
        assert len(index._prune(counts)) < len(counts)
        rescored = m.search(query, top_k=200)
        assert rescored and all(h.score == pytest.approx(by_id[h.source], rel=1e-9) for h in rescored)


def test_a_term_found_everywhere_is_searched_in_its_newest_postings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning keeps the rarest term however common it is; when its postings pass PRUNE_POSTINGS,
    only the newest PRUNE_POSTINGS of them are candidates (the search's cost is bounded on any
    size). A rarer word still finds an old document, and so do a session's and a window's
    searches, which read every posting."""
    monkeypatch.setattr(keyword, "PRUNE_MIN_DOCUMENTS", 20)
    monkeypatch.setattr(keyword, "PRUNE_POSTINGS", 10)
    with LexicalMemory({"root": str(tmp_path), "retrieval": {"min_relative_score": 0.0}}) as m:
        oldest = m.store("weather weather weather: a tornado", "old")  # the best bm25 for "weather"
        newer = [m.store(f"weather report number {i} for the town square", "s") for i in range(40)]
        m.search("warm up", top_k=1)  # index what is pending
        index = m.keyword
        counts = keyword.query_counts("weather", index.settings)
        assert index._frequencies(list(counts), None, {}) == {"weather": 41}
        hits = m.search("weather", top_k=50)
        assert {h.source for h in hits} == set(newer[-10:])  # the newest ten, ranked
        assert m.search("weather tornado", top_k=1)[0].source == oldest  # the rare word finds it
        assert m.search("weather", session_id="old", top_k=1)[0].source == oldest
        # rows FTS5 has not indexed yet are the newest postings: the same ten, before and after
        late = [m.store(f"weather report number {i} for the harbour", "s") for i in range(4)]
        pending = [(h.source, h.score) for h in m.search("weather", top_k=50)]
        assert index.db.scalar("SELECT count(*) FROM keyword_fts_docsize") == 41  # nothing indexed
        assert {s for s, _ in pending} == set(newer[-6:] + late)
        index._index_pending()
        indexed = [(h.source, h.score) for h in m.search("weather", top_k=50)]
        assert [s for s, _ in indexed] == [s for s, _ in pending]
        assert [x for _, x in indexed] == pytest.approx([x for _, x in pending], rel=1e-9)
        monkeypatch.setattr(keyword, "PRUNE_POSTINGS", 3000)  # within the budget: every posting
        assert m.search("weather", top_k=1)[0].source == oldest


def test_bm25_scores_count_every_repeat_on_random_rows() -> None:
    """Random rows of words that are substrings of each other, repeated side by side and apart,
    against a split-and-count BM25 (the fast path counts a term beside itself separately)."""
    rng = random.Random(5)
    vocabulary = ["art", "cart", "party", "smart", "ar", "t", "art's"]
    rows = [
        tuple(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 9))) for _ in range(3)) for _ in range(300)
    ]
    counts = Counter({"art": 1, "t": 2, "smart": 1})
    df = {"art": 120, "t": 80, "smart": 60}
    weights = (1.0, 2.0, 0.4)
    k1, n, avg = keyword.RESCORE_K1, 300, 13.5
    expected = []
    for cols in rows:
        norm = k1 * (1 - keyword.BM25_B + keyword.BM25_B * sum(len(c.split()) for c in cols) / avg)
        score = 0.0
        for term, times in counts.items():
            tf = sum(w * c.split().count(term) for c, w in zip(cols, weights, strict=True))
            if tf:
                idf = max(math.log((n - df[term] + 0.5) / (df[term] + 0.5)), 1e-6)
                score += times * idf * tf * (k1 + 1) / (tf + norm)
        expected.append(score)
    assert keyword.bm25_scores(counts, rows, df, n, avg, weights, k1=k1) == pytest.approx(expected, rel=1e-12)
