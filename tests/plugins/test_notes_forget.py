"""Notes and sticky notes forget for real, and both keep the one NotesKeeper protocol.

Every check runs on real files: after a verb, every byte under the memory's folder is scanned
for the forgotten words (MEMORY.md, RETIRED.md, the backups, the undo history, notes.db and its
full-text shadow tables, the WAL, sticky.db and its replay records).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.config import validate_config
from ovos_memory_plugins.notes import NotesMemory, StaleNotesError
from ovos_memory_plugins.protocols import Note, NoteChange, NotesKeeper
from ovos_memory_plugins.sticky import StickyMemory
from ovos_memory_plugins.testing import exchange

STORES = ["file", "sqlite"]


def files_holding(root: Path, *words: str) -> list[str]:
    """The files under ``root`` whose bytes contain any of ``words`` (UTF-8, any case)."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes().lower()
            if any(w.lower().encode("utf-8") in data for w in words):
                found.append(path.name)
    return sorted(found)


@pytest.fixture(params=STORES)
def notes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NotesMemory]:
    with NotesMemory({"root": str(tmp_path / "notes"), "archive": None, "store": request.param}) as mem:
        yield mem


@pytest.fixture
def sticky(tmp_path: Path) -> Iterator[StickyMemory]:
    with StickyMemory({"root": str(tmp_path / "sticky"), "system_prompt": "You are Ada."}) as mem:
        yield mem


def system_text(messages: list[Any]) -> str:
    return "\n".join(m.content for m in messages if m.role.value == "system")


# -- one protocol --------------------------------------------------------------------------------


def test_both_memories_are_notes_keepers_with_the_one_note_and_change(notes: NotesMemory, sticky: StickyMemory) -> None:
    for keeper in (notes, sticky):
        assert isinstance(keeper, NotesKeeper)
        added = keeper.remember("the spare key is under the blue flower pot", session_id="hall")
        assert isinstance(added, NoteChange) and added.status == "added" and bool(added)
        assert isinstance(added.note, Note) and added.note.session_id == "hall"
        again = keeper.remember("The spare key is under the blue flower pot.", session_id="hall")
        assert again.status == "duplicate" and not again and again.note is not None
        assert again.note.id == added.note.id
        [listed] = keeper.list_notes()
        assert isinstance(listed, Note) and listed.id == added.note.id and listed.active
        assert keeper.list_notes(session_id="kitchen") == []
        for junk in (None, 42, "", "   ", "...", b"bytes"):
            change = keeper.remember(junk, session_id="hall")  # type: ignore[arg-type]
            assert change.status == "refused" and not change, junk
        assert len(keeper.list_notes(include_retired=True)) == 1


def test_retire_and_restore_on_both(notes: NotesMemory, sticky: StickyMemory) -> None:
    for keeper in (notes, sticky):
        keeper.remember("the boiler service is due in May")
        keeper.remember("my sister lives in Tromsø")
        retired = keeper.retire("boiler service")
        assert retired.status == "retired" and retired.note is not None
        assert [n.text for n in keeper.list_notes()] == ["my sister lives in Tromsø"]
        assert [n.retired_on is not None for n in keeper.list_notes(include_retired=True)].count(True) == 1
        assert keeper.retire("boiler service").status == "not_found"  # only active notes retire
        assert keeper.restore(retired.note.id).status == "restored"
        assert {n.text for n in keeper.list_notes()} == {
            "the boiler service is due in May",
            "my sister lives in Tromsø",
        }


def test_a_retired_sticky_note_leaves_the_prompt(sticky: StickyMemory) -> None:
    sticky.remember("my bike is the red one", "s")
    assert "my bike is the red one" in system_text(sticky.build_conversation_context("hello", "s"))
    sticky.retire("bike")
    assert "my bike is the red one" not in system_text(sticky.build_conversation_context("hello", "s"))
    assert sticky.search("bike") == []


def test_ids_are_exact(notes: NotesMemory, sticky: StickyMemory) -> None:
    for keeper in (notes, sticky):
        keeper.remember("the wifi password is platypus")
        keeper.remember("the wifi router is in the hall")
        assert keeper.forget("n-0123456789abcdef").status == "not_found"  # an unknown id never matches loosely
        assert keeper.forget("d-0123456789abcdef01234567").status == "not_found"
        [target] = [n for n in keeper.list_notes() if "password" in n.text]
        gone = keeper.forget(target.id)
        assert gone.status == "forgotten" and gone.note is not None and gone.note.id == target.id
        assert [n.text for n in keeper.list_notes()] == ["the wifi router is in the hall"]


