"""Where durable notes live: ``MEMORY.md`` (human-editable) or tables of the memory's own database.

A note is one fact with the month it was learned and the session it was learned in
(:class:`~ovos_memory_plugins.protocols.Note`, whose id is derived from its words). Stores only
load and save lists of notes, keep retired ones and forget for real; normalisation, dedup and
the prompt budget are the plugin's business (:mod:`ovos_memory_plugins.notes`).

Every store implements :class:`NotesStore`:

* :class:`FileNotesStore`: ``<root>/MEMORY.md``, one ``- [YYYY-MM] fact`` line per note; the
  session each note was learned in is kept beside it in ``<root>/.MEMORY.sessions.json`` (note
  id -> session id, no words), so the file stays plain for people to edit.
  Lines that are not bullets (headings, blank lines, comments) are ignored on load; a bullet
  without a date is a note with an unknown date. A bullet whose leading ``[...]`` is not a
  ``YYYY-MM`` (or ``YYYY-MM-DD``) date, or a file that is not UTF-8, cannot be parsed:
  :class:`~ovos_memory_plugins.errors.CorruptFileError` names the line, and the file is left
  untouched (the store refuses to write over it). Writes are atomic: a temporary file in the
  same folder, fsync, rename, fsync of the folder, so a crash leaves the old or the new file.
  Retired notes go to ``<root>/RETIRED.md`` as ``- [YYYY-MM retired YYYY-MM-DD] fact``.
* :class:`DatabaseNotesStore` (``SQLiteNotesStore`` is its earlier name): the table
  ``memory_notes`` in the memory's own database, SQLite or PostgreSQL (the database the base
  opens: documents, indexes, history), the same statements on both through
  :class:`TableAccess`; no cap; retired notes keep their dates and can be restored; full-text
  search over active and retired notes over :func:`~ovos_memory_plugins.text.tokenize` terms
  (FTS5 on SQLite, a GIN-indexed ``tsvector`` on PostgreSQL), so CJK text is searchable. Every
  SQLite connection runs with ``secure_delete``; after a note is deleted the full-text index is
  rebuilt and the WAL truncated, so no forgotten word is left in any file (PostgreSQL: VACUUM).

Earlier releases kept the SQLite store in ``<root>/notes.db``: :func:`import_notes_file` copies
it into the memory's database once and renames it ``notes.db.moved`` after the copy committed.
:func:`move_notes` copies every note, active and retired, from one store to another.
:func:`adopt_notes` (``Storage.notes_store``) opens the notes of a memory after moving in what
earlier releases and the other store kind left, so no plugin opens a database for its notes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from ovos_memory_plugins.errors import CorruptFileError, StorageError
from ovos_memory_plugins.storage.records import NewNote, Note, note_id, words_key
from ovos_memory_plugins.storage.sqlite.database import Database, Migration, fts5_available, quote_fts_phrase
from ovos_memory_plugins.storage.tables import TableAccess, scrub_lines, truncate_wal

try:  # POSIX advisory locks keep two processes from interleaving read-modify-write cycles
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOG = logging.getLogger(__name__)
_T = TypeVar("_T")

__all__ = [
    "FILE_HEADER",
    "DatabaseNotesStore",
    "FileNotesStore",
    "FileRewrites",
    "NotesShelf",
    "NotesStore",
    "Rewrites",
    "SQLiteNotesStore",
    "TableAccess",
    "adopt_notes",
    "format_note",
    "import_notes_file",
    "make_note",
    "move_aside",
    "move_in_notes",
    "move_notes",
    "notes_store_for",
    "parse_notes",
    "prompt_line",
    "rewrites_for",
    "truncate_wal",
]

FILE_HEADER = (
    "# Memory\n\n"
    "<!-- One durable fact per line: `- [YYYY-MM] fact`. You may edit this file; lines that are\n"
    "     not bullets are ignored and are not kept when the memory rewrites the file. -->\n\n"
)
RETIRED_HEADER = "# Retired notes\n\n<!-- Facts that stopped being true: `- [YYYY-MM retired YYYY-MM-DD] fact`. -->\n\n"

_BULLET = re.compile(r"^\s*[-*]\s+(.*?)\s*$")
_DATED = re.compile(r"^\[([^\]]*)\]\s*(.*)$")
_DATE = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?$")
_RETIRED_DATE = re.compile(
    r"^(\d{4}-(?:0[1-9]|1[0-2])|)\s*retired\s+(\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))$"
)


def make_note(text: str, date: str = "", *, session_id: str = "", retired_on: str | None = None) -> Note:
    """A :class:`Note` whose id is derived from ``text``."""
    return Note(id=note_id(text), text=text, date=date, session_id=session_id, retired_on=retired_on)


def prompt_line(note: Note) -> str:
    """The line a note is shown as in a prompt: ``- [YYYY-MM] fact`` (no session, no retirement)."""
    return f"- [{note.date}] {note.text}" if note.date else f"- {note.text}"


def format_note(note: Note) -> str:
    """The ``MEMORY.md`` line of a note (``RETIRED.md`` form when it is retired)."""
    if note.retired_on:
        return f"- [{note.date + ' ' if note.date else ''}retired {note.retired_on}] {note.text}"
    return prompt_line(note)


def parse_notes(body: str, *, source: str = "<text>", retired: bool = False) -> list[Note]:
    """The notes in a ``MEMORY.md`` body (or ``RETIRED.md`` with ``retired=True``).

    Raises :class:`CorruptFileError` naming ``source`` and the line when a bullet's leading
    ``[...]`` is not a date.
    """
    notes: list[Note] = []
    for number, line in enumerate(body.splitlines(), start=1):
        match = _BULLET.match(line)
        if not match or not match.group(1):
            continue
        content = match.group(1)
        dated = _DATED.match(content)
        date, retired_on = "", None
        if dated:
            label, content = dated.group(1).strip(), dated.group(2).strip()
            if retired:
                rmatch = _RETIRED_DATE.match(label)
                if rmatch:
                    date, retired_on = rmatch.group(1), rmatch.group(2)
                elif _DATE.match(label):
                    date = label[:7]
                else:
                    raise CorruptFileError(f"{source}, line {number}: {label!r} is not 'YYYY-MM retired YYYY-MM-DD'")
            else:
                if not _DATE.match(label):
                    raise CorruptFileError(f"{source}, line {number}: [{label}] is not a date (expected [YYYY-MM])")
                date = label[:7]
        if not content:
            continue
        if retired and retired_on is None:
            retired_on = ""
        notes.append(make_note(content, date, retired_on=retired_on))
    return notes


def render_notes(notes: Sequence[Note], header: str = FILE_HEADER) -> str:
    """A whole ``MEMORY.md`` (or ``RETIRED.md``) body."""
    return header + "".join(format_note(n) + "\n" for n in notes)


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorruptFileError(f"{source}, line {line}: not UTF-8 text ({exc.reason})") from exc


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: temporary file in the same folder, fsync, rename, fsync folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # not every platform can fsync a folder
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@runtime_checkable
class NotesStore(Protocol):
    """Where notes are kept. Order matters: ``load`` returns notes in the order they were saved."""

    def load(self) -> list[Note]:
        """The active notes, in order. Raises CorruptFileError/StorageError when unreadable."""
        ...

    def save(self, notes: Sequence[Note]) -> None:
        """Replace the active notes with ``notes`` (retired notes are not touched)."""
        ...

    def retire(self, notes: Sequence[Note], when: str) -> None:
        """Move these active notes (matched by text) to the retired ones, dated ``when``."""
        ...

    def retired(self) -> list[Note]:
        """The retired notes, oldest retirement first."""
        ...

    def restore(self, notes: Sequence[Note]) -> None:
        """Move these retired notes (matched by text) back to the end of the active ones."""
        ...

    def add_retired(self, notes: Sequence[Note]) -> None:
        """Add already-retired notes as they are (notes moving between stores)."""
        ...

    def search(self, query_terms: Sequence[str], top_k: int, *, include_retired: bool = True) -> list[Note]:
        """Notes sharing any of ``query_terms`` (index terms), best first."""
        ...

    def remove(self, predicate: Callable[[Note], bool]) -> list[Note]:
        """Delete, for real, every note (active or retired) ``predicate`` picks; return them."""
        ...

    def version(self) -> Hashable:
        """A value that changes whenever the stored notes may have changed (cheap to compute)."""
        ...

    def checkpoint(self) -> None:
        """After a removal made inside a transaction: drop the copies a journal still holds."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """A block in which a load-modify-save cycle is not interleaved with another process's."""
        ...

    def close(self) -> None:
        """Release files and connections."""
        ...


