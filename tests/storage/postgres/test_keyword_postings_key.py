"""The ``keyword_postings`` key (issue 25) against a real throwaway server.

Off, the writes of a namespace leave ``memory_keyword_postings`` alone, the namespace's postings
are deleted at open, and searches rank on the GIN path with the very results of the postings path.
On again, the namespace's postings are rebuilt at open before a search reads them. Other
namespaces are untouched throughout; migration 0007 marks the namespaces it finds complete.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from conftest import Engine
from test_keyword_postings import expected, forget, namespace, postings, queries, ranked, sentences, turns, write

from ovos_memory_plugins import ConfigError, validate_config
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.postgres import database as pg
from ovos_memory_plugins.storage.postgres import keyword as pg_keyword
from ovos_memory_plugins.storage.records import KeywordSettings
from ovos_memory_plugins.testing import exchange

OFF = KeywordSettings(keyword_postings=False)


@pytest.fixture
def db(postgres_url: str):
    database = pg.PgDatabase(postgres_url)
    database.migrate("memory", pg.MIGRATIONS)
    yield database
    database.close()


def built(db: pg.PgDatabase, ns: str) -> bool:
    return bool(db.scalar("SELECT 1 FROM memory_keyword_postings_built WHERE namespace = %s", (ns,)))


def every_kind_of_write(db: pg.PgDatabase, index: pg.PgKeywordIndex, texts: list[str]) -> None:
    """One at a time, a batch, a replaced text, a batch replacing some, forgotten turns that were
    other turns' context, a forgotten batch."""
    for doc in turns(texts[:20]):
        write(db, index, [doc])
    write(db, index, turns(texts[20:80], prefix="b"))
    write(db, index, turns(["a wholly new lighthouse sentence"], prefix="d"))
    write(db, index, turns(texts[80:90], prefix="b"))
    forget(db, index, ["d7", "d8", "b20"])
    forget(db, index, [f"b{i}" for i in range(30, 40)])


def test_off_writes_no_postings_and_ranks_as_on(db: pg.PgDatabase) -> None:
    texts = sentences(200)
    on_ns, off_ns = namespace(), namespace()
    on, off = pg.PgKeywordIndex(db, on_ns), pg.PgKeywordIndex(db, off_ns, OFF)
    assert on.postings and not off.postings and not off.maintain
    every_kind_of_write(db, on, texts)
    every_kind_of_write(db, off, texts)
    assert postings(db, off_ns) == set() and not built(db, off_ns)
    assert postings(db, on_ns) == expected(db, on_ns) != set() and built(db, on_ns)
    asked = 0
    for query in queries(texts[:90], 40):
        assert ranked(off, query) == ranked(on, query), query  # same documents, same scores
        assert ranked(off, query, session_id="s2") == ranked(on, query, session_id="s2"), query
        asked += bool(ranked(on, query))
    assert asked >= 30
    off.remove_all()
    assert postings(db, on_ns) == expected(db, on_ns) != set()


def test_switched_off_the_postings_go_and_on_again_they_are_rebuilt(db: pg.PgDatabase) -> None:
    texts = sentences(200)
    ns, other = namespace(), namespace()
    index, neighbour = pg.PgKeywordIndex(db, ns), pg.PgKeywordIndex(db, other)
    write(db, index, turns(texts[:80]))
    write(db, neighbour, turns(texts[80:160]))
    theirs = postings(db, other)
    reference = pg.PgKeywordIndex(db, ns, postings=False)
    asked = queries(texts[:80], 30)
    before = {q: ranked(index, q) for q in asked}
    assert before == {q: ranked(reference, q) for q in asked}

    off = pg.PgKeywordIndex(db, ns, OFF)  # switched off: the namespace's postings go, once
    assert postings(db, ns) == set() and not built(db, ns)
    assert postings(db, other) == theirs and built(db, other)
    assert {q: ranked(off, q) for q in asked} == before
    every_kind_of_write(db, off, texts[:100])  # written while off: no postings
    assert postings(db, ns) == set()
    assert postings(db, other) == theirs
    want = {q: ranked(off, q) for q in asked}

    on = pg.PgKeywordIndex(db, ns)  # on again: rebuilt at open, then read
    assert on.postings and built(db, ns)
    assert postings(db, ns) == expected(db, ns) != set()
    assert {q: ranked(on, q) for q in asked} == want
    assert postings(db, other) == theirs
    write(db, on, turns(texts[100:110], prefix="again"))  # and kept from then on
    assert postings(db, ns) == expected(db, ns)
    assert pg.PgKeywordIndex(db, ns).postings  # the next open finds them complete


