"""The composite as an AgentContextManager of its own: its members' capabilities are its own
(notes verbs, document listing, forgetting), through the real ``ovos-memory`` command; a member
that hangs costs one deadline once, never every turn, and ``close()`` returns within a second;
one bad ``members`` entry drops only itself."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ovos_plugin_manager.templates.agents import AgentContextManager

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.cli import main
from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.protocols import DocumentLister, NotesKeeper
from ovos_memory_plugins.testing import InMemoryMemory, exchange

COMPOSITE = "ovos-memory-plugin-composite"
MEMBERS = [
    {"module": "ovos-memory-plugin-lexical"},
    {"module": "ovos-memory-plugin-notes", "config": {"archive": None, "auto_curate": False}},
    {"module": "ovos-memory-plugin-sticky"},
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def persona(root: Path, members: list[dict[str, Any]] | None = None) -> list[str]:
    return ["--module", COMPOSITE, "--root", str(root), "--config", json.dumps({"members": members or MEMBERS})]


def test_the_composite_is_not_a_base_subclass_but_an_agent_context_manager(tmp_path: Path) -> None:
    with CompositeMemory({"root": str(tmp_path), "members": MEMBERS}) as mem:
        assert isinstance(mem, AgentContextManager) and not isinstance(mem, BaseRetrievalMemory)
        assert isinstance(mem, NotesKeeper) and isinstance(mem, DocumentLister)
        assert mem.notes_keeper() is mem.members["notes"]
        assert callable(mem.notes_body) and callable(mem.replace_notes) and callable(mem.notes_version)
    with CompositeMemory({"root": str(tmp_path / "plain"), "members": [MEMBERS[0]]}) as plain:
        assert not isinstance(plain, NotesKeeper)  # a capability no member has is not the composite's
        assert not hasattr(plain, "remember") and not hasattr(plain, "notes_body")


def test_ovos_memory_commands_on_a_composite_persona(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = persona(tmp_path)
    code, out, err = run(capsys, "remember", *t, "my locker code is 4417")
    assert code == 0 and "remembered: my locker code is 4417" in out, err
    assert run(capsys, "remember", *t, "my cat is called Tom")[0] == 0
    code, out, _ = run(capsys, "notes", *t)
    assert code == 0 and "] my locker code is 4417" in out and "] my cat is called Tom" in out
    code, out, _ = run(capsys, "forget", *t, "--match", "locker code 4417")
    assert code == 0 and "forgot: my locker code is 4417" in out
    code, out, _ = run(capsys, "notes", *t)
    assert "4417" not in out and "my cat is called Tom" in out
    doc = tmp_path / "doc.txt"
    doc.write_text("The red bicycle is kept in the garden shed.\n", encoding="utf-8")
    code, out, err = run(capsys, "ingest", *t, str(doc))
    assert code == 0, err
    code, out, _ = run(capsys, "--json", "search", *t, "bicycle shed")
    assert code == 0 and "garden shed" in out
    # the member answers exactly as the composite did
    member = ["--module", "notes", "--root", str(tmp_path / "notes"), "--config", json.dumps({"archive": None})]
    assert run(capsys, "notes", *member)[1] == run(capsys, "notes", *t)[1]


def test_notes_verbs_and_forgetting_through_the_composite(tmp_path: Path) -> None:
    with CompositeMemory({"root": str(tmp_path), "members": MEMBERS}) as mem:
        assert mem.remember("Ana's PIN is echidna12", session_id="ana").status == "added"
        mem.build_conversation_context("remember that the gate code is wombat9", "bob")
        mem.update_history(exchange("the wifi password is quoll7", "noted"), "ana")
        assert "echidna12" in mem.notes_body()
        assert any("wombat9" in n.text for n in mem.members["sticky"].list_notes())
        assert mem.forget_session("ana") >= 1
        assert "echidna12" not in mem.notes_body()
        assert mem.search("wifi password quoll7") == []
        mem.forget_all()
        assert mem.members["sticky"].list_notes() == []
        assert mem.iter_documents is not None and list(mem.iter_documents()) == []
    found = [p for p in tmp_path.rglob("*") if p.is_file() and b"echidna12" in p.read_bytes()]
    assert found == []


class HungMember(InMemoryMemory):
    """A member whose writes and reads block until released (a member stuck on a dead server)."""

    release = threading.Event()

    def update_history(self, new_messages: list[Any], session_id: str) -> None:
        self.release.wait(30)
        super().update_history(new_messages, session_id)

    def search(self, query: str, session_id: str | None = None, top_k: int | None = None) -> list[Any]:
        self.release.wait(30)
        return super().search(query, session_id=session_id, top_k=top_k)


@pytest.fixture
def hung(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[HungMember]]:
    import ovos_memory_plugins.composite.memory as composite

    real = composite._load_member_class
    monkeypatch.setattr(
        composite, "_load_member_class", lambda module: HungMember if module == "hung-member" else real(module)
    )
    HungMember.release.clear()
    yield HungMember
    HungMember.release.set()


def test_a_hung_member_costs_one_deadline_once_and_close_returns_within_a_second(
    tmp_path: Path, hung: type[HungMember]
) -> None:
    members = [{"module": "ovos-memory-plugin-lexical"}, {"module": "hung-member"}]
    cfg = {"root": str(tmp_path), "members": members, "write_timeout_ms": 300, "member_timeout_ms": 300}
    mem = CompositeMemory(cfg)
    assert list(mem.members) == ["lexical", "hung-member"]
    costs = []
    for i in range(5):
        start = time.monotonic()
        mem.update_history(exchange(f"question {i} about the platypus", f"answer {i}"), "s")
        costs.append(time.monotonic() - start)
    # one write deadline (0.3 s), with room for a loaded machine's first write; then the hung
    # member is not waited for again: each later write costs less than one deadline
    assert costs[0] < 0.3 + 0.7
    assert max(costs[1:]) < 0.2
    start = time.monotonic()
    messages = mem.build_conversation_context("platypus", "s")
    first_turn = time.monotonic() - start
    start = time.monotonic()
    mem.build_conversation_context("platypus again", "s")
    second_turn = time.monotonic() - start
    assert first_turn < 0.3 + 0.7 and second_turn < 0.25  # one search deadline, then none
    assert messages[-1].content == "platypus"
    assert len(mem.members["lexical"].search("platypus")) >= 1  # the healthy member recorded every turn
    start = time.monotonic()
    mem.close()
    assert time.monotonic() - start < 1.0


def test_one_non_object_members_entry_drops_only_itself(tmp_path: Path) -> None:
    members: list[Any] = ["ovos-memory-plugin-lexical", {"module": "ovos-memory-plugin-sticky"}, 7]
    with CompositeMemory({"root": str(tmp_path), "members": members}) as mem:
        assert list(mem.members) == ["sticky"]
        assert sum("members[" in p for p in mem.config_problems) == 2


def test_sticky_is_kept_out_of_fused_recall_by_its_declaration(tmp_path: Path) -> None:
    from ovos_memory_plugins.sticky import StickyMemory

    assert StickyMemory.composite_recall is False
    with CompositeMemory({"root": str(tmp_path), "members": MEMBERS}) as mem:
        mem.members["sticky"].remember("my bike is the red one", "s")
        assert mem.search("bike red") == []  # its block shows it; search does not repeat it
        renamed = [{"module": "ovos-memory-plugin-sticky", "name": "anything", "recall": True}]
    with CompositeMemory({"root": str(tmp_path / "r"), "members": renamed}) as forced:
        forced.members["anything"].remember("my bike is the red one", "s")
        assert forced.search("bike red")  # the member block can override the declaration


CURATED_AND_STICKY = [
    {"module": "ovos-memory-plugin-notes", "config": {"archive": None, "auto_curate": False}},
    {"module": "ovos-memory-plugin-sticky"},
]


def _sticky_rows(root: Path) -> list[tuple[str, str, str | None]]:
    """The sticky member's rows, read from its SQLite file (id, text, retired_on)."""
    import sqlite3

    files = [p for p in (root / "sticky").rglob("*") if p.is_file() and p.read_bytes()[:16] == b"SQLite format 3\0"]
    assert files, list((root / "sticky").rglob("*"))
    rows: list[tuple[str, str, str | None]] = []
    for f in files:
        with sqlite3.connect(f) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "memory_sticky_notes" in names:
                rows += conn.execute("SELECT id, text, retired_on FROM memory_sticky_notes ORDER BY created").fetchall()
    return rows


