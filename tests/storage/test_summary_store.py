"""The rolling-summary store: one class over both engines, and the move of an earlier release's
SQLite table (kept summaries, forgotten with the session, a damaged or unexpected table left
as it is and reported). Real SQLite files; the cases every engine shares take the ``engine``
fixture (PostgreSQL on the throwaway server of tests/pg_server.py)."""

from __future__ import annotations

import itertools
import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import Engine
from ovos_plugin_manager.templates.agents import MessageRole
from test_notes_one_database import tables
from trust_helpers import files_holding, prime_summary

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.storage.summary_store import MIGRATIONS, OLD_COLUMNS, SummaryStore, open_summary_store
from ovos_memory_plugins.testing import exchange

#: The statement of the earlier release (migration ``0001_summaries``), as it wrote the table.
OLD_CREATE = (
    "CREATE TABLE summaries ("
    " session_id TEXT PRIMARY KEY, summary TEXT NOT NULL, folded INTEGER NOT NULL, updated REAL NOT NULL)"
)
#: A word only the legacy session's summary holds (so a byte scan finds that summary, nothing else).
MARKER = "quetzalcoatlus"
_ns = itertools.count()


def lexical(root: Path, **config: Any) -> LexicalMemory:
    return LexicalMemory({"root": str(root), "max_history": 2, **config})


