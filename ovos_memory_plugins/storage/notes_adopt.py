"""Moving curated notes in: from an earlier release's ``notes.db``, and between the two store kinds.

Earlier releases kept the SQLite store in ``<root>/notes.db``: :func:`import_notes_file` copies
it into the memory's database once and renames it ``notes.db.moved`` after the copy committed
(:func:`read_old_file` and :func:`move_aside` serve the sticky notes' old file too).
:func:`move_notes` copies every note, active and retired, from one store to another.
:func:`adopt_notes` (``Storage.notes_store``) opens the notes of a memory after moving in what
earlier releases and the other store kind left, so no plugin opens a database for its notes.
:func:`adopt_notes_folder` moves in the folder a notes member of a composite kept on its own in
earlier releases (the notes part of a composite's one storage takes it in once).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ovos_memory_plugins.errors import CorruptFileError, StorageError
from ovos_memory_plugins.storage.notes_file import FileNotesStore
from ovos_memory_plugins.storage.notes_format import make_note
from ovos_memory_plugins.storage.notes_table import DatabaseNotesStore, SQLiteNotesStore
from ovos_memory_plugins.storage.records import Note
from ovos_memory_plugins.storage.sqlite.database import Database, Migration

if TYPE_CHECKING:
    from ovos_memory_plugins.storage.notes_store import NotesStore, Rewrites

LOG = logging.getLogger("ovos_memory_plugins.storage.notes_store")  # the name its records always had
_T = TypeVar("_T")

__all__ = [
    "adopt_notes",
    "adopt_notes_folder",
    "import_notes_file",
    "move_aside",
    "move_in_notes",
    "move_notes",
    "read_old_file",
]


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


def adopt_notes_folder(storage: Any, store: NotesStore, rewrites: Rewrites, folder: Path) -> int:
    """Move into ``store`` (the notes of a part of ``storage``, a composite's one storage) and
    ``rewrites`` what a notes memory of an earlier release kept in its own ``folder``
    (``<root>/<member>/<namespace>``); return how many notes came. Once and losslessly:

    * its ``MEMORY.md`` and ``RETIRED.md`` (sessions included) and an older ``notes.db``: every
      note, active and retired, with its date (a note already there, same words, is kept once:
      ids come from the words); the files are then renamed ``*.moved``;
    * its undo history (``MEMORY.md.bak``, ``.notes-history/``, ``.dreamed``), copied, then
      renamed ``*.moved``;
    * into a ``MEMORY.md`` store: the notes the storage's table received when the composite
      merged the folder's database (the member kept them there, ``"store": "sqlite"`` before).

    A file that cannot be parsed is left untouched (an ERROR); raises nothing else but
    ``StorageError``/``OSError`` from the target."""
    moved = 0
    if isinstance(store, FileNotesStore) and storage.local and not storage.db.in_ram:
        before = len(store.load()) + len(store.retired())
        _move_out_of_table(storage, store, None)
        moved += len(store.load()) + len(store.retired()) - before
    if not folder.is_dir():
        return moved
    same = isinstance(store, FileNotesStore) and store.root.resolve() == folder.resolve()
    if same:
        return moved
    copied = import_notes_file(store, folder / "notes.db")
    moved += copied or 0
    from ovos_memory_plugins.storage.notes_rewrites import FileRewrites, copy_rewrites

    with store.transaction():  # processes opening the composite at once: one moves, the others find it done
        if (folder / "MEMORY.md").exists() or (folder / "RETIRED.md").exists():
            old = FileNotesStore(folder)
            try:
                count = len(old.load()) + len(old.retired())
            except CorruptFileError as exc:
                LOG.error("notes: cannot move the notes of %s (%s); they are left untouched", folder, exc)
                count = 0
            else:
                if move_in_notes(old, store, [folder / "MEMORY.md", folder / "RETIRED.md"]):
                    moved += count
        old_rewrites = FileRewrites(folder)
        if old_rewrites.bodies() or old_rewrites.dreamed() is not None or old_rewrites.backup.exists():
            copy_rewrites(old_rewrites, rewrites)
            old_rewrites.move_aside()
    return moved