def _term_overlap_search(notes: Sequence[Note], query_terms: Sequence[str], top_k: int) -> list[Note]:
    from ovos_memory_plugins.text import tokenize

    wanted = set(query_terms)
    if not wanted or top_k <= 0:
        return []
    scored = []
    for i, note in enumerate(notes):
        overlap = len(wanted.intersection(tokenize(note.text)))
        if overlap:
            scored.append((-overlap, i, note))
    scored.sort(key=lambda t: (t[0], t[1]))
    return [note for _, _, note in scored[:top_k]]


class FileNotesStore:
    """Notes in ``<root>/MEMORY.md`` (see the module docstring for the format)."""

    def __init__(self, root: str | Path, filename: str = "MEMORY.md") -> None:
        self.root = Path(root)
        self.path = self.root / filename
        self.retired_path = self.root / "RETIRED.md"
        self.sessions_path = self.root / ("." + Path(filename).stem + ".sessions.json")
        self._lock_path = self.root / ("." + filename + ".lock")
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._lock_fd: int | None = None

    def _read(self, path: Path, retired: bool) -> list[Note]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        notes = parse_notes(_decode(data, str(path)), source=str(path), retired=retired)
        sessions = self._sessions()
        return [replace(n, session_id=sessions[n.id]) if n.id in sessions else n for n in notes]

    def _sessions(self) -> dict[str, str]:
        """Note id -> the session it was learned in (an unreadable file counts as empty)."""
        try:
            data = json.loads(self.sessions_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _keep_sessions(self, learned: Sequence[Note] = ()) -> None:
        """Rewrite the sessions file: the sessions of ``learned`` added, ids no longer in either
        file dropped (an empty map removes the file)."""
        sessions = self._sessions()
        sessions.update({n.id: n.session_id for n in learned if n.session_id})
        present = {
            n.id for n in parse_notes(self._text(self.path)) + parse_notes(self._text(self.retired_path), retired=True)
        }
        kept = {k: v for k, v in sessions.items() if k in present}
        if not kept:
            with contextlib.suppress(FileNotFoundError):
                self.sessions_path.unlink()
        elif kept != self._sessions():
            atomic_write(self.sessions_path, json.dumps(kept, ensure_ascii=False, sort_keys=True))

    @staticmethod
    def _text(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ""

    def load(self) -> list[Note]:
        """The notes in ``MEMORY.md`` (none when it does not exist)."""
        return self._read(self.path, retired=False)

    def check(self) -> None:
        """Raise CorruptFileError when ``MEMORY.md`` cannot be parsed (so it must not be written)."""
        self.load()

    def save(self, notes: Sequence[Note]) -> None:
        """Atomically rewrite ``MEMORY.md`` with ``notes``; refuses to replace an unparseable file."""
        with self.transaction():
            self.check()
            atomic_write(self.path, render_notes([replace(n, retired_on=None) for n in notes]))
            self._keep_sessions(notes)

    def retired(self) -> list[Note]:
        """The notes in ``RETIRED.md``."""
        return self._read(self.retired_path, retired=True)

    def retire(self, notes: Sequence[Note], when: str) -> None:
        """Append the notes to ``RETIRED.md`` and remove them from ``MEMORY.md``."""
        self._move(notes, when)

    def restore(self, notes: Sequence[Note]) -> None:
        """Move notes from ``RETIRED.md`` back to the end of ``MEMORY.md``."""
        self._move(notes, None)

    def _move(self, notes: Sequence[Note], when: str | None) -> None:
        """Move notes (matched by text) to ``RETIRED.md`` dated ``when``, or back (``when`` None).
        The file they go to is written first: a crash in between leaves a note twice, never lost."""
        if not notes:
            return
        with self.transaction():
            active, old = self.load(), self.retired()
            texts = {n.text for n in notes}
            moving = [replace(n, retired_on=when) for n in (active if when is not None else old) if n.text in texts]
            if not moving:
                return
            if when is not None:
                atomic_write(self.retired_path, render_notes([*old, *moving], RETIRED_HEADER))
                atomic_write(self.path, render_notes([n for n in active if n.text not in texts]))
                return
            have = {n.text for n in active}
            atomic_write(self.path, render_notes([*active, *(n for n in moving if n.text not in have)]))
            atomic_write(self.retired_path, render_notes([n for n in old if n.text not in texts], RETIRED_HEADER))

    def add_retired(self, notes: Sequence[Note]) -> None:
        """Append already-retired notes to ``RETIRED.md`` (notes moving between stores)."""
        if not notes:
            return
        with self.transaction():
            atomic_write(self.retired_path, render_notes([*self.retired(), *notes], RETIRED_HEADER))
            self._keep_sessions(notes)

    def search(self, query_terms: Sequence[str], top_k: int, *, include_retired: bool = True) -> list[Note]:
        """Notes sharing the most query terms, best first (a plain term-overlap count)."""
        notes = self.load() + (self.retired() if include_retired else [])
        return _term_overlap_search(notes, query_terms, top_k)

    def remove(self, predicate: Callable[[Note], bool]) -> list[Note]:
        """Rewrite ``MEMORY.md`` and ``RETIRED.md`` without the notes ``predicate`` picks (an
        emptied ``RETIRED.md`` is deleted); return the removed notes."""
        with self.transaction():
            active = self.load()
            old = self.retired()
            gone_active = [n for n in active if predicate(n)]
            gone_retired = [n for n in old if predicate(n)]
            if gone_active:
                self.check()
                atomic_write(self.path, render_notes([n for n in active if not predicate(n)]))
            if gone_retired:
                kept = [n for n in old if not predicate(n)]
                if kept:
                    atomic_write(self.retired_path, render_notes(kept, RETIRED_HEADER))
                else:
                    with contextlib.suppress(FileNotFoundError):
                        self.retired_path.unlink()
            if gone_active or gone_retired:
                self._keep_sessions()
        return [*gone_active, *gone_retired]

    def version(self) -> Hashable:
        """The file's modification time, size and inode (None when absent)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[object]:
        """Hold this process's lock and, on POSIX, an advisory lock on ``.MEMORY.md.lock``."""
        with self._thread_lock:
            if self._depth == 0 and fcntl is not None:
                self.root.mkdir(parents=True, exist_ok=True)
                fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                self._lock_fd = fd
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
                if self._depth == 0 and self._lock_fd is not None:
                    fd, self._lock_fd = self._lock_fd, None
                    if fcntl is not None:
                        fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)

    def remove_stale_temp_files(self, older_than_s: float = 3600.0) -> int:
        """Delete temporary files a killed writer left behind (only old ones: a live writer's
        file is never touched); return how many went."""
        removed = 0
        cutoff = time.time() - older_than_s
        for name in (self.path.name, self.retired_path.name):
            for tmp in self.root.glob("." + name + ".*.tmp"):
                with contextlib.suppress(OSError):
                    if tmp.stat().st_mtime <= cutoff:
                        tmp.unlink()
                        removed += 1
        return removed

    def checkpoint(self) -> None:
        """Nothing to do: every write replaces the whole file."""

    def close(self) -> None:
        """Nothing to release (files are opened per call)."""


@runtime_checkable
class Rewrites(Protocol):
    """Previous bodies of the notes (for ``undo``) and when they were last dreamed over."""

    def keep(self, body: str, reason: str, when: float, depth: int) -> None:
        """Keep ``body`` (the notes before a rewrite) as the newest of at most ``depth``."""
        ...

    def bodies(self) -> list[tuple[str, str]]:
        """``(name, body)`` of the kept bodies, newest first."""
        ...

    def drop(self, names: Sequence[str]) -> None:
        """Forget these kept bodies."""
        ...

    def scrub(self, drop_line: Callable[[str], bool]) -> None:
        """Remove the lines ``drop_line`` picks from every kept copy (a forgotten note's words)."""
        ...

    def clear(self) -> None:
        """Forget every kept copy."""
        ...

    def dreamed(self) -> float | None:
        """When the notes were last dreamed over (None: never)."""
        ...

    def mark_dreamed(self, when: float) -> None:
        """Record a dream (or the start of the cadence) at ``when``."""
        ...


class FileRewrites:
    """Rewrites kept as files under ``root``: ``MEMORY.md.bak`` (the body before the last
    rewrite), ``.notes-history/<stamp>-<serial>-<reason>.md`` and ``.dreamed`` (its time)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folder = root / ".notes-history"
        self.backup = root / "MEMORY.md.bak"
        self.marker = root / ".dreamed"

    def _files(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        files = [p for p in self.folder.iterdir() if p.suffix == ".md" and p.name.count("-") >= 2]
        return sorted(files, key=lambda p: p.name.split("-")[1], reverse=True)

    def keep(self, body: str, reason: str, when: float, depth: int) -> None:
        """Write ``MEMORY.md.bak`` and a history file; drop the files past ``depth``."""
        atomic_write(self.backup, body)
        self.folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(when))
        existing = self._files()
        serial = int(existing[0].name.split("-")[1]) + 1 if existing else 1
        atomic_write(self.folder / f"{stamp}-{serial:06d}-{reason}.md", body)
        for old in self._files()[depth:]:
            with contextlib.suppress(OSError):
                old.unlink()

    def bodies(self) -> list[tuple[str, str]]:
        """The history files (paths) and their text, newest first."""
        out = []
        for path in self._files():
            with contextlib.suppress(OSError):
                out.append((str(path), path.read_text(encoding="utf-8")))
        return out

    def drop(self, names: Sequence[str]) -> None:
        """Delete these history files."""
        for name in names:
            with contextlib.suppress(OSError):
                Path(name).unlink()

    def scrub(self, drop_line: Callable[[str], bool]) -> None:
        """Rewrite ``MEMORY.md.bak`` and the history files without the picked lines."""
        for path in [self.backup, *self._files()]:
            try:
                body = path.read_text(encoding="utf-8")
            except OSError:
                continue
            kept = scrub_lines(body, drop_line)
            if kept is not None:
                atomic_write(path, kept)

    def clear(self) -> None:
        """Delete ``MEMORY.md.bak`` and the history files."""
        for path in [self.backup, *self._files()]:
            with contextlib.suppress(OSError):
                path.unlink()

    def dreamed(self) -> float | None:
        """The modification time of ``.dreamed``."""
        try:
            return self.marker.stat().st_mtime
        except FileNotFoundError:
            return None

    def mark_dreamed(self, when: float) -> None:
        """Touch ``.dreamed`` with the time ``when``."""
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        self.marker.touch()
        os.utime(self.marker, (when, when))


def rewrites_for(db: Any, namespace: str, root: Path) -> Rewrites:
    """Where previous note bodies are kept: files under ``root``, or on PostgreSQL the database."""
    if getattr(db, "engine", "") == "postgresql":
        from ovos_memory_plugins.storage.postgres.notes import PgRewrites

        return PgRewrites(db, namespace)
    return FileRewrites(root)


def _notes_v1(conn: sqlite3.Connection) -> None:
    # IF NOT EXISTS throughout: a schema another process created first is not an error. The
    # tables are those of the PostgreSQL engine (storage/postgres/notes.py), namespace included,
    # so one store class serves both engines.
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_notes ("
        " id INTEGER PRIMARY KEY,"
        " namespace TEXT NOT NULL,"
        " position INTEGER NOT NULL,"
        " text TEXT NOT NULL,"
        " date TEXT NOT NULL DEFAULT '',"
        " retired_on TEXT,"
        " created_at REAL NOT NULL,"
        " session_id TEXT NOT NULL DEFAULT '',"
        " terms TEXT NOT NULL DEFAULT '')"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS memory_notes_active ON memory_notes (namespace, retired_on, position)")
    conn.execute("CREATE INDEX IF NOT EXISTS memory_notes_session ON memory_notes (namespace, session_id)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_notes_versions (namespace TEXT PRIMARY KEY, version INTEGER NOT NULL,"
        " dreamed REAL)"
    )
    if fts5_available():
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS memory_notes_fts USING fts5(terms, content='memory_notes',"
            " content_rowid='id')"
        )
        conn.execute(
            "CREATE TRIGGER IF NOT EXISTS memory_notes_ai AFTER INSERT ON memory_notes BEGIN"
            " INSERT INTO memory_notes_fts (rowid, terms) VALUES (new.id, new.terms); END"
        )
        conn.execute(
            "CREATE TRIGGER IF NOT EXISTS memory_notes_ad AFTER DELETE ON memory_notes BEGIN"
            " INSERT INTO memory_notes_fts (memory_notes_fts, rowid, terms) VALUES ('delete', old.id, old.terms); END"
        )
        conn.execute(
            "CREATE TRIGGER IF NOT EXISTS memory_notes_au AFTER UPDATE OF terms ON memory_notes BEGIN"
            " INSERT INTO memory_notes_fts (memory_notes_fts, rowid, terms) VALUES ('delete', old.id, old.terms);"
            " INSERT INTO memory_notes_fts (rowid, terms) VALUES (new.id, new.terms); END"
        )


#: The notes' schema in the memory's SQLite file. Append only; never rename or reorder an applied step.
NOTES_MIGRATIONS = [Migration("0001_notes", _notes_v1)]


def read_old_file(path: Path, reader: Callable[[sqlite3.Connection], _T]) -> _T:
    """``reader(connection)`` over an earlier release's SQLite file, opened read-only (the
    file is never changed; a file that is not a database raises ``sqlite3.DatabaseError``)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return reader(conn)
    finally:
        conn.close()


