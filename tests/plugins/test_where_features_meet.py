"""Issue 27, item 8: the smaller promises that broke where features meet, each on real parts.

* another program's SQLite file named as ``db_path`` is refused, never adopted;
* an identical exchange said twice comes back once from ``search()``, on every backend;
* read-only commands write nothing, whatever ``--module`` says; after ``migrate --to DIR`` the
  notes are where the same memory with ``"root": DIR`` keeps them.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trust_helpers import (
    ALL_BACKENDS,
    LEXICAL,
    NOTES_FILE,
    VECTOR_NUMPY,
    Backend,
    backend_params,
    run_cli,
)

from ovos_memory_plugins.embedders import OPMEmbedder
from ovos_memory_plugins.fakes import Delay, ScriptedOpenAIServer
from ovos_memory_plugins.guard import DeadlineExceeded, ServiceUnavailable
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.testing import exchange
from ovos_memory_plugins.vector import VectorMemory

#: our files' SQLite application_id ("OMEM"), as storage/sqlite/database.py sets it
APPLICATION_ID = 0x4F4D454D


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def table_names(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def application_id(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("PRAGMA application_id").fetchone()[0])
    finally:
        conn.close()


# -- another program's database ------------------------------------------------------------------


def foreign_file(path: Path, *, app_id: int = 0, tables: bool = True) -> Path:
    """Another program's SQLite file: a table of its own (or only its application_id)."""
    conn = sqlite3.connect(path)
    if app_id:
        conn.execute(f"PRAGMA application_id = {app_id}")
    if tables:
        conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
        conn.execute("INSERT INTO accounts (owner) VALUES ('somebody else')")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    ("app_id", "tables"),
    [(0, True), (0x5A5A5A5A, False), (0x5A5A5A5A, True)],
    ids=["tables-of-its-own", "foreign-application-id", "both"],
)
@pytest.mark.parametrize("cls", [LexicalMemory, VectorMemory], ids=["lexical", "vector"])
def test_another_programs_database_is_refused_and_left_untouched(
    tmp_path: Path, cls: type[Any], app_id: int, tables: bool
) -> None:
    path = foreign_file(tmp_path / "their.db", app_id=app_id, tables=tables)
    before, names = digest(path), table_names(path)
    config: dict[str, Any] = {"db_path": str(path)}
    if cls is VectorMemory:
        config.update(embedder="hash", background_reembed=False)
    mem = cls(config)
    try:
        reason = mem.stats()["storage"]["problem"]
        assert reason and "not a memory database of ovos-memory-plugins" in reason and str(path) in reason
        assert mem.storage_problem and "nothing is being kept" in mem.storage_problem  # declared, as for any folder
        mem.update_history([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "s")
    finally:
        mem.close()
    assert table_names(path) == names, "tables were added to another program's database"
    assert digest(path) == before, "another program's database was changed"


def test_the_command_names_the_file_and_changes_nothing(tmp_path: Path) -> None:
    path = foreign_file(tmp_path / "their.db")
    before = digest(path)
    backend = Backend("lexical-db-path", LEXICAL.module, {"db_path": str(path)})
    done = run_cli(backend, tmp_path / "m", "remember", "--document", "the spare key is under the flowerpot")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"{path} is not a memory database of ovos-memory-plugins" in done.stderr, done.stderr
    assert "accounts" in done.stderr and "Traceback" not in done.stderr
    assert digest(path) == before


def test_our_files_are_marked_and_our_earlier_unmarked_files_still_open(tmp_path: Path) -> None:
    mem = LexicalMemory({"root": str(tmp_path / "new")})
    mem.store("the boiler was serviced in May", session_id="s")
    mem.close()
    new = tmp_path / "new" / "lexical.db"
    assert application_id(new) == APPLICATION_ID

    # a file of an earlier release: our tables, no application_id yet
    old = tmp_path / "old" / "lexical.db"
    old.parent.mkdir()
    conn = sqlite3.connect(old)
    conn.execute(
        "CREATE TABLE _migrations (store TEXT NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL,"
        " PRIMARY KEY (store, name))"
    )
    conn.commit()
    conn.close()
    mem = LexicalMemory({"root": str(tmp_path / "old")})
    try:
        assert mem.stats()["storage"]["problem"] is None
        mem.store("the boiler was serviced in May", session_id="s")
        assert mem.search("boiler", top_k=3)
    finally:
        mem.close()
    assert application_id(old) == APPLICATION_ID


# -- a hung embedding server, with the defaults --------------------------------------------------

#: a voice turn's whole budget: the context before the reply, the record after it
VOICE_TURN_S = 3.0


def test_a_hung_embedding_server_costs_a_voice_turn_under_three_seconds_with_defaults(tmp_path: Path) -> None:
    """Only ``model`` and ``base_url`` configured: every deadline is the package's default."""
    with ScriptedOpenAIServer() as server:
        server.queue_embeddings(*(Delay(60.0) for _ in range(20)))
        embedder = {"type": "openai", "model": "m", "base_url": server.base_url}
        mem = VectorMemory({"root": str(tmp_path), "embedder": embedder})
        try:
            turns = []
            for i in range(3):
                start = time.monotonic()
                messages = mem.build_conversation_context(f"where did I put the spare key {i}", "s")
                mem.update_history(exchange(f"where did I put the spare key {i}", "Under the pot."), "s")
                turns.append(time.monotonic() - start)
                assert messages[-1].content == f"where did I put the spare key {i}"
            assert turns[0] <= VOICE_TURN_S, turns
            assert all(t < 0.5 for t in turns[1:]), turns
        finally:
            start = time.monotonic()
            mem.close()
            assert time.monotonic() - start < 1.0


# -- read-only commands write nothing --------------------------------------------------------------

READ_ONLY = [["search", "spare key"], ["stats"], ["export"]]


def listing(root: Path) -> dict[str, str]:
    """Every file under ``root`` (hidden ones, -wal and -shm included) with its SHA-256."""
    return {str(p.relative_to(root)): digest(p) for p in sorted(root.rglob("*")) if p.is_file()}


def folder_of(backend: Backend, root: Path) -> None:
    mem = backend.open(root)
    try:
        mem.update_history(exchange("where is the spare key", "Under the blue flower pot."), "s")
        if backend.notes:
            mem.remember("the spare key is under the blue flower pot", session_id="s")
    finally:
        mem.close()


@pytest.mark.parametrize("backend", backend_params())
def test_a_read_only_command_with_the_wrong_module_writes_nothing(tmp_path: Path, backend: Backend) -> None:
    """A folder kept by one backend, read with another's ``--module``: exit 1, naming the
    folder; not one file created or changed."""
    owner = LEXICAL if backend.module != LEXICAL.module else VECTOR_NUMPY
    root = tmp_path / "m"
    folder_of(owner, root)
    before = listing(root)
    commands = [*READ_ONLY, ["notes"]] if backend.notes else READ_ONLY
    for argv in commands:
        done = run_cli(backend, root, *argv)
        assert done.returncode == 1, (argv, done.stdout, done.stderr)
        assert f"no {backend.module} memory in {root}" in done.stderr and "nothing was created" in done.stderr
        assert listing(root) == before, f"{argv} with --module {backend.module} wrote into {owner.name}'s folder"


@pytest.mark.parametrize("backend", backend_params())
def test_a_read_only_command_with_the_right_module_writes_nothing(tmp_path: Path, backend: Backend) -> None:
    root = tmp_path / "m"
    folder_of(backend, root)
    before = listing(root)
    for argv in [*READ_ONLY, ["notes"]] if backend.notes else READ_ONLY:
        done = run_cli(backend, root, *argv)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        assert "warning" not in done.stderr, (argv, done.stderr)
        assert listing(root) == before, f"{argv} changed {sorted(set(listing(root).items()) ^ set(before.items()))}"


def test_notes_after_migrate_to_a_folder_are_where_that_folder_keeps_them(tmp_path: Path) -> None:
    """``migrate --to DIR`` of a notes memory with ``MEMORY.md``: the first ``notes`` on DIR
    lists them, warns of nothing and writes nothing."""
    source, target = tmp_path / "a", tmp_path / "b"
    folder_of(NOTES_FILE, source)
    done = run_cli(NOTES_FILE, source, "migrate", "--to", str(target))
    assert done.returncode == 0, done.stderr
    before = listing(target)
    assert "MEMORY.md" in before, f"the notes of a file store belong in {target}/MEMORY.md: {sorted(before)}"
    done = run_cli(NOTES_FILE, target, "notes")
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert "the spare key is under the blue flower pot" in done.stdout
    assert listing(target) == before
    mem = NOTES_FILE.open(target)
    try:
        assert [n.text for n in mem.list_notes()] == ["the spare key is under the blue flower pot"]
    finally:
        mem.close()


# -- a full disk ------------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs (root only: skipped, with the reason, elsewhere)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Write a file until the disk has not one byte left."""
    with contextlib.suppress(OSError), open(disk / "filler", "wb", buffering=0) as f:
        while True:
            f.write(b"x" * 1024)


def open_files_under(folder: Path) -> list[str]:
    """The files this process holds open under ``folder`` (``/proc/self/fd``)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(folder)):
                out.append(target)
    return sorted(out)


@pytest.mark.parametrize("when", ["before-open", "while-open"])
@pytest.mark.parametrize("backend", backend_params())
def test_close_releases_every_file_after_a_full_disk(small_disk: Path, backend: Backend, when: str) -> None:
    """Opened on a full disk, or filled while open; used; closed: ``close()`` returns (a
    failure inside is logged) and not one file under the disk is still open afterwards, without
    the garbage collector's help."""
    root = small_disk / "m"
    gc.collect()
    gc.disable()
    try:
        if when == "before-open":
            fill(small_disk)
        mem = backend.open(root)
        try:
            if when == "while-open":
                mem.update_history(exchange("hello there", "Hi."), "s")
                fill(small_disk)
            for i in range(5):
                mem.build_conversation_context(f"where is the spare key {i}", "s")
                mem.update_history(exchange(f"where is the spare key {i} " + "pot " * 300, "Under it. " * 100), "s")
                if backend.notes:
                    with contextlib.suppress(Exception):
                        mem.remember(f"the spare key {i} is under the blue flower pot", session_id="s")
        finally:
            mem.close()
        assert open_files_under(small_disk) == [], "files still open after close()"
    finally:
        gc.enable()


# -- an exchange said again --------------------------------------------------------------------------


def said_twice(mem: Any) -> list[Any]:
    """The same exchange said twice in one session, other turns between (each time a new id:
    ids chain on the exchange before), then searched."""
    for text in ("what is the wifi password", "how is the weather", "what is the wifi password", "tell me a joke"):
        answer = {"what is the wifi password": "It is tangerine42.", "how is the weather": "Sunny."}.get(text, "No.")
        mem.build_conversation_context(text, "s")
        mem.update_history(exchange(text, answer), "s")
    return [h for h in mem.search("wifi password tangerine42", top_k=10) if "tangerine42" in h.content]


@pytest.mark.parametrize("backend", backend_params([b for b in ALL_BACKENDS if b.archives]))
def test_an_exchange_said_twice_is_found_once(tmp_path: Path, backend: Backend) -> None:
    mem = backend.open(tmp_path / "m")
    try:
        assert len(said_twice(mem)) == 1
        assert len([h for h in mem.search("wifi password", "s", 10) if "tangerine42" in h.content]) == 1
    finally:
        mem.close()


@pytest.mark.parametrize("cls", [LexicalMemory, VectorMemory], ids=["lexical", "vector"])
def test_an_exchange_said_twice_is_found_once_on_postgres(postgres_url: str, cls: type[Any]) -> None:
    extra: dict[str, Any] = {"embedder": "hash", "hybrid": True} if cls is VectorMemory else {}
    mem = cls({"database": postgres_url, "namespace": f"said-twice-{cls.__name__.lower()}", **extra})
    try:
        mem.forget_all()
        assert len(said_twice(mem)) == 1
    finally:
        mem.close()


def test_a_hung_opm_embeddings_plugin_costs_a_query_its_own_deadline() -> None:
    """An OPM text-embeddings plugin that never returns: a query gives up at ``query_timeout``
    (1.5 s by default), not at the documents' ``timeout`` (10 s)."""
    release = threading.Event()

    class Hung:
        def get_embeddings(self, text: str) -> list[float]:
            release.wait(30)
            return [1.0, 0.0]

    embedder = OPMEmbedder("hung-plugin", plugin=Hung())
    try:
        start = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            embedder.embed_queries(["where is the spare key"])
        assert time.monotonic() - start < 2.5
        with pytest.raises(ServiceUnavailable):  # then the back-off: at once
            embedder.embed(["a document"])
    finally:
        release.set()
