"""Test doubles for the tool box tests (no tests here): a small in-RAM ``NotesKeeper``, a slow retriever.

The real notes backends implement the protocol too (``tests/frontends/test_toolbox_notes.py``); this double
keeps the tool box's own tests independent of their matching rules.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ovos_memory_plugins.common import MemoryHit, normalize_content
from ovos_memory_plugins.protocols import Note, NoteChange


class NotesDouble:
    """A ``NotesKeeper`` and ``Retriever`` over a list: exact text or id, else substring match."""

    def __init__(self) -> None:
        self.active: list[Note] = []
        self.retired: list[Note] = []
        self.calls: list[str] = []
        self.gate: threading.Event | None = None  # set: calls wait for it (a slow memory)
        self.fail: BaseException | None = None  # set: calls raise it

    def _enter(self, verb: str) -> None:
        self.calls.append(verb)
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail is not None:
            raise self.fail

    def _match(self, description: str, notes: list[Note]) -> list[Note]:
        key = normalize_content(description)
        exact = [n for n in notes if n.id == description or normalize_content(n.text) == key]
        return exact[:1] or [n for n in notes if key and key in normalize_content(n.text)]

    def list_notes(self, *, include_retired: bool = False, session_id: str | None = None) -> list[Note]:
        self._enter("list_notes")
        notes = self.active + (self.retired if include_retired else [])
        return [n for n in notes if session_id is None or n.session_id == session_id]

    def remember(self, fact: str, *, session_id: str = "default", date: str | None = None) -> NoteChange:
        self._enter("remember")
        for n in self.active:
            if normalize_content(n.text) == normalize_content(fact):
                return NoteChange("duplicate", note=n)
        note = Note(id=f"n{len(self.active) + len(self.retired) + 1}", text=fact, date="2026-11", session_id=session_id)
        self.active.append(note)
        return NoteChange("added", note=note)

    def _pick(self, description: str) -> Note | NoteChange:
        found = self._match(description, self.active)
        if not found:
            return NoteChange("not_found")
        if len(found) > 1:
            return NoteChange("ambiguous", candidates=found)
        return found[0]

    def forget(self, description: str) -> NoteChange:
        self._enter("forget")
        picked = self._pick(description)
        if isinstance(picked, NoteChange):
            return picked
        self.active.remove(picked)
        return NoteChange("forgotten", note=picked)

    def update(self, description: str, new_fact: str) -> NoteChange:
        self._enter("update")
        picked = self._pick(description)
        if isinstance(picked, NoteChange):
            return picked
        new = Note(id=picked.id + "u", text=new_fact, date="2026-11", session_id=picked.session_id)
        self.active[self.active.index(picked)] = new
        self.retired.append(Note(picked.id, picked.text, picked.date, picked.session_id, retired_on="2026-11-30"))
        return NoteChange("updated", note=picked, replaced_by=new)

    def retire(self, description: str) -> NoteChange:
        self._enter("retire")
        picked = self._pick(description)
        if isinstance(picked, NoteChange):
            return picked
        self.active.remove(picked)
        gone = Note(picked.id, picked.text, picked.date, picked.session_id, retired_on="2026-11-30")
        self.retired.append(gone)
        return NoteChange("retired", note=gone)

    def restore(self, description: str) -> NoteChange:
        self._enter("restore")
        found = self._match(description, self.retired)
        if len(found) != 1:
            return NoteChange("not_found" if not found else "ambiguous", candidates=found if found else [])
        self.retired.remove(found[0])
        note = Note(found[0].id, found[0].text, found[0].date, found[0].session_id)
        self.active.append(note)
        return NoteChange("restored", note=note)

    def search(self, query: str, session_id: str | None = None, top_k: int | None = None) -> list[MemoryHit]:
        self._enter("search")
        words = set(normalize_content(query).split())
        hits = []
        for n in self.active:
            shared = words & set(normalize_content(n.text).split())
            if shared and (session_id is None or n.session_id == session_id):
                hits.append(MemoryHit(n.text, n.id, float(len(shared)), {"session_id": n.session_id, "date": n.date}))
        hits.sort(key=lambda h: -h.score)
        return hits[: top_k or 5]


class SlowRetriever:
    """A ``Retriever`` that waits ``seconds`` before answering."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.release = threading.Event()

    def search(self, query: str, session_id: str | None = None, top_k: int | None = None) -> list[MemoryHit]:
        self.release.wait(self.seconds)
        return [MemoryHit("late", "x", 1.0, {"time": time.time()})]


def snapshot(memory: Any) -> Any:
    """What a memory holds, to check that a refused call changed nothing."""
    if isinstance(memory, NotesDouble):
        return (list(memory.active), list(memory.retired))
    return sorted((d["id"], d["text"]) for d in memory.iter_documents())