def move_aside(path: Path) -> None:
    """Rename an earlier release's file and its WAL and shared-memory files to ``*.moved``
    (another process may have done it already)."""
    for suffix in ("", "-wal", "-shm"):
        old = path.with_name(path.name + suffix)
        with contextlib.suppress(FileNotFoundError):
            old.rename(old.with_name(old.name + ".moved"))


def pg_notes_schema() -> tuple[str, Sequence[Any]]:
    """The PostgreSQL schema of the notes and sticky-note tables (imported only on PostgreSQL)."""
    from ovos_memory_plugins.storage.postgres.notes import NOTES_MIGRATIONS as PG_MIGRATIONS

    return ("notes", PG_MIGRATIONS)


_SELECT = "SELECT text, date, retired_on, session_id FROM memory_notes WHERE namespace = ?"


class DatabaseNotesStore:
    """Notes in the memory's database (SQLite or PostgreSQL); retired notes are kept with their
    dates and can be restored.

    Args:
        path: a SQLite file to open (``":memory:"``) when no ``db`` is given.
        db: the memory's open database, of either engine (the caller closes it).
        namespace: the memory's namespace (keys the rows; one memory per namespace).
    """

    def __init__(self, path: str | Path = ":memory:", *, db: Any = None, namespace: str = "default") -> None:
        self._owns_db = db is None
        self.db = db if db is not None else Database(path)
        try:
            self.t = TableAccess(self.db, namespace, ("notes", NOTES_MIGRATIONS), pg_notes_schema)
        except BaseException:
            if self._owns_db:
                self.db.close()
            raise
        self.namespace = self.t.namespace
        self._fts = not self.t.pg and self.db.table_exists("memory_notes_fts")

    def _notes(self, sql: str, params: Sequence[Any] = ()) -> list[Note]:
        rows = self.t.query(sql, (self.namespace, *params))
        return [make_note(r[0], r[1], session_id=r[3], retired_on=r[2]) for r in rows]

    def _changed(self, deleted: bool = False) -> None:
        """Inside a write: bump the namespace's version (caches of every process see it) and,
        after deletions, scrub SQLite's full-text index (its shadow tables keep no deleted term)."""
        self.t.execute(
            "INSERT INTO memory_notes_versions (namespace, version) VALUES (?, 1)"
            " ON CONFLICT (namespace) DO UPDATE SET version = memory_notes_versions.version + 1",
            (self.namespace,),
        )
        if deleted:
            self.t.dirty = True
            if self._fts:
                self.t.execute("INSERT INTO memory_notes_fts (memory_notes_fts) VALUES ('rebuild')")

    def _insert(self, notes: Sequence[Note], positions: Sequence[int]) -> None:
        if not notes:
            return
        now = time.time()
        expression = self.t.terms("")[0]
        rows = [
            (self.namespace, at, n.text, n.date, n.retired_on, now, n.session_id, self.t.terms(n.text)[1])
            for n, at in zip(notes, positions, strict=True)
        ]
        self.t.executemany(
            "INSERT INTO memory_notes (namespace, position, text, date, retired_on, created_at, session_id, terms)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, {expression})",
            rows,
        )

    def load(self) -> list[Note]:
        """The active notes, in order."""
        return self._notes(f"{_SELECT} AND retired_on IS NULL ORDER BY position, id")

    def retired(self) -> list[Note]:
        """The retired notes, oldest retirement first."""
        return self._notes(f"{_SELECT} AND retired_on IS NOT NULL ORDER BY retired_on, id")

    def checkpoint(self) -> None:
        """After a removal made inside a transaction: truncate the WAL / VACUUM now."""
        self.t.purge("memory_notes")

    def remove(self, predicate: Callable[[Note], bool]) -> list[Note]:
        """Delete every note (active or retired) ``predicate`` picks, scrub the full-text index
        and purge; return the removed notes."""
        with self.t.atomic("notes"):
            rows = self.t.query(
                "SELECT id, text, date, retired_on, session_id FROM memory_notes WHERE namespace = ? ORDER BY id",
                (self.namespace,),
            )
            gone = [(int(r[0]), make_note(r[1], r[2], session_id=r[4], retired_on=r[3])) for r in rows]
            gone = [(i, n) for i, n in gone if predicate(n)]
            if gone:
                self.t.executemany("DELETE FROM memory_notes WHERE id = ?", [(i,) for i, _ in gone])
            self._changed(deleted=bool(gone))
        self.checkpoint()
        return [n for _, n in gone]

    def save(self, notes: Sequence[Note]) -> None:
        """Replace the active notes: unchanged texts keep their rows, others are inserted or deleted."""
        with self.t.atomic("notes"):
            existing: dict[str, int] = {}
            for row_id, text in self.t.query(
                "SELECT id, text FROM memory_notes WHERE namespace = ? AND retired_on IS NULL ORDER BY id",
                (self.namespace,),
            ):
                existing.setdefault(text, int(row_id))
            keep: set[int] = set()
            updates, new, positions = [], [], []
            for position, note in enumerate(notes):
                row_id = existing.get(note.text)
                if row_id is not None and row_id not in keep:
                    updates.append((position, note.date, note.session_id, row_id))
                    keep.add(row_id)
                else:
                    new.append(note)
                    positions.append(position)
            self.t.executemany("UPDATE memory_notes SET position = ?, date = ?, session_id = ? WHERE id = ?", updates)
            self._insert(new, positions)
            gone = [(i,) for i in existing.values() if i not in keep]
            self.t.executemany("DELETE FROM memory_notes WHERE id = ?", gone)
            self._changed(deleted=bool(gone))
        self.checkpoint()

    def retire(self, notes: Sequence[Note], when: str) -> None:
        """Mark these active notes retired on ``when``."""
        with self.t.atomic("notes"):
            self.t.executemany(
                "UPDATE memory_notes SET retired_on = ? WHERE namespace = ? AND text = ? AND retired_on IS NULL",
                [(when, self.namespace, n.text) for n in notes],
            )
            self._changed()

    def restore(self, notes: Sequence[Note]) -> None:
        """Make these retired notes active again, at the end."""
        with self.t.atomic("notes"):
            active = {r[0] for r in self.t.query(f"{_SELECT} AND retired_on IS NULL", (self.namespace,))}
            for note in notes:
                if note.text in active:
                    self.t.execute(
                        "DELETE FROM memory_notes WHERE namespace = ? AND text = ? AND retired_on IS NOT NULL",
                        (self.namespace, note.text),
                    )
                    self.t.dirty = True
                    continue
                top = self.t.scalar(
                    "SELECT coalesce(max(position), -1) + 1 FROM memory_notes WHERE namespace = ?", (self.namespace,)
                )
                row = self.t.scalar(
                    "SELECT id FROM memory_notes WHERE namespace = ? AND text = ? AND retired_on IS NOT NULL"
                    " ORDER BY retired_on DESC, id DESC",
                    (self.namespace, note.text),
                )
                if row is not None:
                    self.t.execute("UPDATE memory_notes SET retired_on = NULL, position = ? WHERE id = ?", (top, row))
                    active.add(note.text)
            self._changed(deleted=self.t.dirty)

    def add_retired(self, notes: Sequence[Note]) -> None:
        """Insert already-retired notes (used when notes move between stores)."""
        if notes:
            with self.t.atomic("notes"):
                self._insert([replace(n, retired_on=n.retired_on or "") for n in notes], [0] * len(notes))
                self._changed()

    def search(self, query_terms: Sequence[str], top_k: int, *, include_retired: bool = True) -> list[Note]:
        """Notes matching any query term, best first: FTS5 ``bm25`` on SQLite (term overlap
        without FTS5), the count of terms held on PostgreSQL (GIN over our tokens)."""
        terms = [t for t in dict.fromkeys(query_terms) if t]
        if not terms or top_k <= 0:
            return []
        where = "" if include_retired else " AND n.retired_on IS NULL"
        if self.t.pg:
            from ovos_memory_plugins.storage.postgres.notes import search_sql

            sql, params = search_sql(terms, where)
            return self._notes(sql, (*params, int(top_k)))
        if not self._fts:
            notes = self.load() + (self.retired() if include_retired else [])
            return _term_overlap_search(notes, terms, top_k)
        match = " OR ".join(quote_fts_phrase(t) for t in terms)
        return self._notes(
            "SELECT n.text, n.date, n.retired_on, n.session_id FROM memory_notes_fts"
            " JOIN memory_notes n ON n.id = memory_notes_fts.rowid WHERE n.namespace = ?"
            f" AND memory_notes_fts MATCH ?{where} ORDER BY bm25(memory_notes_fts), n.id LIMIT ?",
            (match, int(top_k)),
        )

    def version(self) -> Hashable:
        """Bumped in the transaction of every write, by any process (one indexed read)."""
        return int(
            self.t.scalar("SELECT version FROM memory_notes_versions WHERE namespace = ?", (self.namespace,)) or 0
        )

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """One transaction around a load-modify-save cycle; other processes' cycles wait."""
        return self.t.atomic("notes")

    def count(self) -> tuple[int, int]:
        """(active, retired) note counts."""
        rows = self.t.query(
            "SELECT retired_on IS NULL, count(*) FROM memory_notes WHERE namespace = ? GROUP BY 1", (self.namespace,)
        )
        counts = {bool(r[0]): int(r[1]) for r in rows}
        return counts.get(True, 0), counts.get(False, 0)

    def close(self) -> None:
        """Purge what a removal left, and close the database when this store opened it."""
        with contextlib.suppress(StorageError, sqlite3.Error):
            self.checkpoint()
        if self._owns_db:
            self.db.close()


