"""Update and retire on every memory that keeps notes, from the Python API, the editor and the
tool box, on both engines.

The old fact of an ``update`` (and a retired note) stays by design, retired and restorable: what
is promised is that no prompt shows it as true afterwards (at most marked "no longer true"),
that it is listed as retired, and that the new fact reaches the next prompt. Curated notes,
sticky notes and a composite (keyword + curated + sticky), on SQLite files and on PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_forget_by_description import placed, url  # noqa: F401  # the engine fixture
from trust_helpers import COMPOSITE, NOTES_SQLITE, STICKY, Backend, editor_call, prompt_text

from ovos_memory_plugins.toolbox import MemoryToolBox


def shown_as_true(prompt: str, word: str) -> list[str]:
    """The prompt's lines holding ``word`` that do not mark it as no longer true."""
    return [line for line in prompt.splitlines() if word in line and "no longer true" not in line]


def version(server: Any) -> str:
    status, state = editor_call(server, "GET", "/api/notes")
    assert status == 200, state
    return str(state["version"])


@pytest.mark.parametrize("how", ["python", "editor", "tool"])
@pytest.mark.parametrize("plain", [NOTES_SQLITE, STICKY, COMPOSITE], ids=lambda b: b.name)
def test_update_keeps_the_old_fact_retired_and_out_of_the_prompt(
    tmp_path: Path,
    url: str | None,  # noqa: F811  # the fixture imported above
    plain: Backend,
    how: str,
) -> None:
    backend, _ = placed(plain, url)
    with backend.open(tmp_path / "m") as mem:
        note = mem.remember("my parking spot is B17", session_id="s")
        assert note.status == "added"
        mem.remember("my cat is called Tom", session_id="s")
        new = "my parking spot is C42"
        if how == "python":
            assert mem.update("parking spot", new).status == "updated"
        elif how == "editor":
            from ovos_memory_plugins.editor import EditorServer

            with EditorServer(mem) as server:
                edit = {"id": note.note.id, "text": new, "version": version(server)}
                status, reply = editor_call(server, "PUT", "/api/notes/items", edit)
                assert status == 200, reply
        else:
            out = MemoryToolBox(memory=mem).call_tool("update_memory", {"description": "parking spot", "new_fact": new})
            assert out.model_dump()["status"] == "updated", out
        active = [n.text for n in mem.list_notes()]
        retired = [n.text for n in mem.list_notes(include_retired=True) if not n.active]
        assert any("C42" in t for t in active) and not any("B17" in t for t in active)
        assert any("B17" in t for t in retired), "the old fact is kept, retired"
        prompt = prompt_text(mem, "where is my parking spot", "s")
        assert "C42" in prompt and shown_as_true(prompt, "B17") == []


@pytest.mark.parametrize("how", ["python", "editor"])
@pytest.mark.parametrize("plain", [NOTES_SQLITE, STICKY, COMPOSITE], ids=lambda b: b.name)
def test_retire_takes_the_fact_out_of_the_prompt_and_restore_brings_it_back(
    tmp_path: Path,
    url: str | None,  # noqa: F811  # the fixture imported above
    plain: Backend,
    how: str,
) -> None:
    backend, _ = placed(plain, url)
    with backend.open(tmp_path / "m") as mem:
        note = mem.remember("my gym is on Elm Street", session_id="s")
        mem.remember("my cat is called Tom", session_id="s")
        if how == "python":
            assert mem.retire("gym").status == "retired"
        else:
            from ovos_memory_plugins.editor import EditorServer

            with EditorServer(mem) as server:
                ref = {"id": note.note.id, "version": version(server)}
                status, reply = editor_call(server, "POST", "/api/notes/retire", ref)
                assert status == 200, reply
        assert not any("Elm" in n.text for n in mem.list_notes())
        assert any("Elm" in n.text and not n.active for n in mem.list_notes(include_retired=True))
        assert shown_as_true(prompt_text(mem, "where is my gym", "s"), "Elm") == []
        assert mem.restore(note.note.id).status == "restored"
        assert "Elm" in prompt_text(mem, "where is my gym", "s")