def talk(mem: Any, session: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        mem.update_history(exchange(f"Fact number {i}: my locker code is {1000 + i}.", f"Noted {i}."), session)


def database_file(root: Path) -> Path:
    with lexical(root) as mem:
        return Path(mem.storage.db.location)


def make_old_release_file(root: Path, *, extra_rows: Sequence[tuple[Any, ...]] = (), alter: str = "") -> Path:
    """A memory folder as the earlier release left it: turns recorded, summaries in the old
    table ``summaries`` (written with the old CREATE statement), migration ``0002`` not applied.
    The rows are those the memory folded, plus ``extra_rows``."""
    with lexical(root) as mem:
        talk(mem, "s", 3)
        talk(mem, "t", 3)
        path = Path(mem.storage.db.location)
        # what the earlier release's eager fold had written: every exchange outside the window
        rows = [(s, mem.session_summary(s), 2, 1700000000.0) for s in ("s", "t")]
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute("DROP TABLE memory_summaries")
            conn.execute("DELETE FROM _migrations WHERE store = 'summary' AND name != '0001_summaries'")
            conn.execute(OLD_CREATE)
            conn.executemany("INSERT INTO summaries VALUES (?, ?, ?, ?)", [*rows, *extra_rows])
            if alter:
                conn.execute(alter)
        conn.execute("VACUUM")  # nothing of the new table left in the file
    finally:
        conn.close()
    assert "summaries" in tables(path) and "memory_summaries" not in tables(path)
    return path


def old_rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM summaries ORDER BY session_id").fetchall()
    finally:
        conn.close()


# -- the move of the earlier table (SQLite) ------------------------------------------------------


def test_an_old_release_file_keeps_every_summary_and_forgets_them_with_their_sessions(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    legacy = ("legacy", f"- the user keeps a {MARKER} skeleton in the attic", 4, 1700000000.5)
    path = make_old_release_file(root, extra_rows=[legacy])
    before = {r[0]: (r[1], r[2]) for r in old_rows(path)}
    assert set(before) == {"s", "t", "legacy"}

    with lexical(root) as mem:
        for session, (summary, _) in before.items():
            assert mem.session_summary(session) == summary
        prompt = "\n".join(
            m.content for m in mem.build_conversation_context("hi", "legacy") if m.role == MessageRole.SYSTEM
        )
        assert MARKER in prompt  # injected after the system prompt, as before
    assert "summaries" not in tables(path)  # moved, then dropped
    conn = sqlite3.connect(path)
    try:
        moved = conn.execute("SELECT namespace, session_id, summary, folded FROM memory_summaries ORDER BY session_id")
        assert [tuple(r) for r in moved] == [("default", s, *before[s]) for s in sorted(before)]
        applied = {r[0] for r in conn.execute("SELECT name FROM _migrations WHERE store = 'summary'")}
        assert applied == {m.name for m in MIGRATIONS}
    finally:
        conn.close()

    with lexical(root) as mem:  # a restart after the move: the same summaries, a fold goes on from them
        assert mem.session_summary("legacy") == legacy[1]
        talk(mem, "s", 1, start=3)
        assert "locker code is 1002" in mem.session_summary("s")
        assert mem.forget_session("legacy").tiers["summaries"] == 1
        assert mem.session_summary("legacy") == "" and "1001" in mem.session_summary("t")
        mem.compact()
        assert files_holding(root, MARKER) == []  # neither the moved row nor the dropped table's pages
        mem.forget_all()
        assert mem.session_summary("s") == mem.session_summary("t") == ""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM memory_summaries").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_new_file_has_only_the_table_both_engines_share(tmp_path: Path) -> None:
    path = database_file(tmp_path / "mem")
    assert "memory_summaries" in tables(path) and "summaries" not in tables(path)


@pytest.mark.parametrize(
    ("alter", "extra", "reason"),
    [
        ("ALTER TABLE summaries ADD COLUMN mood TEXT", [], "its columns are"),
        ("", [("odd", "- a summary", "many", 1.0)], "values of other types"),
    ],
    ids=["unexpected-columns", "unexpected-values"],
)
def test_an_unexpected_old_table_is_left_as_it_is_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, alter: str, extra: list[tuple[Any, ...]], reason: str
) -> None:
    root = tmp_path / "mem"
    path = make_old_release_file(root, extra_rows=extra, alter=alter)
    before = old_rows(path)
    with caplog.at_level(logging.WARNING, logger="ovos_memory_plugins"), lexical(root) as mem:
        # not used: a session only the old table has shows none; one with history shows what
        # the lazy fold makes of the history outside the window
        assert all(mem.session_summary(str(row[0])) == "" for row in extra)
        talk(mem, "s", 3, start=10)  # the memory goes on, with new summaries in the new table
        assert "locker code is 1010" in mem.session_summary("s")
        store = open_summary_store(mem.storage)
        assert isinstance(store, SummaryStore) and store.leftover is not None and reason in store.leftover
        mem.forget_all()
    warnings = [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "summaries" in r.getMessage()
    ]
    assert warnings and reason in warnings[0] and "left as it is" in warnings[0]
    assert old_rows(path) == before  # untouched, never dropped
    with caplog.at_level(logging.WARNING, logger="ovos_memory_plugins"), lexical(root):
        pass
    assert sum("left as it is" in r.getMessage() for r in caplog.records) >= 2  # reported on every open


def test_a_damaged_old_table_is_left_as_it_is_and_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "mem"
    path = make_old_release_file(root)
    conn = sqlite3.connect(path)
    try:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        rootpage = int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'summaries'").fetchone()[0])
    finally:
        conn.close()
    with path.open("r+b") as f:  # the table's root page becomes garbage
        f.seek((rootpage - 1) * page_size)
        f.write(b"\xa5" * page_size)
    damaged = path.read_bytes()[(rootpage - 1) * page_size : rootpage * page_size]
    with caplog.at_level(logging.WARNING, logger="ovos_memory_plugins"), lexical(root) as mem:
        talk(mem, "s", 3, start=10)
        assert "locker code is 1010" in mem.session_summary("s")  # the memory and its summary work
        store = open_summary_store(mem.storage)
        assert isinstance(store, SummaryStore) and store.leftover and "cannot be read" in store.leftover
    assert any("cannot be read" in r.getMessage() for r in caplog.records)
    assert "summaries" in tables(path)  # not dropped
    assert path.read_bytes()[(rootpage - 1) * page_size : rootpage * page_size] == damaged  # nor rewritten


def test_two_stores_opening_an_old_file_at_once_move_it_once(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    path = make_old_release_file(root)
    expected = {r[0]: (r[1], r[2]) for r in old_rows(path)}
    barrier = threading.Barrier(4)
    stores: list[SummaryStore] = []
    databases = [Database(path) for _ in range(4)]

    def open_one(db: Database) -> None:
        barrier.wait()
        stores.append(SummaryStore(db))

    threads = [threading.Thread(target=open_one, args=(db,)) for db in databases]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert len(stores) == 4
        for store in stores:
            assert store.leftover is None and {s: store.get(s) for s in expected} == expected
    finally:
        for db in databases:
            db.close()
    assert "summaries" not in tables(path)


# -- one class, both engines ---------------------------------------------------------------------


@pytest.fixture
def engine_db(engine: Engine) -> Iterator[tuple[Any, str]]:
    """A database of the engine under test and a fresh namespace for it."""
    db: Any
    if engine.url is None:
        engine.folder.mkdir(parents=True)
        db = Database(engine.folder / "memory.db")
        namespace = "default"
    else:
        from ovos_memory_plugins.storage.postgres.database import PgDatabase

        db, namespace = PgDatabase(engine.url), engine.namespace
    try:
        yield db, namespace
    finally:
        db.close()


def test_the_same_store_keeps_replaces_counts_and_forgets_on_both_engines(engine_db: tuple[Any, str]) -> None:
    db, namespace = engine_db
    store = SummaryStore(db, namespace)
    assert store.get("s") == ("", 0) and store.count() == 0
    store.put("s", "- the user has a cat", 1)
    store.put("t", "- the user lives in Porto", 2)
    store.put("s", "- the user has a cat named Miso", 3)
    assert store.get("s") == ("- the user has a cat named Miso", 3) and store.count() == 2
    with db.atomic():  # inside a caller's transaction, committed with it
        store.put("u", "- the user plays chess", 1)
    assert store.get("u") == ("- the user plays chess", 1)
    assert SummaryStore(db, namespace).get("t") == ("- the user lives in Porto", 2)  # a second open
    assert store.clear_session("s") == 1 and store.clear_session("s") == 0
    assert store.get("s") == ("", 0)
    assert store.clear_all() == 2 and store.count() == 0


def test_postgresql_namespaces_share_the_table_but_not_the_rows(postgres_url: str) -> None:
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    from ovos_memory_plugins.storage.postgres.database import PgDatabase

    db = PgDatabase(postgres_url)
    try:
        a, b = SummaryStore(db, f"summary-store-{next(_ns)}"), SummaryStore(db, f"summary-store-{next(_ns)}")
        a.put("default", "- a's summary", 1)
        b.put("default", "- b's summary", 1)
        assert a.get("default") == ("- a's summary", 1) and b.get("default") == ("- b's summary", 1)
        assert b.clear_all() == 1 and a.count() == 1 and a.get("default")[0] == "- a's summary"
        assert a.clear_all() == 1
    finally:
        db.close()


def test_the_old_columns_are_the_old_statement_s() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(OLD_CREATE)
        assert tuple(r[1] for r in conn.execute("PRAGMA table_info(summaries)")) == OLD_COLUMNS
    finally:
        conn.close()


@pytest.mark.parametrize("verb", ["forget_session", "forget_all"])
def test_a_forgotten_summary_leaves_no_byte_in_the_folder(tmp_path: Path, verb: str) -> None:
    root = tmp_path / "mem"
    with lexical(root) as mem:
        prime_summary(mem, "s")  # the summary rows are written (the lazy fold writes on trims)
        prime_summary(mem, "t")
        mem.update_history(exchange(f"My first pet was a {MARKER} named Rex.", "What a pet!"), "s")
        talk(mem, "s", 2)  # the pet's exchange leaves the window: into the summary
        talk(mem, "t", 3)
        assert MARKER in mem.session_summary("s")
        assert files_holding(root, MARKER)
        report = mem.forget_session("s") if verb == "forget_session" else mem.forget_all()
        assert report.tiers["summaries"] == (1 if verb == "forget_session" else 2)
        assert files_holding(root, MARKER) == []  # the forget's own purge: secure_delete, WAL truncated
        mem.compact()
        assert files_holding(root, MARKER) == []
        assert ("1001" in mem.session_summary("t")) == (verb == "forget_session")
    with lexical(root) as mem:
        assert mem.session_summary("s") == ""


# -- a memory's summary, on every engine -----------------------------------------------------------


def summary_rows(url: str, namespace: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM memory_summaries WHERE namespace = %s", (namespace,)).fetchone()
    return int(row[0]) if row else 0


def system_text(mem: LexicalMemory, text: str, session: str) -> str:
    return "\n".join(m.content for m in mem.build_conversation_context(text, session) if m.role == MessageRole.SYSTEM)


def test_the_summary_lives_in_the_memory_s_database_and_survives_a_restart(engine: Engine) -> None:
    config = engine.memory_config(max_history=2)
    with LexicalMemory(config) as mem:
        prime_summary(mem, "s")  # stored summaries (the lazy fold writes on trims)
        prime_summary(mem, "t")
        talk(mem, "s", 3)  # exchange 0 leaves the one-exchange window, then 1
        talk(mem, "t", 3)
        assert "locker code is 1000" in mem.session_summary("s")
        assert "locker code is 1002" not in mem.session_summary("s")  # still in the window
        if engine.url is not None:  # in the server's table, keyed by the namespace
            assert summary_rows(engine.url, config["namespace"]) == 2
    if engine.url is not None:
        assert not engine.folder.exists() or not any(engine.folder.iterdir())  # nothing written under root
    else:
        assert files_holding(engine.folder, "locker code is 1000")  # in the memory's own file
    with LexicalMemory(config) as mem:  # a restart (a new process would see the same)
        summary = mem.session_summary("s")
        assert "locker code is 1000" in summary and "locker code is 1001" in summary
        assert "locker code is 1001" in system_text(mem, "hi", "s")
        assert mem.session_summary("nobody") == ""


def test_the_summary_goes_with_its_session_and_with_forget_all(engine: Engine) -> None:
    config = engine.memory_config(max_history=2)
    with LexicalMemory(config) as mem:
        prime_summary(mem, "s")  # stored summaries (the lazy fold writes on trims)
        prime_summary(mem, "t")
        talk(mem, "s", 3)
        talk(mem, "t", 3)
        report = mem.forget_session("s")
        assert report.tiers["summaries"] == 1
        assert mem.session_summary("s") == "" and "1001" in mem.session_summary("t")
        mem.forget_all()
        assert mem.session_summary("t") == ""
    with LexicalMemory(config) as mem:
        assert mem.session_summary("s") == mem.session_summary("t") == ""
    if engine.url is not None:
        assert summary_rows(engine.url, config["namespace"]) == 0


def test_namespaces_keep_their_summaries_apart(engine: Engine) -> None:
    with (
        LexicalMemory(engine.memory_config(namespace="a", max_history=2)) as a,
        LexicalMemory(engine.memory_config(namespace="b", max_history=2)) as b,
    ):
        talk(a, "default", 3)
        assert "1000" in a.session_summary("default")
        assert b.session_summary("default") == ""
        talk(b, "default", 3, start=50)
        b.forget_all()
        assert "1000" in a.session_summary("default") and b.session_summary("default") == ""
        a.forget_all()