def test_list_notes_shows_every_notes_members_notes_and_one_fact_once(tmp_path: Path) -> None:
    with CompositeMemory({"root": str(tmp_path), "members": CURATED_AND_STICKY}) as mem:
        assert mem.remember("my boat is moored in Lisbon", session_id="ana").status == "added"  # curated
        sticky = mem.members["sticky"]
        assert sticky.remember("my locker code is 5512", session_id="ana").status == "added"
        assert sticky.remember("my boat is moored in Lisbon", session_id="ana").status == "added"  # a copy
        listed = mem.list_notes()
        texts = [n.text.rstrip(".") for n in listed]
        assert sorted(texts) == ["my boat is moored in Lisbon", "my locker code is 5512"], texts
        boat = next(n for n in listed if "boat" in n.text)
        locker = next(n for n in listed if "locker" in n.text)
        assert boat.metadata["member"] == "notes" and boat.metadata["members"] == ["notes", "sticky"]
        assert locker.metadata["members"] == ["sticky"] and locker.id == sticky.list_notes()[0].id
        assert [n.text for n in mem.list_notes(session_id="bob")] == []  # scoped as the members are
        assert len(mem.list_notes(session_id="ana")) == 2
        # the toolbox sees the sticky-only note in its listing and its search
        from ovos_memory_plugins.toolbox import MemoryToolBox

        box = MemoryToolBox(memory=mem)
        out = box.call_tool("list_notes", {}).model_dump()
        assert any("5512" in item["text"] for item in out["notes"]), out
        found = box.call_tool("search_memory", {"query": "locker code"}).model_dump()
        assert any("5512" in item["text"] for item in found["results"]), found


