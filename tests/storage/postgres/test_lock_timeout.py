"""A lock timeout is not a lost connection: only a connection or server at fault puts a PostgreSQL
memory in back-off; a lock not granted in time, a deadlock or a serialization failure fails that
one call (against a real throwaway server, tests/pg_server.py)."""

from __future__ import annotations

import itertools
import logging
import threading
import time

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

import psycopg
from pg_server import PgServer

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.postgres.database import PgDatabase
from ovos_memory_plugins.testing import exchange

_ns = itertools.count()

#: What the memory logs when it starts a back-off.
BACKOFF_WARNING = "calls fail fast"


def raise_sql(state: str) -> str:
    """A statement the server answers with an error of SQLSTATE ``state``."""
    return f"DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '{state}'; END $$"


def test_a_lock_timeout_fails_that_call_only(
    postgres_server: PgServer, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    url = postgres_url + "?options=-c%20lock_timeout%3D300"  # the URL's options win over ours: 0.3 s
    ns = f"lock-{next(_ns)}"
    with LexicalMemory({"database": url, "namespace": ns}) as mem:
        mem.update_history(exchange("My bike is red.", "Noted, your bike is red."), "s")
        assert mem.storage.documents.count() == 1
        holder = psycopg.connect(postgres_url)  # a transaction holding the table, as a migration might
        try:
            holder.execute("LOCK TABLE memory_documents IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            with pytest.raises(StorageError, match="waited past lock_timeout") as caught:
                mem.storage.documents.count()
            assert time.monotonic() - started < 3
            assert postgres_server.password not in str(caught.value)
            # the persona's turn is answered meanwhile (without recall)
            messages = mem.build_conversation_context("what colour is my bike?", "other")
            assert messages[-1].content == "what colour is my bike?"
        finally:
            holder.rollback()
            holder.close()
        # the lock is gone: the very next calls work, no fail-fast window
        started = time.monotonic()
        assert mem.storage.documents.count() == 1
        messages = mem.build_conversation_context("what colour is my bike?", "other")
        assert time.monotonic() - started < 2
        assert any("red" in m.content for m in messages[:-1]), messages
        mem.forget_all()
    assert not [r.getMessage() for r in caplog.records if BACKOFF_WARNING in r.getMessage()]


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ("55P03", "waited past lock_timeout"),  # LockNotAvailable
        ("40P01", "rolled back to break a deadlock"),  # DeadlockDetected
        ("40001", "serialization failure, 40001"),  # SerializationFailure
        ("57014", "ran past its deadline"),  # QueryCanceled
        ("53100", "raised by the test"),  # DiskFull: an OperationalError, but the server answered
        ("22012", "raised by the test"),  # DivisionByZero: not an OperationalError at all
    ],
)
def test_an_error_the_server_answers_with_fails_that_call_only(
    postgres_url: str, state: str, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    db = PgDatabase(postgres_url, vector=False)
    try:
        with pytest.raises(StorageError, match=says):
            db.execute(raise_sql(state))
        with pytest.raises(StorageError, match=says), db.atomic() as conn:  # inside a transaction too
            conn.execute(raise_sql(state))
        assert db.scalar("SELECT 1") == 1  # at once: no back-off
    finally:
        db.close()
    assert not [r.getMessage() for r in caplog.records if BACKOFF_WARNING in r.getMessage()]


def test_every_connection_busy_fails_that_call_only(postgres_url: str) -> None:
    db = PgDatabase(postgres_url, vector=False, max_connections=1, pool_timeout=0.5)
    lent, release = threading.Event(), threading.Event()

    def hold() -> None:  # a long call of another thread, holding the pool's one connection
        with db.atomic() as conn:
            conn.execute("SELECT 1")
            lent.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert lent.wait(10)
        started = time.monotonic()
        with pytest.raises(StorageError, match=r"stayed busy with other calls for 0\.5 s"):
            db.scalar("SELECT 1")
        assert time.monotonic() - started < 3
        release.set()
        holder.join(10)
        assert db.scalar("SELECT 1") == 1  # at once: no back-off
    finally:
        release.set()
        holder.join(10)
        db.close()


@pytest.mark.parametrize("state", ["08006", "57P01", "57P03"])
def test_a_connection_or_server_error_backs_off(postgres_url: str, state: str) -> None:
    db = PgDatabase(postgres_url, vector=False)
    try:
        with pytest.raises(StorageError, match="lost the connection"):
            db.execute(raise_sql(state))
        with pytest.raises(StorageError, match="is unreachable; calls resume"):
            db.scalar("SELECT 1")
    finally:
        db.close()


def test_a_killed_connection_backs_off_then_recovers(postgres_server: PgServer) -> None:
    url = postgres_server.create_database("pglock_killed", vector=False)
    db = PgDatabase(url, vector=False)
    try:
        assert db.scalar("SELECT 1") == 1
        with psycopg.connect(url, autocommit=True) as admin:
            others = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            pids = [r[0] for r in admin.execute(others).fetchall()]
            assert pids  # the pool's connection
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))  # waits for it to end
        with pytest.raises(StorageError, match="lost the connection") as caught:
            db.scalar("SELECT 1")
        assert postgres_server.password not in str(caught.value)
        with pytest.raises(StorageError, match="is unreachable; calls resume"):
            db.scalar("SELECT 1")
        deadline = time.monotonic() + 10
        while True:  # once the background probe finds the server up, a new pool answers
            time.sleep(0.3)
            try:
                assert db.scalar("SELECT 1") == 1
                break
            except StorageError:
                if time.monotonic() > deadline:
                    raise
    finally:
        db.close()