def test_a_close_call_changes_nothing(notes: NotesMemory, sticky: StickyMemory) -> None:
    for keeper in (notes, sticky):
        keeper.remember("my bike is red")
        keeper.remember("my bike lock code is 4471")
        before = keeper.list_notes(include_retired=True)
        for verb in (keeper.forget, keeper.retire):
            change = verb("my bike")
            assert change.status == "ambiguous" and len(change.candidates) == 2 and not change
        assert keeper.update("my bike", "my bike is blue").status == "ambiguous"
        assert keeper.list_notes(include_retired=True) == before


# -- the locker code -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "sqlite", "sticky"])
def test_forget_picks_the_retired_note_the_description_names(tmp_path: Path, kind: str) -> None:
    """Remember "locker code is 4417", update it to 1234, then forget "locker code 4417": the
    retired 4417 note goes (from every file), 1234 stays."""
    keeper: Any
    if kind == "sticky":
        keeper = StickyMemory({"root": str(tmp_path)})
    else:
        keeper = NotesMemory({"root": str(tmp_path), "archive": None, "store": kind})
    with keeper:
        keeper.remember("my locker code is 4417")
        keeper.remember("my cat is called Tom")
        updated = keeper.update("locker code", "my locker code is 1234")
        assert updated.status == "updated" and updated.replaced_by is not None
        assert [n.text for n in keeper.list_notes()] == ["my cat is called Tom", "my locker code is 1234"] or [
            n.text for n in keeper.list_notes()
        ] == ["my locker code is 1234", "my cat is called Tom"]
        gone = keeper.forget("locker code 4417")
        assert gone.status == "forgotten" and gone.note is not None and gone.note.text == "my locker code is 4417"
        texts = [n.text for n in keeper.list_notes(include_retired=True)]
        assert "my locker code is 1234" in texts and "my locker code is 4417" not in texts
        assert files_holding(tmp_path, "4417") == []
        assert files_holding(tmp_path, "1234")  # the true note is still there


# -- forgetting for real ---------------------------------------------------------------------------


@pytest.mark.parametrize("store", STORES)
def test_forget_all_empties_notes_backups_and_undo(tmp_path: Path, store: str) -> None:
    root = tmp_path / "notes"
    with NotesMemory({"root": str(root), "store": store, "archive": None}) as mem:
        mem.remember("my bank PIN is echidna4417", session_id="s1")
        mem.remember("the canary word is wombat9", session_id="s2")
        mem.update("canary word", "the canary word is quoll7")
        mem.replace_notes(mem.notes_body() + "- [2026-01] an edited line mentioning numbat3\n")  # a snapshot
        assert mem.history() and (root / "MEMORY.md.bak").exists()
        assert files_holding(root, "echidna4417", "wombat9", "numbat3")
        n = mem.forget_all()
        assert n >= 4
        assert mem.list_notes(include_retired=True) == []
        assert mem.context_blocks("what is my PIN", "s1") == []
        assert mem.history() == [] and not (root / "MEMORY.md.bak").exists()
        assert files_holding(root, "echidna4417", "wombat9", "quoll7", "numbat3") == []  # while still open
    assert files_holding(root, "echidna4417", "wombat9", "quoll7", "numbat3") == []


@pytest.mark.parametrize("store", STORES)
def test_forget_session_removes_the_notes_learned_in_it(tmp_path: Path, store: str) -> None:
    root = tmp_path / "notes"
    with NotesMemory({"root": str(root), "store": store, "archive": None}) as mem:
        mem.remember("Ana's locker is number echidna12", session_id="ana")
        mem.remember("Bob likes green tea", session_id="bob")
        mem.update("locker", "Ana's locker is number quoll34")  # the new note stays in Ana's session
        mem.replace_notes(mem.notes_body())  # an edit keeps each note's session
        assert {n.session_id for n in mem.list_notes(include_retired=True)} == {"ana", "bob"}
        assert mem.forget_session("ana") >= 2
        assert [n.text for n in mem.list_notes(include_retired=True)] == ["Bob likes green tea"]
        assert files_holding(root, "echidna12", "quoll34") == []
    with NotesMemory({"root": str(root), "store": store, "archive": None}) as again:
        assert [(n.text, n.session_id) for n in again.list_notes()] == [("Bob likes green tea", "bob")]


