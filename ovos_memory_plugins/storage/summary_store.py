"""The rolling summary of each session, in the memory's own database.

One row per session: the running summary of the turns that left the history window, and how
many exchanges it folded. It survives restarts like the history, and goes with the session
(``forget_session``) or with everything (``forget_all``), in the same transaction.

* SQLite: table ``summaries`` of the memory's file (:class:`SummaryStore`).
* PostgreSQL: table ``memory_summaries``, keyed by the memory's namespace like every other
  table (:class:`PgSummaryStore`).

:func:`open_summary_store` picks the one for a memory's storage.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.sqlite import Database, Migration

if TYPE_CHECKING:
    import psycopg

    from ovos_memory_plugins.storage.engine import Storage
    from ovos_memory_plugins.storage.postgres import PgDatabase

__all__ = ["PgSummaryStore", "SummaryStorage", "SummaryStore", "open_summary_store"]


@runtime_checkable
class SummaryStorage(Protocol):
    """Where running summaries live (what :class:`~ovos_memory_plugins.summary.RollingSummary` needs)."""

    def get(self, session_id: str) -> tuple[str, int]:
        """``(summary, exchanges folded)`` of a session; ``("", 0)`` when it has none."""

    def put(self, session_id: str, summary: str, folded: int) -> None:
        """Replace a session's summary."""

    def clear_session(self, session_id: str) -> int:
        """Forget a session's summary; return 1 when it had one."""

    def clear_all(self) -> int:
        """Forget every summary of the memory; return how many went."""

    def count(self) -> int:
        """How many sessions have a summary."""


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE summaries ("
        " session_id TEXT PRIMARY KEY, summary TEXT NOT NULL, folded INTEGER NOT NULL, updated REAL NOT NULL)"
    )


MIGRATIONS = [Migration("0001_summaries", _v1)]


class SummaryStore:
    """Running summaries per session over a SQLite :class:`Database`."""

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


# -- PostgreSQL ------------------------------------------------------------------------------


def _pg_v1(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE memory_summaries ("
        " namespace text NOT NULL, session_id text NOT NULL, summary text NOT NULL,"
        " folded integer NOT NULL, updated double precision NOT NULL,"
        " PRIMARY KEY (namespace, session_id))"
    )


def pg_migrations() -> list[Any]:
    """The schema steps of ``memory_summaries`` (append only)."""
    from ovos_memory_plugins.storage.postgres import PgMigration

    return [PgMigration("0001_memory_summaries", _pg_v1)]


class PgSummaryStore:
    """Running summaries per session of one namespace, in ``memory_summaries`` (PostgreSQL).

    A summary is derived from turns already committed durably, so :meth:`put` commits without
    waiting for its own WAL flush (``synchronous_commit`` off for that one statement): the next
    recorded exchange's commit flushes it, and a crash of the server within that moment
    (~0.6 s at most) can only lose the latest fold, never a recorded turn. That keeps a fold from
    adding a second disk flush to a turn.
    """

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace
        db.migrate("summary", pg_migrations())

    def get(self, session_id: str) -> tuple[str, int]:
        """``(summary, exchanges folded)`` of a session; ``("", 0)`` when it has none."""
        rows = self.db.query(
            "SELECT summary, folded FROM memory_summaries WHERE namespace = %s AND session_id = %s",
            (self.namespace, session_id),
        )
        return (str(rows[0][0]), int(rows[0][1])) if rows else ("", 0)

    def put(self, session_id: str, summary: str, folded: int) -> None:
        """Replace a session's summary (one statement; see the class docs for its commit)."""
        # inside a caller's transaction the setting would cover all of it: commit as it does
        commit = "on" if self.db.in_transaction else "off"
        self.db.execute(
            "WITH cfg AS (SELECT set_config('synchronous_commit',"
            " CASE WHEN %s = 'off' THEN 'off' ELSE current_setting('synchronous_commit') END, true) AS v)"
            " INSERT INTO memory_summaries (namespace, session_id, summary, folded, updated)"
            " SELECT %s, %s, %s, %s, %s FROM cfg"
            " ON CONFLICT (namespace, session_id) DO UPDATE SET summary = excluded.summary,"
            " folded = excluded.folded, updated = excluded.updated",
            (commit, self.namespace, session_id, summary, int(folded), time.time()),
        )

    def clear_session(self, session_id: str) -> int:
        """Forget a session's summary; return 1 when it had one."""
        return self.db.execute(
            "DELETE FROM memory_summaries WHERE namespace = %s AND session_id = %s", (self.namespace, session_id)
        )

    def clear_all(self) -> int:
        """Forget every summary of the namespace; return how many went."""
        return self.db.execute("DELETE FROM memory_summaries WHERE namespace = %s", (self.namespace,))

    def count(self) -> int:
        """How many sessions of the namespace have a summary."""
        return int(self.db.scalar("SELECT count(*) FROM memory_summaries WHERE namespace = %s", (self.namespace,)) or 0)


def open_summary_store(storage: Storage) -> SummaryStorage:
    """The summary store in a memory's own database (SQLite file or PostgreSQL namespace).

    Raises:
        StorageError: the storage's engine keeps no summaries (a third-party engine).
    """
    db = storage.db
    if isinstance(db, Database):
        return SummaryStore(db)
    from ovos_memory_plugins.storage.postgres import PgStorage

    if isinstance(storage, PgStorage):
        return PgSummaryStore(storage.db, storage.namespace)
    raise StorageError(f"no rolling-summary store for the {type(db).__name__} engine")
