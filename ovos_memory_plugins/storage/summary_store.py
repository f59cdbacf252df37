"""The rolling summary of each session, in the memory's own database.

One row per session: the running summary of the turns that left the history window, and how
many exchanges it folded. It survives restarts like the history, and goes with the session
(``forget_session``) or with everything (``forget_all``), in the same transaction.

One class serves both engines (:class:`SummaryStore`, over
:class:`~ovos_memory_plugins.storage.tables.TableAccess`, like the notes and sticky-note
stores): the same table and statements, ``namespace`` included::

    memory_summaries(namespace, session_id, summary, folded, updated)  -- key (namespace, session_id)

In a SQLite file (one memory per file) the namespace is ``"default"``; in PostgreSQL, where the
memories of a database share the table, it is the memory's namespace. The SQLite schema is here
(store ``summary`` in ``_migrations``), the PostgreSQL one is
:data:`~ovos_memory_plugins.storage.postgres.notes.SUMMARY_MIGRATIONS`.

Earlier releases kept SQLite summaries in a table ``summaries(session_id, summary, folded,
updated)``. Migration ``0002_memory_summaries`` copies its rows into ``memory_summaries`` and
drops it, in one transaction (``secure_delete`` zeroes the dropped pages). An old table that is
not exactly that (other columns, values of other types) or cannot be read (a damaged page) is
left as it is and reported: logged as a warning on every open while it is there, and named by
:attr:`SummaryStore.leftover` (the memory's ``stats()["summary"]["leftover"]``, which
``ovos-memory stats`` prints). Its summaries are not used; nothing of it is dropped. The table
is read once per open for that (the same reading chooses the migration step).

:func:`open_summary_store` opens the store of a memory's storage.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.storage.sqlite.database import Migration
from ovos_memory_plugins.storage.tables import TableAccess

LOG = logging.getLogger(__name__)

__all__ = ["MIGRATIONS", "SummaryStorage", "SummaryStore", "old_table_problem", "open_summary_store"]


@runtime_checkable
class SummaryStorage(Protocol):
    """Where running summaries live (what :class:`~ovos_memory_plugins.summary.RollingSummary` needs)."""

    #: Why an earlier release's summaries were left where they are (None: nothing was left);
    #: the memory's ``stats()`` shows it as ``summary.leftover``.
    leftover: str | None

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


#: The table of earlier releases (SQLite only) and its columns, in order.
OLD_TABLE = "summaries"
OLD_COLUMNS = ("session_id", "summary", "folded", "updated")


def _v1(conn: sqlite3.Connection) -> None:
    # the first release's table (moved by _v2); IF NOT EXISTS: a foreign table of that name is
    # left to _v2, which reports it instead of failing the store
    conn.execute(
        "CREATE TABLE IF NOT EXISTS summaries ("
        " session_id TEXT PRIMARY KEY, summary TEXT NOT NULL, folded INTEGER NOT NULL, updated REAL NOT NULL)"
    )


def old_table_problem(conn: sqlite3.Connection) -> str | None:
    """Why the earlier releases' ``summaries`` table of ``conn`` cannot be moved as it is; None
    when it can (or there is none). Reads only."""
    try:
        columns = tuple(str(r[1]) for r in conn.execute(f"PRAGMA table_info({OLD_TABLE})"))
        if not columns:
            return None
        if columns != OLD_COLUMNS:
            return f"its columns are ({', '.join(columns)}), not ({', '.join(OLD_COLUMNS)})"
        row = conn.execute(
            "SELECT count(*) FROM summaries WHERE typeof(session_id) != 'text' OR typeof(summary) != 'text'"
            " OR typeof(folded) != 'integer' OR typeof(updated) NOT IN ('real', 'integer')"
        ).fetchone()
        if row and row[0]:
            return f"{row[0]} row(s) hold values of other types than its columns'"
    except sqlite3.DatabaseError as exc:  # a damaged page, or not a table
        return f"it cannot be read ({exc})"
    return None


def _v2_table(conn: sqlite3.Connection) -> None:
    """The table of both engines."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_summaries ("
        " namespace TEXT NOT NULL, session_id TEXT NOT NULL, summary TEXT NOT NULL, folded INTEGER NOT NULL,"
        " updated REAL NOT NULL, PRIMARY KEY (namespace, session_id))"
    )


def _v2(conn: sqlite3.Connection) -> None:
    """The table of both engines, with the rows of the earlier table (namespace ``"default"``,
    the one a SQLite file holds); the earlier table dropped. :class:`SummaryStore` runs
    :func:`_v2_table` alone instead when :func:`old_table_problem` finds that table is not
    what it should be (checked before the migration's transaction: a damaged page read inside
    a write transaction fails the rest of it)."""
    _v2_table(conn)
    if not conn.execute(f"PRAGMA table_info({OLD_TABLE})").fetchone():
        return
    conn.execute(
        "INSERT INTO memory_summaries (namespace, session_id, summary, folded, updated)"
        " SELECT 'default', session_id, summary, folded, updated FROM summaries WHERE true"
        " ON CONFLICT (namespace, session_id) DO NOTHING"
    )
    conn.execute("DROP TABLE summaries")


#: The schema in the memory's SQLite file. Append only; never rename or reorder an applied step.
MIGRATIONS = [Migration("0001_summaries", _v1), Migration("0002_memory_summaries", _v2)]


