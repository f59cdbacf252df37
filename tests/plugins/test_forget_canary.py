"""Provable forget, end to end: a canary through every backend and every forget verb.

For each backend of the package (keyword; vector on the numpy and the sqlite-vec paths; notes on
the file and the SQLite store, each with its keyword archive; sticky notes; a composite of all
four kinds) the canary goes in the way a persona puts it there (``build_conversation_context``
then ``update_history`` with "remember that …"), through ``store`` and through the notes verb
``remember``. Then one forget verb runs: ``delete`` (documents by id, notes by exact id),
``forget_session``, ``forget_all``, the ``ovos-memory forget`` command in another process while
the memory stays open (as a running persona's would), or the editor's HTTP API. Afterwards every
byte of every file under the memory's folder (the database, its -wal and -shm, MEMORY.md and its
backups, the undo snapshots, hidden session files, temp files) is scanned for the canary in
UTF-8 and UTF-16, any case, and prompts built afterwards, by the open instance and by a new one,
must not carry it. The other session's memories must survive every verb but ``forget_all``.

On every engine (the ``engine`` fixture): on PostgreSQL the backends are configured with
``"database": "postgresql://..."`` (each in a namespace of its own; a composite's members in
``<namespace>.<member>``; the SQLite-only backends, notes on the file store and vector on
sqlite-vec, are not there), and afterwards no row of any table belonging to the memory's
namespaces holds the canary either (the whole row read as text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Engine
from trust_helpers import (
    ALL_BACKENDS,
    COMPOSITE,
    LEXICAL,
    NOTES_SQLITE,
    STICKY,
    VECTOR_NUMPY,
    Backend,
    backend_params,
    digest_forms,
    editor_call,
    files_holding,
    files_holding_bytes,
    on_postgres,
    prompt_text,
    rows_of,
    run_cli,
)

from ovos_memory_plugins.base import exchange_text
from ovos_memory_plugins.testing import exchange

CANARY = "Quokka4471Zest"
KEEP = "Lisbon"
ASK = f"remember that my bank PIN is {CANARY}"
KEEP_ASK = f"remember that the boat is moored in {KEEP}"
QUESTION = "what is my bank PIN, my locker code and my safe word"
REPLY = f"I will keep {CANARY} to myself"
STORED = f"ava's safe word is {CANARY}"
NOTED = f"the locker code is {CANARY}"
#: every text holding the canary, whole, as a content-hash cache would key it
TEXTS = [ASK, REPLY, STORED, NOTED, exchange_text(ASK, REPLY), f"my bank PIN is {CANARY}"]

#: Deleting a sticky note by id leaves the turn that told it ("remember that my bank PIN is …")
#: in the session's history window (history.db), which the next prompt of that session shows.
#: Not fixed here: it needs a history-store verb (storage/sqlite/history.py) that removes the exchanges
#: quoting a text, called by sticky.py when a note goes; see docs/reliability.md "Known gaps".

VERBS = [
    "delete",
    "forget_session",
    "forget_all",
    "cli-ids",
    "cli-session",
    "cli-all",
    "editor-delete",
    "editor-session",
    "editor-all",
]


#: the backends a persona can put on PostgreSQL
ON_POSTGRES = [LEXICAL, VECTOR_NUMPY, NOTES_SQLITE, STICKY, COMPOSITE]


def engine_backend_params() -> list[Any]:
    """``pytest.param(engine, backend)`` for every backend on SQLite and every one on PostgreSQL."""
    out = [pytest.param("sqlite", *p.values, id=f"sqlite-{p.id}", marks=p.marks) for p in backend_params()]
    out += [pytest.param("postgresql", b, id=f"postgresql-{b.name}") for b in ON_POSTGRES]
    return out


def kept_anywhere(engine: Engine, root: Path) -> list[str]:
    """Files under ``root`` and, on PostgreSQL, tables of the memory's namespaces holding the canary."""
    found = files_holding(root, CANARY)
    if engine.url is not None:
        found += [f"table {t}" for t in rows_of(engine.url, engine.namespace, CANARY)]
    return found


def fill(backend: Backend, mem: Any) -> None:
    """Put the canary in every way the backend takes it; Bob's session gets other words."""
    mem.build_conversation_context(ASK, "ava")  # the host's path: the turn, then the record
    mem.update_history(exchange(ASK, REPLY), "ava")
    mem.store(STORED, "ava")
    if backend.notes:
        assert mem.remember(NOTED, session_id="ava")
    mem.build_conversation_context(KEEP_ASK, "bob")
    mem.update_history(exchange(KEEP_ASK, f"{KEEP}, noted"), "bob")
    if backend.notes:  # sticky already noted it from the ask: a duplicate is fine
        assert mem.remember(f"the boat is moored in {KEEP}", session_id="bob").status in ("added", "duplicate")
    if callable(getattr(mem, "replace_notes", None)):  # an edit: a backup and an undo snapshot hold the canary
        mem.replace_notes(mem.notes_body() + "- [2026-01] the tea is green\n")
    wait_for_members(mem)
    assert CANARY in prompt_text(mem, QUESTION, "ava"), "the canary must reach the prompt before"


def wait_for_members(mem: Any) -> None:
    """A composite records turns on its members' writers; wait until they are done."""
    drain = getattr(mem, "drain", None)
    if callable(drain):
        drain(10)
    flush = getattr(mem, "flush", None)
    if callable(flush):
        flush(10)


