"""One exchange, one id, in every member of a composite, whatever the order writers ran in.

Four processes (``multiprocessing``, spawn, started together on a barrier) write one session of
one real composite (a keyword member and a vector member, each its own SQLite file) at once, as
four personas' workers, satellites or a persona and the ``ovos-memory`` command would. Each
member's file then holds every exchange under the same id as the other member's file does.
Deleting by the ids the composite lists (``delete``, the ``ovos-memory forget`` command, the
editor, the tool box's ``forget_memory``) leaves the text in no byte of any member's file, and
a member that cannot delete makes the call fail, naming it, after the others deleted.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Engine
from test_toolbox_scope import kept_anywhere
from trust_helpers import Backend, editor_call, files_holding, prompt_text, run_cli

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.errors import IncompleteForgetError
from ovos_memory_plugins.testing import exchange
from ovos_memory_plugins.toolbox import MemoryToolBox

PROCESSES = 4
TURNS = 12
SESSION = "kitchen"

COMPOSITE_CONFIG: dict[str, Any] = {
    # every member records the turn before the next one: the order of writers is the only variable
    "write_timeout_ms": 60000,
    "members": [
        {"module": "ovos-memory-plugin-lexical"},
        {
            "module": "ovos-memory-plugin-vector",
            "config": {"embedder": "hash", "hybrid": False, "background_reembed": False},
        },
    ],
}
COMPOSITE = Backend("composite-keyword-vector", "ovos-memory-plugin-composite", COMPOSITE_CONFIG)

_barrier: Any = None
_runs = itertools.count()


def composite_on(url: str | None) -> Backend:
    """The keyword + vector composite on SQLite files (None) or on the PostgreSQL database ``url``
    (its members each in their own namespace of a namespace of its own)."""
    if url is None:
        return COMPOSITE
    config = {**COMPOSITE_CONFIG, "database": url, "namespace": f"oneid{os.getpid()}x{next(_runs)}"}
    return Backend(COMPOSITE.name, COMPOSITE.module, config)


def _init(barrier: Any) -> None:
    global _barrier
    _barrier = barrier
    import ovos_memory_plugins.composite  # noqa: F401  # imported before the race starts


def canary(tag: str, worker: int, turn: int) -> str:
    return f"Quillwort{tag}w{worker}q{turn}"


def _writer(args: tuple[Backend, str, str, int]) -> str:
    """Open the composite, wait for the others, record TURNS exchanges of one session."""
    backend, root, tag, worker = args
    try:
        mem = backend.open(root)
        try:
            _barrier.wait(timeout=60)
            for turn in range(TURNS):
                word = canary(tag, worker, turn)
                ask = f"my {word} locker holds the spare keys"
                mem.build_conversation_context(ask, SESSION)
                mem.update_history(exchange(ask, f"noted: the {word} locker"), SESSION)
        finally:
            mem.close()
    except Exception:
        return traceback.format_exc()
    return ""


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(PROCESSES, initializer=_init, initargs=(ctx.Barrier(PROCESSES),)) as p:
        yield p


def member_ids(mem: CompositeMemory) -> dict[str, dict[str, str]]:
    """Each member's documents: member name -> {text: id}."""
    return {
        name: {d["text"]: d["id"] for d in member.iter_documents() if d["metadata"].get("kind") == "exchange"}
        for name, member in mem.members.items()
    }


@dataclass
class Written:
    """A composite after four processes wrote one session of it at once."""

    backend: Backend
    root: Path
    url: str | None
    tag: str

    def words(self, worker: int) -> list[str]:
        return [canary(self.tag, worker, t) for t in range(TURNS)]

    def kept(self, worker: int) -> list[str]:
        """Where any of ``worker``'s words is still stored (files under root, rows in the server)."""
        return [where for word in self.words(worker) for where in kept_anywhere(self.root, self.url, word)]


@pytest.fixture
def written(engine: Engine, tmp_path: Path, pool: Any) -> Written:
    url = engine.url
    backend = composite_on(url)
    root = tmp_path / "ada"
    tag = f"{os.getpid()}r{next(_runs)}"
    errors = pool.map(_writer, [(backend, str(root), tag, w) for w in range(PROCESSES)], chunksize=1)
    assert errors == [""] * PROCESSES, "\n".join(errors)
    return Written(backend, root, url, tag)


