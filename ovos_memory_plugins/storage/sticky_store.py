"""The sticky-note store: tables in the memory's own database, each note with its date and session.

The same tables and statements on both engines (:class:`StickyStore` over
:class:`~ovos_memory_plugins.storage.tables.TableAccess`; the PostgreSQL schema is in
:mod:`ovos_memory_plugins.storage.postgres.notes`, the SQLite one here, store name
``sticky_notes`` in ``_migrations``)::

    memory_sticky_notes(namespace, id, session_id, text, norm, lang, created, updated,
                        metadata, retired_on)                     -- key (namespace, id)
    memory_sticky_asks(namespace, session_id, utterance_key, at, reply)

``norm`` is the note's text normalised for dedup (:func:`note_key`): the same fact said twice
is one note. ``retired_on`` is the day a note stopped being true (NULL while active).
``memory_sticky_asks`` keeps each session's last ask and what was answered, so a replayed ask is not
acted on twice, even across a restart; the ask is kept as a digest of the utterance (never its
words), and a record whose answer quotes a note is deleted with that note.

Earlier releases kept these tables in ``<root>/sticky.db``; :func:`import_sticky_file` copies
such a file into the memory's database once (every note with its dates, session, language,
metadata and retirement, and the last-ask records) and renames it ``sticky.db.moved`` only after
the copy committed. A file that cannot be read is left untouched and reported.

Forgetting is for real: every SQLite connection runs with ``secure_delete`` (deleted rows are
zeroed) and the WAL is truncated after deletions, so a byte scan of the folder finds no
forgotten word; on PostgreSQL the tables are vacuumed after deletions.
The schema is created through :meth:`Database.migrate` (one ``BEGIN IMMEDIATE``), so processes
opening a new folder at once never fail on a table another one created.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.notes_adopt import move_aside, read_old_file
from ovos_memory_plugins.storage.notes_table import pg_notes_schema
from ovos_memory_plugins.storage.records import NewNote, Note, words_key
from ovos_memory_plugins.storage.sqlite.database import Migration
from ovos_memory_plugins.storage.tables import TableAccess, marks

LOG = logging.getLogger(__name__)

__all__ = [
    "MIGRATIONS",
    "StickyRow",
    "StickyShelf",
    "StickyStore",
    "ask_key",
    "asks_quoting",
    "import_sticky_file",
    "note_key",
    "note_of",
    "sticky_store_for",
]

#: Columns of a sticky note, in the order every engine reads them.
COLUMNS = "id, session_id, text, lang, created, updated, metadata, retired_on"


def _v1(conn: sqlite3.Connection) -> None:
    # the tables of the PostgreSQL engine (storage/postgres/notes.py), namespace included, so one
    # store class serves both engines
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_sticky_notes ("
        " namespace TEXT NOT NULL, id TEXT NOT NULL, session_id TEXT NOT NULL, text TEXT NOT NULL,"
        " norm TEXT NOT NULL, lang TEXT, created REAL NOT NULL, updated REAL NOT NULL,"
        " metadata TEXT NOT NULL DEFAULT '{}', retired_on TEXT, PRIMARY KEY (namespace, id))"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS memory_sticky_notes_session ON memory_sticky_notes (namespace, session_id, created)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS memory_sticky_notes_norm ON memory_sticky_notes (namespace, norm)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_sticky_asks ("
        " namespace TEXT NOT NULL, session_id TEXT NOT NULL, utterance_key TEXT NOT NULL, at REAL NOT NULL,"
        " reply TEXT NOT NULL, PRIMARY KEY (namespace, session_id))"
    )


#: The schema in the memory's SQLite file. Append only; never rename or reorder an applied step.
MIGRATIONS = [Migration("0001_sticky_notes", _v1)]


def note_key(text: str) -> str:
    """The dedup key of a note: NFKC, case-folded, whitespace collapsed, end punctuation dropped
    (:func:`~ovos_memory_plugins.protocols.words_key`, the one notes use too)."""
    return words_key(text)


def ask_key(utterance_key: str) -> str:
    """What ``memory_sticky_asks`` keeps of an ask: a digest, so the sentence itself is never stored."""
    return hashlib.sha256(utterance_key.encode("utf-8", "surrogatepass")).hexdigest()


def asks_quoting(records: Iterable[tuple[str, str]], texts: Iterable[str]) -> list[str]:
    """The sessions among ``(session_id, reply)`` records whose answer quotes one of ``texts``
    (case folded): their replay records go with the notes (every engine uses this)."""
    folded = [t.casefold() for t in texts if t.strip()]
    if not folded:
        return []
    doomed = []
    for session_id, reply in records:
        try:
            lines = json.loads(reply)
        except (TypeError, ValueError):
            lines = [str(reply)]
        said = " ".join(str(x) for x in lines) if isinstance(lines, list) else str(lines)
        said = said.casefold()
        if any(t in said for t in folded):
            doomed.append(session_id)
    return doomed


@dataclass
class StickyRow:
    """One sticky note as stored (the memory shows it as a ``protocols.Note``).

    Attributes:
        id: the note's id (content-derived; see ``BaseRetrievalMemory.document_id``).
        text: the fact, in the user's own words.
        session_id: the session it was said in.
        created: when it was first saved (Unix time).
        updated: when it was last said again or replaced.
        lang: the language of the phrase that caught it (None when saved through code).
        metadata: what was stored with it.
        retired_on: the day it stopped being true (``YYYY-MM-DD``); None while active.
    """

    id: str
    text: str
    session_id: str
    created: float
    updated: float
    lang: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    retired_on: str | None = None


def row_from(values: Sequence[Any]) -> StickyRow:
    """A :class:`StickyRow` from the columns :data:`COLUMNS` names, in that order."""
    try:
        meta = json.loads(values[6])
    except (TypeError, ValueError):
        meta = {}
    return StickyRow(
        id=values[0],
        text=values[2],
        session_id=values[1],
        created=float(values[4]),
        updated=float(values[5]),
        lang=values[3],
        metadata=meta if isinstance(meta, dict) else {},
        retired_on=values[7],
    )


def reply_lines(reply: Any) -> list[str] | None:
    """The lines of a stored last-ask reply (JSON list), None when unreadable."""
    try:
        value = json.loads(reply)
    except (TypeError, ValueError):
        return None
    return [str(x) for x in value] if isinstance(value, list) else []


_NOTES = f"SELECT {COLUMNS} FROM memory_sticky_notes WHERE namespace = ?"


class StickyStore:
    """Sticky notes in the memory's database, of either engine (see the module docstring).

    Args:
        db: the memory's open database (SQLite or PostgreSQL); the memory closes it.
        namespace: the memory's namespace (keys the rows; one memory per namespace).
    """

    def __init__(self, db: Any, namespace: str = "default") -> None:
        self.db = db
        self.t = TableAccess(db, namespace, ("sticky_notes", MIGRATIONS), pg_notes_schema)
        self.namespace = self.t.namespace

    def _rows(self, where: str, params: Sequence[Any] = ()) -> list[StickyRow]:
        return [row_from(tuple(r)) for r in self.t.query(_NOTES + where, (self.namespace, *params))]

    def put(
        self,
        note_id: str,
        text: str,
        session_id: str,
        *,
        lang: str | None = None,
        metadata: dict[str, Any] | None = None,
        now: float | None = None,
        created: float | None = None,
        retired_on: str | None = None,
    ) -> None:
        """Insert a note, or replace the text and metadata of the note with that id (its date
        stays; a retired note becomes active again). ``created`` and ``retired_on`` set a new
        note's date and retirement (a note copied from another store)."""
        stamp = time.time() if now is None else now
        meta = json.dumps(metadata or {}, ensure_ascii=False, default=str)
        first = stamp if created is None else created
        self.t.execute(
            "INSERT INTO memory_sticky_notes"
            " (namespace, id, session_id, text, norm, lang, created, updated, metadata, retired_on)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (namespace, id) DO UPDATE SET text = excluded.text, norm = excluded.norm,"
            " session_id = excluded.session_id, lang = coalesce(excluded.lang, memory_sticky_notes.lang),"
            " updated = excluded.updated, metadata = excluded.metadata, retired_on = excluded.retired_on",
            (self.namespace, note_id, session_id, text, note_key(text), lang, first, stamp, meta, retired_on),
        )

    def touch(self, note_id: str, now: float | None = None) -> None:
        """Mark a note as said again."""
        stamp = time.time() if now is None else now
        self.t.execute(
            "UPDATE memory_sticky_notes SET updated = ? WHERE namespace = ? AND id = ?",
            (stamp, self.namespace, note_id),
        )

    def get(self, note_id: str) -> StickyRow | None:
        """The note with that id, or None."""
        rows = self._rows(" AND id = ?", (note_id,))
        return rows[0] if rows else None

    def find_key(self, key: str, session_id: str | None = None) -> StickyRow | None:
        """The active note whose dedup key is ``key`` (in ``session_id`` only, when given)."""
        scoped = "" if session_id is None else " AND session_id = ?"
        params = (key,) if session_id is None else (key, session_id)
        rows = self._rows(f" AND norm = ? AND retired_on IS NULL{scoped} ORDER BY created, id LIMIT 1", params)
        return rows[0] if rows else None

    def notes(self, session_id: str | None = None, *, include_retired: bool = False) -> list[StickyRow]:
        """Every active note (of ``session_id`` only, when given), oldest first; retired ones too
        with ``include_retired``."""
        where = "" if include_retired else " AND retired_on IS NULL"
        params: tuple[Any, ...] = ()
        if session_id is not None:
            where += " AND session_id = ?"
            params = (session_id,)
        return self._rows(where + " ORDER BY created, id", params)

    def set_retired(self, note_id: str, retired_on: str | None) -> bool:
        """Retire a note (a day ``YYYY-MM-DD``) or make it active again (None); False when absent."""
        return bool(
            self.t.execute(
                "UPDATE memory_sticky_notes SET retired_on = ? WHERE namespace = ? AND id = ?",
                (retired_on, self.namespace, note_id),
            )
        )

    def ids(self, session_id: str) -> list[str]:
        """The ids of a session's notes."""
        rows = self.t.query(
            "SELECT id FROM memory_sticky_notes WHERE namespace = ? AND session_id = ?", (self.namespace, session_id)
        )
        return [str(r[0]) for r in rows]

    def delete(self, note_ids: Sequence[str]) -> int:
        """Delete notes by id, and the replay records quoting them; return how many existed."""
        ids = list(dict.fromkeys(note_ids))
        if not ids:
            return 0
        with self.t.atomic():
            params = (self.namespace, *ids)
            texts = [
                str(r[0])
                for r in self.t.query(
                    f"SELECT text FROM memory_sticky_notes WHERE namespace = ? AND id IN ({marks(ids)})", params
                )
            ]
            self.t.execute(f"DELETE FROM memory_sticky_notes WHERE namespace = ? AND id IN ({marks(ids)})", params)
            records = self.t.query(
                "SELECT session_id, reply FROM memory_sticky_asks WHERE namespace = ?", (self.namespace,)
            )
            doomed = asks_quoting([(str(r[0]), str(r[1])) for r in records], texts)
            self.t.executemany(
                "DELETE FROM memory_sticky_asks WHERE namespace = ? AND session_id = ?",
                [(self.namespace, s) for s in doomed],
            )
            self.t.dirty = self.t.dirty or bool(texts)
        self.checkpoint()
        return len(texts)

    def delete_all(self) -> int:
        """Delete every note (and the replay records); return how many notes there were."""
        with self.t.atomic():
            self.t.execute("DELETE FROM memory_sticky_asks WHERE namespace = ?", (self.namespace,))
            n = self.t.execute("DELETE FROM memory_sticky_notes WHERE namespace = ?", (self.namespace,))
            self.t.dirty = True
        self.checkpoint()
        return n

    def forget_asks(self, session_id: str) -> None:
        """Delete a session's replay record."""
        self.t.execute(
            "DELETE FROM memory_sticky_asks WHERE namespace = ? AND session_id = ?", (self.namespace, session_id)
        )
        self.t.dirty = True
        self.checkpoint()

    def last_ask(self, session_id: str) -> tuple[str, float, list[str]] | None:
        """The session's last ask: its :func:`ask_key`, when (Unix time), and the lines answered."""
        rows = self.t.query(
            "SELECT utterance_key, at, reply FROM memory_sticky_asks WHERE namespace = ? AND session_id = ?",
            (self.namespace, session_id),
        )
        lines = reply_lines(rows[0][2]) if rows else None
        return None if lines is None else (str(rows[0][0]), float(rows[0][1]), lines)

    def set_last_ask(self, session_id: str, utterance_key: str, lines: Sequence[str], now: float | None = None) -> None:
        """Record the session's last ask (``utterance_key`` is an :func:`ask_key` digest) and the
        lines answered to it."""
        stamp = time.time() if now is None else now
        self.t.execute(
            "INSERT INTO memory_sticky_asks (namespace, session_id, utterance_key, at, reply) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (namespace, session_id) DO UPDATE SET utterance_key = excluded.utterance_key,"
            " at = excluded.at, reply = excluded.reply",
            (self.namespace, session_id, utterance_key, stamp, json.dumps(list(lines), ensure_ascii=False)),
        )

    def asks(self) -> list[tuple[str, str, float, list[str]]]:
        """Every replay record: ``(session_id, utterance_key, at, lines)``."""
        rows = self.t.query(
            "SELECT session_id, utterance_key, at, reply FROM memory_sticky_asks WHERE namespace = ?"
            " ORDER BY session_id",
            (self.namespace,),
        )
        return [(str(r[0]), str(r[1]), float(r[2]), reply_lines(r[3]) or []) for r in rows]

    def count(self) -> int:
        """How many notes there are (active and retired)."""
        return int(
            self.t.scalar("SELECT count(*) FROM memory_sticky_notes WHERE namespace = ?", (self.namespace,)) or 0
        )

    def checkpoint(self) -> None:
        """After deletions, outside a transaction: truncate the WAL / VACUUM (else later)."""
        self.t.purge("memory_sticky_notes, memory_sticky_asks")

    def close(self) -> None:
        """Purge what a deletion left (the memory closes the database)."""
        with contextlib.suppress(StorageError, sqlite3.Error):
            self.checkpoint()


