"""The short-term history store (SQLite), one of the parts of a memory's one database.

* ``history``: every recorded USER and ASSISTANT message per session, trimmed to the newest
  ``keep`` messages per session on write; ``exchange_id`` names the exchange document a message
  became part of, so deleting that document deletes the messages too (else the history window
  would show a forgotten exchange again).
* ``sessions``: per session, the id of its last exchange document (the next exchange names it
  as its ``previous_exchange``; earlier releases chained the ids themselves on it), written only
  when the history cannot give it: a session without a row has as its last exchange id the
  exchange id of its newest tagged message. A recorded exchange, whose own messages carry that
  id, so writes no row (and deletes a stale one); a row is written when that message would not
  survive the trim, when untagged messages are about to trim it, and before messages are
  removed (the next exchange still names a forgotten one as its ``previous_exchange``).

Each exchange the host records reads the session's newest messages and its last exchange id,
and each turn its window: :class:`SqliteHistory` keeps both per session in RAM (the newest
:data:`CACHED_MESSAGES` messages at most, for :data:`CACHED_SESSIONS` sessions at most), updated
when its own writes commit and dropped whole when another connection has committed since
(``PRAGMA data_version``, one statement instead of two reads).

The document catalogue of earlier releases (``documents`` here, without text) is now the
memory's one documents table (:mod:`ovos_memory_plugins.storage.sqlite.documents`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ovos_memory_plugins.storage.records import StoredDocument, StoredMessage
from ovos_memory_plugins.storage.shared import EngineHistory, HistoryWrite
from ovos_memory_plugins.storage.sqlite.database import Database, Migration, chunked

__all__ = ["SqliteHistory", "StoredMessage"]

#: The newest messages per session :class:`SqliteHistory` keeps in RAM (a longer read goes to the file).
CACHED_MESSAGES = 64
#: The sessions it keeps them for (all are dropped when one more would not fit).
CACHED_SESSIONS = 1024
#: Looks in a row that found no other connection's commit before a recorded exchange reads RAM
#: unchecked (:meth:`SqliteHistory.tail`); while other processes write, every read looks first.
CALM_LOOKS = 4


@dataclass
class _Cached:
    """What RAM holds of one session: its newest messages, oldest first (``complete``: every
    message the session has), its last exchange id once read or written (None: not known), and
    how many messages the file holds for it (None: not known; an append that cannot trim then
    skips the trim's statement), and whether the file holds a ``sessions`` row for it (None: not
    known; an exchange whose id its messages give then skips the delete of a stale row)."""

    messages: list[StoredMessage] | None = None
    complete: bool = False
    last_exchange_id: str | None = None
    count: int | None = None
    has_row: bool | None = None


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE history ("
        " id INTEGER PRIMARY KEY AUTOINCREMENT,"
        " session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, created REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX history_session ON history (session_id, id)")
    conn.execute("CREATE TABLE sessions (session_id TEXT PRIMARY KEY, last_exchange_id TEXT NOT NULL)")
    # (earlier releases also created the catalogue ``documents`` here; the memory's documents
    # table replaces it, see sqlite/schema.py's 0001_documents)


def _v2(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE history ADD COLUMN exchange_id TEXT")
    conn.execute("CREATE INDEX history_exchange ON history (exchange_id)")


def _v3(conn: sqlite3.Connection) -> None:
    """The history table without ``AUTOINCREMENT`` and without the index of exchange ids: each
    wrote a page of its own in every recorded exchange's transaction (a seventh of its pages,
    issue 25). A new row's id is still above every other's (SQLite takes the highest plus one;
    only a deleted newest row's id can come back, and no id leaves this module). Messages are
    found by their exchange id by a scan of the table, which the trim keeps to a few dozen
    messages per session (:meth:`SqliteHistory.remove_exchanges`)."""
    conn.execute(
        "CREATE TABLE history_lean ("
        " id INTEGER PRIMARY KEY,"
        " session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, created REAL NOT NULL,"
        " exchange_id TEXT)"
    )
    conn.execute(
        "INSERT INTO history_lean (id, session_id, role, content, created, exchange_id)"
        " SELECT id, session_id, role, content, created, exchange_id FROM history ORDER BY id"
    )
    conn.execute("DROP TABLE history")
    conn.execute("ALTER TABLE history_lean RENAME TO history")
    conn.execute("CREATE INDEX history_session ON history (session_id, id)")


MIGRATIONS = [
    Migration("0001_history_sessions_documents", _v1),
    Migration("0002_exchange_ids", _v2),
    Migration("0003_history_lean", _v3),
]


#: The trim of :meth:`SqliteHistory.append`: once the session holds more than ``full`` messages,
#: every message older than its newest ``keep`` goes; the trimmed rows come back.
_TRIM = (
    "DELETE FROM history WHERE session_id = :s"
    " AND EXISTS (SELECT 1 FROM history WHERE session_id = :s ORDER BY id DESC LIMIT 1 OFFSET :full)"
    " AND id <= (SELECT id FROM history WHERE session_id = :s ORDER BY id DESC LIMIT 1 OFFSET :keep)"
    " RETURNING id, role, content, created"
)
#: The newest tagged message of session ``:s``: its exchange id is the session's last when the
#: session has no ``sessions`` row.
_NEWEST_TAGGED = "FROM history WHERE session_id = :s AND exchange_id IS NOT NULL ORDER BY id DESC LIMIT 1"
_NEWEST_TAG = f"SELECT exchange_id {_NEWEST_TAGGED}"
#: Write the session's last exchange id as a row when it has none (before its newest tagged
#: message may go: a trim by untagged messages, a removal).
_KEEP_LAST = (
    f"INSERT OR IGNORE INTO sessions (session_id, last_exchange_id) SELECT session_id, exchange_id {_NEWEST_TAGGED}"
)


def _given_by_history(write: HistoryWrite) -> bool:
    """Whether the session's history gives the write's new last exchange id once it commits:
    its newest tagged message carries the id and is among the newest ``keep`` (the trim keeps it)."""
    n = len(write.exchange_ids)
    for j in range(n - 1, -1, -1):
        tag = write.exchange_ids[j]
        if tag is not None:
            return tag == write.last_exchange_id and n - j <= write.keep
    return False


class SqliteHistory(EngineHistory):
    """History and exchange-id chains over a :class:`Database`
    (see :class:`ovos_memory_plugins.storage.seam.HistoryStore`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate("history", MIGRATIONS)
        self._cache: dict[str, _Cached] = {}
        self._seen_version: int | None = None
        self._calm = 0  # looks in a row that found no other connection's commit

    def _cached(self, session_id: str) -> _Cached:
        """The session's RAM entry (call with the database lock held), after dropping every
        entry when another connection committed since the last look."""
        self._look()
        return self._entry(session_id)

    def _look(self) -> int:
        """Read the file's data version (once per transaction: see ``Database.data_version``);
        drop every entry when another connection committed since the last look."""
        version = self.db.data_version()
        if version != self._seen_version:
            self._cache.clear()
            self._seen_version = version
            self._calm = 0
        elif self._calm < CALM_LOOKS:
            self._calm += 1
        return version

    def _entry(self, session_id: str) -> _Cached:
        """The session's RAM entry as held, made empty when there is none (the lock held, the
        data version checked)."""
        entry = self._cache.get(session_id)
        if entry is None:
            if len(self._cache) >= CACHED_SESSIONS:
                self._cache.clear()
            entry = self._cache[session_id] = _Cached()
        return entry

    def _forget_cache(self) -> None:
        """Drop what RAM holds (the file is read again)."""
        with self.db.lock:
            self._cache.clear()

    @contextlib.contextmanager
    def _removing(self) -> Iterator[sqlite3.Connection]:
        """The transaction of a write that removes messages: what RAM holds is dropped inside it
        (its own reads see the removal) and again once it commits (what was read meanwhile)."""
        with self.db.atomic(savepoint=False) as conn:
            self._cache.clear()
            self.db.on_commit(self._forget_cache)
            yield conn

    def write_messages(self, write: HistoryWrite) -> list[StoredMessage]:
        """The insert, chain update and trim of :meth:`append` (the seam's
        :class:`~ovos_memory_plugins.storage.shared.EngineHistory`)."""
        session_id, messages, ids, now = write.session_id, write.messages, write.exchange_ids, write.now
        keep, last_exchange_id = write.keep, write.last_exchange_id
        full = keep + write.batch - 1  # the most messages a session holds untrimmed
        with self.db.atomic(savepoint=False) as conn:
            # inside the transaction: no other connection can commit before this one does, so
            # the entry (the file until this commits) stays true through the commit
            version = self._look()
            before = self._cache.pop(session_id, None)
            conn.executemany(
                "INSERT INTO history (session_id, role, content, created, exchange_id) VALUES (?, ?, ?, ?, ?)",
                [(session_id, role, content, now, ids[i]) for i, (role, content) in enumerate(messages)],
            )
            has_row = before.has_row if before is not None else None
            if last_exchange_id is not None and _given_by_history(write):
                if has_row is not False:  # a row would say an older id: the history gives it now
                    conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
                has_row = False
            elif last_exchange_id is not None:
                conn.execute(
                    "INSERT INTO sessions (session_id, last_exchange_id) VALUES (?, ?)"
                    " ON CONFLICT (session_id) DO UPDATE SET last_exchange_id = excluded.last_exchange_id",
                    (session_id, last_exchange_id),
                )
                has_row = True
            held = before.count if before is not None else None
            if held is not None and held + len(messages) <= full:
                rows = []  # RAM knows the session holds too few messages to trim
            else:
                if last_exchange_id is None and has_row is not True:  # the trim may take the newest tag
                    conn.execute(_KEEP_LAST, {"s": session_id})
                    has_row = None
                rows = conn.execute(_TRIM, {"s": session_id, "keep": keep, "full": full}).fetchall()
            added = [StoredMessage(role, content, now) for role, content in messages]
            self.db.on_commit(
                lambda: self._after_append(
                    session_id, version, before, added, bool(rows), keep, last_exchange_id, has_row
                )
            )
        return [StoredMessage(r[1], r[2], r[3]) for r in sorted(rows, key=lambda r: int(r[0]))]

    def _after_append(
        self,
        session_id: str,
        version: int,
        before: _Cached | None,
        added: list[StoredMessage],
        trimmed: bool,
        keep: int,
        last_exchange_id: str | None,
        has_row: bool | None,
    ) -> None:
        """Once an append committed: the session's RAM entry as the file now holds it (a trim
        leaves exactly the newest ``keep`` messages). ``version``: the data version looked at
        inside the append's transaction (no other connection committed between that look and
        the commit); ``before``: the entry then."""
        with self.db.lock:
            if version != self._seen_version:  # a look since found another connection's commit
                self._cache.clear()
                return
            entry = self._entry(session_id)
            if before is not None and before.messages is not None:
                messages, complete = [*before.messages, *added], before.complete
                if trimmed:
                    complete = len(messages) >= keep
                    messages = messages[-keep:] if keep else []
                if len(messages) > CACHED_MESSAGES:
                    messages, complete = messages[-CACHED_MESSAGES:], False
                entry.messages, entry.complete = messages, complete
            if trimmed:
                entry.count = keep
            elif before is not None and before.count is not None:
                entry.count = before.count + len(added)
            if last_exchange_id is not None:
                entry.last_exchange_id = last_exchange_id
            elif before is not None:
                entry.last_exchange_id = before.last_exchange_id
            entry.has_row = has_row

    def tag_exchange(self, session_id: str, exchange_id: str) -> None:
        """Mark the session's last untagged user message as part of ``exchange_id``."""
        self.db.execute(
            "UPDATE history SET exchange_id = ? WHERE id = (SELECT id FROM history WHERE session_id = ?"
            " AND role = 'user' AND exchange_id IS NULL ORDER BY id DESC LIMIT 1)",
            (exchange_id, session_id),
        )

    def recent(self, session_id: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of a session, oldest first, each with its ``created``."""
        with self.db.lock:
            return self._recent(session_id, limit, self._cached(session_id))

    def _recent(self, session_id: str, limit: int, entry: _Cached) -> list[StoredMessage]:
        """:meth:`recent` with the session's entry as looked at (the lock held)."""
        limit = max(limit, 0)
        held = entry.messages
        if held is not None and (entry.complete or len(held) >= limit):
            return held[-limit:] if limit else []
        rows = self.db.query(
            "SELECT role, content, created FROM history WHERE session_id = ? ORDER BY id DESC LIMIT ?",
            (session_id, limit),
        )
        found = [StoredMessage(*r) for r in reversed(rows)]
        if limit <= CACHED_MESSAGES and not self.db.in_transaction:
            entry.messages, entry.complete = found, len(found) < limit
            if entry.complete:
                entry.count = len(found)
        return found

    def tail(
        self, session_id: str, limit: int, *, trusted: bool = False
    ) -> tuple[list[StoredMessage], str, int | None]:
        """:meth:`recent` and :meth:`last_exchange_id` of a session from one look at the file's
        version, and None (what a recorded exchange reads first; the seam's optional ``tail``).

        ``trusted``: when no other connection has committed at the last :data:`CALM_LOOKS` looks,
        answer from RAM without a look, and return the version RAM assumes instead of None: the
        caller's write transaction confirms it (:meth:`confirm`) before writing anything."""
        with self.db.lock:
            if trusted and self._calm >= CALM_LOOKS and self._seen_version is not None and not self.db.in_transaction:
                token = self._seen_version
                entry = self._entry(session_id)
                return self._recent(session_id, limit, entry), self._last_exchange_id(session_id, entry), token
            entry = self._cached(session_id)
            return self._recent(session_id, limit, entry), self._last_exchange_id(session_id, entry), None

    def confirm(self, token: int) -> bool:
        """Whether no other connection committed since the version ``token`` that :meth:`tail`
        answered from (one look; inside the write transaction, it holds until the commit)."""
        with self.db.lock:
            return self._look() == token

    def last_exchange_id(self, session_id: str) -> str:
        """The id of the session's newest exchange document, ``""`` when it has none."""
        with self.db.lock:
            return self._last_exchange_id(session_id, self._cached(session_id))

    def _last_exchange_id(self, session_id: str, entry: _Cached) -> str:
        """:meth:`last_exchange_id` with the session's entry as looked at (the lock held)."""
        if entry.last_exchange_id is not None:
            return entry.last_exchange_id
        value = self.db.scalar("SELECT last_exchange_id FROM sessions WHERE session_id = ?", (session_id,))
        has_row = value is not None
        if not has_row:  # the history gives it (module docstring)
            value = self.db.scalar(_NEWEST_TAG, {"s": session_id})
        found = str(value) if value is not None else ""
        if not self.db.in_transaction:
            entry.last_exchange_id, entry.has_row = found, has_row
        return found

    def sessions(self) -> list[str]:
        """Every session that has history."""
        return [r[0] for r in self.db.query("SELECT DISTINCT session_id FROM history ORDER BY session_id")]

    def remove_exchanges(self, docs: Sequence[StoredDocument]) -> int:
        """Delete the messages the given documents were recorded from; return how many.

        Messages tagged with the document's id go; so do untagged messages of earlier releases
        whose text is the document's question or answer in its session.
        """
        n = 0
        with self._removing() as conn:
            ids = [d.doc_id for d in docs]
            losing: set[str] = set()  # the sessions that lose tagged messages
            for chunk, marks in chunked(ids):  # a scan of the trimmed table per chunk (no index)
                sql = f"SELECT DISTINCT session_id FROM history WHERE exchange_id IN ({marks})"
                losing.update(r[0] for r in conn.execute(sql, chunk))
            # before any goes, their last ids (the next exchange names it)
            conn.executemany(_KEEP_LAST, [{"s": s} for s in sorted(losing)])
            for chunk, marks in chunked(ids):
                n += conn.execute(f"DELETE FROM history WHERE exchange_id IN ({marks})", chunk).rowcount
            for session_id, question, answer in self.untagged_parts(docs):
                n += conn.execute(
                    "DELETE FROM history WHERE session_id = ? AND exchange_id IS NULL AND"
                    " ((role = 'user' AND content = ?) OR (role = 'assistant' AND content = ?))",
                    (session_id, question, answer),
                ).rowcount
        return n

    def remove_quoting(self, session_id: str, text: str) -> int:
        """Delete the session's user messages that quote ``text`` (case folded) and the
        exchanges they belong to; return how many messages went."""
        if not text.strip():
            return 0
        with self._removing() as conn:
            conn.execute(_KEEP_LAST, {"s": session_id})  # the next exchange still names the last one
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
        with self._removing() as conn:
            n = conn.execute("DELETE FROM history WHERE session_id = ?", (session_id,)).rowcount
            conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
        return int(n)

    def clear_all(self) -> int:
        """Delete all history; return how many messages went."""
        with self._removing() as conn:
            n = conn.execute("DELETE FROM history").rowcount
            conn.execute("DELETE FROM sessions")
        return int(n)

    def message_count(self) -> int:
        """How many messages the history holds."""
        return int(self.db.scalar("SELECT count(*) FROM history") or 0)
