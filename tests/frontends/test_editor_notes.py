"""The editor's notes API over plain HTTP, on both notes stores, with a "persona" writing the
same files from another instance (as ovos-persona would from its own process)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

pytest.importorskip("fastapi", reason="the editor extra (fastapi, uvicorn) is not installed")

from test_editor_http import request

from ovos_memory_plugins.editor import EditorServer
from ovos_memory_plugins.fakes import ScriptedLLM
from ovos_memory_plugins.notes import NotesMemory


def config(root: Path, store: str) -> dict[str, Any]:
    return {"root": str(root), "store": store, "archive": None, "auto_curate": False}


def context(memory: NotesMemory, utterance: str = "what do you know about me") -> str:
    """The system part of the persona's next context."""
    return "\n".join(m.content for m in memory.build_conversation_context(utterance, "default")[:-1])


@pytest.fixture(params=["file", "sqlite"])
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def notes(tmp_path: Path, store: str) -> Iterator[NotesMemory]:
    with NotesMemory(config(tmp_path / "notes", store)) as memory:
        memory.remember("[2026-10] User's daughter is called Mia")
        memory.remember("[2026-10] User drinks green tea every morning")
        yield memory


@pytest.fixture
def server(notes: NotesMemory) -> Iterator[EditorServer]:
    with EditorServer(notes) as srv:
        yield srv


def items(state: dict[str, Any], status: str = "active") -> list[str]:
    return [n["text"] for n in state["items"] if n["status"] == status]


def test_notes_verbs_reach_the_next_context(
    server: EditorServer, notes: NotesMemory, tmp_path: Path, store: str
) -> None:
    persona = NotesMemory(config(tmp_path / "notes", store))  # the running persona, its own instance
    try:
        status, state = request(server, "GET", "/api/notes")
        assert status == 200
        assert items(state) == ["User's daughter is called Mia", "User drinks green tea every morning"]
        assert "- [2026-10] User's daughter is called Mia" in state["body"]

        status, state = request(server, "POST", "/api/notes/items", {"text": "User's bike is a red Gazelle"})
        assert status == 200 and "User's bike is a red Gazelle" in items(state)
        assert "red Gazelle" in context(persona)

        edit = {
            "id": "User's bike is a red Gazelle",
            "text": "User's bike is a blue Gazelle",
            "version": state["version"],
        }
        status, state = request(server, "PUT", "/api/notes/items", edit)
        assert status == 200 and "User's bike is a blue Gazelle" in items(state)
        assert "User's bike is a red Gazelle" in items(state, "retired")
        assert "blue Gazelle" in context(persona) and "red Gazelle" not in context(persona)

        ref = {"id": "User drinks green tea every morning", "version": state["version"]}
        status, state = request(server, "POST", "/api/notes/retire", ref)
        assert status == 200 and "User drinks green tea every morning" in items(state, "retired")
        assert "green tea" not in context(persona)

        ref["version"] = state["version"]
        status, state = request(server, "POST", "/api/notes/restore", ref)
        assert status == 200 and "User drinks green tea every morning" in items(state)
        assert "green tea" in context(persona)

        query = urlencode({"id": "User's daughter is called Mia", "version": state["version"]})
        status, state = request(server, "DELETE", f"/api/notes/items?{query}")
        assert status == 200 and "User's daughter is called Mia" not in items(state) + items(state, "retired")
        assert "Mia" not in context(persona)

        status, _body = request(server, "DELETE", f"/api/notes/items?{urlencode({'id': 'no such note at all'})}")
        assert status == 404
    finally:
        persona.close()


def test_a_change_made_meanwhile_is_never_overwritten(server: EditorServer, tmp_path: Path, store: str) -> None:
    status, loaded = request(server, "GET", "/api/notes")
    persona = NotesMemory(config(tmp_path / "notes", store))
    try:
        persona.remember("User's sister lives in Porto")  # the persona writes while the page is open
    finally:
        persona.close()

    body = loaded["body"] + "- [2026-11] User plays the cello\n"
    status, answer = request(server, "PUT", "/api/notes", {"body": body, "version": loaded["version"]})
    assert status == 409 and "changed" in answer["detail"]
    edit = {
        "id": "User's daughter is called Mia",
        "text": "User's daughter is called Mila",
        "version": loaded["version"],
    }
    assert request(server, "PUT", "/api/notes/items", edit)[0] == 409
    ref = {"id": "User drinks green tea every morning", "version": loaded["version"]}
    assert request(server, "POST", "/api/notes/retire", ref)[0] == 409
    query = urlencode({"id": "User's daughter is called Mia", "version": loaded["version"]})
    assert request(server, "DELETE", f"/api/notes/items?{query}")[0] == 409

    status, state = request(server, "GET", "/api/notes")
    assert "User's sister lives in Porto" in items(state) and "User's daughter is called Mia" in items(state)
    assert "cello" not in state["body"]
    body = state["body"] + "- [2026-11] User plays the cello\n"
    status, state = request(server, "PUT", "/api/notes", {"body": body, "version": state["version"]})
    assert status == 200
    assert items(state)[-2:] == ["User's sister lives in Porto", "User plays the cello"]


