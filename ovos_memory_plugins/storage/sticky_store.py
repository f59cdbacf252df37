"""The sticky-note store: one SQLite table of notes, each with its date and the session it came from.

Schema (store name ``sticky`` in ``_migrations``)::

    notes(id TEXT PRIMARY KEY, session_id TEXT, text TEXT, norm TEXT, lang TEXT,
          created REAL, updated REAL, metadata TEXT, retired_on TEXT)

    last_asks(session_id TEXT PRIMARY KEY, utterance_key TEXT, at REAL, reply TEXT)

``norm`` is the note's text normalised for dedup (:func:`note_key`): the same fact said twice
is one note. ``retired_on`` is the day a note stopped being true (NULL while active).
``last_asks`` keeps each session's last ask and what was answered, so a replayed ask is not
acted on twice, even across a restart; the ask is kept as a digest of the utterance (never its
words), and a record whose answer quotes a note is deleted with that note.

Forgetting is for real: every connection runs with ``secure_delete`` (deleted rows are zeroed)
and the WAL is truncated after deletions, so a byte scan of the folder finds no forgotten word.
The schema is created through :meth:`Database.migrate` with ``IF NOT EXISTS`` everywhere, so
processes opening a new folder at once never fail on a table another one created.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.protocols import words_key
from ovos_memory_plugins.storage.notes_store import truncate_wal
from ovos_memory_plugins.storage.sqlite import Database, Migration

__all__ = ["MIGRATIONS", "StickyRow", "StickyStore", "ask_key", "note_key"]


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS notes ("
        " id TEXT PRIMARY KEY, session_id TEXT NOT NULL, text TEXT NOT NULL, norm TEXT NOT NULL,"
        " lang TEXT, created REAL NOT NULL, updated REAL NOT NULL, metadata TEXT NOT NULL DEFAULT '{}')"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS notes_session ON notes (session_id, created)")
    conn.execute("CREATE INDEX IF NOT EXISTS notes_norm ON notes (norm)")


def _v2(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS last_asks ("
        " session_id TEXT PRIMARY KEY, utterance_key TEXT NOT NULL, at REAL NOT NULL, reply TEXT NOT NULL)"
    )


def _v3(conn: sqlite3.Connection) -> None:
    """Sticky notes can be retired; replay records keep a digest of the ask, not its words."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(notes)")}
    if "retired_on" not in columns:
        conn.execute("ALTER TABLE notes ADD COLUMN retired_on TEXT")
    conn.execute("DELETE FROM last_asks")  # older records hold the whole sentence


MIGRATIONS = [Migration("0001_notes", _v1), Migration("0002_last_asks", _v2), Migration("0003_retire_and_digests", _v3)]


def note_key(text: str) -> str:
    """The dedup key of a note: NFKC, case-folded, whitespace collapsed, end punctuation dropped
    (:func:`~ovos_memory_plugins.protocols.words_key`, the one notes use too)."""
    return words_key(text)


def ask_key(utterance_key: str) -> str:
    """What ``last_asks`` keeps of an ask: a digest, so the sentence itself is never stored."""
    return hashlib.sha256(utterance_key.encode("utf-8", "surrogatepass")).hexdigest()


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


def _note(row: sqlite3.Row) -> StickyRow:
    try:
        meta = json.loads(row["metadata"])
    except (TypeError, ValueError):
        meta = {}
    return StickyRow(
        id=row["id"],
        text=row["text"],
        session_id=row["session_id"],
        created=row["created"],
        updated=row["updated"],
        lang=row["lang"],
        metadata=meta if isinstance(meta, dict) else {},
        retired_on=row["retired_on"],
    )


