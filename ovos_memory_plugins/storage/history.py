"""The short-term history store and the document catalogue, in one SQLite database.

* ``history``: every recorded USER and ASSISTANT message per session, trimmed to the newest
  ``keep`` messages per session on write.
* ``sessions``: per session, the id of its last exchange document (ids are chained on it, so
  they never depend on an in-process counter).
* ``documents``: for backends that do not track sessions and metadata themselves, which
  session each document belongs to and the metadata stored with it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ovos_memory_plugins.storage.sqlite import Database, Migration

__all__ = ["HistoryStore", "StoredMessage"]


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE history ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, created REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX history_session ON history (session_id, id)")
    conn.execute("CREATE TABLE sessions (session_id TEXT PRIMARY KEY, last_exchange_id TEXT NOT NULL)")
    conn.execute(
        "CREATE TABLE documents ("
        " doc_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, metadata TEXT NOT NULL, created REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX documents_session ON documents (session_id)")


MIGRATIONS = [Migration("0001_history_sessions_documents", _v1)]


@dataclass(frozen=True)
class StoredMessage:
    """A message read back from the history store."""

    role: str
    content: str


class HistoryStore:
    """History, exchange-id chains and the document catalogue over a :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate("history", MIGRATIONS)

    # -- history -----------------------------------------------------------------------------

    def append(
        self, session_id: str, messages: Sequence[tuple[str, str]], keep: int, last_exchange_id: str | None = None
    ) -> None:
        """Append ``(role, content)`` messages and trim the session to its newest ``keep``."""
        now = time.time()
        with self.db.atomic() as conn:
            conn.executemany(
                "INSERT INTO history (session_id, role, content, created) VALUES (?, ?, ?, ?)",
                [(session_id, role, content, now) for role, content in messages],
            )
            if last_exchange_id is not None:
                conn.execute(
                    "INSERT INTO sessions (session_id, last_exchange_id) VALUES (?, ?)"
                    " ON CONFLICT (session_id) DO UPDATE SET last_exchange_id = excluded.last_exchange_id",
                    (session_id, last_exchange_id),
                )
            conn.execute(
                "DELETE FROM history WHERE session_id = ? AND id <= ("
                " SELECT id FROM history WHERE session_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (session_id, session_id, max(keep, 0)),
            )

    def recent(self, session_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a session, oldest first."""
        rows = self.db.query(
            "SELECT role, content FROM history WHERE session_id = ? ORDER BY id DESC LIMIT ?",
            (session_id, max(limit, 0)),
        )
        return [StoredMessage(r["role"], r["content"]) for r in reversed(rows)]

    def last_exchange_id(self, session_id: str) -> str:
        """The id of the session's newest exchange document, ``""`` when it has none."""
        value = self.db.scalar("SELECT last_exchange_id FROM sessions WHERE session_id = ?", (session_id,))
        return str(value) if value is not None else ""

    def sessions(self) -> list[str]:
        """Every session that has history."""
        return [r[0] for r in self.db.query("SELECT DISTINCT session_id FROM history ORDER BY session_id")]

    def clear_session(self, session_id: str) -> int:
        """Delete a session's history; return how many messages went."""
        with self.db.atomic() as conn:
            n = conn.execute("DELETE FROM history WHERE session_id = ?", (session_id,)).rowcount
            conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
        return int(n)

    def clear_all(self) -> int:
        """Delete all history; return how many messages went."""
        with self.db.atomic() as conn:
            n = conn.execute("DELETE FROM history").rowcount
            conn.execute("DELETE FROM sessions")
        return int(n)

    def message_count(self) -> int:
        """How many messages the history holds."""
        return int(self.db.scalar("SELECT count(*) FROM history") or 0)

    # -- document catalogue ------------------------------------------------------------------

    def put_document(self, doc_id: str, session_id: str, metadata: dict[str, Any]) -> None:
        """Record (or replace) a document's session and metadata."""
        self.db.execute(
            "INSERT INTO documents (doc_id, session_id, metadata, created) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (doc_id) DO UPDATE SET session_id = excluded.session_id, metadata = excluded.metadata",
            (doc_id, session_id, json.dumps(metadata, ensure_ascii=False, default=str), time.time()),
        )

    def documents(self, doc_ids: Iterable[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """``doc_id -> (session_id, metadata)`` for the known ids among ``doc_ids``."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for r in self.db.query(
                f"SELECT doc_id, session_id, metadata FROM documents WHERE doc_id IN ({marks})", chunk
            ):
                out[r["doc_id"]] = (r["session_id"], json.loads(r["metadata"]))
        return out

    def session_documents(self, session_id: str) -> list[str]:
        """The ids of a session's documents."""
        return [r[0] for r in self.db.query("SELECT doc_id FROM documents WHERE session_id = ?", (session_id,))]

    def all_documents(self) -> list[str]:
        """The ids of every catalogued document."""
        return [r[0] for r in self.db.query("SELECT doc_id FROM documents")]

    def document_count(self) -> int:
        """How many documents the catalogue holds."""
        return int(self.db.scalar("SELECT count(*) FROM documents") or 0)

    def drop_documents(self, doc_ids: Iterable[str]) -> None:
        """Forget catalogue rows."""
        ids = list(doc_ids)
        with self.db.atomic() as conn:
            conn.executemany("DELETE FROM documents WHERE doc_id = ?", [(d,) for d in ids])
