"""What a hung composite member costs, and what survives ``forget_all`` on a notes memory.

Run from the project root (or with ``PYTHONPATH`` pointing at another checkout to compare)::

    python benchmarks/notes_trust.py

* A composite of the keyword backend and a member whose ``update_history`` and ``search`` block
  (a member stuck on a dead server): seconds per ``update_history`` and per
  ``build_conversation_context`` over three turns, and how long ``close()`` takes.
* A notes memory (file store, then SQLite store) with a canary note and one edit (so a backup
  and an undo snapshot exist), then ``forget_all``: the files under its folder that still hold
  the canary, and whether the canary is still in the prompt.
"""

from __future__ import annotations

import logging
import pathlib
import tempfile
import threading
import time
from typing import Any

from ovos_memory_plugins.testing import InMemoryMemory, exchange

RELEASE = threading.Event()


class HungMember(InMemoryMemory):
    """Blocks in ``update_history`` and ``search`` until the run ends."""

    def update_history(self, new_messages: list[Any], session_id: str) -> None:
        RELEASE.wait(60)
        super().update_history(new_messages, session_id)

    def search(self, query: str, session_id: str | None = None, top_k: int | None = None) -> list[Any]:
        RELEASE.wait(60)
        return super().search(query, session_id=session_id, top_k=top_k)


def hung_member() -> None:
    import ovos_memory_plugins.composite.memory as composite

    real = composite._load_member_class
    composite._load_member_class = lambda module: HungMember if module == "hung" else real(module)
    members = [{"module": "ovos-memory-plugin-lexical"}, {"module": "hung"}]
    mem = composite.CompositeMemory({"root": tempfile.mkdtemp(), "members": members})
    writes, turns = [], []
    for i in range(3):
        start = time.monotonic()
        mem.update_history(exchange(f"question {i} about the platypus", f"answer {i}"), "s")
        writes.append(time.monotonic() - start)
    for _ in range(3):
        start = time.monotonic()
        mem.build_conversation_context("platypus", "s")
        turns.append(time.monotonic() - start)
    start = time.monotonic()
    mem.close()
    closing = time.monotonic() - start
    RELEASE.set()
    print("composite + hung member, update_history s/turn:", [round(c, 3) for c in writes])
    print("composite + hung member, build_conversation_context s/turn:", [round(c, 3) for c in turns])
    print("composite + hung member, close() s:", round(closing, 3))


def forget_all() -> None:
    from ovos_memory_plugins.notes import NotesMemory

    for store in ("file", "sqlite"):
        root = pathlib.Path(tempfile.mkdtemp())
        with NotesMemory({"root": str(root), "store": store, "archive": None}) as mem:
            mem.remember("the canary is echidna4417")
            mem.replace_notes(mem.notes_body() + "- [2026-01] another note\n")
            mem.forget_all()
            left = sorted(p.name for p in root.rglob("*") if p.is_file() and b"echidna4417" in p.read_bytes())
            prompt = "echidna4417" in "".join(mem.context_blocks("canary", "s"))
        print(f"notes ({store} store) after forget_all: files holding the canary {left}, canary in the prompt {prompt}")


if __name__ == "__main__":
    logging.disable(logging.CRITICAL)
    hung_member()
    forget_all()