class StickyStore:
    """Notes over a :class:`Database` (migrated on open, ``secure_delete`` on)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate("sticky", MIGRATIONS)
        with contextlib.suppress(sqlite3.Error, StorageError):
            db.execute("PRAGMA secure_delete = ON")
        self._wal_dirty = False

    def _deleted(self) -> None:
        """After a deletion: truncate the WAL (its old pages hold the deleted words)."""
        self._wal_dirty = not truncate_wal(self.db)

    def put(
        self,
        note_id: str,
        text: str,
        session_id: str,
        *,
        lang: str | None = None,
        metadata: dict[str, Any] | None = None,
        now: float | None = None,
    ) -> None:
        """Insert a note, or replace the text and metadata of the note with that id (its date
        stays; a retired note becomes active again)."""
        stamp = time.time() if now is None else now
        meta = json.dumps(metadata or {}, ensure_ascii=False, default=str)
        with self.db.atomic() as conn:
            conn.execute(
                "INSERT INTO notes (id, session_id, text, norm, lang, created, updated, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET text = excluded.text, norm = excluded.norm,"
                " session_id = excluded.session_id, lang = COALESCE(excluded.lang, notes.lang),"
                " updated = excluded.updated, metadata = excluded.metadata, retired_on = NULL",
                (note_id, session_id, text, note_key(text), lang, stamp, stamp, meta),
            )

    def touch(self, note_id: str, now: float | None = None) -> None:
        """Mark a note as said again."""
        stamp = time.time() if now is None else now
        self.db.execute("UPDATE notes SET updated = ? WHERE id = ?", (stamp, note_id))

    def get(self, note_id: str) -> StickyRow | None:
        """The note with that id, or None."""
        rows = self.db.query("SELECT * FROM notes WHERE id = ?", (note_id,))
        return _note(rows[0]) if rows else None

    def find_key(self, key: str, session_id: str | None = None) -> StickyRow | None:
        """The active note whose dedup key is ``key`` (in ``session_id`` only, when given)."""
        if session_id is None:
            rows = self.db.query(
                "SELECT * FROM notes WHERE norm = ? AND retired_on IS NULL ORDER BY created LIMIT 1", (key,)
            )
        else:
            rows = self.db.query(
                "SELECT * FROM notes WHERE norm = ? AND session_id = ? AND retired_on IS NULL ORDER BY created LIMIT 1",
                (key, session_id),
            )
        return _note(rows[0]) if rows else None

    def notes(self, session_id: str | None = None, *, include_retired: bool = False) -> list[StickyRow]:
        """Every active note (of ``session_id`` only, when given), oldest first; retired ones too
        with ``include_retired``."""
        where = [] if include_retired else ["retired_on IS NULL"]
        params: list[Any] = []
        if session_id is not None:
            where.append("session_id = ?")
            params.append(session_id)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self.db.query(f"SELECT * FROM notes{clause} ORDER BY created, rowid", params)
        return [_note(r) for r in rows]

    def set_retired(self, note_id: str, retired_on: str | None) -> bool:
        """Retire a note (a day ``YYYY-MM-DD``) or make it active again (None); False when absent."""
        cur = self.db.execute("UPDATE notes SET retired_on = ? WHERE id = ?", (retired_on, note_id))
        return bool(cur.rowcount)

    def ids(self, session_id: str) -> list[str]:
        """The ids of a session's notes."""
        return [r[0] for r in self.db.query("SELECT id FROM notes WHERE session_id = ?", (session_id,))]

    def delete(self, note_ids: Sequence[str]) -> int:
        """Delete notes by id, and the replay records quoting them; return how many existed."""
        n = 0
        with self.db.atomic() as conn:
            texts = []
            for note_id in note_ids:
                row = conn.execute("SELECT text FROM notes WHERE id = ?", (note_id,)).fetchone()
                if row is None:
                    continue
                texts.append(str(row[0]))
                n += conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount
            self._drop_asks_quoting(conn, texts)
        if n:
            self._deleted()
        return n

    def delete_all(self) -> int:
        """Delete every note (and the replay records); return how many notes there were."""
        with self.db.atomic() as conn:
            conn.execute("DELETE FROM last_asks")
            n = int(conn.execute("DELETE FROM notes").rowcount)
        self._deleted()
        return n

    def forget_asks(self, session_id: str) -> None:
        """Delete a session's replay record."""
        self.db.execute("DELETE FROM last_asks WHERE session_id = ?", (session_id,))
        self._deleted()

    @staticmethod
    def _drop_asks_quoting(conn: sqlite3.Connection, texts: Iterable[str]) -> None:
        """Delete the replay records whose answer quotes one of ``texts``."""
        folded = [t.casefold() for t in texts if t.strip()]
        if not folded:
            return
        doomed = []
        for session_id, reply in conn.execute("SELECT session_id, reply FROM last_asks"):
            try:
                lines = json.loads(reply)
            except (TypeError, ValueError):
                lines = [str(reply)]
            said = " ".join(str(x) for x in lines) if isinstance(lines, list) else str(lines)
            said = said.casefold()
            if any(t in said for t in folded):
                doomed.append((session_id,))
        conn.executemany("DELETE FROM last_asks WHERE session_id = ?", doomed)

    def last_ask(self, session_id: str) -> tuple[str, float, list[str]] | None:
        """The session's last ask: its :func:`ask_key`, when (Unix time), and the lines answered."""
        rows = self.db.query("SELECT utterance_key, at, reply FROM last_asks WHERE session_id = ?", (session_id,))
        if not rows:
            return None
        try:
            reply = json.loads(rows[0]["reply"])
        except (TypeError, ValueError):
            return None
        lines = [str(x) for x in reply] if isinstance(reply, list) else []
        return str(rows[0]["utterance_key"]), float(rows[0]["at"]), lines

    def set_last_ask(self, session_id: str, utterance_key: str, lines: Sequence[str], now: float | None = None) -> None:
        """Record the session's last ask (``utterance_key`` is an :func:`ask_key` digest) and the
        lines answered to it."""
        stamp = time.time() if now is None else now
        self.db.execute(
            "INSERT INTO last_asks (session_id, utterance_key, at, reply) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET utterance_key = excluded.utterance_key,"
            " at = excluded.at, reply = excluded.reply",
            (session_id, utterance_key, stamp, json.dumps(list(lines), ensure_ascii=False)),
        )

    def count(self) -> int:
        """How many notes there are (active and retired)."""
        return int(self.db.scalar("SELECT COUNT(*) FROM notes") or 0)

    def close(self) -> None:
        """Truncate a WAL still holding deleted notes (the caller closes the database)."""
        if self._wal_dirty:
            truncate_wal(self.db)
