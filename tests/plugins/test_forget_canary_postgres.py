"""Provable forget on PostgreSQL: the canary of ``test_forget_canary.py`` through every backend
and every forget verb, with the rows in the server read afterwards.

The same backends as a persona configures them with ``"database": "postgresql://..."`` (each in
a namespace of its own; a composite's members in ``<namespace>.<member>``), the same ways in (the
host's path, ``store``, ``remember``) and the same nine verbs (``delete``, ``forget_session``,
``forget_all``; the ``ovos-memory forget`` command in another process while the memory stays
open; the editor's HTTP API). Afterwards no row of any table of the database belonging to the
memory's namespaces holds the canary (the whole row read as text), no prompt carries it, and the
other session's memories stay (but after forget-all).
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from test_forget_canary import (
    ASK,
    CANARY,
    KEEP,
    KEEP_ASK,
    NOTED,
    QUESTION,
    REPLY,
    STORED,
    VERBS,
    forget,
    wait_for_members,
)
from trust_helpers import COMPOSITE, LEXICAL, NOTES_SQLITE, STICKY, VECTOR_NUMPY, Backend, prompt_text

from ovos_memory_plugins.testing import exchange

_ns = itertools.count()

BACKENDS = [LEXICAL, VECTOR_NUMPY, NOTES_SQLITE, STICKY, COMPOSITE]


def on_postgres(backend: Backend, url: str, namespace: str) -> Backend:
    """``backend`` with its block on the database ``url`` under ``namespace``."""
    config = {k: v for k, v in backend.config.items() if k != "vector_search"}
    return dataclasses.replace(backend, config={**config, "database": url, "namespace": namespace})


def rows_of(url: str, namespace: str, word: str) -> dict[str, int]:
    """Rows of every table of the database that belong to ``namespace`` (or a member's
    ``<namespace>.<member>``) and hold ``word`` anywhere, by table."""
    import psycopg

    out: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.columns"
                " WHERE table_schema = 'public' AND column_name = 'namespace'"
            )
        ]
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            row = conn.execute(
                f"SELECT count(*) FROM {quoted} AS t WHERE (t.namespace = %s OR t.namespace LIKE %s)"
                " AND lower(t::text) LIKE lower(%s)",
                (namespace, namespace + ".%", f"%{word}%"),
            ).fetchone()
            if row and row[0]:
                out[table] = int(row[0])
    return out


def fill(backend: Backend, mem: Any) -> None:
    """The canary in every way the backend takes it (as ``test_forget_canary.fill``)."""
    mem.build_conversation_context(ASK, "ava")
    mem.update_history(exchange(ASK, REPLY), "ava")
    mem.store(STORED, "ava")
    if backend.notes:
        assert mem.remember(NOTED, session_id="ava")
    mem.build_conversation_context(KEEP_ASK, "bob")
    mem.update_history(exchange(KEEP_ASK, f"{KEEP}, noted"), "bob")
    if backend.notes:
        assert mem.remember(f"the boat is moored in {KEEP}", session_id="bob").status in ("added", "duplicate")
    if callable(getattr(mem, "replace_notes", None)):
        mem.replace_notes(mem.notes_body() + "- [2026-01] the tea is green\n")
    wait_for_members(mem)
    assert CANARY in prompt_text(mem, QUESTION, "ava"), "the canary must reach the prompt before"


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("plain", BACKENDS, ids=[b.name for b in BACKENDS])
def test_a_forgotten_canary_is_in_no_row_and_no_prompt(
    tmp_path: Path, postgres_url: str, plain: Backend, verb: str
) -> None:
    namespace = f"tfpg{next(_ns)}"
    backend = on_postgres(plain, postgres_url, namespace)
    root = tmp_path / "memory"
    mem = backend.open(root)
    try:
        fill(backend, mem)
        assert rows_of(postgres_url, namespace, CANARY), "the canary must be in the server before"
        forget(verb, backend, mem, root)
        wait_for_members(mem)
        assert rows_of(postgres_url, namespace, CANARY) == {}, "rows still hold it while the memory is open"
        assert CANARY not in prompt_text(mem, QUESTION, "ava"), "the open instance still sends it"
        if verb not in ("forget_all", "cli-all", "editor-all"):
            assert KEEP in prompt_text(mem, "where is the boat moored", "bob"), "the other session stays"
    finally:
        mem.close()
    with backend.open(root) as again:
        assert CANARY not in prompt_text(again, QUESTION, "ava"), "a new instance still sends it"
        assert not any(CANARY in h.content for h in again.search(CANARY, top_k=20))
    assert rows_of(postgres_url, namespace, CANARY) == {}