def day_of(stamp: float) -> str:
    """The UTC day of a Unix time, ``YYYY-MM-DD`` (a sticky note's date)."""
    return datetime.fromtimestamp(stamp, tz=timezone.utc).strftime("%Y-%m-%d")


def note_of(row: StickyRow) -> Note:
    """A stored row as the shared :class:`~ovos_memory_plugins.storage.records.Note` (dated by its day)."""
    return Note(
        id=row.id,
        text=row.text,
        date=day_of(row.created),
        session_id=row.session_id,
        retired_on=row.retired_on,
        metadata=dict(row.metadata),
    )


class StickyShelf:
    """The rows of a :class:`StickyStore` as the notes part works on them
    (:class:`~ovos_memory_plugins.notebook.NoteShelf`): one row per note, oldest first, ids
    given by ``new_id`` (the memory's document ids, ``d-…``).

    Args:
        store: the sticky-note tables.
        new_id: the id of a new note, from its session and text.
        now: the time a note is saved (Unix time).
    """

    def __init__(self, store: StickyStore, *, new_id: Callable[[str, str], str], now: Callable[[], float]) -> None:
        self.store = store
        self._new_id = new_id
        self._now = now

    def rows(self, *, include_retired: bool = False, fresh: bool = True) -> list[Note]:
        """Every note, oldest first (retired ones too with ``include_retired``)."""
        return [note_of(r) for r in self.store.notes(include_retired=include_retired)]

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """Every write is one statement: the memory's lock is enough."""
        return contextlib.nullcontext()

    def insert(self, new: NewNote) -> Note:
        """Save a note dated now (``new.date`` is not kept: a sticky note is dated when saved);
        a retired note with the same id becomes active again."""
        note_id = self._new_id(new.session_id, new.text)
        stamp = self._now()
        self.store.put(note_id, new.text, new.session_id, lang=new.lang, metadata=new.metadata, now=stamp)
        row = self.store.get(note_id)
        return note_of(row or StickyRow(note_id, new.text, new.session_id, stamp, stamp, new.lang, new.metadata))

    def touch(self, note: Note) -> None:
        """Mark the note as said again."""
        self.store.touch(note.id)

    def replace(self, old: Note, text: str, *, date: str, day: str) -> tuple[Note, Note]:
        """Retire ``old`` and save ``text`` in its session, with its language and metadata."""
        row = self.store.get(old.id)
        self.store.set_retired(old.id, day)
        lang = row.lang if row is not None else None
        new = self.insert(NewNote(text, old.session_id, "", lang, dict(old.metadata)))
        return self._now_of(old), new

    def set_retired(self, note: Note, day: str | None) -> Note:
        """Retire the note (``day``) or make it active again (None)."""
        self.store.set_retired(note.id, day)
        return self._now_of(note)

    def _now_of(self, note: Note) -> Note:
        row = self.store.get(note.id)
        return note_of(row) if row is not None else note

    def delete(self, note: Note, *, session_id: str | None = None) -> list[Note]:
        """Delete the note's row (and the replay records quoting it)."""
        row = self.store.get(note.id)
        if row is None or (session_id is not None and row.session_id != session_id):
            return []
        self.store.delete([note.id])
        return [note_of(row)]


