"""The PostgreSQL storage layer against a real throwaway server (tests/pg_server.py)."""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage import postgres as pg
from ovos_memory_plugins.text import tokenize

_ns = itertools.count()


def namespace() -> str:
    return f"t{next(_ns)}-{threading.get_ident() % 1000}"


@pytest.fixture
def db(postgres_url: str):
    database = pg.open_database(postgres_url)
    yield database
    database.close()


def test_literals_quote_anything() -> None:
    assert pg.tsvector_literal([["a", "b", "a"], ["it's"], ["c"]]) == "'a':1A,3A 'b':2A 'it''s':4B 'c':5C"
    assert pg.tsquery_literal(["x", "back\\slash", "x"]) == "'x' | 'back\\\\slash'"
    assert pg.redact_url("postgresql://u:secret@h:5/db") == "postgresql://u:***@h:5/db"
    assert pg.is_postgres_url("postgres://h/db") and not pg.is_postgres_url("/tmp/x.db")


def test_hostile_terms_round_trip(db: pg.PgDatabase) -> None:
    ns = namespace()
    idx = pg.PgKeywordIndex(db, ns)
    terms = ["it's", "back\\slash", "a:b", "&|!", "(x)", "中文", "'", "\\"]
    idx.put("d1", "hostile", "s", {}, [terms])
    for term in terms:
        hits = idx.search(Counter([term]), 5)
        assert [h.doc_id for h in hits] == ["d1"], term


def test_unreachable_server_is_one_clear_error() -> None:
    with pytest.raises(StorageError, match=r"cannot use PostgreSQL at postgresql://u:\*\*\*@127.0.0.1:9/x"):
        pg.PgDatabase("postgresql://u:secret@127.0.0.1:9/x", connect_timeout=1)


def test_missing_extension_is_named(postgres_server) -> None:
    url = postgres_server.create_database("no_vector", vector=False)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:  # make CREATE EXTENSION impossible
        conn.execute("CREATE ROLE plain LOGIN PASSWORD 'plain'")
        conn.execute("GRANT ALL ON SCHEMA public TO plain")
    plain = url.replace(f"postgres:{postgres_server.password}@", "plain:plain@")
    with pytest.raises(StorageError, match="pgvector extension is missing"):
        pg.PgDatabase(plain, connect_timeout=2)


def test_statement_deadline(postgres_url: str) -> None:
    database = pg.PgDatabase(postgres_url, statement_timeout=0.2)
    try:
        with pytest.raises(StorageError, match="deadline"):
            database.query("SELECT pg_sleep(2)")
        assert database.scalar("SELECT 1") == 1  # the pool goes on
    finally:
        database.close()


def test_migrations_once_with_many_processes_at_once(postgres_server) -> None:
    url = postgres_server.create_database("migrate_race")
    results: list[object] = []

    def opener() -> None:
        try:
            d = pg.PgDatabase(url)
            results.append(d.migrate("core", pg.MIGRATIONS))
            d.close()
        except Exception as exc:  # collected, asserted below
            results.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    applied = [r for r in results if r]
    assert applied == [[m.name for m in pg.MIGRATIONS]], results


def test_history_store(db: pg.PgDatabase) -> None:
    ns = namespace()
    h = pg.PgHistoryStore(db, ns)
    other = pg.PgHistoryStore(db, namespace())
    h.append("s1", [("user", "hi"), ("assistant", "hello")], keep=3, last_exchange_id="x-1")
    h.append("s1", [("user", "again"), ("assistant", "yes")], keep=3, last_exchange_id="x-2")
    assert [(m.role, m.content) for m in h.recent("s1", 10)] == [
        ("assistant", "hello"),
        ("user", "again"),
        ("assistant", "yes"),
    ]
    assert h.last_exchange_id("s1") == "x-2"
    assert other.recent("s1", 10) == [] and other.sessions() == []
    h.put_document("d1", "s1", {"k": 1})
    assert h.documents(["d1", "nope"]) == {"d1": ("s1", {"k": 1})}
    assert h.clear_session("s1") == 3
    assert h.message_count() == 0


def _fts5_bm25(docs: list[list[list[str]]], query: Counter[str], weights: tuple[float, ...]) -> list[float]:
    """FTS5's bm25(), written out: the reference the SQL must equal."""
    n = len(docs)
    avgdl = sum(sum(len(c) for c in d) for d in docs) / n
    scores = []
    for d in docs:
        length = sum(len(c) for c in d)
        s = 0.0
        for term, repeat in query.items():
            nhit = sum(1 for x in docs if any(term in c for c in x))
            idf = math.log((n - nhit + 0.5) / (nhit + 0.5))
            idf = idf if idf > 0 else 1e-6
            f = sum(w * c.count(term) for w, c in zip(weights, d, strict=True))
            s += repeat * idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * length / avgdl))
        scores.append(s)
    return scores


