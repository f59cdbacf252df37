"""The notes part: one verb implementation and one set of knobs for curated and sticky notes,
and the base's exchange-listener seam the digest uses.

Every kind of note (curated notes in ``MEMORY.md``, curated notes in the database table, sticky
notes) is asked the same things through the ``NotesKeeper`` verbs and must answer the same way:
the same statuses, the same refusals, the same scope rule, the same matching threshold. Real
SQLite files under ``tmp_path`` and the throwaway PostgreSQL server of ``tests/pg_server.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from conftest import Engine

from ovos_memory_plugins.config import parse_config
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.notebook import Notebook, NotebookOptions, NoteShelf
from ovos_memory_plugins.notes import NotesMemory, NotesOptions
from ovos_memory_plugins.sticky import StickyMemory, StickyOptions
from ovos_memory_plugins.storage.engine import StoredDocument
from ovos_memory_plugins.testing import exchange

_ns = itertools.count()

KINDS = ["notes-file", "notes-sqlite", "sticky"]


def open_memory(kind: str, root: Path, url: str | None, **config: Any) -> Any:
    block: dict[str, Any] = {"root": str(root), "namespace": f"book{next(_ns)}", **config}
    if url is not None:
        block["database"] = url
    if kind.startswith("notes"):
        return NotesMemory({**block, "store": kind.removeprefix("notes-"), "archive": None})
    return StickyMemory(block)


def test_one_set_of_knobs_with_one_default_each() -> None:
    shared = {f.name: f.default for f in dataclasses.fields(NotebookOptions)}
    for options in (NotesOptions, StickyOptions):
        assert issubclass(options, NotebookOptions)
        mine = {f.name: f.default for f in dataclasses.fields(options) if f.name in shared}
        assert mine == shared, options.__name__
    assert shared["forget_min_score"] == 0.6 and shared["max_note_chars"] == 500


def test_an_old_key_is_renamed_and_reported_not_dropped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ovos_memory_plugins.config"):
        parsed = parse_config({"notes_budget": 3000, "context_facts": 7}, NotesOptions)
    assert parsed.problems == []
    assert parsed.options.max_context_chars == 3000 and parsed.options.max_notes_in_context == 7
    assert "'notes_budget' is deprecated; use 'max_context_chars'" in caplog.text
    assert parsed.deprecated == [
        "config key 'notes_budget' is deprecated; use 'max_context_chars'",
        "config key 'context_facts' is deprecated; use 'max_notes_in_context'",
    ]
    both = parse_config({"notes_budget": 3000, "max_context_chars": 5000}, NotesOptions)
    assert both.options.max_context_chars == 5000  # the new name wins, and the old one is said
    assert both.deprecated == ["config key 'notes_budget' is deprecated and ignored: 'max_context_chars' is given too"]


def test_check_warns_of_an_old_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ovos_memory_plugins.cli import main

    module = "ovos-memory-plugin-notes"
    block = {"root": str(tmp_path / "m"), "archive": None, "notes_budget": 3000}
    persona = {"name": "Ada", "handlers": ["ovos-memory-test-echo"], "memory_module": module, module: block}
    path = tmp_path / "ada.json"
    path.write_text(json.dumps(persona))
    code = main(["check", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and "is valid" in out
    assert "warning: config key 'notes_budget' is deprecated; use 'max_context_chars'" in out


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_note_answers_the_verbs_alike(kind: str, engine: Engine, tmp_path: Path) -> None:
    with open_memory(kind, tmp_path, engine.url) as mem:
        assert isinstance(mem.notebook, Notebook) and isinstance(mem.notebook.shelf, NoteShelf)
        added = mem.remember("my bike is red", session_id="ava")
        assert added.status == "added" and added.note is not None and added.note.session_id == "ava"
        assert mem.remember("My bike is red.", session_id="ava").status == "duplicate"
        for bad in (None, 42, "   ", "!!!", "x" * 501):
            assert mem.remember(bad, session_id="ava").status == "refused", repr(bad)[:20]
        assert len(mem.list_notes()) == 1
        # a loose description must hold 60 % of its content words: one of two deletes nothing
        assert mem.forget("my bike is blue").status == "not_found"
        updated = mem.update("bike", "my bike is green")
        assert updated.status == "updated" and updated.note is not None and updated.replaced_by is not None
        assert updated.note.retired_on is not None and updated.replaced_by.session_id == "ava"
        assert updated.message == "updated: my bike is red -> my bike is green"
        assert [n.text for n in mem.list_notes()] == ["my bike is green"]
        retired = mem.retire("green bike")
        assert retired.status == "retired" and retired.note is not None and retired.note.retired_on is not None
        assert mem.list_notes() == []
        restored = mem.restore("my bike is green")
        assert restored.status == "restored" and restored.note is not None and restored.note.active
        gone = mem.forget("my bike is red")
        assert gone.status == "forgotten" and gone.message == "forgot: my bike is red"
        assert [n.text for n in mem.list_notes(include_retired=True)] == ["my bike is green"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_scope_rule_is_the_same_for_every_kind(kind: str, engine: Engine, tmp_path: Path) -> None:
    heard: list[str] = []
    with open_memory(kind, tmp_path, engine.url) as mem:
        mem.add_forget_listener(lambda note: heard.append(note.text))
        mem.remember("the gate code is 1234", session_id="ava")
        mem.remember("the locker code is 4417", session_id="bob")
        for verb in ("forget", "retire"):
            change = getattr(mem, verb)("gate code 1234", session_id="bob")
            assert change.status == "not_found" and "1234" not in change.message
        assert mem.update("gate code", "the gate code is 9", session_id="bob").status == "not_found"
        assert [n.text for n in mem.list_notes(session_id="bob")] == ["the locker code is 4417"]
        assert mem.forget("gate code 1234", session_id="ava").status == "forgotten"
        assert heard == ["the gate code is 1234"]
        assert [n.text for n in mem.list_notes(include_retired=True)] == ["the locker code is 4417"]


def test_a_listener_hears_each_exchange_once_it_is_committed(tmp_path: Path) -> None:
    seen: list[tuple[str, int]] = []
    with LexicalMemory({"root": str(tmp_path)}) as mem:

        def listener(doc: StoredDocument) -> None:
            # another connection to the same file already sees the document: it is committed
            with LexicalMemory({"root": str(tmp_path)}) as other:
                seen.append((doc.doc_id, len(other.documents([doc.doc_id]))))

        def broken(doc: StoredDocument) -> None:
            raise RuntimeError("a listener that fails")

        mem.add_exchange_listener(broken)
        mem.add_exchange_listener(listener)
        mem.update_history(exchange("my cat is called Bartholomew", "A fine name."), "s")
        mem.store("a fact stored as a document", "s")  # not an exchange: not heard
        assert len(seen) == 1 and seen[0][1] == 1
        assert mem.documents([seen[0][0]])[0]["metadata"]["kind"] == "exchange"
        assert mem.search("Bartholomew")  # the failing listener did not undo the write


def test_the_digest_queues_exchanges_through_the_listener(tmp_path: Path) -> None:
    from ovos_memory_plugins.fakes import ScriptedLLM

    assert "_store_document" not in vars(NotesMemory)  # no storage write hook: a listener
    with NotesMemory({"root": str(tmp_path), "curate_in_background": False}, llm=ScriptedLLM([])) as mem:
        mem.update_history(exchange("my sister is called Joana", "Noted."), "s")
        mem.update_history(exchange("and my brother is Rui", "Noted too."), "s")
        assert mem.pending_exchanges("s") == 2
        mem.put_document("d-imported", "Q: my dog is Rex\nA: Nice.", "s", {"kind": "exchange"})
        assert mem.pending_exchanges("s") == 3  # an exchange copied in is heard too
        mem.delete(["d-imported"])
        assert mem.pending_exchanges("s") == 2


@pytest.mark.parametrize("kind", KINDS)
def test_an_update_to_words_already_noted_keeps_one_copy(kind: str, tmp_path: Path) -> None:
    with open_memory(kind, tmp_path, None) as mem:
        mem.remember("my bike is red", session_id="ava")
        mem.remember("my bike is green", session_id="ava")
        change = mem.update("my bike is red", "My bike is green.", session_id="ava")
        assert change.status == "updated" and change.replaced_by is not None
        assert [n.text for n in mem.list_notes()] == ["my bike is green"]
        assert [n.text for n in mem.list_notes(include_retired=True) if not n.active] == ["my bike is red"]
