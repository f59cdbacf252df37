"""Bad input gets a clear error or a logged fall-back: never a crash of a constructor (which
makes ovos-persona drop the persona), never silent loss. Every backend, built from a config block.

The cases: a NUL byte in ``root``/``db_path`` (and ``ovos-memory check`` says so); a ``members``
entry that is not an object (only it is dropped); a lone surrogate in a session id (its turns are
kept); ``remember(None)`` (nothing stored); a 10 MB id (refused at once; later deletes stay fast);
rows another process added (the numpy vector path sees them).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trust_helpers import (
    ALL_BACKENDS,
    COMPOSITE,
    VECTOR_NUMPY,
    Backend,
    backend_params,
    every_note,
    files_holding,
    prompt_text,
    run_cli,
)

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.errors import OvosMemoryPluginError
from ovos_memory_plugins.testing import exchange

ARCHIVERS = [b for b in ALL_BACKENDS if b.archives]
DB_PATH = ("LexicalMemory", "VectorMemory")
NOTE_KEEPERS = [b for b in ALL_BACKENDS if b.notes]


# -- NUL bytes in paths ----------------------------------------------------------------------------


#: ``db_path`` is a key of the keyword and vector memories only (the others have several files)
PATH_KEYS = [(b, "root") for b in ALL_BACKENDS] + [(b, "db_path") for b in ALL_BACKENDS if b.cls.__name__ in DB_PATH]


def path_params(skip_sqlite_vec: bool = False) -> list[Any]:
    out = []
    for param in backend_params():
        backend = param.values[0]
        if skip_sqlite_vec and backend.name == "vector-sqlite-vec":
            continue
        for b, key in PATH_KEYS:
            if b is backend:
                out.append(pytest.param(backend, key, id=f"{backend.name}-{key}", marks=param.marks))
    return out


@pytest.mark.parametrize(("backend", "key"), path_params())
def test_a_nul_byte_in_a_path_never_crashes_a_constructor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, backend: Backend, key: str
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    bad = str(tmp_path / "a\x00b")
    caplog.set_level(logging.ERROR)
    with backend.cls({**backend.block(), key: bad}) as mem:  # must not raise
        assert "NUL" in caplog.text or "\\x00" in caplog.text, "the fall-back is logged"
        mem.update_history(exchange("the gate code is 5151", "5151, noted"), "s")
        assert "5151" in prompt_text(mem, "what is the gate code", "s"), "the memory still works"


@pytest.mark.parametrize(("backend", "key"), path_params(skip_sqlite_vec=True))
def test_check_reports_a_nul_byte(tmp_path: Path, backend: Backend, key: str) -> None:
    persona = {"name": "ada", "memory_module": backend.module, backend.module: {**backend.block(), key: "/tmp/a\x00b"}}
    path = tmp_path / "ada.json"
    path.write_text(json.dumps(persona))
    done = _check(path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "NUL" in done.stdout or "\\x00" in done.stdout or "\\u0000" in done.stdout, done.stdout


def _check(path: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from ovos_memory_plugins.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "check", str(path)], capture_output=True, text=True, timeout=120, check=False
    )


# -- members -----------------------------------------------------------------------------------


def test_a_non_object_members_entry_drops_only_itself(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    config = {
        "root": str(tmp_path),
        "members": [
            {"module": "ovos-memory-plugin-lexical"},
            42,
            "ovos-memory-plugin-vector",
            None,
            ["x"],
            {"module": "ovos-memory-plugin-sticky"},
        ],
    }
    with CompositeMemory(config) as mem:
        assert sorted(mem.members) == ["lexical", "sticky"]
        assert all(str(bad) in caplog.text for bad in ("42", "None", "['x']"))
        mem.update_history(exchange("my bike is the red one", "red, noted"), "s")
        assert "red one" in prompt_text(mem, "which bike is mine", "s")


# -- lone surrogates ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backend_params())
def test_a_lone_surrogate_session_keeps_its_turns(tmp_path: Path, backend: Backend) -> None:
    session = "kitchen-\ud800"
    with backend.open(tmp_path / "m", max_history=4) as mem:
        mem.update_history(exchange("the oven timer is 20 minutes", "20 minutes, noted"), session)
        history = [m.content for m in mem.get_history(session)]
        assert history == ["the oven timer is 20 minutes", "20 minutes, noted"]
        assert "oven timer is 20" in prompt_text(mem, "how long is the oven timer", session)
        if backend.archives:
            assert mem.search("oven timer", session_id=session, top_k=3)
    with backend.open(tmp_path / "m", max_history=4) as again:  # after a restart too
        assert [m.content for m in again.get_history(session)][:1] == ["the oven timer is 20 minutes"]
        again.forget_session(session)
        assert again.get_history(session) == []


# -- remember(None) ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backend_params(NOTE_KEEPERS))
def test_remember_none_stores_nothing(tmp_path: Path, backend: Backend) -> None:
    root = tmp_path / "m"
    with backend.open(root) as mem:
        for bad in (None, "", "   ", 42, b"bytes", ["a list"], "!!!"):
            change = mem.remember(bad, session_id="s")
            assert not change and change.status == "refused", (bad, change)
        assert every_note(mem) == []
        assert "None" not in prompt_text(mem, "what do you know about me", "s")
    assert files_holding(root, "None") == []


# -- a 10 MB id ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backend_params(ARCHIVERS))
def test_a_ten_megabyte_id_is_refused_at_once_and_deletes_stay_fast(
    tmp_path: Path, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    huge = "x" * 10_000_000
    with backend.open(tmp_path / "m") as mem:
        kept = mem.store("the lighthouse is red", "s")
        caplog.set_level(logging.WARNING)
        calls: list[Callable[[], Any]] = [
            lambda: mem.store("text", huge),
            lambda: mem.delete([huge]),
            lambda: mem.forget_session(huge),
        ]
        for call in calls:
            caplog.clear()
            start = time.monotonic()
            try:
                result = call()
            except (ValueError, OvosMemoryPluginError) as exc:  # a clear error ...
                assert "at most" in str(exc)
            else:  # ... or (the composite, fanning out) nothing done and a log line saying why
                assert not result and "at most" in caplog.text, result
            # generous bounds on a shared 2-core machine: the bug they catch (the id written,
            # then every later statement scanning 10 MB) costs far more than these
            assert time.monotonic() - start < 5.0
        start = time.monotonic()
        mem.update_history(exchange("a question", "an answer"), huge)  # never raises: logged, dropped
        mem.build_conversation_context("a question", huge)
        assert time.monotonic() - start < 10.0
        for i in range(20):
            mem.store(f"filler {i} about herons", "s")
        start = time.monotonic()
        assert mem.delete([kept]) == 1
        assert mem.delete(["no-such-id"]) == 0
        assert time.monotonic() - start < 3.0, "later deletes stay fast"
    assert files_holding(tmp_path / "m", "x" * 1000) == [], "the huge id was written nowhere"


# -- another process's rows ------------------------------------------------------------------------

_ADD = """
import json, sys
from ovos_memory_plugins.vector import VectorMemory
with VectorMemory(json.loads(sys.argv[1])) as mem:
    mem.store("the windmill is blue", "s")
"""


def test_the_numpy_vector_path_sees_rows_another_process_added(tmp_path: Path) -> None:
    block = VECTOR_NUMPY.block(tmp_path / "m")
    with VECTOR_NUMPY.open(tmp_path / "m") as mem:
        mem.store("the lighthouse is red", "s")
        assert mem.search("lighthouse", top_k=1)  # the RAM matrix is loaded now
        done = subprocess.run(
            [sys.executable, "-c", _ADD, json.dumps(block)], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        assert [h.content for h in mem.search("windmill blue", top_k=1)] == ["the windmill is blue"]
        assert "windmill is blue" in prompt_text(mem, "what colour is the windmill", "t")


def test_a_composite_member_sees_rows_another_process_added(tmp_path: Path) -> None:
    with COMPOSITE.open(tmp_path / "m") as mem:
        mem.store("the lighthouse is red", "s")
        assert mem.search("lighthouse", top_k=1)
        done = run_cli(COMPOSITE, tmp_path / "m", "remember", "--document", "the windmill is blue")
        assert done.returncode == 0, done.stderr
        assert "windmill is blue" in prompt_text(mem, "what colour is the windmill", "t")
