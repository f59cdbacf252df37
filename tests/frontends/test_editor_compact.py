"""Compaction as a declared protocol: ``compact()`` on every memory, called by the editor after a delete.

Real SQLite files, a real uvicorn server on 127.0.0.1; the bytes of every file are scanned.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the editor extra (fastapi, uvicorn) is not installed")
pytest.importorskip("uvicorn", reason="the editor extra (fastapi, uvicorn) is not installed")

from test_editor_http import files_holding, request

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.editor import EditorServer
from ovos_memory_plugins.editor.parts import compact
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.protocols import Compactable
from ovos_memory_plugins.sticky import StickyMemory
from ovos_memory_plugins.storage.engine import Compacted, compact_database
from ovos_memory_plugins.storage.sqlite import database as sqlite_module
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.testing import exchange


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    """A SQLite file with one table ``t`` holding one row; a busy file is skipped after 0.1 s."""
    monkeypatch.setattr(sqlite_module, "COMPACT_WAIT_MS", 100)
    db = Database(tmp_path / "m.db")
    with db.atomic():
        db.execute("CREATE TABLE t (x TEXT)")
        db.execute("INSERT INTO t VALUES ('my safe code is aardvarkthree')")
    yield db
    db.close()


def test_sqlite_compaction_skips_a_busy_file_reports_it_and_retries(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    path = Path(db.path)
    with db.atomic():
        db.execute("DELETE FROM t")
    other = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with caplog.at_level(logging.WARNING, logger="ovos_memory_plugins.storage.sqlite.database"):
            busy = compact_database(db)
        assert busy == [] and list(busy.skipped) == [str(path)]
        assert "locked" in busy.skipped[str(path)]
        assert "not compacted yet" in caplog.text
    finally:
        other.execute("ROLLBACK")
        other.close()
    done = compact_database(db)
    assert done == [str(path)] and done.skipped == {}
    assert b"aardvarkthree" not in path.read_bytes()
    assert compact_database(Database(":memory:")) == []


def test_a_long_reader_blocks_the_wal_truncation_and_is_reported(db: Database) -> None:
    path = Path(db.path)
    reader = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchall()  # a read transaction pins the WAL
    try:
        with db.atomic():
            db.execute("INSERT INTO t VALUES ('y')")
        result = db.compact()
        assert result == [] and "write-ahead log" in result.skipped[str(path)]
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    assert db.compact() == [str(path)]


def test_a_forget_does_not_wait_for_a_long_reader(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A delete's WAL truncation waits PURGE_WAIT_MS for readers, not the busy timeout (10 s)."""
    import time

    with LexicalMemory({"root": str(tmp_path / "l")}) as memory:
        memory.put_document("safe", "the safe code is aardvarkthree", "study", {})
        path = memory.storage.db.location
        reader = sqlite3.connect(path, isolation_level=None, timeout=0.1)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlite_master").fetchall()  # pins the WAL
        try:
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="ovos_memory_plugins.storage.sqlite.database"):
                assert memory.delete(["safe"]) == 1
            assert time.monotonic() - started < 5.0  # was the whole busy timeout, 10 s
            assert "WAL is not truncated yet" in caplog.text
            assert memory.search("safe code") == []
        finally:
            reader.execute("ROLLBACK")
            reader.close()
        assert memory.compact() == [path]
    assert files_holding(tmp_path / "l", "aardvarkthree") == []


def test_every_memory_declares_it(tmp_path: Path) -> None:
    with (
        LexicalMemory({"root": str(tmp_path / "l")}) as lexical,
        StickyMemory({"root": str(tmp_path / "s")}) as sticky,
        NotesMemory({"root": str(tmp_path / "n"), "store": "sqlite", "auto_curate": False}) as notes,
    ):
        for memory in (lexical, sticky, notes):
            assert isinstance(memory, Compactable)
        assert lexical.compact() == [lexical.storage.db.location]
        # the notes and sticky stores live in the memory's one database: one file each
        assert sticky.compact() == [sticky.storage.db.location]
        assert notes.compact() == [notes.storage.db.location]


def test_the_editors_delete_leaves_the_word_in_no_file(tmp_path: Path) -> None:
    root = tmp_path / "lexical"
    with LexicalMemory({"root": str(root)}) as memory, EditorServer(memory) as server:
        # documents only (no history holds the words): the delete must take them out of every file
        memory.put_document("safe", "the safe code is aardvarkthree", "study", {})
        memory.put_document("gate", "the gate code is bilbyeleven", "study", {})
        memory.update_history(exchange("the attic key is under platypusone", "ok"), "attic")
        assert files_holding(root, "aardvarkthree") and files_holding(root, "bilbyeleven")

        status, answer = request(server, "DELETE", "/api/documents/safe")
        assert status == 200 and answer["deleted"] == 1
        assert answer["compacted"] == [memory.storage.db.location] and answer["not_compacted"] == {}
        assert files_holding(root, "aardvarkthree") == []
        assert files_holding(root, "bilbyeleven")  # the other document stays
        assert [h.source for h in memory.search("gate code")] == ["gate"]


def test_a_composite_compacts_its_members(tmp_path: Path) -> None:
    cfg = {
        "root": str(tmp_path / "composite"),
        "members": [{"module": "ovos-memory-plugin-lexical"}, {"module": "ovos-memory-plugin-sticky"}],
    }
    with CompositeMemory(cfg) as memory, EditorServer(memory) as server:
        assert isinstance(memory, Compactable)
        memory.update_history(exchange("my locker code is numbatfive", "noted"), "gym")
        change = memory.remember("my bank pin is echidnafour")
        assert change and change.note is not None
        assert files_holding(tmp_path, "echidnafour")
        done = memory.compact()
        assert isinstance(done, Compacted)
        lexical, sticky = memory.members["lexical"], memory.members["sticky"]
        # parts of one storage: one file, compacted once
        assert lexical.storage is sticky.storage and done == [lexical.storage.db.location]

        status, state = request(server, "DELETE", f"/api/notes/items?id={change.note.id}")
        assert status == 200 and state["deleted"]["text"] == "my bank pin is echidnafour"
        status, answer = request(server, "DELETE", "/api/sessions/gym?confirm=gym")
        assert status == 200 and len(answer["compacted"]) == 1
        assert files_holding(tmp_path, "echidnafour") == []
        assert files_holding(tmp_path, "numbatfive") == []


def test_a_member_that_fails_to_compact_is_named_not_raised(tmp_path: Path) -> None:
    cfg = {"root": str(tmp_path / "c"), "members": [{"module": "ovos-memory-plugin-lexical"}]}
    with CompositeMemory(cfg) as memory:
        member = memory.members["lexical"]
        member.storage.db.close()  # the member's file can no longer be used
        done = memory.compact()
        assert done == [] and list(done.skipped) == [member.storage.db.location]


def test_a_file_kept_busy_waits_for_the_next_compaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_module, "COMPACT_WAIT_MS", 100)
    with LexicalMemory({"root": str(tmp_path / "m")}) as memory:
        memory.put_document("safe", "the safe code is aardvarkthree", "study", {})
        path = memory.storage.db.location
        reader = sqlite3.connect(path, isolation_level=None, timeout=0.1)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlite_master").fetchall()  # another process reads on
        try:
            memory.put_document("kite", "the kite is in the shed", "study", {})  # a write it does not see
            done = compact(memory)  # what the editor runs after each delete
        finally:
            reader.execute("ROLLBACK")
            reader.close()
        assert done == [] and list(done.skipped) == [path]
        assert compact(memory) == [path]  # the next one does it
