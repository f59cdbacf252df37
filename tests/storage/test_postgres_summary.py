"""The rolling summary on PostgreSQL: kept in the memory's namespace, across restarts, forgotten
with its session and with everything (against a real throwaway server, tests/pg_server.py)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole
from trust_helpers import prime_summary

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


def test_the_summary_lives_in_postgresql_and_survives_a_restart(postgres_url: str, tmp_path: Any) -> None:
    ns = f"summary-{next(_ns)}"
    with memory(postgres_url, ns, root=str(tmp_path)) as mem:
        prime_summary(mem, "s")  # stored summaries (the lazy fold writes on trims)
        prime_summary(mem, "t")
        talk(mem, "s", 3)  # exchange 0 leaves the one-exchange window, then 1
        talk(mem, "t", 3)
        assert "locker code is 1000" in mem.session_summary("s")
        assert "locker code is 1002" not in mem.session_summary("s")  # still in the window
        assert summary_rows(postgres_url, ns) == 2  # in the server's table, keyed by the namespace
    assert not any(tmp_path.iterdir())  # nothing written under root
    with memory(postgres_url, ns) as mem:  # a restart (a new process would see the same)
        summary = mem.session_summary("s")
        assert "locker code is 1000" in summary and "locker code is 1001" in summary
        assert "locker code is 1001" in system_text(mem.build_conversation_context("hi", "s"))
        assert mem.session_summary("nobody") == ""


def test_the_summary_goes_with_its_session_and_with_forget_all(postgres_url: str) -> None:
    ns = f"summary-{next(_ns)}"
    with memory(postgres_url, ns) as mem:
        prime_summary(mem, "s")
        prime_summary(mem, "t")
        talk(mem, "s", 3)
        talk(mem, "t", 3)
        report = mem.forget_session("s")
        assert report.tiers["summaries"] == 1
        assert mem.session_summary("s") == "" and "1001" in mem.session_summary("t")
        mem.forget_all()
        assert mem.session_summary("t") == ""
    with memory(postgres_url, ns) as mem:
        assert mem.session_summary("s") == mem.session_summary("t") == ""
        assert summary_rows(postgres_url, ns) == 0


def test_namespaces_keep_their_summaries_apart(postgres_url: str) -> None:
    ns_a, ns_b = f"summary-{next(_ns)}", f"summary-{next(_ns)}"
    with memory(postgres_url, ns_a) as a, memory(postgres_url, ns_b) as b:
        talk(a, "default", 3)
        assert "1000" in a.session_summary("default")
        assert b.session_summary("default") == ""
        talk(b, "default", 3, start=50)
        b.forget_all()
        assert "1000" in a.session_summary("default") and b.session_summary("default") == ""
        a.forget_all()


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
