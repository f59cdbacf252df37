"""Notes and sticky notes live in the memory's one database; earlier releases' files move in.

Real SQLite files under tmp_path: the ``sticky.db`` and ``notes.db`` of earlier releases are
written with their own schema (as those releases wrote them), then a memory opens the folder.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory

# -- files as earlier releases wrote them ------------------------------------------------------


def _old_file(path: Path, schema: str, insert: str, rows: list[tuple[object, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(schema)
    conn.executemany(insert, rows)
    conn.commit()
    conn.close()


def old_sticky_file(path: Path) -> None:
    """A ``sticky.db`` of the previous release: notes (one retired) and a last-ask record."""
    _old_file(
        path,
        "CREATE TABLE notes (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, text TEXT NOT NULL,"
        " norm TEXT NOT NULL, lang TEXT, created REAL NOT NULL, updated REAL NOT NULL,"
        " metadata TEXT NOT NULL DEFAULT '{}', retired_on TEXT);"
        "CREATE TABLE last_asks (session_id TEXT PRIMARY KEY, utterance_key TEXT NOT NULL, at REAL NOT NULL,"
        " reply TEXT NOT NULL);"
        "CREATE TABLE _migrations (store TEXT NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL,"
        " PRIMARY KEY (store, name));"
        "INSERT INTO last_asks VALUES ('kitchen', 'abc123', 1.7e9, '[\"You saved it.\"]');",
        "INSERT INTO notes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            ("d-aaaaaaaaaaaa", "kitchen", "my bike is red", "my bike is red", "en", 1.7e9, 1.7e9 + 5, '{"k": 1}', None),
            (
                "d-bbbbbbbbbbbb",
                "porch",
                "the gate code is 4471",
                "the gate code is 4471",
                None,
                1.6e9,
                1.6e9,
                "{}",
                "2025-01-02",
            ),
        ],
    )


def old_notes_file(path: Path) -> None:
    """A ``notes.db`` of the previous release: two active notes and a retired one."""
    _old_file(
        path,
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, position INTEGER NOT NULL, text TEXT NOT NULL,"
        " date TEXT NOT NULL DEFAULT '', retired_on TEXT, created_at REAL NOT NULL,"
        " terms TEXT NOT NULL DEFAULT '', session_id TEXT NOT NULL DEFAULT '');",
        "INSERT INTO notes (position, text, date, retired_on, created_at, session_id) VALUES (?, ?, ?, ?, 0, ?)",
        [
            (1, "User's cat is called Bartholomew", "2025-03", None, "s2"),
            (0, "User lives in Lisbon", "2024-11", None, "s1"),
            (0, "User drives a GTX 1080 car", "2023-01", "2024-05-06", "s1"),
        ],
    )


def tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


# -- sticky notes ------------------------------------------------------------------------------


def test_sticky_notes_live_in_the_memory_database(tmp_path: Path) -> None:
    with StickyMemory({"root": str(tmp_path)}) as mem:
        mem.remember("my bike is red", "s")
    assert not (tmp_path / "sticky.db").exists()
    assert {"memory_sticky_notes", "memory_sticky_asks", "documents"} <= tables(tmp_path / "history.db")


def test_an_old_sticky_file_moves_in_once_losing_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old_sticky_file(tmp_path / "sticky.db")
    with caplog.at_level(logging.WARNING), StickyMemory({"root": str(tmp_path)}) as mem:
        notes = {n.id: n for n in mem.list_notes(include_retired=True)}
        assert set(notes) == {"d-aaaaaaaaaaaa", "d-bbbbbbbbbbbb"}
        bike, gate = notes["d-aaaaaaaaaaaa"], notes["d-bbbbbbbbbbbb"]
        assert (bike.text, bike.session_id, bike.date, bike.retired_on, bike.metadata) == (
            "my bike is red",
            "kitchen",
            "2023-11-14",
            None,
            {"k": 1},
        )
        assert (gate.session_id, gate.retired_on, gate.date) == ("porch", "2025-01-02", "2020-09-13")
        assert mem.store_db.last_ask("kitchen") == ("abc123", 1.7e9, ["You saved it."])
        [row] = [r for r in mem.store_db.notes() if r.id == "d-aaaaaaaaaaaa"]
        assert (row.lang, row.updated) == ("en", 1.7e9 + 5)
    assert "moved 2 note(s)" in caplog.text
    assert not (tmp_path / "sticky.db").exists() and (tmp_path / "sticky.db.moved").exists()
    caplog.clear()
    with caplog.at_level(logging.WARNING), StickyMemory({"root": str(tmp_path)}) as again:
        assert len(again.list_notes(include_retired=True)) == 2  # not copied twice
    assert "moved" not in caplog.text


@pytest.mark.parametrize("kind", ["sticky", "sqlite", "file"])
def test_a_corrupt_old_file_is_left_untouched_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    name = "sticky.db" if kind == "sticky" else "notes.db"
    junk = b"this is not a database" * 100
    (tmp_path / name).write_bytes(junk)
    memory = (
        StickyMemory({"root": str(tmp_path)})
        if kind == "sticky"
        else NotesMemory({"root": str(tmp_path), "store": kind})
    )
    with caplog.at_level(logging.ERROR), memory as mem:
        assert mem.remember("the memory still works").status == "added"
        assert mem.store_problem is None
    assert name in caplog.text and "untouched" in caplog.text
    assert (tmp_path / name).read_bytes() == junk and not (tmp_path / f"{name}.moved").exists()


# -- curated notes -----------------------------------------------------------------------------

EXPECTED_ACTIVE = [("User lives in Lisbon", "2024-11", "s1"), ("User's cat is called Bartholomew", "2025-03", "s2")]


@pytest.mark.parametrize("store", ["sqlite", "file"])
def test_an_old_notes_file_moves_in_once_losing_nothing(tmp_path: Path, store: str) -> None:
    old_notes_file(tmp_path / "notes.db")
    cfg = {"root": str(tmp_path), "store": store}
    with NotesMemory(cfg) as mem:
        assert [(n.text, n.date, n.session_id) for n in mem.list_notes()] == EXPECTED_ACTIVE
        [old] = mem.retired_notes()
        assert (old.text, old.date, old.retired_on, old.session_id) == (
            "User drives a GTX 1080 car",
            "2023-01",
            "2024-05-06",
            "s1",
        )
    assert not (tmp_path / "notes.db").exists() and (tmp_path / "notes.db.moved").exists()
    assert ("memory_notes" in tables(tmp_path / "history.db")) == (store == "sqlite")
    with NotesMemory(cfg) as again:
        assert len(again.list_notes(include_retired=True)) == 3


def test_switching_the_store_moves_the_notes_out_of_the_database(tmp_path: Path) -> None:
    with NotesMemory({"root": str(tmp_path), "store": "sqlite"}) as mem:
        mem.remember("User's dog is called Rex", session_id="s1")
        mem.remember("User's old car was blue")
        mem.retire("old car")
    with NotesMemory({"root": str(tmp_path), "store": "file"}) as mem:
        assert [(n.text, n.session_id) for n in mem.list_notes()] == [("User's dog is called Rex", "s1")]
        assert [n.text for n in mem.retired_notes()] == ["User's old car was blue"]
    assert "Rex" in (tmp_path / "MEMORY.md").read_text()
    conn = sqlite3.connect(tmp_path / "history.db")
    assert conn.execute("SELECT count(*) FROM memory_notes").fetchone()[0] == 0
    conn.close()
    with NotesMemory({"root": str(tmp_path), "store": "sqlite"}) as mem:  # and back
        assert [n.text for n in mem.list_notes(include_retired=True)] == [
            "User's dog is called Rex",
            "User's old car was blue",
        ]
    assert (tmp_path / "MEMORY.md.moved").exists()


def test_without_an_archive_the_notes_still_persist_in_the_memory_file(tmp_path: Path) -> None:
    cfg = {"root": str(tmp_path), "store": "sqlite", "archive": None}
    with NotesMemory(cfg) as mem:
        mem.remember("User's dog is called Rex")
        mem.update_history([{"role": "user", "content": "a private chat"}, {"role": "assistant", "content": "ok"}], "s")
    with NotesMemory(cfg) as mem:
        assert [n.text for n in mem.list_notes()] == ["User's dog is called Rex"]
    assert b"private chat" not in (tmp_path / "history.db").read_bytes()  # the conversation stays in RAM
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["history.db"]


_OPEN_OLD_FOLDER = """
import sys
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory
root, kind = sys.argv[1], sys.argv[2]
mem = StickyMemory({"root": root}) if kind == "sticky" else NotesMemory({"root": root, "store": "sqlite"})
print(len(mem.list_notes(include_retired=True)), mem.store_problem is None, flush=True)
mem.close()
"""


@pytest.mark.parametrize("kind", ["sticky", "sqlite"])
def test_many_processes_opening_a_folder_with_an_old_file(tmp_path: Path, kind: str) -> None:
    """Four processes open a folder holding an earlier release's file at once, three rounds:
    none crashes or falls back to RAM, the notes are copied exactly once."""
    for round_ in range(3):
        root = tmp_path / f"round{round_}"
        if kind == "sticky":
            old_sticky_file(root / "sticky.db")
        else:
            old_notes_file(root / "notes.db")
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_OLD_FOLDER, str(root), kind],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        expected = "2 True" if kind == "sticky" else "3 True"
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            assert out.strip() == expected, err
        old = "sticky.db" if kind == "sticky" else "notes.db"
        assert not (root / old).exists() and (root / f"{old}.moved").exists()
        assert ("memory_sticky_notes" if kind == "sticky" else "memory_notes") in tables(root / "history.db")


@pytest.mark.parametrize("kind", ["sticky", "notes"])
def test_a_vector_memory_in_the_same_folder_leaves_the_notes_database_alone(tmp_path: Path, kind: str) -> None:
    """``history.db`` of a notes or sticky memory is no earlier release's history for a vector
    memory opening the same folder (no ``sticky.db`` / ``notes.db`` beside it any more)."""
    from ovos_memory_plugins.vector import VectorMemory

    keeper = StickyMemory if kind == "sticky" else NotesMemory
    config = {"root": str(tmp_path)} if kind == "sticky" else {"root": str(tmp_path), "store": "sqlite"}
    with keeper(config) as mem:  # type: ignore[operator]
        mem.remember("my bike is red")
    with VectorMemory({"root": str(tmp_path), "embedder": "hash"}):
        pass
    with keeper(config) as mem:  # type: ignore[operator]
        assert [n.text for n in mem.list_notes()] == ["my bike is red"]


def test_without_an_archive_switching_to_the_file_store_moves_the_notes_out(tmp_path: Path) -> None:
    with NotesMemory({"root": str(tmp_path), "store": "sqlite", "archive": None}) as mem:
        mem.remember("User's dog is called Rex", session_id="s1")
    with NotesMemory({"root": str(tmp_path), "store": "file", "archive": None}) as mem:
        assert [(n.text, n.session_id) for n in mem.list_notes()] == [("User's dog is called Rex", "s1")]
    assert "Rex" in (tmp_path / "MEMORY.md").read_text()
    assert b"Rex" not in (tmp_path / "history.db").read_bytes()  # deleted for real from the database
