"""``compact()`` on PostgreSQL waits for its VACUUM of every memory table, within a deadline, and
says when it could not (against a real throwaway server, tests/pg_server.py)."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

import psycopg
from trust_helpers import prime_summary

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.storage.engine import Compacted, compact_database
from ovos_memory_plugins.storage.postgres.database import PgDatabase, redact_url
from ovos_memory_plugins.testing import exchange

_ns = itertools.count()


def talk(mem: Any, session: str, n: int) -> None:
    for i in range(n):
        mem.update_history(exchange(f"Fact number {i}: my locker code is {1000 + i}.", f"Noted {i}."), session)


def vacuumed_since(url: str, since: Any) -> dict[str, bool]:
    """Per memory table: whether a manual VACUUM finished after ``since`` (server time)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, coalesce(last_vacuum >= %s, false) FROM pg_stat_user_tables"
            " WHERE relname LIKE 'memory\\_%%' AND schemaname = current_schema()",
            (since,),
        ).fetchall()
    return {str(r[0]): bool(r[1]) for r in rows}


def server_now(url: str) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


def test_compact_returns_after_every_memory_table_was_vacuumed(postgres_url: str) -> None:
    ns = f"compact-{next(_ns)}"
    with (
        LexicalMemory({"database": postgres_url, "namespace": ns, "max_history": 2}) as mem,
        NotesMemory({"database": postgres_url, "namespace": ns}) as notes,
    ):
        prime_summary(mem, "s")  # a stored summary (the lazy fold writes on trims)
        talk(mem, "s", 4)  # documents, keywords, history and a summary
        notes.remember("The user's locker code is 1003.")
        mem.forget_session("s")
        notes.forget("locker code")
        since = server_now(postgres_url)
        done = mem.compact()
        assert isinstance(done, Compacted) and done == [redact_url(postgres_url)] and not done.skipped
        vacuumed = vacuumed_since(postgres_url, since)  # read at once: no waiting for a background step
        for table in (
            "memory_documents",
            "memory_keywords",
            "memory_keyword_df",
            "memory_history",
            "memory_summaries",
            "memory_notes",
        ):
            assert vacuumed[table], table
        assert all(vacuumed.values()), [t for t, v in vacuumed.items() if not v]
        mem.forget_all()
        notes.forget_all()


def test_a_compact_blocked_by_a_lock_gives_up_at_the_deadline_and_says_so(postgres_url: str) -> None:
    with LexicalMemory({"database": postgres_url, "namespace": f"compact-{next(_ns)}", "max_history": 2}) as mem:
        talk(mem, "s", 3)  # the tables exist
    db = PgDatabase(postgres_url, statement_timeout=1.0)
    holder = psycopg.connect(postgres_url)
    try:
        holder.execute("LOCK TABLE memory_summaries IN SHARE UPDATE EXCLUSIVE MODE")  # as a VACUUM would
        start = time.monotonic()
        done = compact_database(db)
        assert time.monotonic() - start < 4
        assert done == [] and list(done.skipped) == [db.location]
        assert "lock" in done.skipped[db.location]
        holder.rollback()
        done = compact_database(db)  # the lock is gone: done
        assert done == [db.location] and not done.skipped
    finally:
        holder.close()
        db.close()


def test_a_forget_vacuums_the_summaries_too(postgres_url: str) -> None:
    ns = f"compact-{next(_ns)}"
    with LexicalMemory({"database": postgres_url, "namespace": ns, "max_history": 2}) as mem:
        prime_summary(mem, "s")  # a stored summary (the lazy fold writes on trims)
        talk(mem, "s", 3)
        since = server_now(postgres_url)
        assert mem.forget_session("s").tiers["summaries"] == 1
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not vacuumed_since(postgres_url, since).get("memory_summaries"):
            time.sleep(0.05)  # the forget's VACUUM runs in the background
        assert vacuumed_since(postgres_url, since)["memory_summaries"]


def test_the_forget_vacuum_works_in_a_database_without_summaries(
    postgres_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = postgres_server.create_database(f"no_summaries_{next(_ns)}")
    config = {"database": url, "namespace": "n", "max_history": 2, "summary": {"enabled": False}}
    with caplog.at_level(logging.WARNING, logger="ovos_memory_plugins"), LexicalMemory(config) as mem:
        talk(mem, "s", 3)
        since = server_now(url)
        mem.forget_session("s")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not vacuumed_since(url, since).get("memory_documents"):
            time.sleep(0.05)
        assert vacuumed_since(url, since)["memory_documents"]
        assert "memory_summaries" not in vacuumed_since(url, since)  # never created
        assert mem.compact() == [redact_url(url)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_turns_go_on_while_a_compact_waits(postgres_url: str) -> None:
    ns = f"compact-{next(_ns)}"
    with LexicalMemory({"database": postgres_url, "namespace": ns, "max_history": 2}) as mem:
        talk(mem, "s", 3)
        holder = psycopg.connect(postgres_url)
        try:
            holder.execute("LOCK TABLE memory_summaries IN SHARE UPDATE EXCLUSIVE MODE")
            result: list[Compacted] = []
            worker = threading.Thread(target=lambda: result.append(mem.compact()))
            worker.start()
            time.sleep(0.3)  # the compact's VACUUM now waits for the lock
            start = time.monotonic()
            messages = mem.build_conversation_context("what is my locker code?", "s")
            mem.update_history(exchange("My bike is red.", "Noted."), "s")
            assert time.monotonic() - start < 1.0 and messages[-1].content == "what is my locker code?"
            assert worker.is_alive()  # still waiting
            holder.rollback()
            worker.join(10)
            assert result and result[0] == [redact_url(postgres_url)]
        finally:
            holder.close()
        mem.forget_all()
