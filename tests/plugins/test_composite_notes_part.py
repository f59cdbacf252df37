"""Curated notes as a PART of a composite's one storage (issue 28, stage 3).

A keyword + notes composite keeps one database (``<root>/composite.db``, or one namespace of a
PostgreSQL database) and one history, each exchange archived once; the operator's notes stay in
``<root>/MEMORY.md`` beside the database (``"store": "file"``, editable by hand) or in the
storage's notes table (``"store": "sqlite"``; always on PostgreSQL). The notes part records
the exchanges, so its digest hears every one. A forget is one transaction whose failure reaches
the caller. The per-member notes folder of an earlier release is adopted once, losslessly; a
notes member with ``"archive": null`` (nothing of the conversation on disk) stays a whole member.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.composite import PARTS_FILE, CompositeMemory
from ovos_memory_plugins.errors import IncompleteForgetError
from ovos_memory_plugins.fakes import ScriptedOpenAIServer
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.testing import exchange

SESSION = "kitchen"
_runs = itertools.count()
KEYWORD = {"module": "ovos-memory-plugin-lexical"}


def notes_member(**config: Any) -> dict[str, Any]:
    return {"module": "ovos-memory-plugin-notes", "config": {"auto_curate": False, **config}}


def files(root: Path) -> list[str]:
    """Every file under ``root`` (SQLite's WAL, shared-memory and lock files left out)."""
    skip = ("-wal", "-shm", ".lock")
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.endswith(skip))


# -- one database, one history, the notes beside it -------------------------------------------------


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_keyword_and_notes_keep_one_database_one_history_and_each_exchange_once(
    composite_where: dict[str, Any], store: str
) -> None:
    members = [KEYWORD, notes_member(store=store)]
    root = Path(composite_where["root"])
    with CompositeMemory({**composite_where, "members": members}) as mem:
        storage = mem.storage
        assert storage is not None, "notes are a part: one storage"
        notes = mem.members["notes"]
        assert notes.storage is storage and mem.members["lexical"].storage is storage
        assert mem.stats()["storage"]["recorder"] == "notes", "the notes part records: its digest hears it all"
        mem.remember("my bike is red", session_id=SESSION)
        for i in range(4):
            mem.update_history(exchange(f"my Zorbak{i} locker holds the keys", f"noted, Zorbak{i}"), SESSION)
        assert storage.documents.count() == 4, "each exchange archived once"
        assert storage.history.message_count() == 8, "one history"
        for name in ("lexical", "notes"):
            hits = mem.members[name].search("Zorbak2 locker", session_id=SESSION)
            assert hits and "Zorbak2" in hits[0].content, name
        assert [n.text for n in mem.list_notes()] == ["my bike is red"]
        prompt = "\n".join(m.content for m in mem.build_conversation_context("what colour is my bike", SESSION))
        assert "my bike is red" in prompt
    if "database" not in composite_where:
        kept = files(root)
        assert [f for f in kept if f.endswith(".db")] == [PARTS_FILE], "one database, no member folders"
        if store == "file":
            assert "MEMORY.md" in kept, "the operator's MEMORY.md beside composite.db"
            assert "my bike is red" in (root / "MEMORY.md").read_text(encoding="utf-8")
        else:
            assert "MEMORY.md" not in kept
        assert not (root / "notes").exists() and not (root / "lexical").exists()
    with CompositeMemory({**composite_where, "members": members}) as again:
        assert again.storage is not None and again.storage.documents.count() == 4
        assert [n.text for n in again.list_notes()] == ["my bike is red"]
        assert again.storage.history.message_count() == 8


def test_a_hand_edit_of_memory_md_beside_the_database_reaches_the_prompt(tmp_path: Path) -> None:
    root = tmp_path / "ada"
    with CompositeMemory({"root": str(root), "members": [KEYWORD, notes_member()]}) as mem:
        mem.remember("my bike is red")
        text = (root / "MEMORY.md").read_text(encoding="utf-8")
        (root / "MEMORY.md").write_text(text + "- [2026-11] my kayak is yellow\n", encoding="utf-8")
        os.utime(root / "MEMORY.md", (time.time() + 5, time.time() + 5))
        prompt = "\n".join(m.content for m in mem.build_conversation_context("kayak", "s"))
        assert "my kayak is yellow" in prompt and "my bike is red" in prompt


# -- the digest hears every recorded exchange ------------------------------------------------------


def digest_reply(**data: Any) -> str:
    return json.dumps({"new": [], "replace": [], "retire": [], "episode": "", **data})