def test_update_retire_restore_by_id_reach_the_member_holding_it(tmp_path: Path) -> None:
    with CompositeMemory({"root": str(tmp_path), "members": CURATED_AND_STICKY}) as mem:
        mem.remember("my boat is moored in Lisbon", session_id="ana")
        sticky = mem.members["sticky"]
        sticky.remember("my locker code is 5512", session_id="ana")
        locker = next(n for n in mem.list_notes() if "5512" in n.text)
        assert mem.update(locker.id, "my locker code is 7781", session_id="bob").status == "not_found"
        change = mem.update(locker.id, "my locker code is 7781", session_id="ana")
        assert change.status == "updated" and change.replaced_by is not None, change
        rows = _sticky_rows(tmp_path)
        assert (locker.id, "my locker code is 5512", rows[0][2]) in rows and rows[0][2] is not None
        assert any(text == "my locker code is 7781" and retired is None for _, text, retired in rows), rows
        assert not any("7781" in n.text for n in mem.members["notes"].list_notes())  # the curated file untouched
        new = next(n for n in mem.list_notes() if "7781" in n.text)
        assert mem.retire(new.id).status == "retired"
        assert any(text == "my locker code is 7781" and retired for _, text, retired in _sticky_rows(tmp_path))
        assert mem.restore(new.id).status == "restored"
        assert any(text == "my locker code is 7781" and not retired for _, text, retired in _sticky_rows(tmp_path))


def test_update_by_id_reaches_every_members_copy_of_the_fact(tmp_path: Path) -> None:
    with CompositeMemory({"root": str(tmp_path), "members": CURATED_AND_STICKY}) as mem:
        mem.remember("my bike is red", session_id="ana")
        mem.members["sticky"].remember("my bike is red", session_id="ana")
        bike = next(n for n in mem.list_notes() if "bike" in n.text)
        assert bike.metadata["members"] == ["notes", "sticky"]
        assert mem.update(bike.id, "my bike is green", session_id="ana").status == "updated"
        for name in ("notes", "sticky"):
            active = [n.text.rstrip(".") for n in mem.members[name].list_notes()]
            assert active == ["my bike is green"], (name, active)
        assert [n.text.rstrip(".") for n in mem.list_notes()] == ["my bike is green"]


def test_the_editor_lists_and_edits_a_sticky_only_note_of_a_composite(tmp_path: Path) -> None:
    from trust_helpers import editor_call

    from ovos_memory_plugins.editor import EditorServer

    with CompositeMemory({"root": str(tmp_path), "members": CURATED_AND_STICKY}) as mem:
        mem.remember("my boat is moored in Lisbon", session_id="ana")
        mem.members["sticky"].remember("my locker code is 5512", session_id="ana")
        locker = next(n for n in mem.list_notes() if "5512" in n.text)
        with EditorServer(mem) as server:
            status, state = editor_call(server, "GET", "/api/notes")
            assert status == 200 and any("5512" in item["text"] for item in state["items"]), state
            edit = {"id": locker.id, "text": "my locker code is 7781", "version": state["version"]}
            status, state = editor_call(server, "PUT", "/api/notes/items", edit)
            assert status == 200, state
        rows = _sticky_rows(tmp_path)
        assert any(text == "my locker code is 7781" and retired is None for _, text, retired in rows), rows
        assert any(i == locker.id and retired for i, _, retired in rows), rows
