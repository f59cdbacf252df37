"""Files of earlier releases the SQLite engine takes in: the file earlier releases shared
between namespaces (:func:`adopt_shared_file`, copied to a namespace's own place), and separate
files whose rows move into a memory's file (:func:`import_legacy_file`: ``keyword/lexical.db``
of a hybrid vector memory, a ``history.db`` next to it), deleted once copied. (Tables of
earlier releases inside the file itself are migrations: :mod:`ovos_memory_plugins.storage.sqlite.schema`.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.storage.sqlite.database import Migration
from ovos_memory_plugins.storage.sqlite.schema import table_columns

if TYPE_CHECKING:
    from ovos_memory_plugins.storage.sqlite.engine import SqliteStorage

LOG = logging.getLogger("ovos_memory_plugins.storage.sqlite.engine")  # the name its records always had

__all__ = ["adopt_shared_file", "import_legacy_file"]


def _read_legacy(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of an earlier release's file worth keeping (read-only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        out: dict[str, list[tuple[Any, ...]]] = {}
        if "lexical_docs" in tables:
            out["documents"] = [
                tuple(r)
                for r in conn.execute(
                    "SELECT doc_id, session_id, content, metadata, created FROM lexical_docs ORDER BY rowid"
                )
            ]
        if "history" in tables:
            out["history"] = [
                tuple(r) for r in conn.execute("SELECT session_id, role, content, created FROM history ORDER BY id")
            ]
        if "sessions" in tables:
            out["sessions"] = [tuple(r) for r in conn.execute("SELECT session_id, last_exchange_id FROM sessions")]
        if "documents" in tables and "content" not in table_columns(conn, "documents"):
            out["catalogue"] = [
                tuple(r) for r in conn.execute("SELECT doc_id, session_id, metadata, created FROM documents")
            ]
        return out
    finally:
        conn.close()


def _current_memory(path: Path) -> bool:
    """Whether ``path`` is a memory database of this release (its schema is the store ``memory``)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = '_migrations'").fetchone():
            return False
        return bool(conn.execute("SELECT 1 FROM _migrations WHERE store = 'memory' LIMIT 1").fetchone())
    finally:
        conn.close()


def _remove_file(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(str(path) + suffix)


def import_legacy_file(storage: SqliteStorage, path: Path) -> int:
    """Copy the documents and history of an earlier release's separate file into ``storage``,
    once (recorded as a migration of the store ``legacy``), then delete the old file.

    Handles ``keyword/lexical.db`` (the hybrid's old keyword arm: its documents, with text) and
    ``history.db`` (history, exchange chains, catalogue). Nothing is deleted before the copy
    is committed; a document already present keeps the stored version. Returns how many rows
    were copied.
    """
    db = storage.db
    name = f"import:{path.name}:{path.parent.name}"
    if not path.exists() or name in db.applied("legacy"):
        if path.exists() and name in db.applied("legacy"):
            _remove_file(path)
        return 0
    try:
        if _current_memory(path):  # another memory's database of this release (sticky notes, notes): not ours
            LOG.info("storage: %s is another memory's database, not an earlier release's file; left alone", path)
            return 0
        rows = _read_legacy(path)
    except sqlite3.Error as exc:
        LOG.error("storage: cannot read the earlier file %s (%s); it is left in place", path, exc)
        return 0
    copied = 0

    def apply(conn: sqlite3.Connection) -> None:
        nonlocal copied
        for doc_id, session_id, content, metadata, created in rows.get("documents", []):
            copied += conn.execute(
                "INSERT OR IGNORE INTO documents (doc_id, session_id, content, metadata, created)"
                " VALUES (?, ?, ?, ?, ?)",
                (doc_id, session_id, content, metadata, created),
            ).rowcount
        for doc_id, session_id, metadata, created in rows.get("catalogue", []):
            copied += conn.execute(
                "INSERT OR IGNORE INTO documents (doc_id, session_id, content, metadata, created)"
                " VALUES (?, ?, '', ?, ?)",
                (doc_id, session_id, metadata, created),
            ).rowcount
        history = rows.get("history", [])
        if history:
            # earlier history first, so the newest messages stay the newest
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS _keep AS SELECT * FROM history WHERE 0")
            conn.execute("DELETE FROM temp._keep")
            conn.execute("INSERT INTO temp._keep SELECT * FROM history")
            conn.execute("DELETE FROM history")
            conn.executemany("INSERT INTO history (session_id, role, content, created) VALUES (?, ?, ?, ?)", history)
            cols = ", ".join(c for c in table_columns(conn, "history") if c != "id")
            conn.execute(f"INSERT INTO history ({cols}) SELECT {cols} FROM temp._keep ORDER BY id")
            conn.execute("DROP TABLE temp._keep")
            copied += len(history)
        for session_id, last in rows.get("sessions", []):
            conn.execute(
                "INSERT OR IGNORE INTO sessions (session_id, last_exchange_id) VALUES (?, ?)", (session_id, last)
            )

    db.migrate("legacy", [Migration(name, apply)])
    LOG.warning(
        "storage: copied %d row(s) of the earlier file %s into %s; deleting the old file", copied, path, db.path
    )
    _remove_file(path)
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # keyword/ when empty
    return copied


def adopt_shared_file(shared: Path, target: Path) -> bool:
    """Give a namespace its own copy of the file earlier releases shared under one ``root``.

    Earlier releases put ``{"root": R, "namespace": "ava"}`` and ``{"root": R, "namespace":
    "bob"}`` in the same ``R/<file>``; now each namespace has ``R/<namespace>/<file>``. The
    first time a namespace opens and its file does not exist yet, the shared file is copied
    (SQLite's backup API, consistent even while another process writes it) to the new place:
    the persona keeps every memory it could see before, and nothing is lost. The shared file
    stays where it is (it is still what a config without a namespace opens); a WARNING says so,
    once per namespace. Safe with many processes: the copy is linked into place only if no
    other process got there first.
    """
    if target.exists() or not shared.is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.adopt-{os.getpid()}-{time.monotonic_ns()}")
    try:
        source = sqlite3.connect(f"file:{shared}?mode=ro", uri=True)
        try:
            copy = sqlite3.connect(temp)
            try:
                source.backup(copy)
            finally:
                copy.close()
        finally:
            source.close()
        try:
            os.link(temp, target)
        except FileExistsError:
            return False
    except sqlite3.Error as exc:
        LOG.error("storage: cannot copy the shared file %s to %s (%s); starting empty", shared, target, exc)
        return False
    finally:
        _remove_file(temp)
    LOG.warning(
        "storage: %s was shared by every namespace under one root in earlier releases; copied it to %s "
        "for this namespace (nothing is lost). The shared file stays in place; delete it once every "
        "persona that used it has opened its own copy.",
        shared,
        target,
    )
    return True