def test_sqlite_notes_store_keeps_no_forgotten_word_in_its_index(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    with NotesMemory({"root": str(root), "store": "sqlite", "archive": None}) as mem:
        for i in range(30):
            mem.remember(f"filler fact {i} about gardening and tomatoes")
        mem.remember("the safe combination is platypus7788")
        assert mem.search_notes("platypus7788")
        assert files_holding(root, "platypus7788")
        assert mem.forget("safe combination").status == "forgotten"
        assert mem.search_notes("platypus7788") == []
        assert files_holding(root, "platypus7788") == []  # notes table, notes_fts_data, the WAL


def test_replace_notes_with_an_expected_version(notes: NotesMemory) -> None:
    notes.remember("first fact")
    version = notes.notes_version()
    assert version == notes.notes_version()
    notes.remember("someone else wrote this meanwhile")
    with pytest.raises(StaleNotesError):
        notes.replace_notes("- [2026-01] only this\n", expected_version=version)
    assert len(notes.list_notes()) == 2
    notes.replace_notes("- [2026-01] only this\n", expected_version=notes.notes_version())
    assert [n.text for n in notes.list_notes()] == ["only this"]


def test_old_knob_names_still_work_with_a_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = {"root": str(tmp_path), "archive": None, "notes_budget": 300, "context_facts": 2, "notes_header": "N:"}
    validate_config(old, NotesMemory)  # the strict check accepts them too
    with caplog.at_level(logging.WARNING), NotesMemory(old) as mem:
        assert mem.options.max_context_chars == 300 and mem.options.max_notes_in_context == 2
        assert mem.options.header == "N:" and mem.config_problems == []
    assert "'notes_budget' is deprecated" in caplog.text


def test_sticky_forget_verbs_leave_no_sentence_behind(tmp_path: Path) -> None:
    root = tmp_path / "sticky"
    with StickyMemory({"root": str(root), "max_history": 0}) as mem:
        mem.build_conversation_context("remember that my bank pin is echidna4417", "s1")
        mem.build_conversation_context("remember that the gate code is wombat9", "s2")
        mem.build_conversation_context("remember that my locker is quoll7", "s3")
        mem.build_conversation_context("remember that the alarm word is numbat3", "s4")
        assert files_holding(root, "echidna4417", "wombat9", "quoll7", "numbat3")
        # forget by voice: the note and both replay records (the remember and the forget) lose the words
        mem.build_conversation_context("forget that my bank pin is echidna4417", "s1")
        assert files_holding(root, "echidna4417") == []
        [gate] = [n for n in mem.list_notes() if "gate" in n.text]
        assert mem.delete([gate.id]) == 1
        assert files_holding(root, "wombat9") == []
        assert mem.forget_session("s3") == 1
        assert files_holding(root, "quoll7") == []
        mem.forget_all()
        assert files_holding(root, "numbat3") == []
        assert mem.store_db.asks() == []


_OPEN_NEW_FOLDER = """
import sys
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory
root, kind, i = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "sticky":
    mem = StickyMemory({"root": root})
else:
    mem = NotesMemory({"root": root, "store": kind, "archive": None})
change = mem.remember("note from process " + i)
print(change.status, mem.store_problem is None, flush=True)
mem.close()
"""


@pytest.mark.parametrize("kind", ["sticky", "sqlite"])
def test_many_processes_opening_one_new_folder(tmp_path: Path, kind: str) -> None:
    """Four processes open one new folder at once, five rounds: none crashes, none falls back to
    RAM, every note is kept."""
    for round_ in range(5):
        root = tmp_path / f"round{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN_NEW_FOLDER, str(root), kind, str(i)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err) in zip(procs, outs, strict=True):
            assert p.returncode == 0, err
            assert out.strip() == "added True", err
            assert "already exists" not in err
        keeper: Any
        if kind == "sticky":
            keeper = StickyMemory({"root": str(root)})
        else:
            keeper = NotesMemory({"root": str(root), "store": kind, "archive": None})
        with keeper:
            assert sorted(n.text for n in keeper.list_notes()) == [f"note from process {i}" for i in range(4)]


def test_notes_carry_the_session_of_a_digest(tmp_path: Path) -> None:
    from ovos_memory_plugins.fakes import ScriptedLLM

    llm = ScriptedLLM([json.dumps({"new": ["User's dog is called Rex"], "replace": [], "retire": [], "episode": ""})])
    cfg = {"root": str(tmp_path), "archive": None, "curate_in_background": False}
    with NotesMemory(cfg, llm=llm) as mem:
        mem.update_history(exchange("my dog is called Rex", "nice"), "porch")
        assert mem.digest("porch").status == "applied"
        assert [(n.text, n.session_id) for n in mem.list_notes()] == [("User's dog is called Rex", "porch")]
        mem.forget_session("porch")
        assert mem.list_notes() == []


# -- the archive: an index over the memory's own database -------------------------------------------


def test_the_archive_keeps_the_base_ids_and_forgets_by_them(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    with NotesMemory({"root": str(root)}) as mem:
        mem.put_document("x-imported-id", "the attic ladder is behind the boiler wombat9", "hall")
        [hit] = mem.search("attic ladder wombat9")
        assert hit.source == "x-imported-id"
        assert [d["id"] for d in mem.iter_documents()] == ["x-imported-id"]
        held = files_holding(root, "wombat9")
        assert held and all(name.startswith("history.db") for name in held)  # one database (and its WAL)
        assert mem.delete(["x-imported-id"]) == 1
        assert mem.search("attic ladder wombat9") == []
        assert files_holding(root, "wombat9") == []
        mem.update_history(exchange("my locker code is echidna4417", "noted"), "s")
        assert mem.search("locker code echidna4417")
        assert mem.forget_session("s") >= 1
        assert files_holding(root, "echidna4417") == []
        note = mem.remember("my bank PIN is numbat3").note
        assert note is not None
        mem.put_document("d-keep", "a document that stays", "s")
        assert mem.delete([note.id, "d-keep", "n-0000000000000000"]) == 2  # ids are exact, notes too
        assert mem.list_notes() == [] and files_holding(root, "numbat3") == []


def test_an_archive_of_an_earlier_release_is_moved_in_once(tmp_path: Path) -> None:
    from ovos_memory_plugins.lexical import LexicalMemory

    root = tmp_path / "notes"
    with LexicalMemory({"root": str(root / "archive")}) as old:
        old.put_document("d-old-1", "the spare tyre is in the garage numbat3", "garage", {"kind": "note"})
        old.update_history(exchange("where is the bike pump", "in the shed, quoll7"), "shed")
    with NotesMemory({"root": str(root)}) as mem:
        assert not (root / "archive").exists() and (root / "archive.moved").is_dir()
        [hit] = mem.search("spare tyre garage")
        assert hit.source == "d-old-1" and hit.metadata.get("session_id", "garage") == "garage"
        assert mem.search("bike pump shed")
        assert mem.pending_exchanges() == 0  # old exchanges are not digested again
    with NotesMemory({"root": str(root)}) as again:  # once: nothing copied twice
        assert len(list(again.iter_documents())) == 2
        again.forget_all()
        assert not (root / "archive.moved").exists()
    assert files_holding(root, "numbat3", "quoll7") == []


def test_a_fall_back_to_ram_is_never_silent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the memory's folder should be")
    with caplog.at_level(logging.ERROR):
        with StickyMemory({"root": str(blocked)}) as sticky:  # the constructor never raises
            assert sticky.store_problem and "RAM" in sticky.store_problem
            assert sticky.stats()["storage_problem"] == sticky.store_problem
            caplog.clear()
            sticky.build_conversation_context("hello", "s")
            assert "RAM" in caplog.text  # an ERROR every turn
        with NotesMemory({"root": str(blocked), "archive": None}) as notes:
            assert notes.store_problem and notes.stats()["notes_store_problem"] == notes.store_problem
            assert notes.remember("still works in RAM").status == "added"
            caplog.clear()
            notes.build_conversation_context("hello", "s")
            assert "RAM" in caplog.text


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_a_spoken_forget_removes_the_note_for_good(tmp_path: Path, store: str) -> None:
    """ "Forget that my locker code is 5512": the digest's ``forget`` deletes the note (no retired
    copy, nothing recalled as "no longer true", no byte under the folder), the episode that would
    quote it is not archived, the other notes stay."""
    from ovos_memory_plugins.fakes import ScriptedLLM

    reply = {"new": [], "replace": [], "retire": [], "forget": [1], "episode": "The user's locker code was 5512."}
    llm = ScriptedLLM([json.dumps(reply)])
    root = tmp_path / "m"
    cfg = {"root": str(root), "store": store, "archive": None, "curate_in_background": False}
    with NotesMemory(cfg, llm=llm) as mem:
        mem.remember("User's locker code is 5512", session_id="s")
        mem.remember("User's cat is called Tom", session_id="s")
        mem.update_history(exchange("forget my locker code", "done, it is forgotten"), "s")
        result = mem.digest("s")
        assert result.status == "applied" and [n.text for n in result.forgotten] == ["User's locker code is 5512"]
        assert [n.text for n in mem.list_notes(include_retired=True)] == ["User's cat is called Tom"]
        assert mem.search("locker code") == []
        prompt = "\n".join(m.content for m in mem.build_conversation_context("what is my locker code", "s"))
        assert "5512" not in prompt and "Tom" in prompt
    assert files_holding(root, "5512") == []
