"""The PostgreSQL storage layer against a real throwaway server (tests/pg_server.py)."""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.engine import Document, KeywordSettings, StoredDocument
from ovos_memory_plugins.storage.postgres import database as pg
from ovos_memory_plugins.storage.postgres import keyword as pg_keyword
from ovos_memory_plugins.storage.postgres import vector as pg_vector
from ovos_memory_plugins.text import tokenize

_ns = itertools.count()


def namespace() -> str:
    return f"t{next(_ns)}-{threading.get_ident() % 1000}"


@pytest.fixture
def db(postgres_url: str):
    database = pg.PgDatabase(postgres_url)
    database.migrate("memory", pg.MIGRATIONS)
    yield database
    database.close()


def put(db: pg.PgDatabase, index: pg.PgKeywordIndex, doc_id: str, text: str, session: str = "s") -> StoredDocument:
    """Write one document through the seam's path: prepare, then documents + index in one transaction."""
    doc = Document(doc_id, text, session, {"n": doc_id})
    prepared = index.prepare([doc])
    with db.atomic():
        stored = pg.PgDocuments(db, index.namespace).put([doc])
        index.add(stored, prepared)
    return stored[0]


def forget(db: pg.PgDatabase, index: pg.PgKeywordIndex, doc_ids: list[str]) -> int:
    docs = pg.PgDocuments(db, index.namespace)
    with db.atomic():
        found = docs.get(doc_ids)
        index.remove(list(found.values()))
        return docs.remove(doc_ids)


def test_literals_quote_anything() -> None:
    assert pg.tsquery_literal(["x", "back\\slash", "x"]) == "'x' | 'back\\\\slash'"
    assert pg.redact_url("postgresql://u:secret@h:5/db") == "postgresql://***@h:5/db"
    assert pg.redact_url("postgresql://h/db?password=secret") == "postgresql://h/db"
    assert pg.is_postgres_url("postgres://h/db") and not pg.is_postgres_url("/tmp/x.db")


def test_hostile_terms_round_trip(db: pg.PgDatabase) -> None:
    idx = pg.PgKeywordIndex(db, namespace())
    terms = ["it's", "back\\slash", "a:b", "&|!", "(x)", "中文", "'", "\\"]
    doc = Document("d1", "hostile", "s")
    with db.atomic():  # terms no tokenizer makes, handed to the index's write path as its prepared counts
        stored = pg.PgDocuments(db, idx.namespace).put([doc])
        idx.add(stored, {"d1": ({t: 1 for t in terms}, len(terms), False)})
    for term in terms:
        hits = idx.search_terms(Counter([term]), 5)
        assert [h.source for h in hits] == ["d1"], term


def test_unreachable_server_is_one_clear_error() -> None:
    with pytest.raises(StorageError, match=r"cannot use PostgreSQL at postgresql://\*\*\*@127.0.0.1:9/x"):
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
            results.append(d.migrate("memory", pg.MIGRATIONS))
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
    h = pg.PgHistory(db, ns)
    other = pg.PgHistory(db, namespace())
    h.append(
        "s1", [("user", "hi"), ("assistant", "hello")], keep=3, last_exchange_id="x-1", exchange_ids=["x-1", "x-1"]
    )
    h.append(
        "s1", [("user", "again"), ("assistant", "yes")], keep=3, last_exchange_id="x-2", exchange_ids=["x-2", "x-2"]
    )
    assert [(m.role, m.content) for m in h.recent("s1", 10)] == [
        ("assistant", "hello"),
        ("user", "again"),
        ("assistant", "yes"),
    ]
    assert h.last_exchange_id("s1") == "x-2"
    assert other.recent("s1", 10) == [] and other.sessions() == []
    doc = StoredDocument(1, "x-2", "s1", "Q: again\nA: yes", {}, 0.0)
    assert h.remove_exchanges([doc]) == 2
    assert [(m.role, m.content) for m in h.recent("s1", 10)] == [("assistant", "hello")]
    h.append("s1", [("user", "single")], keep=10)
    h.tag_exchange("s1", "x-3")
    assert h.remove_exchanges([StoredDocument(2, "x-3", "s1", "Q: single\nA: later", {}, 0.0)]) == 1
    assert h.clear_session("s1") == 1
    assert h.message_count() == 0 and h.last_exchange_id("s1") == ""


