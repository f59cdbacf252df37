"""Shared parts of the end-to-end trust proofs (docs/reliability.md) (not fixtures: plain functions).

Every backend of the package, built the way a persona JSON builds it (a config block, no test
seams), so the same table drives the forget, namespace and many-process proofs; a byte scanner
for everything under a folder; and a way to run the ``ovos-memory`` command in a subprocess.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory
from ovos_memory_plugins.storage.sqlite.engine import open_database
from ovos_memory_plugins.vector import VectorMemory


def sqlite_vec_loads() -> bool:
    """Whether a sqlite3 module here can load the sqlite-vec extension."""
    db, ext = open_database(":memory:", True)
    db.close()
    return ext is not None


@dataclass(frozen=True)
class Backend:
    """One memory plugin as a persona configures it.

    Attributes:
        name: the test id.
        module: the entry-point name (for the command and the persona).
        config: the plugin's block, without ``root``/``namespace``.
        archives: whether exchanges become searchable documents.
        notes: whether it keeps notes (the NotesKeeper verbs).
        sticky_asks: whether a "remember that …" utterance becomes a note in the turn.
    """

    name: str
    module: str
    config: dict[str, Any] = field(default_factory=dict)
    archives: bool = True
    notes: bool = False
    sticky_asks: bool = False

    @property
    def cls(self) -> type[Any]:
        return _CLASSES[self.module]

    def block(self, root: Path | str | None = None, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
        """The config block with ``root`` and ``namespace`` where given."""
        out: dict[str, Any] = json.loads(json.dumps(self.config))
        if root is not None:
            out["root"] = str(root)
        if namespace is not None:
            out["namespace"] = namespace
        out.update(extra)
        return out

    def open(self, root: Path | str | None = None, namespace: str | None = None, **extra: Any) -> Any:
        """A new instance, built from the config block alone (as the host builds it)."""
        return self.cls(self.block(root, namespace, **extra))


_CLASSES: dict[str, type[Any]] = {
    "ovos-memory-plugin-lexical": LexicalMemory,
    "ovos-memory-plugin-vector": VectorMemory,
    "ovos-memory-plugin-notes": NotesMemory,
    "ovos-memory-plugin-sticky": StickyMemory,
    "ovos-memory-plugin-composite": CompositeMemory,
}

LEXICAL = Backend("lexical", "ovos-memory-plugin-lexical")
VECTOR_NUMPY = Backend(
    "vector-numpy",
    "ovos-memory-plugin-vector",
    {"embedder": "hash", "hybrid": True, "vector_search": "numpy", "background_reembed": False},
)
VECTOR_SQLITE_VEC = Backend(
    "vector-sqlite-vec",
    "ovos-memory-plugin-vector",
    {"embedder": "hash", "hybrid": True, "vector_search": "sqlite-vec", "background_reembed": False},
)
NOTES_FILE = Backend("notes-file", "ovos-memory-plugin-notes", {"store": "file"}, notes=True)
NOTES_SQLITE = Backend("notes-sqlite", "ovos-memory-plugin-notes", {"store": "sqlite"}, notes=True)
STICKY = Backend("sticky", "ovos-memory-plugin-sticky", {}, archives=False, notes=True, sticky_asks=True)
COMPOSITE = Backend(
    "composite",
    "ovos-memory-plugin-composite",
    {
        "members": [
            {"module": "ovos-memory-plugin-lexical"},
            {
                "module": "ovos-memory-plugin-vector",
                "config": {"embedder": "hash", "hybrid": False, "background_reembed": False},
            },
            {"module": "ovos-memory-plugin-notes", "config": {"store": "sqlite"}},
            {"module": "ovos-memory-plugin-sticky"},
        ]
    },
    notes=True,
    sticky_asks=True,
)

#: Every backend and every storage path of this package.
ALL_BACKENDS: list[Backend] = [
    LEXICAL,
    VECTOR_NUMPY,
    VECTOR_SQLITE_VEC,
    NOTES_FILE,
    NOTES_SQLITE,
    STICKY,
    COMPOSITE,
]


def backend_params(backends: Iterable[Backend] = ALL_BACKENDS) -> list[Any]:
    """``pytest.param`` per backend, the sqlite-vec one skipped (with the reason) where no
    sqlite3 module can load extensions."""
    import pytest

    out = []
    vec = sqlite_vec_loads()
    for b in backends:
        marks = []
        if b is VECTOR_SQLITE_VEC and not vec:
            marks.append(pytest.mark.skipif(True, reason="no sqlite3 module here can load sqlite-vec"))
        out.append(pytest.param(b, id=b.name, marks=marks))
    return out


# -- bytes ---------------------------------------------------------------------------------------


def byte_forms(word: str) -> list[bytes]:
    """``word`` as it may sit in a file: UTF-8 and UTF-16 (both byte orders), in its own case,
    lower case and upper case (tokenizers fold case)."""
    out: list[bytes] = []
    for form in dict.fromkeys([word, word.lower(), word.upper()]):
        for enc in ("utf-8", "utf-16-le", "utf-16-be"):
            out.append(form.encode(enc))
    return out


def files_holding(root: Path, *words: str) -> list[str]:
    """Every file under ``root`` (hidden ones, -wal, -shm, backups, undo snapshots and temp
    files included) whose bytes hold any of ``words`` in any form of :func:`byte_forms`."""
    forms = [f for w in words for f in byte_forms(w)]
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(f in data for f in forms):
                found.append(str(path.relative_to(root)))
    return found


def all_files(root: Path) -> list[str]:
    """Every file under ``root``, relative (for messages)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# -- prompts -------------------------------------------------------------------------------------