def test_a_search_leaves_postings_another_process_took_away(db: pg.PgDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    """An open index with the key on, then another process opens the namespace with it off: the
    first one's searches notice the mark is gone and rank on the GIN path, with the same results
    (the namespace's size counted at every search: the other's writes are seen at once)."""
    monkeypatch.setattr(pg_keyword, "STATS_TTL", 0.0)
    texts = sentences(150)
    ns = namespace()
    on = pg.PgKeywordIndex(db, ns)
    write(db, on, turns(texts[:100]))
    asked = queries(texts[:100], 20, seed=7)
    before = {q: ranked(on, q) for q in asked}
    off = pg.PgKeywordIndex(db, ns, OFF)
    assert postings(db, ns) == set()
    assert {q: ranked(on, q) for q in asked} == before
    write(db, off, turns(texts[100:], prefix="late"))
    assert {q: ranked(on, q) for q in asked} == {q: ranked(off, q) for q in asked}


def test_openers_at_once_build_the_postings_once(db: pg.PgDatabase) -> None:
    texts = sentences(200)
    ns = namespace()
    write(db, pg.PgKeywordIndex(db, ns, OFF), turns(texts))
    assert postings(db, ns) == set()
    opened: list[pg.PgKeywordIndex] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(pg.PgKeywordIndex(db, ns))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(opened) == 4 and all(i.postings for i in opened)
    assert postings(db, ns) == expected(db, ns) != set()


def test_the_migration_marks_the_namespaces_it_finds_complete(db: pg.PgDatabase) -> None:
    texts = sentences(100)
    first, second = namespace(), namespace()
    write(db, pg.PgKeywordIndex(db, first), turns(texts[:50]))
    write(db, pg.PgKeywordIndex(db, second), turns(texts[50:]))
    with db.atomic() as conn:  # back to 0006: the step only adds the table
        conn.execute("DROP TABLE memory_keyword_postings_built")
        conn.execute("DELETE FROM memory_migrations WHERE store = 'memory' AND name = '0007_keyword_postings_built'")
    assert db.migrate("memory", pg.MIGRATIONS) == ["0007_keyword_postings_built"]
    assert built(db, first) and built(db, second)
    stamp = db.scalar("SELECT built FROM memory_keyword_postings_built WHERE namespace = %s", (first,))
    assert pg.PgKeywordIndex(db, first).postings  # nothing to rebuild
    assert db.scalar("SELECT built FROM memory_keyword_postings_built WHERE namespace = %s", (first,)) == stamp
    assert db.migrate("memory", pg.MIGRATIONS) == []


def test_the_key_reaches_the_index_from_the_persona_config(engine: Engine) -> None:
    """``keyword_postings`` in the backend's block, and in the hybrid's ``keyword`` block; SQLite
    takes the key and ignores it."""
    config: dict[str, Any] = engine.memory_config({"keyword_postings": False})
    with LexicalMemory(config) as m:
        assert not m.config_problems
        assert m.keyword_settings.keyword_postings is False
        m.update_history(exchange("my bike is red", "noted"), "s")
        assert m.search("bike", top_k=3)
        if engine.url is not None:
            assert not m.keyword.maintain and not m.keyword.postings
            db = m.keyword.db
            assert postings(db, m.keyword.namespace) == set()
    with LexicalMemory({**config, "keyword_postings": True}) as m:
        assert m.search("bike", top_k=3)
        if engine.url is not None:
            assert m.keyword.postings
            assert postings(m.keyword.db, m.keyword.namespace) == expected(m.keyword.db, m.keyword.namespace) != set()
    hybrid = {"hybrid": True, "keyword": {"keyword_postings": False}}
    assert validate_config(hybrid, plugin="ovos-memory-plugin-vector").options.keyword == hybrid["keyword"]
    archive = {"archive": {"module": "ovos-memory-plugin-lexical", "config": {"keyword_postings": False}}}
    assert validate_config(archive, plugin="ovos-memory-plugin-notes").options.archive == archive["archive"]
    with pytest.raises(ConfigError, match="keyword_postings"):
        validate_config({"keyword_postings": "no"}, plugin="ovos-memory-plugin-lexical")


def test_a_process_writing_with_the_key_off_takes_the_mark_away(
    db: pg.PgDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order: a process opened with the key off, then one with it on (which rebuilds);
    every later write of the first (one document, a batch, a forget, remove_all) takes the mark
    away again, so the second ranks on the GIN path, and its next open rebuilds."""
    monkeypatch.setattr(pg_keyword, "STATS_TTL", 0.0)
    texts = sentences(160)
    ns = namespace()
    off = pg.PgKeywordIndex(db, ns, OFF)
    write(db, off, turns(texts[:60]))
    for change in (
        lambda: write(db, off, turns(texts[60:61], prefix="one")),
        lambda: write(db, off, turns(texts[61:90], prefix="batch")),
        lambda: forget(db, off, ["d3", "batch4"]),
    ):
        on = pg.PgKeywordIndex(db, ns)
        assert on.postings and built(db, ns) and postings(db, ns) == expected(db, ns)
        change()
        assert not built(db, ns)
        asked = queries(texts[:90], 15, seed=11)
        assert {q: ranked(on, q) for q in asked} == {q: ranked(off, q) for q in asked}
    on = pg.PgKeywordIndex(db, ns)
    assert built(db, ns) and postings(db, ns) == expected(db, ns)
    off.remove_all()
    assert not built(db, ns)


def test_a_forget_with_the_key_off_leaves_no_posting_behind(db: pg.PgDatabase) -> None:
    """Postings a process with the key on wrote go with the documents an off process forgets,
    and the words of a forgotten context leave the next turn's postings (nothing else is written)."""
    texts = sentences(40)
    ns = namespace()
    off = pg.PgKeywordIndex(db, ns, OFF)
    on = pg.PgKeywordIndex(db, ns)
    stored = write(db, on, turns(texts[:20], sessions=1))
    gone = {d.key for d in stored if d.doc_id in {"d3", "d9"}}
    forget(db, off, ["d3", "d9"])
    assert not {i for _, i, _, _ in postings(db, ns)} & gone
    left = {(t, i) for t, i, _, _ in postings(db, ns)}
    assert left <= {(t, i) for t, i, _, _ in expected(db, ns)}  # no word a keyword row lost
    off.remove_all()
    assert postings(db, ns) == set()
