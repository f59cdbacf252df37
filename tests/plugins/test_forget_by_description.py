"""Forget by description, from the Python API, the command and the editor, on both engines; and
the tool box's ``forget_memory`` on memories of documents.

The locker-code case of ``test_notes_locker_code.py`` (remember "my locker code is 4417", update it to
1234, forget "locker code 4417") on every memory that keeps notes, on SQLite files and on
PostgreSQL: 4417 leaves every file under the folder and every row of the memory's namespaces,
1234 stays. And a keyword or vector memory's document forgotten through the tool box (loose
words: the candidates; then the id) leaves no byte and no row.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from urllib.parse import urlencode

import pytest
from conftest import Engine
from test_notes_locker_code import NEW, OLD, setup_locker
from trust_helpers import (
    COMPOSITE,
    LEXICAL,
    NOTES_FILE,
    NOTES_SQLITE,
    STICKY,
    VECTOR_NUMPY,
    Backend,
    editor_call,
    files_holding,
    prompt_text,
    run_cli,
)

from ovos_memory_plugins.toolbox import MemoryToolBox

_ns = itertools.count()


@pytest.fixture
def url(engine: Engine) -> str | None:
    """None (SQLite files under the folder) or the PostgreSQL database's URL: the engine under test."""
    return engine.url


def placed(backend: Backend, url: str | None) -> tuple[Backend, str]:
    """``backend`` in a namespace of its own, on the database when ``url`` is given."""
    namespace = f"fbd{next(_ns)}"
    config = {k: v for k, v in backend.config.items() if not (url and k == "vector_search")}
    config["namespace"] = namespace
    if url:
        config["database"] = url
    return dataclasses.replace(backend, config=config), namespace


def kept(root: Path, url: str | None, namespace: str, word: str) -> list[str]:
    """Files under ``root`` and tables of the memory's namespaces that still hold ``word``."""
    found = files_holding(root, word)
    if url:
        from trust_helpers import rows_of

        found += [f"table {t}" for t in rows_of(url, namespace, word)]
    return found


@pytest.mark.parametrize("how", ["python", "command", "editor"])
@pytest.mark.parametrize("plain", [NOTES_FILE, NOTES_SQLITE, STICKY, COMPOSITE], ids=lambda b: b.name)
def test_forget_by_description_leaves_no_byte_and_no_row(
    tmp_path: Path, url: str | None, plain: Backend, how: str
) -> None:
    if url and plain is NOTES_FILE:
        pytest.skip("on PostgreSQL the notes are always tables: notes-sqlite is that case")
    backend, namespace = placed(plain, url)
    root = tmp_path / "m"
    with backend.open(root) as mem:
        setup_locker(mem)
        assert kept(root, url, namespace, OLD), "the retired code is stored before"
        description = f"locker code {OLD}"
        if how == "python":
            change = mem.forget(description)
            assert change.status == "forgotten" and change.note is not None and OLD in change.note.text, change
        elif how == "command":
            done = run_cli(backend, root, "forget", "--match", description)
            assert done.returncode == 0, (done.stdout, done.stderr)
        else:
            from ovos_memory_plugins.editor import EditorServer

            with EditorServer(mem) as server:
                status, reply = editor_call(server, "DELETE", f"/api/notes/items?{urlencode({'id': description})}")
                assert status == 200, reply
        texts = [n.text for n in mem.list_notes(include_retired=True)]
        assert any(NEW in t for t in texts) and not any(OLD in t for t in texts)
        prompt = prompt_text(mem, "what is my locker code", "s")
        assert NEW in prompt and OLD not in prompt
    assert kept(root, url, namespace, OLD) == []
    assert kept(root, url, namespace, NEW), "the true note is still kept"


@pytest.mark.parametrize("plain", [LEXICAL, VECTOR_NUMPY], ids=lambda b: b.name)
def test_the_tool_forgets_a_document_for_good(tmp_path: Path, url: str | None, plain: Backend) -> None:
    backend, namespace = placed(plain, url)
    root = tmp_path / "m"
    secret = "Narwhal6620"
    with backend.open(root) as mem:
        mem.store(f"The user's gym locker code is {secret}.", "default")
        mem.store("The user's cat is called Tom.", "default")
        assert kept(root, url, namespace, secret)
        box = MemoryToolBox(memory=mem)
        loose = box.call_tool("forget_memory", {"description": "gym locker"}).model_dump()
        assert loose["status"] == "ambiguous" and len(loose["candidates"]) >= 1, loose  # loose words: the ids
        doc_id = next(c["id"] for c in loose["candidates"] if secret in c["text"])
        gone = box.call_tool("forget_memory", {"description": doc_id}).model_dump()
        assert gone["ok"] is True and gone["status"] == "forgotten", gone
        assert not any(secret in h.content for h in mem.search("gym locker code", top_k=10))
        assert any("Tom" in h.content for h in mem.search("cat", top_k=10))
    assert kept(root, url, namespace, secret) == []


