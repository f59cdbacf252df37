"""Ranking at scale on PostgreSQL: when query terms were pruned, the best candidates of the kept
terms are ranked again on every query term, as the SQLite keyword index ranks them.

Both engines are real: a SQLite file with FTS5 and a throwaway PostgreSQL server
(tests/pg_server.py). The size from which terms are pruned, the posting budget and the number of
rescored candidates are lowered (on both engines alike) so a few hundred documents are "large".
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.storage import keyword
from ovos_memory_plugins.storage.engine import Document, KeywordSettings, Storage
from ovos_memory_plugins.storage.postgres import database as pg
from ovos_memory_plugins.storage.postgres import keyword as pg_keyword
from ovos_memory_plugins.storage.registry import open_storage

_ns = itertools.count()

#: Made-up words (the stemmer leaves them alone), most common first.
VOCAB = [
    "zorb", "plim", "quax", "drem", "fenk", "gulp", "harv", "jomp", "kelt", "lumb",
    "mirv", "nosk", "prav", "quib", "rusk", "selk", "tarn", "uvel", "vesk", "wilp",
    "yarn", "zelk", "bront", "crisk", "dulf", "emsk", "frol", "grint", "hosk", "iltz",
]  # fmt: skip


def write(storage: Storage, index: Any, docs: list[Document]) -> None:
    """The seam's write path: prepare, then documents and index in one transaction."""
    prepared = index.prepare(docs)
    with storage.atomic():
        index.add(storage.documents.put(docs), prepared)


class Engines:
    """The same documents in a SQLite file and in a PostgreSQL namespace."""

    def __init__(self, url: str, folder: Path, settings: KeywordSettings | None = None) -> None:
        settings = settings or KeywordSettings()
        self.stores = [
            open_storage(folder / "keyword.db"),
            open_storage(url, namespace=f"rescore-{next(_ns)}-{threading.get_ident() % 1000}"),
        ]
        self.sqlite, self.postgres = (s.keyword_index(settings) for s in self.stores)

    def add(self, docs: list[Document]) -> None:
        for storage, index in zip(self.stores, (self.sqlite, self.postgres), strict=True):
            write(storage, index, docs)

    def search(self, query: str, k: int, session_id: str | None = None) -> tuple[list[MemoryHit], list[MemoryHit]]:
        return self.sqlite.search(query, k, session_id), self.postgres.search(query, k, session_id)

    def close(self) -> None:
        self.postgres.remove_all()
        for storage in self.stores:
            storage.close()