def test_four_writers_one_session_every_member_has_the_same_ids(written: Written) -> None:
    with written.backend.open(written.root) as mem:
        ids = member_ids(mem)
        keyword, vector = ids["lexical"], ids["vector"]
        assert len(keyword) == PROCESSES * TURNS and set(keyword) == set(vector), "an exchange is missing"
        differing = [text for text in keyword if keyword[text] != vector[text]]
        assert differing == [], f"{len(differing)} of {len(keyword)} exchanges have another id in each member"
        listed = [d["id"] for d in mem.iter_documents()]
        assert len(listed) == len(set(listed)) == PROCESSES * TURNS, "the composite lists each exchange once"


def listed_ids(mem: CompositeMemory, written: Written, worker: int) -> list[str]:
    """The ids the composite lists (as export and the editor show them) of one writer's exchanges."""
    prefix = f"Quillwort{written.tag}w{worker}q"
    return [d["id"] for d in mem.iter_documents() if prefix in d["text"]]


@pytest.mark.parametrize("front_end", ["python", "command", "editor", "tool"])
def test_a_delete_by_the_listed_id_leaves_no_copy_in_any_member(written: Written, front_end: str) -> None:
    backend, root = written.backend, written.root
    mem = backend.open(root)
    try:
        gone = listed_ids(mem, written, 0)
        assert len(gone) == TURNS
        assert written.kept(0), "the exchanges are stored before"
        if front_end == "python":
            assert mem.delete(gone) == TURNS
        elif front_end == "command":
            done = run_cli(backend, root, "forget", *gone)  # another process, the persona's open
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert f"{TURNS} document(s) deleted" in done.stdout
        elif front_end == "editor":
            from ovos_memory_plugins.editor import EditorServer

            with EditorServer(mem) as server:
                for doc_id in gone:
                    status, reply = editor_call(server, "DELETE", f"/api/documents/{doc_id}")
                    assert status == 200, reply
        else:
            box = MemoryToolBox(memory=mem)
            for doc_id in gone:
                out = box.call_tool("forget_memory", {"description": doc_id}).model_dump()
                assert out["ok"] is True and out["status"] == "forgotten", out
        assert listed_ids(mem, written, 0) == []
        holding = written.kept(0)
        assert holding == [], f"a member still keeps a copy: {holding}"
        question = "which locker holds the spare keys, " + ", ".join(written.words(0)[:3])
        assert not any(w in prompt_text(mem, question, SESSION) for w in written.words(0))
        assert len(listed_ids(mem, written, 1)) == TURNS, "the other writers' exchanges stay"
    finally:
        mem.close()
    assert written.kept(0) == []


def test_copies_an_earlier_release_kept_under_other_ids_go_with_the_listed_one(tmp_path: Path) -> None:
    """Members recorded by an earlier release chained ids on their own histories: one exchange
    sits under another id in each member. A delete by the id one of them lists takes both."""
    root = tmp_path / "ada"
    text = "Q: my Quokkor locker holds the spare keys\nA: noted"
    with COMPOSITE.open(root) as mem:
        mem.members["lexical"].put_document("x-0a0a0a0a0a0a0a0a0a0a0a0a", text, SESSION, {"kind": "exchange"})
        mem.members["vector"].put_document("x-0b0b0b0b0b0b0b0b0b0b0b0b", text, SESSION, {"kind": "exchange"})
        mem.members["vector"].put_document("x-0c0c0c0c0c0c0c0c0c0c0c0c", text, "other", {"kind": "exchange"})
        assert sorted(d["id"] for d in mem.iter_documents() if "Quokkor" in d["text"]) == [
            "x-0a0a0a0a0a0a0a0a0a0a0a0a",
            "x-0b0b0b0b0b0b0b0b0b0b0b0b",
            "x-0c0c0c0c0c0c0c0c0c0c0c0c",
        ]
        assert mem.delete(["x-0a0a0a0a0a0a0a0a0a0a0a0a"]) == 1
        left = [(d["id"], d["session_id"]) for d in mem.iter_documents() if "Quokkor" in d["text"]]
        assert left == [("x-0c0c0c0c0c0c0c0c0c0c0c0c", "other")], "the copy of another session stays"
    assert [f for f in files_holding(root, "Quokkor") if "lexical" in f] == []