def test_the_digest_of_a_notes_part_hears_the_exchanges_and_archives_its_episode_once(tmp_path: Path) -> None:
    reply = digest_reply(new=["User's locker code is 5512"], episode="Ana gave her locker code, 5512.")
    with ScriptedOpenAIServer(default_chat_reply=reply) as server:
        llm = {"base_url": server.base_url, "api_key": "k", "model": "m", "timeout": 5}
        notes = {"module": "ovos-memory-plugin-notes", "config": {"llm": llm, "curate_every_turns": 2}}
        config = {"root": str(tmp_path / "ada"), "max_history": 1000, "members": [KEYWORD, notes]}
        with CompositeMemory(config) as mem:
            assert mem.storage is not None
            mem.update_history(exchange("my locker code is 5512", "noted"), SESSION)
            assert mem.members["notes"].pending_exchanges(SESSION) == 1
            mem.update_history(exchange("my gym is on Elm Street", "noted, Elm Street"), SESSION)
            assert mem.members["notes"].drain(10)
            assert [n.text for n in mem.list_notes()] == ["User's locker code is 5512"]
            docs = list(mem.iter_documents())
            assert len(docs) == 3, "two exchanges and the episode, each once"
            assert mem.members["lexical"].search("locker code episode 5512"), "the keyword part indexes the episode"


def test_an_exchange_imported_into_the_composite_waits_for_the_notes_digest(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default_chat_reply=digest_reply()) as server:
        llm = {"base_url": server.base_url, "api_key": "k", "model": "m", "timeout": 5}
        notes = {"module": "ovos-memory-plugin-notes", "config": {"llm": llm, "curate_every_turns": 100}}
        with CompositeMemory({"root": str(tmp_path / "ada"), "members": [KEYWORD, notes]}) as mem:
            mem.put_document("x-imported", "Q: my locker code is 5512\nA: noted", SESSION, {"kind": "exchange"})
            assert mem.members["notes"].pending_exchanges(SESSION) == 1, "put_document goes through the recorder"
            assert len(list(mem.iter_documents())) == 1


# -- forgetting: one transaction, failures reach the caller -----------------------------------------


