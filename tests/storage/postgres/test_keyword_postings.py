"""The keyword postings (``memory_keyword_postings``, migration 0006) against a real throwaway server.

The postings path scores a search from one row per (namespace, term, document) instead of the
candidates' keyword rows; these tests hold it to the GIN path it replaced (``postings=False``):
the same documents, in the same order, with the same scores, on real text (the sentences of this
repository's own docs/, as dialogue turns over several sessions, so turns carry the previous
turn's words as context), small and at scale (pruned and ranked again), in a session and in a
window of time. And the table stays exact: after every kind of write its rows are what the
keyword rows say, and the migration builds them from a database at 0005.
"""

from __future__ import annotations

import itertools
import random
import re
import threading
from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.storage import keyword
from ovos_memory_plugins.storage.engine import Document, StoredDocument
from ovos_memory_plugins.storage.postgres import database as pg
from ovos_memory_plugins.storage.postgres import keyword as pg_keyword

_ns = itertools.count()
DOCS = Path(__file__).resolve().parents[3] / "docs"


def namespace() -> str:
    return f"post{next(_ns)}-{threading.get_ident() % 1000}"


def sentences(limit: int) -> list[str]:
    """Real English: the sentences of docs/*.md (code blocks and tables left out), in file order."""
    out: list[str] = []
    for path in sorted(DOCS.glob("*.md")):
        text = re.sub(r"```.*?```", " ", path.read_text(encoding="utf-8"), flags=re.S)
        lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("|", "#"))]
        for sentence in re.split(r"(?<=[.!?])\s+", " ".join(lines)):
            words = sentence.split()
            if 4 <= len(words) <= 60:
                out.append(" ".join(words))
                if len(out) >= limit:
                    return out
    return out


@pytest.fixture
def db(postgres_url: str):
    database = pg.PgDatabase(postgres_url)
    database.migrate("memory", pg.MIGRATIONS)
    yield database
    database.close()


def write(db: pg.PgDatabase, index: pg.PgKeywordIndex, docs: list[Document]) -> list[StoredDocument]:
    """The seam's write path: prepare, then documents and index in one transaction."""
    prepared = index.prepare(docs)
    with db.atomic():
        stored = pg.PgDocuments(db, index.namespace).put(docs)
        index.add(stored, prepared)
    return stored


def forget(db: pg.PgDatabase, index: pg.PgKeywordIndex, doc_ids: list[str]) -> None:
    docs = pg.PgDocuments(db, index.namespace)
    with db.atomic():
        index.remove(list(docs.get(doc_ids).values()))
        docs.remove(doc_ids)


def turns(texts: list[str], sessions: int = 7, prefix: str = "d") -> list[Document]:
    """Dialogue turns (``[date] Speaker: text``) round robin over ``sessions`` sessions."""
    return [
        Document(f"{prefix}{i}", f"[2023-05-{1 + i % 28:02d}] {'Ada' if i % 2 else 'Bo'}: {text}", f"s{i % sessions}")
        for i, text in enumerate(texts)
    ]


def postings(db: pg.PgDatabase, ns: str) -> set[tuple[str, int, int, int]]:
    """The namespace's postings as stored: ``(term, key, tf, length)``."""
    rows = db.query("SELECT term, id, tf, length FROM memory_keyword_postings WHERE namespace = %s", (ns,))
    return {(str(t), int(i), int(f), int(n)) for t, i, f, n in rows}


def expected(db: pg.PgDatabase, ns: str) -> set[tuple[str, int, int, int]]:
    """What the keyword rows say the postings must be."""
    rows = db.query(
        "SELECT e.key, k.id, e.value::int, k.length FROM memory_keywords k CROSS JOIN LATERAL jsonb_each(k.tf) AS e"
        " WHERE k.namespace = %s",
        (ns,),
    )
    return {(str(t), int(i), int(f), int(n)) for t, i, f, n in rows}


def both(db: pg.PgDatabase, ns: str) -> tuple[pg.PgKeywordIndex, pg.PgKeywordIndex]:
    return pg.PgKeywordIndex(db, ns), pg.PgKeywordIndex(db, ns, postings=False)


def ranked(index: pg.PgKeywordIndex, query: str, **kw: object) -> list[tuple[str, float]]:
    return [(h.source, h.score) for h in index.search(query, 10, **kw)]  # type: ignore[arg-type]


