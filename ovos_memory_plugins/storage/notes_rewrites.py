"""Previous bodies of the curated notes (for ``undo``) and when they were last dreamed over.

:class:`FileRewrites` keeps them as files beside ``MEMORY.md`` (SQLite, or the file store);
on PostgreSQL :class:`~ovos_memory_plugins.storage.postgres.notes.PgRewrites` keeps them in the
database. :func:`rewrites_for` picks one; both implement
:class:`~ovos_memory_plugins.storage.notes_store.Rewrites`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.storage.notes_file import atomic_write
from ovos_memory_plugins.storage.tables import scrub_lines

if TYPE_CHECKING:
    from ovos_memory_plugins.storage.notes_store import Rewrites

__all__ = ["FileRewrites", "copy_rewrites", "rewrites_for"]


class FileRewrites:
    """Rewrites kept as files under ``root``: ``MEMORY.md.bak`` (the body before the last
    rewrite), ``.notes-history/<stamp>-<serial>-<reason>.md`` and ``.dreamed`` (its time)."""

    #: The names of the files and the folder it keeps under ``root``.
    NAMES = (".notes-history", "MEMORY.md.bak", ".dreamed")

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

    def move_aside(self) -> None:
        """Rename the files and the folder to ``*.moved`` (they were copied elsewhere)."""
        for name in self.NAMES:
            path = self.root / name
            with contextlib.suppress(FileNotFoundError):
                path.rename(path.with_name(path.name + ".moved"))

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


def copy_rewrites(source: Rewrites, target: Rewrites, depth: int = 1000) -> int:
    """Copy the kept previous bodies of ``source`` into ``target``, oldest first (so the newest
    stays the newest), and the time of the last dream; return how many bodies came."""
    bodies = source.bodies()
    for name, body in reversed(bodies):
        target.keep(body, name.rsplit("-", 1)[-1].removesuffix(".md") or "copy", time.time(), depth)
    when = source.dreamed()
    if when is not None:
        target.mark_dreamed(when)
    return len(bodies)


def rewrites_for(db: Any, namespace: str, root: Path) -> Rewrites:
    """Where previous note bodies are kept: files under ``root``, or on PostgreSQL the database."""
    if getattr(db, "engine", "") == "postgresql":
        from ovos_memory_plugins.storage.postgres.notes import PgRewrites

        return PgRewrites(db, namespace)
    return FileRewrites(root)