def test_forget_is_one_transaction_over_the_notes_part_too(
    composite_where: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with CompositeMemory({**composite_where, "members": [KEYWORD, notes_member(store="sqlite")]}) as mem:
        storage = mem.storage
        assert storage is not None
        mem.update_history(exchange("my Quibbix locker holds the keys", "noted"), SESSION)
        mem.remember("the Quibbix code is 4411", session_id=SESSION)

        def refuse(*_args: Any, **_kwargs: Any) -> int:
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(mem.members["notes"], "forget_all", refuse)
        with pytest.raises(IncompleteForgetError) as failed:
            mem.forget_all()
        assert list(failed.value.failures) == ["member 'notes'"] and failed.value.done == 0
        assert storage.documents.count() == 1 and [n.text for n in mem.list_notes()] == ["the Quibbix code is 4411"]
        monkeypatch.undo()

        report = mem.forget_all()
        assert report.tiers["documents"] == 1 and report.tiers["notes"] == 1
        assert storage.documents.count() == 0 and mem.list_notes() == []
        assert storage.history.message_count() == 0


# -- adopting an earlier release's notes folder -------------------------------------------------------


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_an_earlier_notes_member_folder_is_adopted_once_losslessly(tmp_path: Path, store: str) -> None:
    root = tmp_path / "mem"
    old = {"namespace": "ada", "max_history": 1000, "auto_curate": False, "store": store}
    # what an earlier release kept: each member a whole memory in <root>/<member>/<namespace>/
    lexical = LexicalMemory({"namespace": "ada", "max_history": 1000, "root": str(root / "lexical")})
    notes = NotesMemory({**old, "root": str(root / "notes")})
    for i in range(3):
        for member in (lexical, notes):
            member.update_history(exchange(f"my Wumbat{i} lives in the shed", f"noted {i}"), SESSION)
    notes.remember("my bike is red", session_id=SESSION)
    notes.remember("my car is blue", session_id=SESSION)
    notes.retire("my car is blue")
    notes.replace_notes("- [2026-11] my bike is red\n- [2026-11] my kayak is yellow\n")  # an undo history
    before = notes.list_notes(include_retired=True)
    for member in (lexical, notes):
        member.close()
    old_folder = root / "notes" / "ada"
    assert (old_folder / "history.db").is_file()

    members = [KEYWORD, notes_member(store=store)]
    config = {"root": str(root), "namespace": "ada", "max_history": 1000, "members": members}
    with CompositeMemory(config) as mem:
        storage = mem.storage
        assert storage is not None
        kept = files(root)
        assert [f for f in kept if f.endswith(".db")] == [f"ada/{PARTS_FILE}"], "the old databases are gone"
        assert storage.documents.count() == 3, "the copies of each exchange merged (same content, same id)"
        assert storage.history.message_count() == 6, "one copy of the conversation"
        listed = mem.members["notes"].list_notes(include_retired=True)
        assert sorted((n.id, n.text, n.retired_on) for n in listed) == sorted(
            (n.id, n.text, n.retired_on) for n in before
        ), "notes and retired notes, ids from their words"
        assert all(n.session_id == SESSION for n in listed if "bike" in n.text)
        assert mem.members["notes"].history(), "the undo history came too"
        if store == "file":
            assert "my kayak is yellow" in (root / "ada" / "MEMORY.md").read_text(encoding="utf-8")
            assert (old_folder / "MEMORY.md.moved").is_file() and not (old_folder / "MEMORY.md").exists()
        assert "Wumbat1" in mem.members["notes"].search("Wumbat1 shed")[0].content
    with CompositeMemory(config) as again:  # adopted once: nothing more on a restart
        assert again.storage is not None and again.storage.documents.count() == 3
        assert again.storage.history.message_count() == 6
        assert len(again.members["notes"].list_notes(include_retired=True)) == len(before)
        assert len(again.members["notes"].history()) == len(mem.members["notes"].history())


def test_an_earlier_notes_member_namespace_on_postgresql_is_adopted(postgres_url: str) -> None:
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    ns = f"notesadopt{os.getpid()}x{next(_runs)}"
    old = {"database": postgres_url, "max_history": 1000, "auto_curate": False}
    notes = NotesMemory({**old, "namespace": f"{ns}.notes"})
    notes.update_history(exchange("my Wumbat lives in the shed", "noted"), SESSION)
    notes.remember("my bike is red", session_id=SESSION)
    notes.remember("my car is blue", session_id=SESSION)
    notes.retire("my car is blue")
    before = sorted((n.id, n.retired_on) for n in notes.list_notes(include_retired=True))
    notes.close()
    config = {"database": postgres_url, "namespace": ns, "max_history": 1000, "members": [KEYWORD, notes_member()]}
    with CompositeMemory(config) as mem:
        assert mem.storage is not None and mem.storage.documents.count() == 1
        assert mem.storage.history.message_count() == 2
        assert sorted((n.id, n.retired_on) for n in mem.members["notes"].list_notes(include_retired=True)) == before
    with NotesMemory({**old, "namespace": f"{ns}.notes"}) as emptied:
        assert emptied.storage.documents.count() == 0 and emptied.list_notes(include_retired=True) == []


# -- what stays a whole member -----------------------------------------------------------------------


def test_notes_without_an_archive_and_two_notes_members_keep_whole_members(tmp_path: Path) -> None:
    private = [KEYWORD, notes_member(archive=None)]
    with CompositeMemory({"root": str(tmp_path / "a"), "members": private}) as mem:
        assert mem.storage is None, "archive null: nothing of the conversation on disk, a whole member"
    two = [notes_member(), {**notes_member(), "name": "more"}]
    with CompositeMemory({"root": str(tmp_path / "b"), "members": two}) as mem:
        assert mem.storage is None, "two notes members would share one MEMORY.md"
        assert list(mem.members) == ["notes", "more"]


def _open_composite(args: tuple[dict[str, Any], Any]) -> str:
    config, barrier = args
    try:
        barrier.wait(timeout=60)
        with CompositeMemory(config) as mem:
            return str(len(mem.members["notes"].list_notes(include_retired=True)))
    except Exception as exc:  # the parent reports it
        return f"{type(exc).__name__}: {exc}"


def test_processes_opening_the_composite_at_once_adopt_the_old_notes_folder_once(tmp_path: Path) -> None:
    import multiprocessing

    root = tmp_path / "mem"
    notes = NotesMemory({"namespace": "ada", "auto_curate": False, "root": str(root / "notes")})
    notes.remember("my bike is red")
    notes.replace_notes("- [2026-11] my bike is red\n- [2026-11] my kayak is yellow\n")
    notes.close()
    config = {"root": str(root), "namespace": "ada", "members": [KEYWORD, notes_member()]}
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(3)
        with ctx.Pool(3) as pool:
            answers = pool.map(_open_composite, [(config, barrier)] * 3, chunksize=1)
    assert answers == ["2"] * 3, answers
    with CompositeMemory(config) as mem:
        assert sorted(n.text for n in mem.list_notes()) == ["my bike is red", "my kayak is yellow"]
        assert len(mem.members["notes"].history()) == 1, "the undo history copied once"
