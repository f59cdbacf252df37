"""A composite compacts each database once, however many of its members store in it.

Members name where their ``compact()`` works beforehand (``compaction_locations``, the
:class:`~ovos_memory_plugins.protocols.LocatedCompactable` protocol); the composite asks a member
only when one of its locations was not done yet. Counted on real databases: the VACUUM
statements SQLite runs (a trace callback on each member's connection) and PostgreSQL's own
``vacuum_count`` of the memory tables (a throwaway server, tests/pg_server.py).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.protocols import Compactable, LocatedCompactable
from ovos_memory_plugins.storage.engine import Compacted
from ovos_memory_plugins.testing import exchange


def count_vacuums(memory: CompositeMemory) -> list[str]:
    """Every VACUUM statement any member's SQLite connection runs from now on."""
    seen: list[str] = []
    for member in memory.members.values():
        member.storage.db.conn.set_trace_callback(lambda sql: seen.append(sql) if "VACUUM" in sql.upper() else None)
    return seen


def lexical(name: str, **config: Any) -> dict[str, Any]:
    return {"name": name, "module": "ovos-memory-plugin-lexical", "config": config}


def test_parts_of_one_storage_vacuum_its_one_file_once(tmp_path: Path) -> None:
    members = [lexical("a"), lexical("b", head_weight=2.0)]
    with CompositeMemory({"root": str(tmp_path / "c"), "members": members}) as memory:
        assert memory.storage is not None
        files = {memory.storage.db.location}
        assert memory.compaction_locations == frozenset(files)
        memory.update_history(exchange("my locker code is numbatfive", "Noted."), "gym")
        memory.forget_session("gym")
        vacuums = count_vacuums(memory)
        done = memory.compact()
        assert vacuums == ["VACUUM"] and sorted(done) == sorted(files) and done.skipped == {}


def test_members_on_sqlite_files_vacuum_each_file_once(tmp_path: Path) -> None:
    # members placed in files of their own (db_path) stay whole memories, each with its file
    members = [
        lexical("a", db_path=str(tmp_path / "a.db")),
        lexical("b", db_path=str(tmp_path / "b.db"), head_weight=2.0),
    ]
    with CompositeMemory({"root": str(tmp_path / "c"), "members": members}) as memory:
        a, b = (memory.members[n] for n in ("a", "b"))
        files = {a.storage.db.location, b.storage.db.location}
        assert len(files) == 2 and memory.compaction_locations == frozenset(files)
        memory.update_history(exchange("my locker code is numbatfive", "Noted."), "gym")
        memory.forget_session("gym")
        vacuums = count_vacuums(memory)
        done = memory.compact()
        assert vacuums == ["VACUUM", "VACUUM"] and sorted(done) == sorted(files) and done.skipped == {}


@pytest.mark.parametrize("second", ["ovos-memory-plugin-lexical", "ovos-memory-plugin-vector"])
def test_a_member_on_another_members_sqlite_file_is_refused(tmp_path: Path, second: str) -> None:
    """Two members on one file would share rows (history twice, each other's documents), and a
    vector member there dropped the keyword member's index: the second is skipped, the first works."""
    shared = str(tmp_path / "one.db")
    members = [lexical("a", db_path=shared), {"name": "b", "module": second, "config": {"db_path": shared}}]
    with CompositeMemory({"root": str(tmp_path / "c"), "members": members}) as memory:
        assert list(memory.members) == ["a"]
        assert f"the database file {Path(shared).resolve()}" in memory.skipped["b"]
        memory.update_history(exchange("my locker code is numbatfive", "Noted."), "gym")
        assert [h.content for h in memory.search("locker code")] != []
        assert memory.compact() == [shared]


