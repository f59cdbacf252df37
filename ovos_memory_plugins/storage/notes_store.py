"""Where durable notes live: ``MEMORY.md`` (human-editable) or tables of the memory's own database.

A note is one fact with the month it was learned and the session it was learned in
(:class:`~ovos_memory_plugins.protocols.Note`, whose id is derived from its words). Stores only
load and save lists of notes, keep retired ones and forget for real; normalisation, dedup and
the prompt budget are the plugin's business (:mod:`ovos_memory_plugins.notes`).

This module is the contract: every store implements :class:`NotesStore`, every keeper of
previous bodies :class:`Rewrites`; :class:`NotesShelf` is a store as the notes part works on it,
:func:`notes_store_for` the store in a memory's database. The rest lives by concept, and every
name is importable from here as before:

* :mod:`~ovos_memory_plugins.storage.notes_format`: the ``- [YYYY-MM] fact`` lines
  (:func:`make_note`, :func:`parse_notes`, :func:`format_note`, :func:`render_notes`);
* :mod:`~ovos_memory_plugins.storage.notes_file`: :class:`FileNotesStore`, ``<root>/MEMORY.md``
  and ``RETIRED.md``, written atomically (:func:`atomic_write`);
* :mod:`~ovos_memory_plugins.storage.notes_table`: :class:`DatabaseNotesStore`
  (``SQLiteNotesStore`` is its earlier name), the ``memory_notes`` table of either engine;
* :mod:`~ovos_memory_plugins.storage.notes_rewrites`: :class:`FileRewrites` and
  :func:`rewrites_for` (undo history, the dream marker), :func:`copy_rewrites`;
* :mod:`~ovos_memory_plugins.storage.notes_adopt`: :func:`import_notes_file` (an earlier
  release's ``notes.db``), :func:`move_notes`, :func:`move_in_notes`, :func:`adopt_notes`
  (``Storage.notes_store``: the notes of a memory, after moving in what earlier releases and the
  other store kind left) and :func:`adopt_notes_folder` (a composite's notes part taking in the
  folder its member kept in earlier releases).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.storage.notes_adopt import (
    adopt_notes,
    adopt_notes_folder,
    import_notes_file,
    move_aside,
    move_in_notes,
    move_notes,
    read_old_file,
)
from ovos_memory_plugins.storage.notes_file import FileNotesStore, atomic_write
from ovos_memory_plugins.storage.notes_format import (
    FILE_HEADER,
    RETIRED_HEADER,
    format_note,
    make_note,
    parse_notes,
    prompt_line,
    render_notes,
)
from ovos_memory_plugins.storage.notes_rewrites import FileRewrites, copy_rewrites, rewrites_for
from ovos_memory_plugins.storage.notes_table import (
    NOTES_MIGRATIONS,
    DatabaseNotesStore,
    SQLiteNotesStore,
    pg_notes_schema,
)
from ovos_memory_plugins.storage.records import NewNote, Note, words_key
from ovos_memory_plugins.storage.tables import TableAccess, truncate_wal

LOG = logging.getLogger(__name__)  # the logger of notes_adopt (records keep this name)

__all__ = [
    "FILE_HEADER",
    "NOTES_MIGRATIONS",
    "RETIRED_HEADER",
    "DatabaseNotesStore",
    "FileNotesStore",
    "FileRewrites",
    "NotesShelf",
    "NotesStore",
    "Rewrites",
    "SQLiteNotesStore",
    "TableAccess",
    "adopt_notes",
    "adopt_notes_folder",
    "atomic_write",
    "copy_rewrites",
    "format_note",
    "import_notes_file",
    "make_note",
    "move_aside",
    "move_in_notes",
    "move_notes",
    "notes_store_for",
    "parse_notes",
    "pg_notes_schema",
    "prompt_line",
    "read_old_file",
    "render_notes",
    "rewrites_for",
    "truncate_wal",
]


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


def notes_store_for(db: Any, namespace: str = "default") -> NotesStore:
    """The curated-notes store in a memory's database of either engine (``namespace`` keys the
    rows; one memory per namespace)."""
    return DatabaseNotesStore(db=db, namespace=namespace)
