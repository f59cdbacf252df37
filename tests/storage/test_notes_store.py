"""The notes stores: MEMORY.md parsing and atomic writes, the SQLite store, moving between them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ovos_memory_plugins.errors import CorruptFileError
from ovos_memory_plugins.protocols import Note
from ovos_memory_plugins.storage.notes_store import (
    FileNotesStore,
    NotesStore,
    SQLiteNotesStore,
    format_note,
    make_note,
    move_notes,
    parse_notes,
)
from ovos_memory_plugins.text import query_terms


def N(text: str, date: str = "", retired_on: str | None = None) -> Note:
    return make_note(text, date, retired_on=retired_on)


NOTES = [N("User's cat is called Bartholomew", "2026-01"), N("User prefers tea over coffee", "2025-12")]


def test_parse_ignores_non_bullets_and_accepts_undated_bullets() -> None:
    body = (
        "# Memory\n\nsome prose\n- [2026-01] fact one\n  continuation line\n* undated fact\n-\n"
        "- [2025-02-14] day date\n"
    )
    assert parse_notes(body) == [N("fact one", "2026-01"), N("undated fact", ""), N("day date", "2025-02")]
    assert format_note(N("x", "2026-01")) == "- [2026-01] x"
    assert format_note(N("x", "2026-01", "2026-03-02")) == "- [2026-01 retired 2026-03-02] x"


@pytest.mark.parametrize(
    ("body", "line"),
    [("# M\n\n- [2026-13] bad month\n", 3), ("- ok\n- [soon] when\n", 2), ("- [2026-01] fine\n- [] empty\n", 2)],
)
def test_unparseable_bullet_names_the_line(body: str, line: int) -> None:
    with pytest.raises(CorruptFileError, match=f"line {line}"):
        parse_notes(body, source="MEMORY.md")


def test_file_store_round_trip_and_corrupt_file_left_untouched(tmp_path: Path) -> None:
    store = FileNotesStore(tmp_path)
    assert isinstance(store, NotesStore)
    assert store.load() == [] and store.version() is None
    store.save(NOTES)
    assert store.load() == NOTES
    text = (tmp_path / "MEMORY.md").read_text()
    assert "- [2026-01] User's cat is called Bartholomew\n" in text
    bad = "- [2026-01] fine\n- [whenever] broken\n"
    (tmp_path / "MEMORY.md").write_text(bad)
    with pytest.raises(CorruptFileError, match="line 2"):
        store.load()
    with pytest.raises(CorruptFileError):
        store.save(NOTES)
    with pytest.raises(CorruptFileError):
        store.retire(NOTES[:1], "2026-02-01")
    assert (tmp_path / "MEMORY.md").read_text() == bad
    (tmp_path / "MEMORY.md").write_bytes(b"- [2026-01] ok\n- caf\xe9\n")
    with pytest.raises(CorruptFileError, match="line 2"):
        store.load()


def test_file_store_retire_restore_search(tmp_path: Path) -> None:
    store = FileNotesStore(tmp_path)
    store.save([*NOTES, N("User's graphics card is a GTX 1080", "2024-03")])
    store.retire([N("User's graphics card is a GTX 1080")], "2026-02-10")
    assert [n.text for n in store.load()] == [n.text for n in NOTES]
    assert store.retired() == [N("User's graphics card is a GTX 1080", "2024-03", "2026-02-10")]
    assert "- [2024-03 retired 2026-02-10] User's graphics card" in (tmp_path / "RETIRED.md").read_text()
    found = store.search(query_terms("which graphics card did I have"), 3)
    assert found and found[0].text.startswith("User's graphics card")
    assert store.search(query_terms("graphics card"), 3, include_retired=False) == []
    store.restore(store.retired())
    assert store.retired() == [] and store.load()[-1].text == "User's graphics card is a GTX 1080"


def test_sqlite_store(tmp_path: Path) -> None:
    store = SQLiteNotesStore(tmp_path / "notes.db")
    try:
        assert isinstance(store, NotesStore)
        v0 = store.version()
        store.save(NOTES)
        assert store.version() != v0
        assert store.load() == NOTES
        store.save([NOTES[1], N("猫の名前はタマです", "2026-02")])
        assert store.load() == [NOTES[1], N("猫の名前はタマです", "2026-02")]
        assert store.search(query_terms("タマ"), 5)[0].text == "猫の名前はタマです"
        store.retire([NOTES[1]], "2026-03-01")
        assert store.retired() == [N(NOTES[1].text, "2025-12", "2026-03-01")]
        assert store.search(query_terms("tea"), 5)[0].retired_on == "2026-03-01"
        assert store.search(query_terms("tea"), 5, include_retired=False) == []
        assert store.count() == (1, 1)
        store.restore([NOTES[1]])
        assert store.load()[-1].text == NOTES[1].text and store.retired() == []
        store.save([N(f"fact number {i}", "2026-01") for i in range(2000)])  # no cap
        assert len(store.load()) == 2000
    finally:
        store.close()
    again = SQLiteNotesStore(tmp_path / "notes.db")
    try:
        assert len(again.load()) == 2000
    finally:
        again.close()


def test_sqlite_sees_another_connections_writes(tmp_path: Path) -> None:
    a, b = SQLiteNotesStore(tmp_path / "n.db"), SQLiteNotesStore(tmp_path / "n.db")
    try:
        v = a.version()
        b.save(NOTES)
        assert a.version() != v and a.load() == NOTES
    finally:
        a.close()
        b.close()


def test_move_notes_loses_nothing(tmp_path: Path) -> None:
    file_store = FileNotesStore(tmp_path / "f")
    file_store.save([*NOTES, N("old phone was a Nokia", "2020-01")])
    file_store.retire([N("old phone was a Nokia")], "2025-01-01")
    sql = SQLiteNotesStore(tmp_path / "notes.db")
    try:
        assert move_notes(file_store, sql) == 3
        assert sql.load() == NOTES and sql.retired() == file_store.retired()
        assert move_notes(file_store, sql) == 0  # idempotent
        back = FileNotesStore(tmp_path / "g")
        assert move_notes(sql, back) == 3
        assert back.load() == NOTES and back.retired() == sql.retired()
    finally:
        sql.close()


def test_file_store_concurrent_transactions_do_not_lose_updates(tmp_path: Path) -> None:
    stores = [FileNotesStore(tmp_path), FileNotesStore(tmp_path)]

    def add(store: FileNotesStore, prefix: str) -> None:
        for i in range(25):
            with store.transaction():
                store.save([*store.load(), N(f"{prefix} fact {i}", "2026-01")])

    threads = [threading.Thread(target=add, args=(s, f"t{n}")) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(FileNotesStore(tmp_path).load()) == 50


CHILD = r"""
import sys
from ovos_memory_plugins.storage.notes_store import FileNotesStore, make_note as N
store = FileNotesStore(sys.argv[1])
versions = [[N(f"version {v} fact {i} " + "x" * 80, "2026-01") for i in range(3000)] for v in "AB"]
print("ready", flush=True)
n = 0
while True:
    store.save(versions[n % 2])
    n += 1
"""


def test_sigkill_during_saves_leaves_old_or_new_never_torn(tmp_path: Path) -> None:
    store = FileNotesStore(tmp_path)
    expected = {v: [N(f"version {v} fact {i} " + "x" * 80, "2026-01") for i in range(3000)] for v in "AB"}
    store.save(expected["A"])
    env = dict(os.environ)
    for round_ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, env=env, text=True
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(0.05 + (round_ % 4) * 0.037)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        loaded = store.load()
        assert loaded in (expected["A"], expected["B"]), f"torn file after round {round_}"
    store.remove_stale_temp_files(older_than_s=-1)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