def test_documents_table(db: pg.PgDatabase) -> None:
    docs = pg.PgDocuments(db, namespace())
    first = docs.put([Document("a", "text a", "s1", {"x": 1}), Document("b", "text b", "s2")])
    assert [d.changed for d in first] == [True, True] and first[0].key < first[1].key
    again = docs.put([Document("a", "text a", "s1", {"x": 2}), Document("b", "new b", "s2")])
    assert [(d.key, d.changed) for d in again] == [(first[0].key, False), (first[1].key, True)]
    assert again[0].created == first[0].created
    assert docs.get(["a", "zz"])["a"].metadata == {"x": 2}
    assert docs.by_keys([first[1].key])[first[1].key].text == "new b"
    assert docs.ids() == ["a", "b"] and docs.ids("s2") == ["b"] and docs.sessions() == ["s1", "s2"]
    assert [d.doc_id for d in docs.iter(batch=1)] == ["a", "b"]
    assert docs.count() == 2 and docs.count("s1") == 1
    assert docs.remove(["a", "zz"]) == 1 and docs.remove_all() == 1 and docs.count() == 0


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
    weights = (1.0, 0.5, 0.4)
    idx = pg.PgKeywordIndex(db, namespace(), KeywordSettings(head_weight=0.5, context_weight=0.4))
    texts = [
        ("[8 May 2023] Caroline", "the red bike is in the shed"),
        ("[9 May 2023] Mel", "a blue car and a red car"),
        ("[9 May 2023] Caroline", "bikes bikes everywhere"),
        ("[1 June 2023] Mel", "nothing to see"),
        ("[2 June 2023] Li", "我喜欢红色自行车"),
    ]
    docs = []
    for i, (head, body) in enumerate(texts):
        # a new session each: no context terms, so the reference needs none
        put(db, idx, f"d{i}", f"{head}: {body}", session=f"s{i}")
        docs.append([tokenize(body, unigrams=True), tokenize(head, unigrams=True), []])
    query = Counter({t: 1 for t in tokenize("red bike caroline", unigrams=True)})
    query[tokenize("bike")[0]] += 1
    expected = _fts5_bm25(docs, query, weights)
    hits = idx.search_terms(query, 10)
    got = {h.source: h.score for h in hits}
    assert {f"d{i}" for i, score in enumerate(expected) if score > 0} == set(got)
    for i, score in enumerate(expected):
        if score > 0:
            assert got[f"d{i}"] == pytest.approx(score, rel=1e-6)
    assert [h.source for h in hits] == sorted(got, key=lambda d: -got[d])
    assert [h.source for h in idx.search("自行车", 3)] == ["d4"]
    first = next(h for h in hits if h.source == "d0")
    assert first.metadata == {"n": "d0", "session_id": "s0"}


def test_session_filter_and_delete(db: pg.PgDatabase) -> None:
    idx = pg.PgKeywordIndex(db, namespace())
    for i in range(30):
        put(db, idx, f"a{i}", f"red bike number {i}", session="a")
    put(db, idx, "b0", "red", session="b")
    assert [h.source for h in idx.search("red", 3, session_id="b")] == ["b0"]
    assert forget(db, idx, ["b0", "missing"]) == 1
    assert idx.search("red", 3, session_id="b") == []
    assert idx.count() == 30
    assert idx.remove_all() == 30 and idx.count() == 0


def test_context_terms_follow_and_leave(db: pg.PgDatabase) -> None:
    idx = pg.PgKeywordIndex(db, namespace())
    put(db, idx, "t1", "Ann: where is the lighthouse")
    put(db, idx, "t2", "Bob: near the harbour")
    assert {h.source for h in idx.search("lighthouse", 5)} == {"t1", "t2"}  # t2 is found by what it answers
    length = db.scalar(
        "SELECT length FROM memory_keywords k JOIN memory_documents d ON d.id = k.id WHERE doc_id = 't2'"
    )
    assert length == len(tokenize("near the harbour", unigrams=True)) + 1 + len(
        tokenize("where is the lighthouse", unigrams=True)
    )
    forget(db, idx, ["t1"])
    assert idx.search("lighthouse", 5) == []
    assert [h.source for h in idx.search("harbour", 5)] == ["t2"]