def canary_documents(mem: Any) -> list[str]:
    """The ids of every document holding the canary: listed where the memory lists documents
    (DocumentLister), else found by search (the notes backend's archive)."""
    if callable(getattr(mem, "iter_documents", None)):
        return [d["id"] for d in mem.iter_documents() if CANARY.lower() in str(d["text"]).lower()]
    return [h.source for h in mem.search(CANARY, top_k=50) if CANARY.lower() in h.content.lower()]


def canary_notes(mem: Any) -> list[str]:
    return [n.id for n in mem.list_notes(include_retired=True) if CANARY.lower() in n.text.lower()]


def forget(verb: str, backend: Backend, mem: Any, root: Path) -> None:
    docs = canary_documents(mem) if backend.archives else []
    notes = canary_notes(mem) if backend.notes else []
    # a composite lists every notes member's notes; its sticky member's notes are documents of
    # that member too, deleted here by id through the composite's delete (not forgotten again)
    on_sticky = sticky_ids(mem) if backend.name == "composite" else set()
    docs += [n for n in on_sticky if CANARY.lower() in n_text(mem, n).lower()]
    notes = [n for n in notes if n not in on_sticky]
    if backend.archives:
        assert docs, "the canary must be listed as a document"
    if verb == "delete":
        if docs:
            assert mem.delete(docs) >= 1
        for note_id in notes:
            assert mem.forget(note_id), f"forget by exact id {note_id!r}"
    elif verb == "forget_session":
        assert mem.forget_session("ava") >= 1
    elif verb == "forget_all":
        assert mem.forget_all() >= 2
    elif verb.startswith("cli-"):
        runs = []
        if verb == "cli-ids":
            if docs:
                runs.append(["forget", *docs])
            runs += [["forget", "--match", note_id] for note_id in notes]
        elif verb == "cli-session":
            runs.append(["forget", "--session", "ava"])
        else:
            runs.append(["forget", "--all", "--yes"])
        for args in runs:
            done = run_cli(backend, root, *args)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
    else:
        from ovos_memory_plugins.editor import EditorServer

        with EditorServer(mem) as server:
            calls: list[tuple[str, str, Any]] = []
            if verb == "editor-delete":
                # a composite's sticky notes are its sticky member's documents: deleted by id too
                calls += [("DELETE", f"/api/documents/{d}", None) for d in docs]
                calls += [("DELETE", f"/api/notes/items?id={note_id}", None) for note_id in notes]
            elif backend.name == "sticky":
                pytest.skip("the editor offers no session or forget-all verb for a sticky-notes memory")
            elif verb == "editor-session":
                calls.append(("DELETE", "/api/sessions/ava?confirm=ava", None))
            else:
                calls.append(("POST", "/api/forget-all", {"confirm": "everything"}))
            for method, path, body in calls:
                status, reply = editor_call(server, method, path, body)
                assert status == 200, (method, path, status, reply)


def n_text(mem: Any, note_id: str) -> str:
    """The text of the composite's sticky member's note ``note_id``."""
    from ovos_memory_plugins.sticky import StickyMemory

    for member in getattr(mem, "members", {}).values():
        if isinstance(member, StickyMemory):
            for n in member.list_notes(include_retired=True):
                if n.id == note_id:
                    return n.text
    return ""


def sticky_ids(mem: Any) -> set[str]:
    """The ids of the composite's sticky member's notes (the editor shows them on their own tab)."""
    from ovos_memory_plugins.sticky import StickyMemory

    out: set[str] = set()
    for member in getattr(mem, "members", {}).values():
        if isinstance(member, StickyMemory):
            out |= {n.id for n in member.list_notes(include_retired=True)}
    return out


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize(("engine", "plain"), engine_backend_params(), indirect=["engine"])
def test_a_forgotten_canary_is_in_no_byte_no_row_and_no_prompt(engine: Engine, plain: Backend, verb: str) -> None:
    backend = plain if engine.url is None else on_postgres(plain, engine.url, engine.namespace)
    root = engine.folder
    mem = backend.open(root)
    try:
        fill(backend, mem)
        assert kept_anywhere(engine, root), "the canary must be stored before it is forgotten"
        forget(verb, backend, mem, root)
        wait_for_members(mem)
        assert kept_anywhere(engine, root) == [], "found while the memory is open"
        assert files_holding_bytes(root, digest_forms(*TEXTS)) == [], "a digest of a forgotten text is kept"
        assert CANARY not in prompt_text(mem, QUESTION, "ava"), "the open instance still sends it"
        assert CANARY not in prompt_text(mem, "what do you remember", "bob")
        if verb not in ("forget_all", "cli-all", "editor-all"):
            kept = prompt_text(mem, "where is the boat moored", "bob")
            assert KEEP in kept, "the other session's memories must stay"
    finally:
        mem.close()
    assert kept_anywhere(engine, root) == [], "found after close"
    with backend.open(root) as again:
        assert CANARY not in prompt_text(again, QUESTION, "ava"), "a new instance still sends it"
        assert not any(CANARY in h.content for h in again.search(CANARY, top_k=20))
    assert kept_anywhere(engine, root) == []


def test_the_table_covers_every_registered_plugin() -> None:
    from conftest import our_memory_plugins

    assert {b.module for b in ALL_BACKENDS} == set(our_memory_plugins())
