"""A PostgreSQL memory whose server is missing or dies: one clear error, working turns, no hang."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from pg_server import PgUnavailable, start_server

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.vector import VectorMemory

TURN = [{"role": "user", "content": "my bike is red"}, {"role": "assistant", "content": "noted"}]


@pytest.mark.parametrize("make", [LexicalMemory, lambda c: VectorMemory({"embedder": "hash", **c})])
def test_unreachable_at_load(tmp_path: Path, caplog: pytest.LogCaptureFixture, make: object) -> None:
    caplog.set_level(logging.ERROR)
    started = time.monotonic()
    mem = make({"root": str(tmp_path), "database": "postgresql://u:secret@127.0.0.1:9/memory"})  # type: ignore[operator]
    at_load = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    messages = mem.build_conversation_context("what colour is my bike?", "s")
    mem.update_history(TURN, "s")
    assert time.monotonic() - started < 10
    assert messages[-1].content == "what colour is my bike?"
    assert len(at_load) == 1, at_load  # one error at load, naming the server, never the password
    assert "127.0.0.1:9" in at_load[0] and "Connection refused" in at_load[0]
    assert not any("secret" in r.getMessage() for r in caplog.records)
    assert mem.storage.db.in_ram  # said so, and kept nothing on disk
    mem.close()


def test_server_dies_mid_run(tmp_path: Path) -> None:
    try:
        server = start_server()
    except PgUnavailable as exc:
        pytest.skip(f"no throwaway PostgreSQL server here: {exc}")
    try:
        url = server.create_database("dies")
        mem = LexicalMemory({"root": str(tmp_path), "database": url})
        mem.update_history(TURN, "s")
        assert any("bike" in m.content for m in mem.build_conversation_context("bike colour?", "s"))
        server.stop()
        timings = []
        for _ in range(3):
            started = time.monotonic()
            messages = mem.build_conversation_context("bike colour?", "s")
            mem.update_history(TURN, "s")
            timings.append(time.monotonic() - started)
            assert messages[-1].content == "bike colour?"
        # the first turn waits at most the deadlines; then the back-off answers at once
        assert timings[0] < 15 and max(timings[1:]) < 1.0, timings
        mem.close()
    finally:
        server.stop()