def test_vectors_exact_and_scoped(db: pg.PgDatabase) -> None:
    import numpy as np

    ns = namespace()
    idx = pg.PgKeywordIndex(db, ns)
    vec = pg.PgVectorStore(db, ns)
    for i in range(3):
        put(db, idx, f"v{i}", f"text {i}", "s" if i < 2 else "t")
    assert vec.missing("m") == [("v0", "text 0"), ("v1", "text 1"), ("v2", "text 2")]
    rows = [("v0", (1, 0, 0)), ("v1", (0, 1, 0)), ("v2", (0.9, 0.1, 0)), ("nope", (1, 1, 1))]
    assert vec.put_vectors("m", [(d, np.asarray(v, dtype=np.float32)) for d, v in rows]) == 3
    assert vec.dimension("m") == 3 and vec.spaces() == {"m": 3} and vec.missing_count("m") == 0
    with pytest.raises(StorageError, match="3-dimensional"):
        vec.put_vectors("m", [("v0", np.ones(4, dtype=np.float32))])
    hits = vec.search("m", np.asarray([1, 0, 0], dtype=np.float32), 2)
    assert [d for d, _ in hits] == ["v0", "v2"] and hits[0][1] == pytest.approx(1.0)
    assert [d for d, _ in vec.search("m", np.asarray([1, 0, 0], dtype=np.float32), 2, session_id="s")] == ["v0", "v1"]
    assert vec.search("other", np.asarray([1, 0, 0], dtype=np.float32), 2) == []
    forget(db, idx, ["v0"])
    assert db.scalar("SELECT count(*) FROM memory_vectors WHERE namespace = %s", (ns,)) == 2
    assert vec.drop_space("m") == 2 and vec.spaces() == {}