def test_hand_edited_file_is_read_back(tmp_path: Path) -> None:
    with NotesMemory(config(tmp_path / "notes", "file")) as memory, EditorServer(memory) as server:
        (tmp_path / "notes" / "MEMORY.md").write_text("# Memory\n\n- [2026-09] User is vegetarian\n", encoding="utf-8")
        _status, state = request(server, "GET", "/api/notes")
        assert items(state) == ["User is vegetarian"]


def test_dream_before_after_and_undo(tmp_path: Path, store: str) -> None:
    llm = ScriptedLLM()
    with NotesMemory(config(tmp_path / "notes", store), llm=llm) as memory, EditorServer(memory) as server:
        memory.remember("[2026-10] User's daughter is called Mia")
        memory.remember("[2026-10] User's daughter Mia is seven")
        llm.queue(json.dumps({"notes": ["[2026-10] User's daughter is called Mia; Mia is seven"]}))
        status, dreamt = request(server, "POST", "/api/notes/dream")
        assert status == 200 and dreamt["changed"], dreamt
        assert "User's daughter Mia is seven" in dreamt["before"]
        assert "User's daughter Mia is seven" not in dreamt["after"]
        assert dreamt["result"]["status"] == "rewritten"
        assert [n.text for n in memory.list_notes()] == ["User's daughter is called Mia; Mia is seven"]

        status, state = request(server, "POST", "/api/notes/dream/undo", {"id": dreamt["undo"]})
        assert status == 200
        assert items(state) == ["User's daughter is called Mia", "User's daughter Mia is seven"]
        assert request(server, "POST", "/api/notes/dream/undo", {"id": dreamt["undo"]})[0] == 404

        llm.queue(json.dumps({"notes": ["[2026-10] User's daughter is called Mia; Mia is seven"]}))
        status, dreamt = request(server, "POST", "/api/notes/dream")
        memory.remember("User's son is called Leo")  # written after the dream: undo must not drop it
        status, _answer = request(server, "POST", "/api/notes/dream/undo", {"id": dreamt["undo"]})
        assert status == 409
        assert "User's son is called Leo" in [n.text for n in memory.list_notes()]

        status, dreamt = request(server, "POST", "/api/notes/dream")  # no reply queued: the model fails
        assert status == 200 and not dreamt["changed"] and dreamt["undo"] is None
        assert dreamt["result"]["status"] == "failed"


def test_info_offers_dreaming_only_with_a_model(server: EditorServer, tmp_path: Path) -> None:
    _status, info = request(server, "GET", "/api/info")
    caps = info["capabilities"]
    assert caps["notes"] and caps["notes_text"] and caps["archive"]
    assert not caps["dream"], "no language model: the page must not offer Dream now"
    status, body = request(server, "POST", "/api/notes/dream")
    assert status == 405 and "needs a language model" in body["detail"]
    with NotesMemory(config(tmp_path / "other", "file"), llm=ScriptedLLM()) as memory, EditorServer(memory) as srv:
        assert request(srv, "GET", "/api/info")[1]["capabilities"]["dream"]


def test_a_deleted_note_can_be_put_back(server: EditorServer, notes: NotesMemory) -> None:
    status, state = request(server, "GET", "/api/notes")
    mia = next(n for n in state["items"] if "Mia" in n["text"])
    status, state = request(
        server, "DELETE", f"/api/notes/items?{urlencode({'id': mia['id'], 'version': state['version']})}"
    )
    assert status == 200 and state["deleted"]["text"] == mia["text"]
    back = {
        "text": state["deleted"]["text"],
        "session_id": state["deleted"]["session_id"],
        "date": state["deleted"]["date"],
    }
    status, state = request(server, "POST", "/api/notes/items", back)
    assert status == 200
    again = next(n for n in state["items"] if "Mia" in n["text"])
    assert (again["id"], again["text"], again["date"]) == (mia["id"], mia["text"], mia["date"])
    assert "Mia" in context(notes)