def prompt_text(mem: Any, utterance: str, session_id: str) -> str:
    """Everything a turn sends the model but the utterance itself (the last message)."""
    messages = mem.build_conversation_context(utterance, session_id)
    assert messages[-1].content == utterance or utterance in messages[-1].content
    earlier = [m.content for m in messages[:-1]]
    last = messages[-1].content.replace(utterance, "")
    return "\n".join([*earlier, last])


# -- the command ---------------------------------------------------------------------------------

_RUN_CLI = "import sys; from ovos_memory_plugins.cli import main; sys.exit(main(sys.argv[1:]))"


def run_cli(
    backend: Backend, root: Path, *args: str, namespace: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``ovos-memory <args> --module M --config <block> --root R`` in a new process."""
    config = backend.block()
    cmd = [sys.executable, "-c", _RUN_CLI, *args, "--module", backend.module, "--config", json.dumps(config)]
    cmd += ["--root", str(root)]
    if namespace:
        cmd += ["--namespace", namespace]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def wait_for(check: Callable[[], bool], timeout: float = 10.0, step: float = 0.02) -> bool:
    """Poll ``check`` until true or ``timeout``; return its last answer."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(step)
    return check()


# -- the editor ----------------------------------------------------------------------------------


def editor_call(server: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request to a running :class:`~ovos_memory_plugins.editor.EditorServer`, with its
    token and Host header, as the page sends it; returns (status, parsed JSON or text)."""
    from test_editor_http import request

    return request(server, method, path, body, timeout=30)


def every_note(mem: Any) -> list[Any]:
    """The notes of ``mem`` (active and retired) and, for a composite, of every member that keeps
    notes (each member's own listing, whatever the composite merges)."""
    out = list(mem.list_notes(include_retired=True)) if callable(getattr(mem, "list_notes", None)) else []
    for member in getattr(mem, "members", {}).values():
        if callable(getattr(member, "list_notes", None)):
            out += [n for n in member.list_notes(include_retired=True) if n not in out]
    return out


def digest_forms(*texts: str) -> list[bytes]:
    """SHA-256 digests of ``texts`` as a content-hash cache may key them (hex and raw bytes):
    a digest of a short secret can be confirmed by guessing, so it must go with the text."""
    import hashlib

    out: list[bytes] = []
    for text in texts:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
        out += [digest.hexdigest().encode(), digest.digest()]
    return out


def files_holding_bytes(root: Path, needles: Iterable[bytes]) -> list[str]:
    """Every file under ``root`` whose bytes hold any of ``needles`` exactly."""
    wanted = list(needles)
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and any(n in p.read_bytes() for n in wanted)
    )


#: Low-signal exchanges (the summary skips them; admission does not archive them).
_FILLER = (("ok thanks", "You're welcome."), ("thanks", "Sure."))


def prime_summary(mem: Any, session: str, exchanges: int = 16) -> None:
    """Give ``session`` a stored summary row before a test's own turns: the lazy fold writes the
    row when the history trims (at ``max_history`` 2, after 16 exchanges); these exchanges are
    low-signal, so the summary's text is what the test's own turns make it."""
    for i in range(exchanges):
        user, assistant = _FILLER[i % 2]
        mem.update_history([{"role": "user", "content": user}, {"role": "assistant", "content": assistant}], session)


# -- on PostgreSQL ----------------------------------------------------------------------------


def on_postgres(backend: Backend, url: str, namespace: str) -> Backend:
    """``backend`` with its block on the database ``url`` under ``namespace``."""
    config = {k: v for k, v in backend.config.items() if k != "vector_search"}
    return dataclasses.replace(backend, config={**config, "database": url, "namespace": namespace})


#: Column types whose values are text a memory wrote (what :func:`rows_of` reads).
_TEXT_TYPES = frozenset({"text", "character varying", "character", "json", "jsonb", "tsvector"})


def rows_of(url: str, namespace: str, word: str) -> dict[str, int]:
    """Rows of every table of the database that belong to ``namespace`` (or a member's
    ``<namespace>.<member>``) and hold ``word`` in a text column, by table.

    Only text columns are read (text, JSON, ``tsvector``, text arrays): a number column (a
    ``created`` of ``1796295512.41``) or a vector spells digits by chance, and a canary of digits
    only would be "found" there once in a few hundred runs."""
    import psycopg

    out: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        columns: dict[str, list[str]] = {}
        for table, column, data_type, udt in conn.execute(
            "SELECT table_name, column_name, data_type, udt_name FROM information_schema.columns"
            " WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        ):
            if data_type in _TEXT_TYPES or (data_type == "ARRAY" and udt in ("_text", "_varchar")):
                columns.setdefault(table, []).append(column)
        for table, names in columns.items():
            if "namespace" not in names or len(names) == 1:
                continue
            quoted = '"' + table.replace('"', '""') + '"'
            text = "concat_ws(' ', " + ", ".join(f'"{c}"::text' for c in names if c != "namespace") + ")"
            row = conn.execute(
                f"SELECT count(*) FROM {quoted} AS t WHERE (t.namespace = %s OR t.namespace LIKE %s)"
                f" AND lower({text}) LIKE lower(%s)",
                (namespace, namespace + ".%", f"%{word}%"),
            ).fetchone()
            if row and row[0]:
                out[table] = int(row[0])
    return out