def test_bm25_equals_fts5_formula(db: pg.PgDatabase) -> None:
    ns = namespace()
    weights = (1.0, 0.5, 0.4)
    idx = pg.PgKeywordIndex(db, ns, weights)
    texts = [
        ("the red bike is in the shed", "Caroline"),
        ("a blue car and a red car", "Mel"),
        ("bikes bikes everywhere", "Caroline"),
        ("nothing to see", "Mel"),
        ("我喜欢红色自行车", "Li"),
    ]
    docs = []
    for i, (body, head) in enumerate(texts):
        cols = [tokenize(body, unigrams=True), tokenize(head, unigrams=True), []]
        docs.append(cols)
        idx.put(f"d{i}", f"{head}: {body}", "s", {"i": i}, cols)
    query = Counter({t: 1 for t in tokenize("red bike caroline", unigrams=True)})
    query[tokenize("bike")[0]] += 1
    expected = _fts5_bm25(docs, query, weights)
    hits = idx.search(query, 10)
    got = {h.doc_id: h.score for h in hits}
    for i, score in enumerate(expected):
        if score > 0:
            assert got[f"d{i}"] == pytest.approx(score, rel=1e-6)
    assert [h.doc_id for h in hits] == sorted(got, key=lambda d: -got[d])
    cjk = idx.search(Counter(tokenize("自行车")), 3)
    assert [h.doc_id for h in cjk] == ["d4"]


def test_session_filter_and_delete(db: pg.PgDatabase) -> None:
    ns = namespace()
    idx = pg.PgKeywordIndex(db, ns)
    for i in range(30):
        idx.put(f"a{i}", "red bike red bike", "a", {}, [["red", "bike", "red", "bike"]])
    idx.put("b0", "red", "b", {}, [["red"]])
    hits = idx.search(Counter(["red"]), 3, session_id="b")
    assert [h.doc_id for h in hits] == ["b0"]
    assert idx.delete(["b0", "missing"]) == 1
    assert idx.search(Counter(["red"]), 3, session_id="b") == []
    assert db.scalar("SELECT count(*) FROM memory_keywords WHERE namespace = %s", (ns,)) == 30
    assert idx.delete_all() == 30
    assert db.scalar("SELECT count(*) FROM memory_keywords WHERE namespace = %s", (ns,)) == 0


def test_context_terms_follow_and_leave(db: pg.PgDatabase) -> None:
    ns = namespace()
    idx = pg.PgKeywordIndex(db, ns, (1.0, 1.0, 0.4))
    idx.put("t1", "Ann: where is the lighthouse", "s", {}, [["lighthous"], ["ann"]], context_from_previous=True)
    idx.put("t2", "Bob: near the harbour", "s", {}, [["near", "harbour"], ["bob"]], context_from_previous=True)
    hits = idx.search(Counter(tokenize("lighthouse")), 5)
    assert {h.doc_id for h in hits} == {"t1", "t2"}  # t2 is found by what it answers
    idx.delete(["t1"])
    assert idx.search(Counter(tokenize("lighthouse")), 5) == []


def test_vectors_exact_and_scoped(db: pg.PgDatabase) -> None:
    ns = namespace()
    idx = pg.PgKeywordIndex(db, ns)
    vec = pg.PgVectorIndex(db, ns, "test-3")
    for i in range(3):
        idx.put(f"v{i}", f"text {i}", "s" if i < 2 else "t", {}, [["text"]])
    assert vec.missing() == [("v0", "text 0"), ("v1", "text 1"), ("v2", "text 2")]
    assert vec.put([("v0", (1, 0, 0)), ("v1", (0, 1, 0)), ("v2", (0.9, 0.1, 0)), ("nope", (1, 1, 1))]) == 3
    hits = vec.search((1, 0, 0), 2)
    assert [h.doc_id for h in hits] == ["v0", "v2"] and hits[0].score == pytest.approx(1.0)
    assert [h.doc_id for h in vec.search((1, 0, 0), 2, session_id="s")] == ["v0", "v1"]
    idx.delete(["v0"])
    assert vec.count() in (2, 3)  # cached count; the rows went with the document
    assert db.scalar("SELECT count(*) FROM memory_vectors WHERE namespace = %s", (ns,)) == 2


def test_hnsw_index_search(db: pg.PgDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    ns = namespace()
    idx = pg.PgKeywordIndex(db, ns)
    vec = pg.PgVectorIndex(db, ns, "test-8")
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    for i in range(300):
        idx.put(f"h{i}", f"text {i}", "s", {}, [["text"]])
    vec.put([(f"h{i}", vectors[i]) for i in range(300)])
    exact = [h.doc_id for h in vec.search(vectors[7], 5)]
    assert exact[0] == "h7"
    assert vec.build_ann_index(8)
    monkeypatch.setattr(pg, "HNSW_MIN_VECTORS", 100)
    vec._count = None
    approx = [h.doc_id for h in vec.search(vectors[7], 5)]
    assert approx[0] == "h7" and len(set(approx) & set(exact)) >= 4