@pytest.mark.parametrize("plain", [STICKY, COMPOSITE], ids=lambda b: b.name)
def test_a_spoken_forget_leaves_no_byte_and_no_row(tmp_path: Path, url: str | None, plain: Backend) -> None:
    """ "Forget about my bank PIN", said in a turn: sticky notes act on it; in a composite the
    curated member's copy of the same fact (told through ``remember``) goes too."""
    backend, namespace = placed(plain, url)
    root = tmp_path / "m"
    secret = "Dugong5208"
    with backend.open(root) as mem:
        mem.build_conversation_context(f"remember that my bank PIN is {secret}", "ava")  # sticky notes it
        if plain is COMPOSITE:
            assert mem.remember(f"my bank PIN is {secret}", session_id="ava").status == "added"  # curated member
        mem.build_conversation_context("remember that my boat is moored in Lisbon", "ava")
        assert kept(root, url, namespace, secret)
        messages = mem.build_conversation_context("forget about my bank PIN", "ava")  # acted on in the turn
        assert "deleted the note" in "\n".join(m.content for m in messages)
        notes = [n.text for n in mem.list_notes(include_retired=True)]
        for member in getattr(mem, "members", {}).values():
            if callable(getattr(member, "list_notes", None)):
                notes += [n.text for n in member.list_notes(include_retired=True)]
        assert not any(secret in t for t in notes), notes
        assert any("Lisbon" in t for t in notes), "the other note stays"
        assert secret not in prompt_text(mem, "what is my bank PIN", "ava")
    assert kept(root, url, namespace, secret) == []


def test_a_spoken_forget_read_by_the_digest_leaves_no_byte_and_no_row(tmp_path: Path, url: str | None) -> None:
    """ "Forget my locker code" to curated notes: the digest's ``forget`` list deletes the note."""
    import json

    from ovos_memory_plugins.fakes import ScriptedLLM
    from ovos_memory_plugins.notes import NotesMemory
    from ovos_memory_plugins.testing import exchange

    backend, namespace = placed(NOTES_SQLITE, url)
    root = tmp_path / "m"
    reply = {"new": [], "replace": [], "retire": [], "forget": [1], "episode": "The code was 3390."}
    config = {**backend.block(root), "archive": None, "curate_in_background": False}
    with NotesMemory(config, llm=ScriptedLLM([json.dumps(reply)])) as mem:
        mem.remember("User's locker code is Ibex3390", session_id="s")
        mem.remember("User's cat is called Tom", session_id="s")
        mem.update_history(exchange("forget my locker code", "done"), "s")
        assert mem.digest("s").status == "applied"
        assert [n.text for n in mem.list_notes(include_retired=True)] == ["User's cat is called Tom"]
    assert kept(root, url, namespace, "Ibex3390") == []
    assert kept(root, url, namespace, "3390") == []


@pytest.mark.parametrize("plain", [LEXICAL, VECTOR_NUMPY], ids=lambda b: b.name)
def test_the_tool_updates_a_document_and_the_old_text_goes(tmp_path: Path, url: str | None, plain: Backend) -> None:
    """A document has no retired state: ``update_memory`` stores the new fact and deletes the old."""
    backend, namespace = placed(plain, url)
    root = tmp_path / "m"
    with backend.open(root) as mem:
        doc = mem.store("The user's gym locker code is Orca1184.", "home")
        out = MemoryToolBox(memory=mem).call_tool(
            "update_memory", {"description": doc, "new_fact": "The user's gym locker code is Orca2295."}
        )
        assert out.model_dump()["status"] == "updated", out
        found = [h.content for h in mem.search("gym locker code", top_k=10)]
        assert found == ["The user's gym locker code is Orca2295."]
    assert kept(root, url, namespace, "Orca1184") == []
    assert kept(root, url, namespace, "Orca2295")