def test_hnsw_index_search(db: pg.PgDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    ns = namespace()
    vec = pg.PgVectorStore(db, ns)
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    docs = pg.PgDocuments(db, ns)
    with db.atomic():
        docs.put([Document(f"h{i}", f"text {i}", "s") for i in range(300)])
    vec.put_vectors("e8", [(f"h{i}", vectors[i]) for i in range(300)])
    exact = [d for d, _ in vec.search("e8", vectors[7], 5)]
    assert exact[0] == "h7"
    assert vec.build_ann_index(8)
    monkeypatch.setattr(pg_vector, "HNSW_MIN_VECTORS", 100)
    approx = [d for d, _ in vec.search("e8", vectors[7], 5)]
    assert approx[0] == "h7" and len(set(approx) & set(exact)) >= 4
    with db.atomic() as conn:  # the index serves the query shape search() sends (a tiny table needs the nudge)
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = conn.execute(
            "EXPLAIN SELECT id FROM memory_vectors WHERE dims = 8 ORDER BY embedding::vector(8) <=> %s LIMIT 5",
            (vectors[7],),
        ).fetchall()
    assert "memory_vectors_hnsw_8" in " ".join(r[0] for r in plan)
    # with the HNSW index there, a window of time still finds every document made then, in order
    inside = [f"h{i}" for i in range(0, 300, 30)]
    with db.atomic() as conn:
        conn.execute("UPDATE memory_documents SET created = 1000 WHERE namespace = %s", (ns,))
        conn.execute(
            "UPDATE memory_documents SET created = 5000 WHERE namespace = %s AND doc_id = ANY(%s)", (ns, inside)
        )
    in_window = [d for d, _ in vec.search("e8", vectors[7], 20, window=(4000.0, 6000.0))]
    assert sorted(in_window) == sorted(inside)
    assert in_window == sorted(
        inside,
        key=lambda d: (
            -float(vectors[int(d[1:])] @ vectors[7] / np.linalg.norm(vectors[int(d[1:])]) / np.linalg.norm(vectors[7]))
        ),
    )


def test_large_namespace_prunes_common_terms(db: pg.PgDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_keyword, "PRUNE_MIN_DOCUMENTS", 10)
    monkeypatch.setattr(pg_keyword, "PRUNE_POSTINGS", 5)
    idx = pg.PgKeywordIndex(db, namespace())
    for i in range(40):
        put(db, idx, f"c{i}", f"common word {'zebra' if i in (3, 30) else 'filler'} number{i}", session=f"s{i}")
    hits = idx.search("common zebra", 10)
    assert {h.source for h in hits} == {"c3", "c30"}  # "common" (in all 40) was left out
    # its exact count, kept on write: the rescoring weighs it (tests/storage/postgres/test_pruned_terms_rescored.py)
    assert idx.frequencies(["common", "zebra", "absent"]) == {"common": 40, "zebra": 2, "absent": 0}
    first = pg.PgKeywordIndex(db, idx.namespace)
    alone = first.search("common", 3)  # the rarest (only) term is kept
    assert len(alone) == 3
    again = first.search("common", 3)
    assert [(h.source, h.score) for h in again] == [(h.source, h.score) for h in alone]
    fresh = pg.PgKeywordIndex(db, idx.namespace)
    in_session = fresh.search("common", 3, session_id="s7")
    assert [h.source for h in in_session] == ["c7"]


def test_keyword_rows_carry_their_namespace_lexeme(db: pg.PgDatabase) -> None:
    """The GIN index keeps a query to its namespace (the namespace's lexeme ANDed with the words),
    and the migration that brought the lexeme gives it to rows written before it (the GIN path:
    ``postings=False``; the postings path keys its rows by the namespace itself)."""
    a, b = pg.PgKeywordIndex(db, namespace(), postings=False), pg.PgKeywordIndex(db, namespace(), postings=False)
    for i in range(3):
        put(db, a, f"a{i}", f"the lighthouse keeper number {i}")
        put(db, b, f"b{i}", f"the lighthouse keeper number {i}")

    def gin_count(index: pg.PgKeywordIndex) -> int:
        query = f"{pg.tsquery_literal([pg.namespace_lexeme(index.namespace)])} & {pg.tsquery_literal(['lighthous'])}"
        return int(db.scalar("SELECT count(*) FROM memory_keywords WHERE terms @@ %s::tsquery", (query,)))

    assert gin_count(a) == gin_count(b) == 3
    with db.atomic() as conn:  # rows as the first schema wrote them, and the step not applied yet
        conn.execute(
            "UPDATE memory_keywords SET terms = array_to_tsvector(ARRAY(SELECT jsonb_object_keys(tf)))"
            " WHERE namespace = %s",
            (a.namespace,),
        )
        conn.execute("DELETE FROM memory_migrations WHERE store = 'memory' AND name = '0002_keyword_namespace_lexeme'")
    assert gin_count(a) == 0 and [h.source for h in a.search("lighthouse keeper", 5)] == []
    assert db.migrate("memory", pg.MIGRATIONS) == ["0002_keyword_namespace_lexeme"]
    assert gin_count(a) == gin_count(b) == 3
    fresh = pg.PgKeywordIndex(db, a.namespace, postings=False)
    assert sorted(h.source for h in fresh.search("lighthouse keeper", 5)) == ["a0", "a1", "a2"]
    assert sorted(h.source for h in b.search("lighthouse keeper", 5)) == ["b0", "b1", "b2"]


def test_the_keyword_index_keeps_a_short_pending_list(db: pg.PgDatabase) -> None:
    """Searches scan at most 128 kB of unsorted recent entries (migration 0003)."""
    options = db.scalar("SELECT reloptions FROM pg_class WHERE relname = 'memory_keywords_terms'")
    assert "gin_pending_list_limit=128" in options


def test_a_lexeme_collision_never_mixes_namespaces(db: pg.PgDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keyword statements find candidates by the namespace's lexeme; the namespace column is
    checked too, so two namespaces whose lexemes collided (a 64-bit hash: never in practice)
    would still never see each other's rows."""
    monkeypatch.setattr(pg_keyword, "namespace_lexeme", lambda namespace: " ns:collision")
    monkeypatch.setattr(pg_keyword, "PRUNE_MIN_DOCUMENTS", 2)  # the large-namespace path as well
    monkeypatch.setattr(pg_keyword, "PRUNE_POSTINGS", 1)
    a, b = pg.PgKeywordIndex(db, namespace()), pg.PgKeywordIndex(db, namespace())
    for i in range(3):
        put(db, a, f"a{i}", f"alpha secret lighthouse {i}")
        put(db, b, f"b{i}", f"beta secret lighthouse {i}")
    for index, own in ((a, "a"), (b, "b")):
        for query in ("secret lighthouse", "secret", "alpha beta"):
            hits = index.search(query, 10)  # fewer, perhaps: the other's rows take candidate places
            assert all(h.source.startswith(own) for h in hits), (own, query, [h.source for h in hits])


def test_documents_are_created_at_their_time_and_read_by_window(db: pg.PgDatabase) -> None:
    docs = pg.PgDocuments(db, namespace())
    docs.put(
        [
            Document("old", "an old exchange", "s", {"time": 1000.0}),
            Document("mid", "a middle exchange", "s", {"time": 2000.0}),
            Document("mid2", "another middle one", "other", {"time": 2500.0}),
            Document("now", "undated: now", "s", {}),
        ]
    )
    got = docs.get(["old", "mid"])
    assert got["old"].created == 1000.0 and got["mid"].created == 2000.0
    assert [d.doc_id for d in docs.made_between(1500.0, 3000.0, 10)] == ["mid2", "mid"]
    assert [d.doc_id for d in docs.made_between(1500.0, 3000.0, 10, "s")] == ["mid"]
    assert [d.doc_id for d in docs.made_between(0.0, 3000.0, 1)] == ["mid2"]