def queries(texts: list[str], n: int, seed: int = 3) -> list[str]:
    """Questions made of real words: a few words of a sentence, some with a common word."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.choice(texts).split()
        out.append(" ".join(rng.sample(words, min(len(words), rng.randint(2, 5)))))
    return out


def test_the_postings_path_ranks_as_the_gin_path_on_real_text(db: pg.PgDatabase) -> None:
    texts = sentences(400)
    assert len(texts) >= 300
    ns = namespace()
    fast, reference = both(db, ns)
    write(db, fast, turns(texts))
    asked = 0
    for query in queries(texts, 60):
        got, want = ranked(fast, query), ranked(reference, query)
        assert got == want, query  # same documents, same order, the very same scores
        asked += bool(want)
        in_session = ranked(fast, query, session_id="s3")
        assert in_session == ranked(reference, query, session_id="s3"), query
    assert asked >= 50


def test_at_scale_pruned_and_ranked_again_the_paths_agree(db: pg.PgDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    """From PRUNE_MIN_DOCUMENTS on: common terms left out, the candidates ranked again on every
    term (k1 0.5): the postings path finds the same candidates and reads the same counts."""
    for module in (keyword, pg_keyword):
        monkeypatch.setattr(module, "PRUNE_MIN_DOCUMENTS", 100)
        monkeypatch.setattr(module, "PRUNE_POSTINGS", 60)
        monkeypatch.setattr(module, "RESCORE_CANDIDATES", 12)
    texts = sentences(500)
    ns = namespace()
    fast, reference = both(db, ns)
    write(db, fast, turns(texts))
    common = [t for t, _ in sorted(fast.frequencies(keyword.query_counts(" ".join(texts), fast.settings)).items(),
                                   key=lambda kv: -kv[1])[:3]]  # fmt: skip
    for query in queries(texts, 40) + [f"{q} {common[0]} {common[1]}" for q in queries(texts, 20, seed=9)]:
        assert ranked(fast, query) == ranked(reference, query), query
        assert ranked(fast, query, session_id="s1") == ranked(reference, query, session_id="s1"), query


def test_a_window_of_time_keeps_to_it_and_ranks_as_the_gin_path(
    db: pg.PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = sentences(300)
    for scale in (False, True):
        if scale:
            for module in (keyword, pg_keyword):
                monkeypatch.setattr(module, "PRUNE_MIN_DOCUMENTS", 100)
                monkeypatch.setattr(module, "PRUNE_POSTINGS", 60)
        ns = namespace()
        fast, reference = both(db, ns)
        stored = write(db, fast, turns(texts))
        made = {d.doc_id: 86_400.0 * (i % 20) for i, d in enumerate(stored)}
        with db.atomic():
            pg.PgDocuments(db, ns).set_created(list(made.items()))
        window = (86_400.0 * 5, 86_400.0 * 10)
        found = 0
        for query in queries(texts, 40, seed=5):
            got = ranked(fast, query, window=window)
            assert got == ranked(reference, query, window=window), query
            assert all(window[0] <= made[doc] < window[1] for doc, _ in got), query
            found += bool(got)
            assert ranked(fast, query, window=window, session_id="s2") == ranked(
                reference, query, window=window, session_id="s2"
            )
        assert found >= 20


def test_every_write_keeps_the_postings_exact(db: pg.PgDatabase) -> None:
    """New documents one by one and in a batch, a replaced text, a forgotten turn (the next
    turn loses its context words: new counts, a new length), a forgotten batch, remove_all."""
    texts = sentences(120)
    ns = namespace()
    index = pg.PgKeywordIndex(db, ns)
    for doc in turns(texts[:30]):  # one at a time: the single statement
        write(db, index, [doc])
    write(db, index, turns(texts[30:90], prefix="b"))  # a batch
    assert postings(db, ns) == expected(db, ns) and len(postings(db, ns)) > 300
    write(db, index, [Document("d4", "[2023-05-05] Bo: a wholly new lighthouse sentence", "s4")])  # replaced
    write(db, index, turns(texts[90:100], prefix="b"))  # a batch replacing b0..b9
    assert postings(db, ns) == expected(db, ns)
    assert ("lighthous", int(db.scalar("SELECT id FROM memory_documents WHERE namespace = %s AND doc_id = 'd4'",
                                        (ns,))), 1) in {(t, i, f) for t, i, f, _ in postings(db, ns)}  # fmt: skip
    with_context = db.scalar("SELECT count(*) FROM memory_keywords WHERE namespace = %s AND ctx_id IS NOT NULL", (ns,))
    assert with_context
    forget(db, index, ["d7", "d8", "b20"])  # turns that were other turns' context
    assert postings(db, ns) == expected(db, ns)
    forget(db, index, [f"b{i}" for i in range(30, 60)])
    assert postings(db, ns) == expected(db, ns)
    other = namespace()
    write(db, pg.PgKeywordIndex(db, other), turns(texts[:10]))
    index.remove_all()
    assert postings(db, ns) == set() and postings(db, other) == expected(db, other) != set()


def test_the_migration_builds_the_postings_of_a_database_at_0005(db: pg.PgDatabase) -> None:
    """A database as 0005 left it (no postings table, rows in several namespaces): the first
    process of this version builds the table from the keyword rows, and searches rank as before."""
    texts = sentences(200)
    first, second = namespace(), namespace()
    write(db, pg.PgKeywordIndex(db, first), turns(texts[:120]))
    write(db, pg.PgKeywordIndex(db, second), turns(texts[120:]))
    forget(db, pg.PgKeywordIndex(db, first), ["d5"])  # a turn lost its context
    with db.atomic() as conn:  # back to 0005: the step only adds the table
        conn.execute("DROP TABLE memory_keyword_postings")
        conn.execute("DELETE FROM memory_migrations WHERE store = 'memory' AND name = '0006_keyword_postings'")
    reference = pg.PgKeywordIndex(db, first, postings=False)
    before = {q: ranked(reference, q) for q in queries(texts[:120], 20)}
    assert db.migrate("memory", pg.MIGRATIONS) == ["0006_keyword_postings"]
    for ns in (first, second):
        assert postings(db, ns) == expected(db, ns) != set()
    fast = pg.PgKeywordIndex(db, first)
    assert {q: ranked(fast, q) for q in before} == before
    assert db.migrate("memory", pg.MIGRATIONS) == []  # applied once
    write(db, fast, turns(texts[:5], prefix="new"))  # and kept from then on
    assert postings(db, first) == expected(db, first)
    scan = "\n".join(
        str(r[0])
        for r in db.query(
            "EXPLAIN SELECT id, tf, length FROM memory_keyword_postings WHERE namespace = %s AND term = ANY(%s)",
            (first, ["lighthous", "memori"]),
        )
    )
    assert "memory_keyword_postings_pkey" in scan  # the covering key answers a search