def _sqlite_plan(db: Any) -> tuple[list[Migration], str | None]:
    """The steps to apply and what is wrong with the earlier table (None: there is none, or it
    can be moved), the table read once (:func:`old_table_problem`, outside any transaction).

    The steps are :data:`MIGRATIONS`, or, when the earlier table is there to move but must
    stay, the same steps with ``0002`` creating the new table only."""
    if not db.table_exists(OLD_TABLE):
        return MIGRATIONS, None
    with db.lock:  # outside any transaction
        problem = old_table_problem(db.conn)
    if problem is None or MIGRATIONS[1].name in db.applied("summary"):
        return MIGRATIONS, problem
    return [MIGRATIONS[0], Migration(MIGRATIONS[1].name, _v2_table)], problem


_UPSERT = (
    "INSERT INTO memory_summaries (namespace, session_id, summary, folded, updated) {rows}"
    " ON CONFLICT (namespace, session_id) DO UPDATE SET summary = excluded.summary,"
    " folded = excluded.folded, updated = excluded.updated"
)
#: SQLite, and PostgreSQL inside a caller's transaction (whose durability it keeps).
_PUT = _UPSERT.format(rows="VALUES (?, ?, ?, ?, ?)")
#: PostgreSQL outside a transaction: this one statement commits without waiting for its flush.
_PUT_NO_FLUSH = _UPSERT.format(
    rows="SELECT ?, ?, ?, ?, ? FROM (SELECT set_config('synchronous_commit', 'off', true)) AS cfg"
)


class SummaryStore:
    """Running summaries per session of one memory, in its database of either engine.

    On PostgreSQL a summary is derived from turns already committed durably, so :meth:`put`
    commits without waiting for its own WAL flush (``synchronous_commit`` off for that one
    statement): the next recorded exchange's commit flushes it, and a crash of the server within
    that moment (~0.6 s at most) can only lose the latest fold, never a recorded turn. That
    keeps a fold from adding a second disk flush to a turn. Inside a caller's transaction the
    setting would cover the whole transaction, so there it commits as the caller does.

    Args:
        db: the memory's open database (SQLite or PostgreSQL); the memory closes it.
        namespace: the memory's namespace (keys the rows on PostgreSQL).

    Attributes:
        leftover: why an earlier release's ``summaries`` table was left in the SQLite file
            (None when there is none): see the module docstring.
    """

    def __init__(self, db: Any, namespace: str = "default") -> None:
        self.db = db
        problem: str | None = None
        if getattr(db, "engine", "") == "postgresql":
            from ovos_memory_plugins.storage.postgres.notes import SUMMARY_MIGRATIONS

            self.t = TableAccess(db, namespace, ("summary", []), lambda: ("summary", SUMMARY_MIGRATIONS))
        else:
            steps, problem = _sqlite_plan(db)
            self.t = TableAccess(db, namespace, ("summary", steps))
        self.namespace = self.t.namespace
        self.leftover: str | None = None
        if not self.t.pg and db.table_exists(OLD_TABLE):  # what the plan read: never read twice
            self.leftover = problem or "it was not moved"
            LOG.warning(
                "rolling summary: the table %r of an earlier release in %s was left as it is: %s;"
                " its summaries are not used and forgetting does not reach it (look at it, then drop it"
                " by hand)",
                OLD_TABLE,
                db.location,
                self.leftover,
            )

    def get(self, session_id: str) -> tuple[str, int]:
        """``(summary, exchanges folded)`` of a session; ``("", 0)`` when it has none."""
        rows = self.t.query(
            "SELECT summary, folded FROM memory_summaries WHERE namespace = ? AND session_id = ?",
            (self.namespace, session_id),
        )
        return (str(rows[0][0]), int(rows[0][1])) if rows else ("", 0)

    def put(self, session_id: str, summary: str, folded: int) -> None:
        """Replace a session's summary (one statement; see the class docs for its commit)."""
        no_flush = self.t.pg and not self.db.in_transaction
        self.t.execute(
            _PUT_NO_FLUSH if no_flush else _PUT, (self.namespace, session_id, summary, int(folded), time.time())
        )

    def items(self) -> list[tuple[str, str, int]]:
        """``(session_id, summary, exchanges folded)`` of every session, by session id (a
        migration between engines copies them)."""
        rows = self.t.query(
            "SELECT session_id, summary, folded FROM memory_summaries WHERE namespace = ? ORDER BY session_id",
            (self.namespace,),
        )
        return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def clear_session(self, session_id: str) -> int:
        """Forget a session's summary; return 1 when it had one."""
        return self.t.execute(
            "DELETE FROM memory_summaries WHERE namespace = ? AND session_id = ?", (self.namespace, session_id)
        )

    def clear_all(self) -> int:
        """Forget every summary of the memory; return how many went."""
        return self.t.execute("DELETE FROM memory_summaries WHERE namespace = ?", (self.namespace,))

    def count(self) -> int:
        """How many sessions of the memory have a summary."""
        return int(self.t.scalar("SELECT count(*) FROM memory_summaries WHERE namespace = ?", (self.namespace,)) or 0)


def open_summary_store(storage: Any) -> SummaryStorage:
    """The summary store in a memory's own database (SQLite file or PostgreSQL namespace):
    ``storage.summaries()`` of its :class:`~ovos_memory_plugins.storage.seam.Storage`.

    Raises:
        StorageError: the storage's engine keeps no summaries (a third-party engine).
    """
    store: SummaryStorage = storage.summaries()
    return store