#: The name earlier releases used (the class now serves both engines).
SQLiteNotesStore = DatabaseNotesStore


def move_notes(source: NotesStore, target: NotesStore) -> int:
    """Copy every note of ``source`` (active and retired) into ``target``; return how many moved.

    Active notes already in the target (same text) are not duplicated; the target's own notes
    are kept, the moved ones follow them. Nothing is removed from the source.
    """
    active = source.load()
    retired = source.retired()
    with target.transaction():
        have = target.load()
        texts = {n.text for n in have}
        new_active = [n for n in active if n.text not in texts]
        if new_active:
            target.save([*have, *new_active])
        old_retired = {(n.text, n.retired_on) for n in target.retired()}
        new_retired = [n for n in retired if (n.text, n.retired_on) not in old_retired]
        target.add_retired(new_retired)
    return len(new_active) + len(new_retired)


class NotesShelf:
    """The rows of a :class:`NotesStore` as the notes part works on them
    (:class:`~ovos_memory_plugins.notebook.NoteShelf`): ids are the words' (``n-…``), an active
    note's place in the list is kept, a note is dated by the month.

    Args:
        store: ``MEMORY.md`` or the ``memory_notes`` table.
        month: this month, ``YYYY-MM`` (the date of a note given none).
        cached: the active notes as last read (a listing outside a transaction may use them).
    """

    def __init__(
        self, store: NotesStore, *, month: Callable[[], str], cached: Callable[[], list[Note]] | None = None
    ) -> None:
        self.store = store
        self._month = month
        self._cached = cached

    def rows(self, *, include_retired: bool = False, fresh: bool = True) -> list[Note]:
        """The active notes in order, then the retired ones (``include_retired``)."""
        active = list(self._cached()) if self._cached is not None and not fresh else self.store.load()
        return active + self.store.retired() if include_retired else active

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """The store's transaction."""
        return self.store.transaction()

    def insert(self, new: NewNote) -> Note:
        """Append a note (language and metadata are not kept by these stores)."""
        note = make_note(new.text, new.date or self._month(), session_id=new.session_id)
        with self.store.transaction():
            self.store.save([*self.store.load(), note])
        return note

    def touch(self, note: Note) -> None:
        """Nothing to note: these stores keep when a fact was learned, not when it was said again."""

    def replace(self, old: Note, text: str, *, date: str, day: str) -> tuple[Note, Note]:
        """Retire ``old`` and put ``text`` at its place in the list."""
        new = make_note(text, date or self._month(), session_id=old.session_id)
        with self.store.transaction():
            notes = self.store.load()
            index = next((i for i, n in enumerate(notes) if n.id == old.id), len(notes))
            self.store.retire([old], day)
            key = words_key(text)
            notes = [n for n in self.store.load() if words_key(n.text) != key]
            notes.insert(min(index, len(notes)), new)
            self.store.save(notes)
        return replace(old, retired_on=day), new

    def set_retired(self, note: Note, day: str | None) -> Note:
        """Move the note to the retired ones (``day``) or back to the end of the active ones."""
        if day is None:
            self.store.restore([note])
        else:
            self.store.retire([note], day)
        return replace(note, retired_on=day)

    def delete(self, note: Note, *, session_id: str | None = None) -> list[Note]:
        """Remove every row with the note's words (active and retired; ``session_id``'s only)."""
        key = words_key(note.text)
        return self.store.remove(
            lambda n: words_key(n.text) == key and (session_id is None or n.session_id == session_id)
        )


