"""Issue 27, item 4: a memory that cannot open its folder never reports success.

With ``--root`` under a regular file, a database path that is a folder (both fail as root too)
or a read-only folder (checked as the ``nobody`` user: root writes anywhere), every command
fails with exit 1 naming the folder and the reason; a persona's memory keeps answering (its
constructor never raises) but says so: an ERROR naming the folder and the declared
``storage_problem`` (:class:`~ovos_memory_plugins.protocols.StorageStatus`); ``ovos-memory
check`` reports it. Real files, the command in another process.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole
from trust_helpers import ALL_BACKENDS, LEXICAL, NOTES_FILE, Backend, backend_params, run_cli

_RUN_CLI = "import sys; from ovos_memory_plugins.cli import main; sys.exit(main(sys.argv[1:]))"


def _under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("not a folder")
    return tmp_path / "a-file" / "mem"


@pytest.mark.parametrize("backend", backend_params(ALL_BACKENDS))
def test_commands_fail_when_root_is_under_a_regular_file(backend: Backend, tmp_path: Path) -> None:
    root = _under_a_file(tmp_path)
    for args in (["remember", "my locker code is 5512"], ["search", "locker"], ["export"], ["stats"]):
        done = run_cli(backend, root, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        error = done.stderr.strip().splitlines()[-1]
        assert str(root) in error and ("Not a directory" in error or "is a file, not a folder" in error), error
        assert "stored" not in done.stdout and "remembered" not in done.stdout
    assert (tmp_path / "a-file").read_text() == "not a folder"


@pytest.mark.parametrize("backend", backend_params(ALL_BACKENDS))
def test_a_persona_keeps_talking_and_says_nothing_is_kept(
    backend: Backend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ovos_memory_plugins.protocols import StorageStatus

    root = _under_a_file(tmp_path)
    caplog.set_level(logging.ERROR)
    with backend.open(root) as mem:  # a constructor never raises: the host would drop the persona
        assert isinstance(mem, StorageStatus)
        problem = mem.storage_problem
        assert problem is not None and "nothing is being kept" in problem and str(root) in problem
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any(str(root) in e for e in errors), errors
        mem.update_history(
            [
                AgentMessage(role=MessageRole.USER, content="hi"),
                AgentMessage(role=MessageRole.ASSISTANT, content="hey"),
            ],
            "s",
        )
        messages = mem.build_conversation_context("hello again", "s")
        assert messages[-1].content.endswith("hello again")


@pytest.mark.parametrize("backend", backend_params([LEXICAL, NOTES_FILE]))
def test_a_healthy_memory_has_no_storage_problem(backend: Backend, tmp_path: Path) -> None:
    with backend.open(tmp_path / "mem") as mem:
        assert mem.storage_problem is None


def test_a_database_path_that_is_a_folder_fails_every_command(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    (root / "lexical.db").mkdir(parents=True)  # fails as root too
    for args in (["remember", "x y z"], ["search", "x"], ["export"]):
        done = run_cli(LEXICAL, root, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert str(root / "lexical.db") in done.stderr.strip().splitlines()[-1]


def _check(persona: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _RUN_CLI, "check", str(persona), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _persona(tmp_path: Path, backend: Backend, root: Path) -> Path:
    path = tmp_path / "persona.json"
    config = {"name": "ada", "handlers": ["ovos-solver-failure-plugin"], "memory_module": backend.module}
    config[backend.module] = backend.block(root)
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("backend", backend_params([LEXICAL, NOTES_FILE]))
def test_check_reports_a_folder_that_cannot_be_used(backend: Backend, tmp_path: Path) -> None:
    root = _under_a_file(tmp_path)
    done = _check(_persona(tmp_path, backend, root))
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] is False
    assert any(str(root) in p and "is a file, not a folder" in p for p in data["problems"]), data
    assert (tmp_path / "a-file").read_text() == "not a folder"

    other = tmp_path / "other"
    (other / "lexical.db").mkdir(parents=True)
    (other / "history.db").mkdir()
    data = json.loads(_check(_persona(tmp_path, backend, other)).stdout)
    assert data["ok"] is False and any("nothing is being kept" in p for p in data["problems"]), data

    fine = tmp_path / "fine"
    done = _check(_persona(tmp_path, backend, fine))
    assert done.returncode == 0 and json.loads(done.stdout)["ok"] is True, done.stdout + done.stderr


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder the ``nobody`` user can reach (pytest's tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="ovos-memory-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv to run the command as nobody",
)
def test_a_read_only_folder_fails_the_command_as_nobody(shared_folder: Path) -> None:
    root = shared_folder / "mem"
    with LEXICAL.open(root) as mem:
        mem.store("my locker code is 5512", "s")
    for path in root.iterdir():
        path.chmod(0o644)
    root.chmod(0o555)  # read-only for nobody: no -wal, -shm or journal can be made
    home = shared_folder / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "XDG_DATA_HOME": str(home)}
    base = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", _RUN_CLI]
    for args in (["search", "locker"], ["remember", "my bike is blue"]):
        cmd = [*base, *args, "--module", LEXICAL.module, "--root", str(root)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, env=env, cwd=home)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert str(root) in done.stderr.strip().splitlines()[-1], done.stderr
        assert "no memories match" not in done.stdout and "stored" not in done.stdout
