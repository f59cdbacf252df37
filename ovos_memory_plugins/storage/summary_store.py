"""The rolling summary of each session, in the memory's own database (table ``summaries``).

One row per session: the running summary of the turns that left the history window, and how
many exchanges it folded. It survives restarts like the history, and goes with the session
(``forget_session``) or with everything (``forget_all``).
"""

from __future__ import annotations

import sqlite3
import time

from ovos_memory_plugins.storage.sqlite import Database, Migration

__all__ = ["SummaryStore"]


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE summaries ("
        " session_id TEXT PRIMARY KEY, summary TEXT NOT NULL, folded INTEGER NOT NULL, updated REAL NOT NULL)"
    )


MIGRATIONS = [Migration("0001_summaries", _v1)]


class SummaryStore:
    """Running summaries per session over a :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate("summary", MIGRATIONS)

    def get(self, session_id: str) -> tuple[str, int]:
        """``(summary, exchanges folded)`` of a session; ``("", 0)`` when it has none."""
        rows = self.db.query("SELECT summary, folded FROM summaries WHERE session_id = ?", (session_id,))
        return (str(rows[0]["summary"]), int(rows[0]["folded"])) if rows else ("", 0)

    def put(self, session_id: str, summary: str, folded: int) -> None:
        """Replace a session's summary."""
        self.db.execute(
            "INSERT INTO summaries (session_id, summary, folded, updated) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET summary = excluded.summary, folded = excluded.folded,"
            " updated = excluded.updated",
            (session_id, summary, int(folded), time.time()),
        )

    def clear_session(self, session_id: str) -> int:
        """Forget a session's summary; return 1 when it had one."""
        return int(self.db.execute("DELETE FROM summaries WHERE session_id = ?", (session_id,)).rowcount)

    def clear_all(self) -> int:
        """Forget every summary; return how many went."""
        return int(self.db.execute("DELETE FROM summaries").rowcount)

    def count(self) -> int:
        """How many sessions have a summary."""
        return int(self.db.scalar("SELECT count(*) FROM summaries") or 0)