class _OldNotesFile:
    """The notes of an earlier release's ``notes.db`` (read-only, for :func:`move_notes`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(notes)")}
        if not {"position", "text", "date", "retired_on"} <= columns:
            raise sqlite3.DatabaseError("no table of notes")
        session = "session_id" if "session_id" in columns else "''"
        select = f"SELECT text, date, retired_on, {session} FROM notes"
        self.active = [
            make_note(r[0], r[1], session_id=r[3])
            for r in conn.execute(f"{select} WHERE retired_on IS NULL ORDER BY position, id")
        ]
        self.old = [
            make_note(r[0], r[1], session_id=r[3], retired_on=r[2])
            for r in conn.execute(f"{select} WHERE retired_on IS NOT NULL ORDER BY retired_on, id")
        ]

    def load(self) -> list[Note]:
        return list(self.active)

    def retired(self) -> list[Note]:
        return list(self.old)


def import_notes_file(store: NotesStore, path: Path) -> int | None:
    """Copy an earlier release's ``notes.db`` into ``store``, then rename the file (and its WAL)
    ``*.moved``; return how many notes were copied, None when there was nothing to do.

    Into a :class:`SQLiteNotesStore` the copy is one transaction recorded as a migration of the
    store ``legacy``, so of many processes opening the folder at once exactly one copies. A file
    that cannot be read (or a ``MEMORY.md`` that cannot be parsed) is left untouched and
    reported (an ERROR); the memory opens without those notes until it is fixed.
    """
    if not path.exists():
        return None
    copied = 0

    def copy(conn: sqlite3.Connection | None = None) -> None:
        nonlocal copied
        copied = move_notes(read_old_file(path, _OldNotesFile), store)  # type: ignore[arg-type]

    try:
        if isinstance(store, SQLiteNotesStore):
            applied = bool(store.db.migrate("legacy", [Migration(f"import:{path.name}", copy)]))
        else:
            copy()
            applied = True
    except (sqlite3.Error, StorageError, OSError) as exc:
        LOG.error("notes: cannot move the notes of %s (%s); it is left untouched", path, exc)
        return None
    move_aside(path)
    if applied:
        LOG.warning("notes: moved %d note(s) of %s; the old file is now %s.moved", copied, path, path.name)
    return copied


def notes_store_for(db: Any, namespace: str = "default") -> NotesStore:
    """The curated-notes store in a memory's database of either engine (``namespace`` keys the
    rows; one memory per namespace)."""
    return DatabaseNotesStore(db=db, namespace=namespace)


def move_in_notes(source: NotesStore, target: NotesStore, rename: Sequence[Path] = ()) -> bool:
    """Move every note of ``source`` into ``target``, then rename the ``rename`` files that exist
    to ``*.moved``; False (and an ERROR, the files untouched) when ``source`` cannot be parsed."""
    try:
        n = move_notes(source, target)
    except CorruptFileError as exc:
        LOG.error("notes: cannot move notes (%s); the file is left untouched", exc)
        return False
    for path in rename:
        if path.exists():
            path.rename(path.with_name(path.name + ".moved"))
    LOG.info("notes: moved %d notes into the %s store", n, type(target).__name__)
    return True


def _move_out_of_table(storage: Any, store: FileNotesStore, database_file: Path | None) -> None:
    """The notes are kept in ``MEMORY.md`` but the memory's database holds notes (the table was
    used before): move them into ``store``, then delete them from the table."""
    db: Any = storage.db
    opened: Database | None = None
    if db.in_ram:
        if database_file is None or not database_file.exists():
            return
        db = opened = Database(database_file)
    try:
        if db.table_exists("memory_notes") and db.scalar("SELECT 1 FROM memory_notes LIMIT 1"):
            old = DatabaseNotesStore(db=db)
            if move_in_notes(old, store):
                old.remove(lambda n: True)
                old.close()
    finally:
        if opened is not None:  # the file store needs no database of its own
            opened.close()


def adopt_notes(storage: Any, kind: str, root: Path, *, database_file: Path | None = None) -> NotesStore:
    """The curated notes of a memory over ``storage`` (a :class:`~ovos_memory_plugins.storage.seam.Storage`,
    which calls this: ``storage.notes_store(kind, root)``) that keeps them in ``kind``, after moving
    in what earlier releases and the other kind left; raises (``StorageError``, ``OSError``)
    when they cannot be opened (the caller keeps the notes in RAM, and says so).

    * a storage that is not :attr:`~ovos_memory_plugins.storage.seam.Storage.local`
      (PostgreSQL): its notes table, whatever ``kind`` says (a ``MEMORY.md`` under one machine's
      ``root`` cannot be shared by the servers that share the memory);
    * ``"sqlite"``: the notes table of the memory's database; when the storage is in RAM (the
      memory keeps nothing of the conversation on disk) and ``database_file`` is given, the table
      of that file, opened for the notes alone (closed with the store). An earlier release's
      ``<root>/notes.db`` is copied in, and ``MEMORY.md``/``RETIRED.md`` move in (renamed
      ``*.moved``);
    * ``"file"``: ``<root>/MEMORY.md`` (stale temporary files of a killed writer removed);
      ``notes.db`` is copied in, and notes the database's table holds move out into the file.
    """
    db = storage.db
    if not storage.local:
        shared: NotesStore = storage.notes()
        return shared
    if db.fallback_reason:
        raise StorageError(db.fallback_reason)
    if kind == "sqlite":
        table: DatabaseNotesStore = (
            DatabaseNotesStore(database_file) if db.in_ram and database_file is not None else storage.notes()
        )
        if not table.db.in_ram:
            import_notes_file(table, root / "notes.db")
        if (root / "MEMORY.md").exists() or (root / "RETIRED.md").exists():
            move_in_notes(FileNotesStore(root), table, [root / "MEMORY.md", root / "RETIRED.md"])
        return table
    root.mkdir(parents=True, exist_ok=True)
    store = FileNotesStore(root)
    store.remove_stale_temp_files()
    import_notes_file(store, root / "notes.db")
    _move_out_of_table(storage, store, database_file)
    return store
