"""The sticky-note store: one SQLite table of notes, each with its date and the session it came from.

Schema (store name ``sticky`` in ``_migrations``)::

    notes(id TEXT PRIMARY KEY, session_id TEXT, text TEXT, norm TEXT, lang TEXT,
          created REAL, updated REAL, metadata TEXT)

    last_asks(session_id TEXT PRIMARY KEY, utterance_key TEXT, at REAL, reply TEXT)

``norm`` is the note's text normalised for dedup (:func:`note_key`): the same fact said twice
is one note. ``last_asks`` keeps each session's last ask and what was answered, so a replayed
ask is not acted on twice, even across a restart.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ovos_memory_plugins.common import normalize_content
from ovos_memory_plugins.storage.sqlite import Database, Migration

__all__ = ["MIGRATIONS", "Note", "StickyStore", "note_key"]


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE notes ("
        " id TEXT PRIMARY KEY, session_id TEXT NOT NULL, text TEXT NOT NULL, norm TEXT NOT NULL,"
        " lang TEXT, created REAL NOT NULL, updated REAL NOT NULL, metadata TEXT NOT NULL DEFAULT '{}')"
    )
    conn.execute("CREATE INDEX notes_session ON notes (session_id, created)")
    conn.execute("CREATE INDEX notes_norm ON notes (norm)")


def _v2(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE last_asks ("
        " session_id TEXT PRIMARY KEY, utterance_key TEXT NOT NULL, at REAL NOT NULL, reply TEXT NOT NULL)"
    )


MIGRATIONS = [Migration("0001_notes", _v1), Migration("0002_last_asks", _v2)]

_TRAILING = " \t\r\n.。!！?？;；,，…"


def note_key(text: str) -> str:
    """The dedup key of a note: NFKC, case-folded, whitespace collapsed, end punctuation dropped."""
    return normalize_content(text).rstrip(_TRAILING)


@dataclass
class Note:
    """One sticky note.

    Attributes:
        id: the note's id (content-derived; see ``BaseRetrievalMemory.document_id``).
        text: the fact, in the user's own words.
        session_id: the session it was said in.
        created: when it was first saved (Unix time).
        updated: when it was last said again or replaced.
        lang: the language of the phrase that caught it (None when saved through code).
        metadata: what was stored with it.
    """

    id: str
    text: str
    session_id: str
    created: float
    updated: float
    lang: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def _note(row: sqlite3.Row) -> Note:
    try:
        meta = json.loads(row["metadata"])
    except (TypeError, ValueError):
        meta = {}
    return Note(
        id=row["id"],
        text=row["text"],
        session_id=row["session_id"],
        created=row["created"],
        updated=row["updated"],
        lang=row["lang"],
        metadata=meta if isinstance(meta, dict) else {},
    )


class StickyStore:
    """Notes over a :class:`Database` (migrated on open)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate("sticky", MIGRATIONS)

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
        """Insert a note, or replace the text and metadata of the note with that id (its date stays)."""
        stamp = time.time() if now is None else now
        meta = json.dumps(metadata or {}, ensure_ascii=False, default=str)
        with self.db.atomic() as conn:
            conn.execute(
                "INSERT INTO notes (id, session_id, text, norm, lang, created, updated, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET text = excluded.text, norm = excluded.norm,"
                " session_id = excluded.session_id, lang = COALESCE(excluded.lang, notes.lang),"
                " updated = excluded.updated, metadata = excluded.metadata",
                (note_id, session_id, text, note_key(text), lang, stamp, stamp, meta),
            )

    def touch(self, note_id: str, now: float | None = None) -> None:
        """Mark a note as said again."""
        stamp = time.time() if now is None else now
        self.db.execute("UPDATE notes SET updated = ? WHERE id = ?", (stamp, note_id))

    def get(self, note_id: str) -> Note | None:
        """The note with that id, or None."""
        rows = self.db.query("SELECT * FROM notes WHERE id = ?", (note_id,))
        return _note(rows[0]) if rows else None

    def find_key(self, key: str, session_id: str | None = None) -> Note | None:
        """The note whose dedup key is ``key`` (in ``session_id`` only, when given)."""
        if session_id is None:
            rows = self.db.query("SELECT * FROM notes WHERE norm = ? ORDER BY created LIMIT 1", (key,))
        else:
            rows = self.db.query(
                "SELECT * FROM notes WHERE norm = ? AND session_id = ? ORDER BY created LIMIT 1", (key, session_id)
            )
        return _note(rows[0]) if rows else None

    def notes(self, session_id: str | None = None) -> list[Note]:
        """Every note (of ``session_id`` only, when given), oldest first."""
        if session_id is None:
            rows = self.db.query("SELECT * FROM notes ORDER BY created, rowid")
        else:
            rows = self.db.query("SELECT * FROM notes WHERE session_id = ? ORDER BY created, rowid", (session_id,))
        return [_note(r) for r in rows]

    def ids(self, session_id: str) -> list[str]:
        """The ids of a session's notes."""
        return [r[0] for r in self.db.query("SELECT id FROM notes WHERE session_id = ?", (session_id,))]

    def delete(self, note_ids: Sequence[str]) -> int:
        """Delete notes by id; return how many existed."""
        n = 0
        with self.db.atomic() as conn:
            for note_id in note_ids:
                n += conn.execute("DELETE FROM notes WHERE id = ?", (note_id,)).rowcount
        return n

    def delete_all(self) -> int:
        """Delete every note (and the replay records); return how many notes there were."""
        with self.db.atomic() as conn:
            conn.execute("DELETE FROM last_asks")
            return int(conn.execute("DELETE FROM notes").rowcount)

    def last_ask(self, session_id: str) -> tuple[str, float, list[str]] | None:
        """The session's last ask: its utterance key, when (Unix time), and the lines answered."""
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
        """Record the session's last ask and the lines answered to it."""
        stamp = time.time() if now is None else now
        self.db.execute(
            "INSERT INTO last_asks (session_id, utterance_key, at, reply) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET utterance_key = excluded.utterance_key,"
            " at = excluded.at, reply = excluded.reply",
            (session_id, utterance_key, stamp, json.dumps(list(lines), ensure_ascii=False)),
        )

    def count(self) -> int:
        """How many notes there are."""
        return int(self.db.scalar("SELECT COUNT(*) FROM notes") or 0)
