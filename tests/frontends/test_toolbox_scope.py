"""The tool box with ``"scope": "session"`` on every memory that keeps notes, and what
``forget_memory`` leaves behind.

Two sessions (two people on two satellites) keep notes about the same thing. From Bob's session,
``update_memory`` and ``forget_memory`` reach only Bob's notes: a description naming Ava's note,
its exact text or its id changes nothing and never quotes it back, and an ambiguous description
lists only Bob's. ``forget_memory`` removes a note for good: no retired copy, nothing in search
("no longer true ..."), no byte of any file under the memory's folder, no row in the PostgreSQL
server. Curated notes (file and SQLite store), sticky notes, a composite (keyword + curated notes
+ sticky notes), each on SQLite files and on PostgreSQL (the throwaway server of
``tests/pg_server.py``).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Engine
from trust_helpers import files_holding

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory
from ovos_memory_plugins.toolbox import MemoryToolBox

_ns = itertools.count()

COMPOSITE_MEMBERS = [
    {"module": "ovos-memory-plugin-lexical"},
    {"module": "ovos-memory-plugin-notes", "config": {"store": "sqlite"}},
    {"module": "ovos-memory-plugin-sticky"},
]

KINDS = ["notes-file", "notes-sqlite", "sticky", "composite"]


def open_memory(kind: str, root: Path, url: str | None) -> Any:
    """A memory of ``kind`` under ``root`` (SQLite files), or on the database ``url``."""
    block: dict[str, Any] = {"root": str(root), "namespace": f"scope{next(_ns)}"}
    if url is not None:
        block["database"] = url
    if kind.startswith("notes"):
        return NotesMemory({**block, "store": kind.removeprefix("notes-")})
    if kind == "sticky":
        return StickyMemory(block)
    return CompositeMemory({**block, "members": COMPOSITE_MEMBERS})


def rows_holding(url: str, word: str) -> dict[str, int]:
    """Every table of the database with rows holding ``word`` anywhere (the whole row as text)."""
    import psycopg

    out: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            row = conn.execute(f"SELECT count(*) FROM {quoted} AS t WHERE t::text LIKE %s", (f"%{word}%",)).fetchone()
            if row and row[0]:
                out[table] = int(row[0])
    return out


def call(box: MemoryToolBox, session: str, name: str, **kwargs: Any) -> dict[str, Any]:
    with box.for_session(session):
        return dict(box.call_tool(name, kwargs).model_dump(mode="json"))


def kept_anywhere(root: Path, url: str | None, word: str, namespace: str | None = None) -> list[str]:
    """Where ``word`` is still stored: files under ``root`` and, on PostgreSQL, tables with rows
    (of ``namespace`` and its members' when given: a vector's digits may spell a number)."""
    found = files_holding(root, word)
    if url is not None and namespace is not None:
        from trust_helpers import rows_of

        found += [f"table {t}" for t in rows_of(url, namespace, word)]
    elif url is not None:
        found += [f"table {t}" for t in rows_holding(url, word)]
    return found


def every_note_text(mem: Any) -> list[str]:
    """Every note of the memory, active and retired, and of each member of a composite."""
    texts = [n.text for n in mem.list_notes(include_retired=True)]
    for member in getattr(mem, "members", {}).values():
        if callable(getattr(member, "list_notes", None)):
            texts += [n.text for n in member.list_notes(include_retired=True)]
    return texts


@pytest.mark.parametrize("kind", KINDS)
def test_scope_session_update_and_forget_never_cross_sessions(tmp_path: Path, engine: Engine, kind: str) -> None:
    ava_code, bob_code, bob_new = "5512", "7731", "8842"
    with open_memory(kind, tmp_path / "m", engine.url) as mem:
        namespace = mem.settings.namespace
        box = MemoryToolBox(config={"scope": "session"}, memory=mem)
        ava = call(box, "ava", "remember", fact=f"Ava's locker code is {ava_code}.")
        assert ava["ok"] is True, ava
        assert call(box, "bob", "remember", fact=f"Bob's locker code is {bob_code}.")["ok"] is True
        ava_id = ava["item"]["id"]

        # Bob's session names Ava's note every way it can: Ava's note is never changed nor quoted
        # back (loose words may name Bob's own note: then forget asks, update changes nothing here)
        for description in (ava_id, f"Ava's locker code is {ava_code}.", f"Ava {ava_code}"):
            for tool, extra in (
                ("forget_memory", {}),
                ("update_memory", {"new_fact": f"Bob's locker code is {bob_code}."}),
            ):
                out = call(box, "bob", tool, description=description, **extra)
                assert out["status"] in ("not_found", "ambiguous", "duplicate"), (tool, description, out)
                assert ava_code not in json.dumps(out), f"{tool} quoted another session's note: {out}"
                assert all(c["session_id"] == "bob" for c in out["candidates"]), out
            assert ava_id in [n.id for n in mem.list_notes()], "Ava's note is untouched"
        assert any(ava_code in t for t in (n.text for n in mem.list_notes())), "Ava's note is untouched"

        # an update from Bob's session changes Bob's note, not Ava's
        upd = call(box, "bob", "update_memory", description="locker code", new_fact=f"Bob's locker code is {bob_new}.")
        assert upd["ok"] is True and upd["status"] == "updated", upd
        assert bob_code in upd["item"]["text"] and ava_code not in json.dumps(upd)
        active = [n.text for n in mem.list_notes()]
        assert any(ava_code in t for t in active) and any(bob_new in t for t in active)
        assert not any(bob_code in t for t in active)

        # an ambiguous description lists Bob's own notes only (his new one and the retired one)
        amb = call(box, "bob", "forget_memory", description="locker code")
        if amb["status"] == "ambiguous":
            assert amb["candidates"] and all(c["session_id"] == "bob" for c in amb["candidates"]), amb
        assert ava_code not in json.dumps(amb), amb
        listed = call(box, "bob", "list_notes")
        assert ava_code not in json.dumps(listed)
        found = call(box, "bob", "search_memory", query="locker code")
        assert ava_code not in json.dumps(found)

        # Ava forgets her own note: gone for good, Bob's notes stay
        gone = call(box, "ava", "forget_memory", description=ava_id)
        assert gone["ok"] is True and gone["status"] == "forgotten", gone
        assert not any(ava_code in t for t in every_note_text(mem))
        assert any(bob_new in n.text for n in mem.list_notes())
    assert kept_anywhere(tmp_path / "m", engine.url, ava_code, namespace) == []


@pytest.mark.parametrize("kind", KINDS)
def test_forget_memory_removes_the_note_for_good(tmp_path: Path, engine: Engine, kind: str) -> None:
    code = "Kx4471"
    with open_memory(kind, tmp_path / "m", engine.url) as mem:
        namespace = mem.settings.namespace
        box = MemoryToolBox(memory=mem)
        added = call(box, "default", "remember", fact=f"The user's locker code is {code}.")
        assert added["ok"] is True, added
        call(box, "default", "remember", fact="The user's cat is called Tom.")
        assert kept_anywhere(tmp_path / "m", engine.url, code, namespace), "the note is stored before it is forgotten"
        loose = call(box, "default", "forget_memory", description="locker code")
        assert loose["status"] == "ambiguous" and len(loose["candidates"]) == 1, loose  # loose words never forget
        gone = call(box, "default", "forget_memory", description=loose["candidates"][0]["id"])
        assert gone["ok"] is True and gone["status"] == "forgotten", gone  # not "retired"
        found = call(box, "default", "search_memory", query="locker code")
        assert code not in json.dumps(found) and "no longer true" not in json.dumps(found), found
        assert not any(code in t for t in every_note_text(mem)), "no retired copy is kept"
        prompt = "\n".join(m.content for m in mem.build_conversation_context("what is my locker code", "default"))
        assert code not in prompt and "Tom" in prompt
        assert mem.restore(added["item"]["id"]).status == "not_found"
    assert kept_anywhere(tmp_path / "m", engine.url, code, namespace) == []