def test_a_busy_file_is_tried_once_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from ovos_memory_plugins.storage.sqlite import database as sqlite_module

    monkeypatch.setattr(sqlite_module, "COMPACT_WAIT_MS", 100)
    shared = str(tmp_path / "one.db")
    with CompositeMemory({"root": str(tmp_path / "c"), "members": [lexical("a", db_path=shared)]}) as memory:
        memory.update_history(exchange("my locker code is numbatfive", "Noted."), "gym")
        vacuums = count_vacuums(memory)
        other = sqlite3.connect(shared, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            started = time.monotonic()
            done = memory.compact()
            waited = time.monotonic() - started
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert done == [] and list(done.skipped) == [shared]
        assert vacuums == ["VACUUM"] and waited < 1.0
        assert memory.compact() == [shared]  # the next compaction does it


class _OwnFileMemory(LexicalMemory):
    """A backend with data of its own beside the base's database (docs/writing-a-backend.md)."""

    calls = 0

    def compact(self) -> Compacted:
        type(self).calls += 1
        return super().compact()


def test_a_member_that_compacts_more_than_it_declares_is_always_asked(tmp_path: Path) -> None:
    with _OwnFileMemory({"root": str(tmp_path / "m")}) as memory:
        assert isinstance(memory, LocatedCompactable) and memory.compaction_locations is None
    with LexicalMemory({"root": str(tmp_path / "plain")}) as plain:
        assert isinstance(plain, Compactable) and isinstance(plain, LocatedCompactable)
        assert plain.compaction_locations == frozenset({plain.storage.db.location})
    with NotesMemory({"root": str(tmp_path / "n"), "archive": None}) as in_ram:  # nothing of it on disk
        assert in_ram.storage.db.in_ram and in_ram.compaction_locations == frozenset()


def test_a_third_party_member_without_locations_is_asked_every_time(tmp_path: Path) -> None:
    import ovos_memory_plugins.composite.memory as composite_module

    class Plain:
        """A member of another package: compactable, with no declared locations."""

        asked = 0

        def __init__(self, config: dict[str, Any] | None = None) -> None:
            self.config = config or {}

        def search(self, query: str, session_id: str | None = None, top_k: int | None = None) -> list[Any]:
            return []

        def compact(self) -> list[str]:
            type(self).asked += 1
            return ["elsewhere"]

    original = composite_module._load_member_class
    composite_module._load_member_class = lambda module: Plain if module == "plain" else original(module)
    try:
        cfg = {"root": str(tmp_path / "c"), "members": [{"name": "p", "module": "plain"}, lexical("kw")]}
        with CompositeMemory(cfg) as memory:
            assert memory.compaction_locations is None  # a member does not say
            assert memory.compact() == ["elsewhere", memory.members["kw"].storage.db.location]
            assert memory.compact() and Plain.asked == 2
    finally:
        composite_module._load_member_class = original


# -- PostgreSQL: members on one database ------------------------------------------------------

_ns = itertools.count()


def vacuum_counts(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, vacuum_count FROM pg_stat_user_tables"
            " WHERE relname LIKE 'memory\\_%%' AND schemaname = current_schema()"
        ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def settled_counts(url: str, before: dict[str, int]) -> Iterator[dict[str, int]]:
    """The tables' vacuum counts once they moved past ``before`` and stayed put for a second
    (the server publishes its statistics a moment after a VACUUM)."""
    deadline = time.monotonic() + 10
    last: dict[str, int] | None = None
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        now = vacuum_counts(url)
        if now != last:
            last, stable_since = now, time.monotonic()
        elif all(now.get(t, 0) > n for t, n in before.items()) and time.monotonic() - stable_since > 1.0:
            break
        time.sleep(0.1)
    assert last is not None
    yield last


def test_members_on_one_postgresql_database_vacuum_it_once(postgres_url: str) -> None:
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    ns = f"once-{next(_ns)}"
    members = [lexical("kw"), {"name": "notes", "module": "ovos-memory-plugin-notes"}]
    with CompositeMemory({"database": postgres_url, "namespace": ns, "members": members}) as memory:
        kw, notes = memory.members["kw"], memory.members["notes"]
        assert kw.compaction_locations == notes.compaction_locations == frozenset({kw.storage.db.location})
        memory.update_history(exchange("my locker code is numbatfive", "Noted."), "gym")
        memory.forget_session("gym")
        time.sleep(1.5)  # the background VACUUM after the forget is counted before we start
        before = next(settled_counts(postgres_url, {}))
        done = memory.compact()
        assert done == [kw.storage.db.location] and done.skipped == {}
        after = next(settled_counts(postgres_url, before))
    moved = {t: after[t] - n for t, n in before.items()}
    assert moved and set(moved.values()) == {1}, moved  # one VACUUM of each table, not one per member


def test_members_on_a_locked_postgresql_database_wait_for_it_once(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    psycopg = pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    from ovos_memory_plugins.storage.postgres import database as postgres_module

    monkeypatch.setattr(postgres_module, "COMPACT_DEADLINE_S", 1.0)  # each VACUUM waits a second at most
    ns = f"once-{next(_ns)}"
    members = [lexical("kw"), lexical("kw2"), {"name": "notes", "module": "ovos-memory-plugin-notes"}]
    with CompositeMemory({"database": postgres_url, "namespace": ns, "members": members}) as memory:
        memory.update_history(exchange("my locker code is numbatfive", "Noted."), "gym")
        holder = psycopg.connect(postgres_url)
        try:
            holder.execute("LOCK TABLE memory_documents IN SHARE UPDATE EXCLUSIVE MODE")  # as a VACUUM would
            started = time.monotonic()
            done = memory.compact()
            waited = time.monotonic() - started
        finally:
            holder.rollback()
            holder.close()
        location = memory.members["kw"].storage.db.location
        assert done == [] and list(done.skipped) == [location]
        assert 0.9 < waited < 1.9  # one wait for the lock, not one per member (three before)
        assert memory.compact() == [location]  # the lock is gone: done
