"""The notes as text: the whole body as ``MEMORY.md`` text (:meth:`notes_body`, its version, and
:meth:`replace_notes` for editors) and the rewrite history (each dream or edit keeps the body
before it for :meth:`undo`; a forgotten note's lines are scrubbed from it). Part of
:class:`~ovos_memory_plugins.notes.NotesMemory`.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from ovos_memory_plugins.errors import CorruptFileError, StorageError
from ovos_memory_plugins.notes.results import StaleNotesError, normalize_fact
from ovos_memory_plugins.notes.state import NotesState
from ovos_memory_plugins.protocols import Note, words_key
from ovos_memory_plugins.storage.notes_store import FileNotesStore, atomic_write, make_note, parse_notes, render_notes
from ovos_memory_plugins.text import clean_text


class BodyMixin(NotesState):
    """The notes body as text and its rewrite history (:class:`~ovos_memory_plugins.notes.NotesMemory`'s part)."""

    # -- the notes as text -------------------------------------------------------------------------

    def notes_body(self) -> str:
        """The notes as ``MEMORY.md`` text: the file itself for the file store (even one that
        cannot be parsed, so an editor can fix it), a rendering for the SQLite store."""
        with self._mutex, self._notes_store.transaction():
            return self._body()

    def _body(self) -> str:
        if isinstance(self._notes_store, FileNotesStore):
            try:
                return self._notes_store.path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                return render_notes([])
        return render_notes(self._notes_store.load())

    @staticmethod
    def _version_of(body: str) -> str:
        return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def notes_version(self) -> str:
        """A short digest of :meth:`notes_body`: it changes whenever the notes change (by this
        process, another one, or a hand edit). Pass it to ``replace_notes(expected_version=...)``."""
        return self._version_of(self.notes_body())

    def replace_notes(self, body: str, *, expected_version: str | None = None) -> list[Note]:
        """Replace every active note with the bullets of ``body`` (normalised, deduplicated,
        undated ones dated this month, sessions kept where a line says so). The previous body is
        kept for :meth:`undo`.

        With ``expected_version`` (from :meth:`notes_version`), the check and the write happen
        under the notes' lock and store transaction, and :class:`StaleNotesError` is raised (nothing
        changes) when the notes changed since. Raises CorruptFileError naming the line when a
        bullet's date cannot be parsed; a ``MEMORY.md`` that could not be parsed is replaced (its
        text is kept in the history).
        """
        parsed = parse_notes(clean_text(body), source="the new notes")
        learned: dict[str, str] = {}
        with contextlib.suppress(CorruptFileError, StorageError):  # a broken MEMORY.md is being replaced
            learned = {n.id: n.session_id for n in self.list_notes(include_retired=True)}
        notes: list[Note] = []
        seen: set[str] = set()
        for raw in parsed:
            text, _ = normalize_fact(raw.text)
            key = words_key(text)
            if not text or key in seen:
                continue
            seen.add(key)
            note = make_note(text[: self.options.max_note_chars], raw.date or self._month())
            notes.append(make_note(note.text, note.date, session_id=learned.get(note.id, "")))
        with self._mutex, self._notes_store.transaction():
            before = self._body()
            if expected_version is not None and self._version_of(before) != expected_version:
                raise StaleNotesError("the notes changed since they were read; nothing was replaced")
            self._snapshot(before, "edit")
            if isinstance(self._notes_store, FileNotesStore):
                atomic_write(self._notes_store.path, render_notes(notes))
            else:
                self._notes_store.save(notes)
            self._saved(notes)
        self._notes_store.checkpoint()
        return notes

    # -- rewrite history -------------------------------------------------------------------------

    @property
    def history_dir(self) -> Path:
        """Where previous note bodies are kept for :meth:`undo` (on the SQLite engine)."""
        return self.root / ".notes-history"

    def _snapshot(self, body: str, reason: str) -> None:
        """Keep ``body`` for :meth:`undo` (``MEMORY.md.bak`` and the rotating history, or the
        database on PostgreSQL)."""
        self._rewrites.keep(body, reason, self._clock(), self.options.dream_history)

    def history(self) -> list[str]:
        """The names of the saved previous bodies, newest first (file paths on the SQLite engine)."""
        return [name for name, _ in self._rewrites.bodies()]

    def undo(self, steps: int = 1) -> bool:
        """Put back the notes as they were ``steps`` rewrites (dreams, edits) ago. False when the
        history is not that deep. The used snapshots are removed."""
        snapshots = self._rewrites.bodies()
        if steps < 1 or len(snapshots) < steps:
            return False
        name, body = snapshots[steps - 1]
        learned = {n.id: n.session_id for n in self.list_notes(include_retired=True)}
        notes = [make_note(n.text, n.date, session_id=learned.get(n.id, "")) for n in parse_notes(body, source=name)]
        with self._mutex, self._notes_store.transaction():
            if isinstance(self._notes_store, FileNotesStore):
                atomic_write(self._notes_store.path, render_notes(notes))
            else:
                self._notes_store.save(notes)
            self._saved(notes)
        self._rewrites.drop([n for n, _ in snapshots[:steps]])
        return True

    def _scrub(self, keys: set[str]) -> None:
        """Remove forgotten notes' lines (by normalised words) from the backups and the history."""
        if not keys:
            return

        def forgotten(line: str) -> bool:
            try:
                parsed = parse_notes(line)
            except CorruptFileError:
                return False
            return bool(parsed) and words_key(parsed[0].text) in keys

        self._rewrites.scrub(forgotten)
