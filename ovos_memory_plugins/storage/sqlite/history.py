"""The short-term history store (SQLite), one of the parts of a memory's one database.

* ``history``: every recorded USER and ASSISTANT message per session, trimmed to the newest
  ``keep`` messages per session on write; ``exchange_id`` names the exchange document a message
  became part of, so deleting that document deletes the messages too (else the history window
  would show a forgotten exchange again).
* ``sessions``: per session, the id of its last exchange document (the next exchange names it
  as its ``previous_exchange``; earlier releases chained the ids themselves on it).

The document catalogue of earlier releases (``documents`` here, without text) is now the
memory's one documents table (:mod:`ovos_memory_plugins.storage.sqlite.engine`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from ovos_memory_plugins.common import exchange_parts
from ovos_memory_plugins.storage.records import StoredDocument, StoredMessage
from ovos_memory_plugins.storage.sqlite.database import Database, Migration, chunked

__all__ = ["SqliteHistory", "StoredMessage"]


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE history ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, created REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX history_session ON history (session_id, id)")
    conn.execute("CREATE TABLE sessions (session_id TEXT PRIMARY KEY, last_exchange_id TEXT NOT NULL)")
    # (earlier releases also created the catalogue ``documents`` here; the memory's documents
    # table replaces it, see sqlite/engine.py's 0001_documents)


def _v2(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE history ADD COLUMN exchange_id TEXT")
    conn.execute("CREATE INDEX history_exchange ON history (exchange_id)")


MIGRATIONS = [Migration("0001_history_sessions_documents", _v1), Migration("0002_exchange_ids", _v2)]


#: The trim of :meth:`SqliteHistory.append`: once the session holds more than ``full`` messages,
#: every message older than its newest ``keep`` goes; the trimmed rows come back.
_TRIM = (
    "DELETE FROM history WHERE session_id = :s"
    " AND EXISTS (SELECT 1 FROM history WHERE session_id = :s ORDER BY id DESC LIMIT 1 OFFSET :full)"
    " AND id <= (SELECT id FROM history WHERE session_id = :s ORDER BY id DESC LIMIT 1 OFFSET :keep)"
    " RETURNING id, role, content, created"
)


class SqliteHistory:
    """History and exchange-id chains over a :class:`Database`
    (see :class:`ovos_memory_plugins.storage.seam.HistoryStore`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate("history", MIGRATIONS)

    #: :meth:`append` takes ``batch`` and returns the messages it trimmed (the seam's
    #: :class:`~ovos_memory_plugins.storage.seam.HistoryStore`).
    trims_in_batches = True

    def append(
        self,
        session_id: str,
        messages: Sequence[tuple[str, str]],
        keep: int,
        last_exchange_id: str | None = None,
        exchange_ids: Sequence[str | None] | None = None,
        *,
        created: float | None = None,
        batch: int = 1,
    ) -> list[StoredMessage]:
        """Append ``(role, content)`` messages (made at ``created``, default now); once the
        session holds ``keep + batch`` messages or more, trim it to its newest ``keep``; return
        the trimmed messages, oldest first."""
        now = time.time() if created is None else created
        ids = list(exchange_ids) if exchange_ids is not None else [None] * len(messages)
        keep = max(keep, 0)
        with self.db.atomic(savepoint=False) as conn:
            conn.executemany(
                "INSERT INTO history (session_id, role, content, created, exchange_id) VALUES (?, ?, ?, ?, ?)",
                [(session_id, role, content, now, ids[i]) for i, (role, content) in enumerate(messages)],
            )
            if last_exchange_id is not None:
                conn.execute(
                    "INSERT INTO sessions (session_id, last_exchange_id) VALUES (?, ?)"
                    " ON CONFLICT (session_id) DO UPDATE SET last_exchange_id = excluded.last_exchange_id",
                    (session_id, last_exchange_id),
                )
            rows = conn.execute(_TRIM, {"s": session_id, "keep": keep, "full": keep + max(batch, 1) - 1}).fetchall()
        return [StoredMessage(r[1], r[2], r[3]) for r in sorted(rows, key=lambda r: int(r[0]))]

    def tag_exchange(self, session_id: str, exchange_id: str) -> None:
        """Mark the session's last untagged user message as part of ``exchange_id``."""
        self.db.execute(
            "UPDATE history SET exchange_id = ? WHERE id = (SELECT id FROM history WHERE session_id = ?"
            " AND role = 'user' AND exchange_id IS NULL ORDER BY id DESC LIMIT 1)",
            (exchange_id, session_id),
        )

    def recent(self, session_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a session, oldest first, each with its ``created``."""
        rows = self.db.query(
            "SELECT role, content, created FROM history WHERE session_id = ? ORDER BY id DESC LIMIT ?",
            (session_id, max(limit, 0)),
        )
        return [StoredMessage(*r) for r in reversed(rows)]

    def last_exchange_id(self, session_id: str) -> str:
        """The id of the session's newest exchange document, ``""`` when it has none."""
        value = self.db.scalar("SELECT last_exchange_id FROM sessions WHERE session_id = ?", (session_id,))
        return str(value) if value is not None else ""

    def sessions(self) -> list[str]:
        """Every session that has history."""
        return [r[0] for r in self.db.query("SELECT DISTINCT session_id FROM history ORDER BY session_id")]

    def remove_exchanges(self, docs: Sequence[StoredDocument]) -> int:
        """Delete the messages the given documents were recorded from; return how many.

        Messages tagged with the document's id go; so do untagged messages of earlier releases
        whose text is the document's question or answer in its session.
        """
        n = 0
        with self.db.atomic(savepoint=False) as conn:
            ids = [d.doc_id for d in docs]
            for chunk, marks in chunked(ids):
                n += conn.execute(f"DELETE FROM history WHERE exchange_id IN ({marks})", chunk).rowcount
            for doc in docs:
                parts = exchange_parts(doc.text)
                if parts is None:
                    continue
                n += conn.execute(
                    "DELETE FROM history WHERE session_id = ? AND exchange_id IS NULL AND"
                    " ((role = 'user' AND content = ?) OR (role = 'assistant' AND content = ?))",
                    (doc.session_id, parts[0], parts[1]),
                ).rowcount
        return n

    def remove_quoting(self, session_id: str, text: str) -> int:
        """Delete the session's user messages that quote ``text`` (case folded) and the
        exchanges they belong to; return how many messages went."""
        if not text.strip():
            return 0
        with self.db.atomic(savepoint=False) as conn:
            quoting = "session_id = ? AND role = 'user' AND instr(lower(content), lower(?)) > 0"
            n = conn.execute(
                "DELETE FROM history WHERE session_id = ? AND exchange_id IN"
                f" (SELECT exchange_id FROM history WHERE {quoting} AND exchange_id IS NOT NULL)",
                (session_id, session_id, text),
            ).rowcount
            n += conn.execute(f"DELETE FROM history WHERE {quoting}", (session_id, text)).rowcount
        return int(n)

    def clear_session(self, session_id: str) -> int:
        """Delete a session's history; return how many messages went."""
        with self.db.atomic(savepoint=False) as conn:
            n = conn.execute("DELETE FROM history WHERE session_id = ?", (session_id,)).rowcount
            conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
        return int(n)

    def clear_all(self) -> int:
        """Delete all history; return how many messages went."""
        with self.db.atomic(savepoint=False) as conn:
            n = conn.execute("DELETE FROM history").rowcount
            conn.execute("DELETE FROM sessions")
        return int(n)

    def message_count(self) -> int:
        """How many messages the history holds."""
        return int(self.db.scalar("SELECT count(*) FROM history") or 0)
