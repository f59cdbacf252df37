"""``ovos-memory check`` on a persona whose memory lives in PostgreSQL: it reaches the server and
runs one vector query, so a pgvector that crashes (built for another CPU) is reported as such."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_server import PgServer, private_server

from ovos_memory_plugins.cli import main

MODULE = "ovos-memory-plugin-lexical"


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], database: str) -> tuple[int, dict[str, Any]]:
    persona = tmp_path / "ada.json"
    block = {"namespace": "ada", "database": database}
    persona.write_text(
        json.dumps({"name": "Ada", "handlers": ["ovos-solver-failure-plugin"], "memory_module": MODULE, MODULE: block})
    )
    code = main(["--json", "check", str(persona)])
    return code, json.loads(capsys.readouterr().out)


def test_a_working_server_passes(postgres_server: PgServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = postgres_server.create_database("check_ok", vector=False)
    code, data = check(tmp_path, capsys, url)
    assert code == 0 and data["problems"] == []
    with psycopg.connect(url) as conn:  # the extension was created only inside a rolled-back transaction
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone() == (0,)


def test_an_unreachable_server_is_named_without_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, data = check(tmp_path, capsys, f"postgresql://ada:secret-pw@127.0.0.1:{port}/memory")
    assert code == 1
    assert data["problems"][0].startswith("cannot connect to PostgreSQL at postgresql://***@127.0.0.1:")
    assert "secret-pw" not in json.dumps(data)


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-x86_64 is not installed")
def test_a_pgvector_built_for_another_cpu_is_reported_as_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with private_server(cpu="Nehalem") as server:  # no AVX: the wheel's pgvector (x86-64-v3) dies with SIGILL
        url = server.create_database("check_crash", vector=False)
        code, data = check(tmp_path, capsys, url)
    assert code == 1
    (problem,) = data["problems"]
    assert "closed the connection while running one vector query" in problem
    assert "its backend crashed" in problem and 'OPTFLAGS=""' in problem
