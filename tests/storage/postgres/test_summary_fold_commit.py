"""The rolling summary's fold on PostgreSQL commits without weakening the caller's durability
(against a real throwaway server, tests/pg_server.py). What every engine does with a summary
(kept across restarts, forgotten with its session, namespaces apart) is in
tests/storage/test_summary_store.py, on every engine."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.summary_store import SummaryStore

_ns = itertools.count()


def memory(url: str, namespace: str, **config: Any) -> LexicalMemory:
    return LexicalMemory({"database": url, "namespace": namespace, "max_history": 2, **config})


def talk(mem: LexicalMemory, session: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        mem.update_history(
            [
                AgentMessage(role=MessageRole.USER, content=f"Fact number {i}: my locker code is {1000 + i}."),
                AgentMessage(role=MessageRole.ASSISTANT, content=f"Noted {i}."),
            ],
            session,
        )


def summary_rows(url: str, namespace: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM memory_summaries WHERE namespace = %s", (namespace,)).fetchone()
    return int(row[0]) if row else 0


def system_text(messages: list[AgentMessage]) -> str:
    return "\n".join(m.content for m in messages if m.role == MessageRole.SYSTEM)


def test_a_fold_commits_without_weakening_the_turn(postgres_url: str) -> None:
    """The fold's own statement commits asynchronously only outside a transaction: inside one
    (the caller's), it leaves the caller's durability setting alone."""
    ns = f"summary-{next(_ns)}"
    with memory(postgres_url, ns) as mem:
        db = mem.storage.db
        store = SummaryStore(db, ns)
        with db.atomic() as conn:
            conn.execute("SET LOCAL synchronous_commit = 'local'")  # the caller's own setting
            store.put("s", "a summary", 1)
            assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "local"  # left alone
        assert store.get("s") == ("a summary", 1)
        store.put("s", "another", 2)
        assert store.get("s") == ("another", 2)
        mem.forget_all()
