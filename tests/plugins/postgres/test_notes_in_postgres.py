"""Curated notes and sticky notes with `"database": "postgresql://..."`: every note in PostgreSQL.

Against the throwaway server of `tests/pg_server.py`: nothing written under `root`, and three
processes writing notes into one namespace at once. (The conformance kits and two memory objects
seeing each other's notes run on every engine: tests/plugins/test_notes_contract.py,
test_sticky.py, test_notes.py.)
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory

_ns = itertools.count()


def _config(tmp_path: Path, url: str, **extra: Any) -> dict[str, Any]:
    return {"root": str(tmp_path / "root"), "database": url, "namespace": f"pg-notes-{next(_ns)}", **extra}


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_notes_verbs_on_postgres_write_nothing_under_root(tmp_path: Path, postgres_url: str, store: str) -> None:
    cfg = _config(tmp_path, postgres_url, store=store)
    with NotesMemory(cfg) as mem:
        assert mem.storage.db.engine == "postgresql" and mem.store_problem is None
        assert mem.remember("User lives in Lisbon", session_id="s1", date="2024-11").status == "added"
        assert mem.remember("User's cat is called Bartholomew", session_id="s2").status == "added"
        assert mem.remember("user lives in lisbon.").status == "duplicate"
        assert mem.update("cat", "User's cat is called Bart").status == "updated"
        assert {n.text for n in mem.search_notes("cat")} == {
            "User's cat is called Bart",
            "User's cat is called Bartholomew",
        }
        assert [n.text for n in mem.search_notes("Bartholomew")] == ["User's cat is called Bartholomew"]
        assert mem.search_notes("Bartholomew", include_retired=False) == []
        assert mem.forget_session("s1") == 1
        assert "Bart" in mem.build_conversation_context("hello", "s")[0].content
    with NotesMemory(cfg) as again:  # a restart finds the notes in the database
        assert [(n.text, n.session_id, n.retired_on is None) for n in again.list_notes(include_retired=True)] == [
            ("User's cat is called Bart", "s2", True),
            ("User's cat is called Bartholomew", "s2", False),
        ]
        assert again.restore("Bartholomew").status == "restored"
        assert again.forget("Bartholomew").status == "forgotten"
        assert [n.text for n in again.list_notes(include_retired=True)] == ["User's cat is called Bart"]
        body = again.notes_body()
        again.replace_notes(body + "- [2025-01] User plays the cello\n", expected_version=again.notes_version())
        assert [n.text for n in again.list_notes()][-1] == "User plays the cello"
        assert len(again.history()) == 1 and again.undo() and again.history() == []  # undo, from the database
        assert [n.text for n in again.list_notes()] == ["User's cat is called Bart"]
        assert again.forget_all() == 1 and again.list_notes(include_retired=True) == []
    root = tmp_path / "root"
    assert not root.exists() or not any(root.rglob("*"))


def test_sticky_notes_on_postgres_write_nothing_under_root(tmp_path: Path, postgres_url: str) -> None:
    cfg = _config(tmp_path, postgres_url)
    with StickyMemory(cfg) as mem:
        context = mem.build_conversation_context("Remember that my bike is red.", "kitchen")
        assert "my bike is red" in context[0].content
        again = mem.build_conversation_context("Remember that my bike is red.", "kitchen")  # a replay: once
        assert [m.content for m in again] == [m.content for m in context]
        assert [n.text for n in mem.list_notes()] == ["my bike is red"]
        mem.remember("the gate code is 4471", "porch")
        assert mem.retire("gate code").status == "retired"
        assert [n.text for n in mem.list_notes()] == ["my bike is red"]
        assert mem.restore("gate code").status == "restored"
        mem.build_conversation_context("Forget about my bike", "kitchen")
        assert [n.text for n in mem.list_notes()] == ["the gate code is 4471"]
        assert mem.store_db.asks()[0][3] == [
            "As the user asked, you already acted on this request to forget a note. Confirm briefly."
        ]
    with StickyMemory(cfg) as mem:
        assert [n.text for n in mem.list_notes()] == ["the gate code is 4471"]
        assert mem.forget_session("porch") == 1 and mem.list_notes() == []
    root = tmp_path / "root"
    assert not root.exists() or not any(root.rglob("*"))


_WRITER = """
import sys
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory
url, ns, who, kind = sys.argv[1:5]
cfg = {"database": url, "namespace": ns, "root": "/nonexistent/unused"}
mem = NotesMemory(cfg) if kind == "notes" else StickyMemory(cfg)
for i in range(12):
    change = mem.remember(f"fact {i} told to server {who}")
    assert change.status == "added", change
mem.close()
"""


@pytest.mark.parametrize("kind", ["notes", "sticky"])
def test_servers_writing_at_once_lose_no_note(tmp_path: Path, postgres_url: str, kind: str) -> None:
    """Three processes remember notes in one namespace at the same time: every note is kept
    (a notes save is a load-modify-save cycle under the namespace's advisory lock)."""
    import subprocess
    import sys

    namespace = f"pg-writers-{kind}-{next(_ns)}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, postgres_url, namespace, who, kind],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in "abc"
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    cfg = {"database": postgres_url, "namespace": namespace, "root": str(tmp_path / "root")}
    with NotesMemory(cfg) if kind == "notes" else StickyMemory(cfg) as mem:
        texts = sorted(n.text for n in mem.list_notes())
    assert texts == sorted(f"fact {i} told to server {who}" for who in "abc" for i in range(12))
