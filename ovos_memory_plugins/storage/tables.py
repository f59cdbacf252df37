"""The tables a memory keeps beside its documents (notes, sticky notes, summaries), on either engine.

:class:`TableAccess` runs the same statements on SQLite and PostgreSQL (``?`` placeholders,
``namespace`` in every row); :func:`marks`, :func:`scrub_lines` and :func:`truncate_wal` are the
small helpers the stores of those tables share. Kept apart from the stores so that the
PostgreSQL notes tables (``postgres.notes``) and the summary store use them without importing
the notes store that imports them.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.sqlite.database import Database, Migration

LOG = logging.getLogger(__name__)

__all__ = ["TableAccess", "marks", "pg_lexeme", "scrub_lines", "truncate_wal", "tsquery_literal"]


def scrub_lines(body: str, drop_line: Callable[[str], bool]) -> str | None:
    """``body`` without the lines ``drop_line`` picks; None when none is picked."""
    lines = body.splitlines(keepends=True)
    kept = [line for line in lines if not drop_line(line)]
    return None if len(kept) == len(lines) else "".join(kept)


def truncate_wal(db: Database) -> bool:
    """Copy ``db``'s WAL into the database file and truncate it (old page images in a WAL hold
    deleted words). Only outside a transaction, waiting at most 0.2 s for other processes'
    readers; return whether it was done (an in-memory database needs nothing)."""
    if db.path == ":memory:":
        return True
    with db.lock:
        if db.conn.in_transaction:
            return False
        try:
            db.conn.execute("PRAGMA busy_timeout = 200")
            row = db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return row is not None and not row[0]
        except sqlite3.Error:
            return False
        finally:
            with contextlib.suppress(sqlite3.Error):
                db.conn.execute(f"PRAGMA busy_timeout = {int(db.busy_timeout_ms)}")


class TableAccess:
    """A memory's notes, sticky-note or summary tables on either engine. The tables and
    statements are the same on SQLite and PostgreSQL (``namespace`` included); what differs is
    the placeholder, the schema steps, the terms column and how deleted rows are purged, all here.

    ``sqlite_schema`` is the ``(store, migrations)`` applied on open in a SQLite file;
    ``pg_schema`` gives the PostgreSQL one when called (so an engine's schema module is imported
    only where that engine runs); a PostgreSQL database without it is refused."""

    def __init__(
        self,
        db: Any,
        namespace: str,
        sqlite_schema: tuple[str, Sequence[Migration]],
        pg_schema: Callable[[], tuple[str, Sequence[Any]]] | None = None,
    ) -> None:
        self.db = db
        self.pg = getattr(db, "engine", "") == "postgresql"
        #: the rows' namespace: the memory's on PostgreSQL, where memories share the tables;
        #: ``"default"`` in a SQLite file, which holds one memory (so a copied file stays valid)
        self.namespace = namespace if self.pg else "default"
        #: rows were deleted since the last :meth:`purge`
        self.dirty = False
        if self.pg:
            if pg_schema is None:
                raise StorageError(f"{sqlite_schema[0]}: these tables have no PostgreSQL schema")
            db.migrate(*pg_schema())
        else:
            db.migrate(*sqlite_schema)
            with contextlib.suppress(sqlite3.Error, StorageError):  # deleted rows leave zeroes, not words
                db.execute("PRAGMA secure_delete = ON")

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self.pg else text

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]:
        """Rows of a statement written with ``?`` placeholders."""
        return list(self.db.query(self._sql(sql), params))

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row, or None."""
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; return the rows it touched."""
        result = self.db.execute(self._sql(sql), params)
        return int(result if isinstance(result, int) else result.rowcount)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run a statement for many rows (inside :meth:`atomic` for one commit)."""
        if rows:
            self.db.executemany(self._sql(sql), rows)

    @contextlib.contextmanager
    def atomic(self, lock: str | None = None) -> Iterator[TableAccess]:
        """One transaction (a savepoint when nested). With ``lock``, a load-modify-save cycle of
        other processes waits for it: SQLite's ``BEGIN IMMEDIATE`` does that already, on
        PostgreSQL a transaction-scoped advisory lock of the namespace is taken."""
        with self.db.atomic():
            if lock and self.pg:
                self.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"ovos_memory_{lock}:{self.namespace}",))
            yield self

    def terms(self, text: str) -> tuple[str, Any]:
        """The SQL expression and the value of a text's ``terms`` column (our tokens: a
        ``tsvector`` on PostgreSQL, space-joined text for FTS5 on SQLite)."""
        from ovos_memory_plugins.text import tokenize

        tokens = [t for t in dict.fromkeys(tokenize(text)) if t]
        return ("array_to_tsvector(?::text[])", tokens) if self.pg else ("?", " ".join(tokens))

    def purge(self, tables: str) -> None:
        """After deletions, outside a transaction: truncate SQLite's WAL (``secure_delete``
        zeroed the rows already) or ``VACUUM`` the PostgreSQL tables; else on the next call."""
        if not self.dirty:
            return
        if not self.pg:
            self.dirty = not truncate_wal(self.db)
            return
        try:
            with self.db.connection() as conn:
                if conn.info.transaction_status.name != "IDLE":
                    return  # inside the caller's transaction, where VACUUM cannot run
                conn.execute(f"VACUUM {tables}")
            self.dirty = False
        except StorageError as exc:  # the server is away: next time
            LOG.debug("notes: VACUUM %s postponed (%s)", tables, exc)


def pg_lexeme(term: str) -> str:
    """``term`` as one PostgreSQL ``tsquery`` lexeme literal (quoted, backslashes and quotes escaped)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_literal(terms: Iterable[str]) -> str:
    """A PostgreSQL ``tsquery`` that matches a row holding any of the terms (each a literal
    lexeme): the keyword index's and the notes tables' (``storage.postgres.tsquery_literal``)."""
    return " | ".join(pg_lexeme(t) for t in dict.fromkeys(terms) if t)


def marks(values: Sequence[Any]) -> str:
    """``?,?,...`` for an ``IN (...)`` list of ``values`` (never empty: call with values)."""
    return ",".join("?" * len(values))
