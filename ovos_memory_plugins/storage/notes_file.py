"""Curated notes in ``<root>/MEMORY.md``, a file people may edit: :class:`FileNotesStore`.

One ``- [YYYY-MM] fact`` line per note (:mod:`~ovos_memory_plugins.storage.notes_format`); the
session each note was learned in is kept beside it in ``<root>/.MEMORY.sessions.json`` (note
id -> session id, no words), so the file stays plain for people to edit.
Lines that are not bullets (headings, blank lines, comments) are ignored on load; a bullet
without a date is a note with an unknown date. A bullet whose leading ``[...]`` is not a
``YYYY-MM`` (or ``YYYY-MM-DD``) date, or a file that is not UTF-8, cannot be parsed:
:class:`~ovos_memory_plugins.errors.CorruptFileError` names the line, and the file is left
untouched (the store refuses to write over it). Writes are atomic (:func:`atomic_write`): a
temporary file in the same folder, fsync, rename, fsync of the folder, so a crash leaves the old
or the new file. Retired notes go to ``<root>/RETIRED.md`` as ``- [YYYY-MM retired YYYY-MM-DD] fact``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from ovos_memory_plugins.errors import CorruptFileError, StorageError
from ovos_memory_plugins.storage.notes_format import RETIRED_HEADER, parse_notes, render_notes, term_overlap_search
from ovos_memory_plugins.storage.records import Note

try:  # POSIX advisory locks keep two processes from interleaving read-modify-write cycles
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileNotesStore", "atomic_write"]


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
        return term_overlap_search(notes, query_terms, top_k)

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