@pytest.fixture
def scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pruning from 100 documents, a budget of 40 postings and 12 rescored candidates, on both engines."""
    for module in (keyword, pg_keyword):
        monkeypatch.setattr(module, "PRUNE_MIN_DOCUMENTS", 100)
        monkeypatch.setattr(module, "PRUNE_POSTINGS", 40)
        monkeypatch.setattr(module, "RESCORE_CANDIDATES", 12)


@pytest.fixture
def engines(postgres_url: str, tmp_path: Path, scale: None) -> Iterator[Engines]:
    both = Engines(postgres_url, tmp_path)
    yield both
    both.close()


def corpus(n: int, seed: int = 3) -> list[Document]:
    """``n`` documents of made-up words (a skewed vocabulary), each of a length of its own, some
    with a date, some dialogue turns (which borrow the previous turn's words as context)."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(VOCAB))]
    docs = []
    for i in range(n):
        words = " ".join(rng.choices(VOCAB, weights, k=3 + i % 97)) + f" tag{i}x"
        if i % 3 == 0:
            text = f"[day {i % 7 + 1}] Ann: {words}"  # a turn: a head, and context from the one before
        elif i % 3 == 1:
            text = f"[day {i % 5 + 1}] {words}"
        else:
            text = words
        docs.append(Document(f"d{i}", text, f"s{i % 4}", {"i": i}))
    return docs


def ranking(hits: list[MemoryHit]) -> list[tuple[str, float]]:
    return [(h.source, round(h.score, 9)) for h in hits]


def pruned(index: keyword.SqliteKeywordIndex, query: str) -> bool:
    """Whether the SQLite index leaves a term of ``query`` out (and so rescores)."""
    counts = keyword.query_counts(query, index.settings)
    return len(index._prune(counts)) < len(counts)


def test_a_left_out_common_term_orders_what_the_rare_term_found(engines: Engines) -> None:
    """The word "weather" is in a quarter of the documents (left out: over the budget), "tornado" in
    three: "tornado" alone ranks the double mention first; with "weather" weighed again the
    one that also names the weather comes first, on both engines, with the scores an unpruned
    search gives."""
    docs = [Document(f"w{i}", f"weather report number {i} sunny", "s", {}) for i in range(45)]
    docs += [Document(f"f{i}", f"filler note number {i} plain", "s", {}) for i in range(120)]
    docs += [
        Document("twice", "tornado siren tornado drill at noon on the coast today", "s", {}),
        Document("weather", "weather alert tornado warning today", "s", {}),
        Document("once", "a tornado shelter list at noon for all of the town today", "s", {}),
    ]
    engines.add(docs)
    sqlite, postgres = engines.search("tornado", 3)
    assert [h.source for h in sqlite] == [h.source for h in postgres] == ["twice", "weather", "once"]

    assert pruned(engines.sqlite, "weather tornado")
    sqlite, postgres = engines.search("weather tornado", 3)
    assert [h.source for h in postgres] == ["weather", "twice", "once"]
    assert ranking(postgres) == ranking(sqlite)
    with pytest.MonkeyPatch.context() as m:  # no budget, every term searched: the same scores
        m.setattr(pg_keyword, "PRUNE_POSTINGS", 10**9)
        full = pg.PgKeywordIndex(engines.postgres.db, engines.postgres.namespace).search("weather tornado", 3)
    assert ranking(full) == ranking(postgres)
    # within a session as well
    sqlite, postgres = engines.search("weather tornado", 2, session_id="s")
    assert [h.source for h in postgres] == ["weather", "twice"] and ranking(postgres) == ranking(sqlite)


def test_the_same_documents_in_the_same_order_as_sqlite(engines: Engines) -> None:
    """Queries of two to six words over 400 documents: wherever terms are pruned, PostgreSQL
    returns SQLite's documents in SQLite's order, with its scores; so do the other queries."""
    engines.add(corpus(400))
    rng = random.Random(11)
    queries = [" ".join(rng.sample(VOCAB, rng.randint(2, 6))) for _ in range(40)]
    queries += [f"{rng.choice(VOCAB[:5])} {rng.choice(VOCAB[20:])} tag{rng.randrange(400)}x" for _ in range(10)]
    rescored = 0
    for query in queries:
        rescored += pruned(engines.sqlite, query)
        for k, session in ((10, None), (5, "s2")):
            sqlite, postgres = engines.search(query, k, session)
            assert [h.source for h in postgres] == [h.source for h in sqlite], (query, session)
            assert [h.score for h in postgres] == pytest.approx([h.score for h in sqlite], rel=1e-9), query
    assert rescored >= 30  # the case under test is the common one here


def test_rescoring_counts_left_out_terms_exactly_once(engines: Engines) -> None:
    """A left-out term's weight needs its exact document count (kept on write on PostgreSQL), and
    several common terms keep the rarest of them by their exact counts (as SQLite does)."""
    engines.add(corpus(400))
    query = f"{VOCAB[0]} {VOCAB[1]} {VOCAB[2]}"  # all three over the budget: only the rarest is kept
    counts = keyword.query_counts(query, KeywordSettings())
    assert len(engines.sqlite._prune(counts)) == 1
    sqlite, postgres = engines.search(query, 10)
    assert ranking(postgres) == ranking(sqlite)
    kept = engines.postgres.frequencies(counts)  # kept on write (memory_keyword_df)
    assert kept == engines.sqlite._document_frequencies(list(counts), 400)
    again = engines.postgres.search(query, 10)
    assert ranking(again) == ranking(postgres)


def test_both_engines_prune_with_the_same_constants() -> None:
    """One definition: the PostgreSQL index prunes and rescores with the SQLite index's constants
    (with the same ones, both return the same documents in the same order: the tests above)."""
    for name in ("PRUNE_MIN_DOCUMENTS", "PRUNE_POSTINGS", "RESCORE_CANDIDATES", "BM25_K1", "BM25_B"):
        assert getattr(pg_keyword, name) == getattr(keyword, name), name
    assert pg_keyword.bm25_scores is keyword.bm25_scores


def test_a_window_of_time_gives_the_same_documents_in_the_same_order_as_sqlite(engines: Engines) -> None:
    """Time words at scale: documents dated over 20 days, searched within a window of 5, pruned or
    not: both engines return the window's documents only, in SQLite's order, with its scores."""
    docs = [
        Document(d.doc_id, d.text, d.session_id, {**d.metadata, "time": 86_400.0 * (i % 20)})
        for i, d in enumerate(corpus(400))
    ]
    engines.add(docs)
    made = {d.doc_id: 86_400.0 * (i % 20) for i, d in enumerate(docs)}
    window = (86_400.0 * 5, 86_400.0 * 10)
    rng = random.Random(5)
    rescored = 0
    for query in [" ".join(rng.sample(VOCAB, rng.randint(2, 6))) for _ in range(20)]:
        rescored += pruned(engines.sqlite, query)
        sqlite = engines.sqlite.search(query, 10, window=window)
        postgres = engines.postgres.search(query, 10, window=window)
        assert sqlite and all(window[0] <= made[h.source] < window[1] for h in sqlite), query
        assert [h.source for h in postgres] == [h.source for h in sqlite], query
        assert [h.score for h in postgres] == pytest.approx([h.score for h in sqlite], rel=1e-9), query
    assert rescored >= 10