def test_a_member_that_cannot_delete_reaches_the_caller(tmp_path: Path) -> None:
    """Whole members (each placed in a file of its own): a member that cannot delete fails the
    call after the others deleted (parts of one storage: tests/plugins/test_composite_one_storage.py)."""
    root = tmp_path / "ada"
    members = [
        {"module": "ovos-memory-plugin-lexical", "config": {"db_path": str(tmp_path / "lexical.db")}},
        {
            **COMPOSITE_CONFIG["members"][1],
            "config": {**COMPOSITE_CONFIG["members"][1]["config"], "db_path": str(tmp_path / "vector.db")},
        },
    ]
    placed = Backend(COMPOSITE.name, COMPOSITE.module, {**COMPOSITE_CONFIG, "members": members})
    with placed.open(root) as mem:
        mem.update_history(exchange("my Quibbix locker holds the keys", "noted"), SESSION)
        doc_id = next(d["id"] for d in mem.iter_documents() if "Quibbix" in d["text"])
        mem.members["vector"].close()  # its database is gone from under it: it cannot delete
        with pytest.raises(IncompleteForgetError) as failed:
            mem.delete([doc_id])
        assert "member 'vector'" in str(failed.value) and failed.value.done == 1
        assert list(failed.value.failures) == ["member 'vector'"]
        assert not any("Quibbix" in d["text"] for d in mem.members["lexical"].iter_documents()), "the others deleted"
        with pytest.raises(IncompleteForgetError, match="member 'vector'"):
            mem.forget_session(SESSION)
        with pytest.raises(IncompleteForgetError, match="member 'vector'"):
            mem.forget_all()
        box = MemoryToolBox(memory=mem)
        mem.members["lexical"].store("the Quibbix umbrella is blue", SESSION)
        umbrella = mem.members["lexical"].document_id(SESSION, "the Quibbix umbrella is blue")
        out = box.call_tool("forget_memory", {"description": umbrella}).model_dump()
        assert out["ok"] is False and "IncompleteForgetError" in out["error"], out


NOTES_COMPOSITE = Backend(
    "composite-notes-sticky",
    "ovos-memory-plugin-composite",
    {
        "members": [
            {"module": "ovos-memory-plugin-lexical"},
            {"module": "ovos-memory-plugin-notes", "config": {"store": "sqlite"}},
            {"module": "ovos-memory-plugin-sticky"},
        ]
    },
)


@pytest.mark.parametrize("front_end", ["python", "command", "editor", "tool"])
def test_forgetting_a_note_removes_every_members_copy(tmp_path: Path, front_end: str) -> None:
    """One fact kept by two members (sticky notes caught the spoken ask, curated notes were told it
    too) under two ids: forgetting it by the id or words the composite shows removes both."""
    root = tmp_path / "ada"
    secret = "Wombat9931"
    mem = NOTES_COMPOSITE.open(root)
    try:
        mem.build_conversation_context(f"remember that my bank PIN is {secret}", "ava")  # sticky notes it
        assert mem.remember(f"my bank PIN is {secret}", session_id="ava").status == "added"  # the notes member
        mem.remember("my boat is moored in Lisbon", session_id="ava")
        keepers = {name: m for name, m in mem.members.items() if callable(getattr(m, "list_notes", None))}
        holders = [name for name, m in keepers.items() if any(secret in n.text for n in m.list_notes())]
        assert sorted(holders) == ["notes", "sticky"], holders
        note_id = next(n.id for n in mem.list_notes() if secret in n.text)
        if front_end == "python":
            change = mem.forget("bank PIN")
            assert change.status == "forgotten", change
        elif front_end == "command":
            done = run_cli(NOTES_COMPOSITE, root, "forget", "--match", "bank PIN")
            assert done.returncode == 0, (done.stdout, done.stderr)
        elif front_end == "editor":
            from ovos_memory_plugins.editor import EditorServer

            with EditorServer(mem) as server:
                status, reply = editor_call(server, "DELETE", f"/api/notes/items?id={note_id}")
                assert status == 200, reply
        else:
            out = MemoryToolBox(memory=mem).call_tool("forget_memory", {"description": note_id}).model_dump()
            assert out["ok"] is True and out["status"] == "forgotten", out
        for name, member in keepers.items():
            kept = [n.text for n in member.list_notes(include_retired=True) if secret in n.text]
            assert kept == [], f"member {name} keeps {kept}"
        assert any("Lisbon" in n.text for n in mem.list_notes()), "the other note stays"
        assert secret not in prompt_text(mem, "what is my bank PIN", "ava")
    finally:
        mem.close()
    assert files_holding(root, secret) == []