def copy_sticky(source: StickyStore, target: StickyStore) -> int:
    """Copy every note of ``source`` (active and retired, with dates, session, language and
    metadata) and its replay records into ``target``; a note id already there is kept as it is.
    Returns how many notes were copied."""
    have = {r.id for r in target.notes(include_retired=True)}
    copied = 0
    for row in source.notes(include_retired=True):
        if row.id in have:
            continue
        target.put(
            row.id,
            row.text,
            row.session_id,
            lang=row.lang,
            metadata=row.metadata,
            now=row.updated,
            created=row.created,
            retired_on=row.retired_on,
        )
        copied += 1
    for session_id, key, at, lines in source.asks():
        if target.last_ask(session_id) is None:
            target.set_last_ask(session_id, key, lines, at)
    return copied


class _OldStickyFile:
    """The rows of an earlier release's ``sticky.db`` (read-only, for :func:`copy_sticky`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(notes)")}
        if not {"id", "session_id", "text", "created", "updated"} <= columns:
            raise sqlite3.DatabaseError("no table of sticky notes")
        retired = "retired_on" if "retired_on" in columns else "NULL"
        self.rows = [
            row_from(tuple(r))
            for r in conn.execute(
                f"SELECT id, session_id, text, lang, created, updated, metadata, {retired} FROM notes"
                " ORDER BY created, rowid"
            )
        ]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        # records of releases before retirement hold the whole sentence, not a digest: not kept
        self.records = (
            [
                (str(r[0]), str(r[1]), float(r[2]), reply_lines(r[3]) or [])
                for r in conn.execute("SELECT session_id, utterance_key, at, reply FROM last_asks")
            ]
            if "last_asks" in tables and "retired_on" in columns
            else []
        )

    def notes(self, session_id: str | None = None, *, include_retired: bool = False) -> list[StickyRow]:
        return list(self.rows)

    def asks(self) -> list[tuple[str, str, float, list[str]]]:
        return list(self.records)


def import_sticky_file(store: StickyStore, path: Path) -> int | None:
    """Copy an earlier release's ``sticky.db`` into ``store`` (the memory's database), once, in
    one transaction, then rename the file (and its WAL) ``*.moved``; return how many notes were
    copied, None when there was nothing to do. A file that cannot be read is left untouched and
    reported (an ERROR); the memory opens without its notes until it is fixed."""
    name = f"import:{path.name}"
    if not path.exists():
        return None
    copied = 0

    def apply(conn: sqlite3.Connection) -> None:
        nonlocal copied
        old = read_old_file(path, _OldStickyFile)
        copied = copy_sticky(old, store)  # type: ignore[arg-type]

    try:
        store.db.migrate("legacy", [Migration(name, apply)])
    except (sqlite3.Error, StorageError, OSError) as exc:
        LOG.error("sticky notes: cannot read %s (%s); it is left untouched and its notes are not shown", path, exc)
        return None
    move_aside(path)
    LOG.warning(
        "sticky notes: moved %d note(s) of %s into %s; the old file is now %s.moved",
        copied,
        path,
        store.db.path,
        path.name,
    )
    return copied


def sticky_store_for(db: Any, namespace: str = "default") -> StickyStore:
    """The sticky-note store over a memory's database of either engine (``namespace`` keys the
    rows; one memory per namespace)."""
    return StickyStore(db, namespace)
