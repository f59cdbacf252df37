"""Curated notes in tables of the memory's own database: :class:`DatabaseNotesStore`.

``SQLiteNotesStore`` is its earlier name: the table ``memory_notes`` in the memory's own
database, SQLite or PostgreSQL (the database the base opens: documents, indexes, history), the
same statements on both through :class:`~ovos_memory_plugins.storage.tables.TableAccess`; no
cap; retired notes keep their dates and can be restored; full-text search over active and
retired notes over :func:`~ovos_memory_plugins.text.tokenize` terms (FTS5 on SQLite, a
GIN-indexed ``tsvector`` on PostgreSQL), so CJK text is searchable. Every SQLite connection runs
with ``secure_delete``; after a note is deleted the full-text index is rebuilt and the WAL
truncated, so no forgotten word is left in any file (PostgreSQL: VACUUM).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.notes_format import make_note, term_overlap_search
from ovos_memory_plugins.storage.records import Note
from ovos_memory_plugins.storage.sqlite.database import Database, Migration, fts5_available, quote_fts_phrase
from ovos_memory_plugins.storage.tables import TableAccess

__all__ = ["NOTES_MIGRATIONS", "DatabaseNotesStore", "SQLiteNotesStore", "pg_notes_schema"]


def _notes_v1(conn: sqlite3.Connection) -> None:
    # IF NOT EXISTS throughout: a schema another process created first is not an error. The
    # tables are those of the PostgreSQL engine (storage/postgres/notes.py), namespace included,
    # so one store class serves both engines.
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_notes ("
        " id INTEGER PRIMARY KEY,"
        " namespace TEXT NOT NULL,"
        " position INTEGER NOT NULL,"
        " text TEXT NOT NULL,"
        " date TEXT NOT NULL DEFAULT '',"
        " retired_on TEXT,"
        " created_at REAL NOT NULL,"
        " session_id TEXT NOT NULL DEFAULT '',"
        " terms TEXT NOT NULL DEFAULT '')"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS memory_notes_active ON memory_notes (namespace, retired_on, position)")
    conn.execute("CREATE INDEX IF NOT EXISTS memory_notes_session ON memory_notes (namespace, session_id)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_notes_versions (namespace TEXT PRIMARY KEY, version INTEGER NOT NULL,"
        " dreamed REAL)"
    )
    if fts5_available():
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS memory_notes_fts USING fts5(terms, content='memory_notes',"
            " content_rowid='id')"
        )
        conn.execute(
            "CREATE TRIGGER IF NOT EXISTS memory_notes_ai AFTER INSERT ON memory_notes BEGIN"
            " INSERT INTO memory_notes_fts (rowid, terms) VALUES (new.id, new.terms); END"
        )
        conn.execute(
            "CREATE TRIGGER IF NOT EXISTS memory_notes_ad AFTER DELETE ON memory_notes BEGIN"
            " INSERT INTO memory_notes_fts (memory_notes_fts, rowid, terms) VALUES ('delete', old.id, old.terms); END"
        )
        conn.execute(
            "CREATE TRIGGER IF NOT EXISTS memory_notes_au AFTER UPDATE OF terms ON memory_notes BEGIN"
            " INSERT INTO memory_notes_fts (memory_notes_fts, rowid, terms) VALUES ('delete', old.id, old.terms);"
            " INSERT INTO memory_notes_fts (rowid, terms) VALUES (new.id, new.terms); END"
        )


#: The notes' schema in the memory's SQLite file. Append only; never rename or reorder an applied step.
NOTES_MIGRATIONS = [Migration("0001_notes", _notes_v1)]


def pg_notes_schema() -> tuple[str, Sequence[Any]]:
    """The PostgreSQL schema of the notes and sticky-note tables (imported only on PostgreSQL)."""
    from ovos_memory_plugins.storage.postgres.notes import NOTES_MIGRATIONS as PG_MIGRATIONS

    return ("notes", PG_MIGRATIONS)


_SELECT = "SELECT text, date, retired_on, session_id FROM memory_notes WHERE namespace = ?"


class DatabaseNotesStore:
    """Notes in the memory's database (SQLite or PostgreSQL); retired notes are kept with their
    dates and can be restored.

    Args:
        path: a SQLite file to open (``":memory:"``) when no ``db`` is given.
        db: the memory's open database, of either engine (the caller closes it).
        namespace: the memory's namespace (keys the rows; one memory per namespace).
    """

    def __init__(self, path: str | Path = ":memory:", *, db: Any = None, namespace: str = "default") -> None:
        self._owns_db = db is None
        self.db = db if db is not None else Database(path)
        try:
            self.t = TableAccess(self.db, namespace, ("notes", NOTES_MIGRATIONS), pg_notes_schema)
        except BaseException:
            if self._owns_db:
                self.db.close()
            raise
        self.namespace = self.t.namespace
        self._fts = not self.t.pg and self.db.table_exists("memory_notes_fts")

    def _notes(self, sql: str, params: Sequence[Any] = ()) -> list[Note]:
        rows = self.t.query(sql, (self.namespace, *params))
        return [make_note(r[0], r[1], session_id=r[3], retired_on=r[2]) for r in rows]

    def _changed(self, deleted: bool = False) -> None:
        """Inside a write: bump the namespace's version (caches of every process see it) and,
        after deletions, scrub SQLite's full-text index (its shadow tables keep no deleted term)."""
        self.t.execute(
            "INSERT INTO memory_notes_versions (namespace, version) VALUES (?, 1)"
            " ON CONFLICT (namespace) DO UPDATE SET version = memory_notes_versions.version + 1",
            (self.namespace,),
        )
        if deleted:
            self.t.dirty = True
            if self._fts:
                self.t.execute("INSERT INTO memory_notes_fts (memory_notes_fts) VALUES ('rebuild')")

    def _insert(self, notes: Sequence[Note], positions: Sequence[int]) -> None:
        if not notes:
            return
        now = time.time()
        expression = self.t.terms("")[0]
        rows = [
            (self.namespace, at, n.text, n.date, n.retired_on, now, n.session_id, self.t.terms(n.text)[1])
            for n, at in zip(notes, positions, strict=True)
        ]
        self.t.executemany(
            "INSERT INTO memory_notes (namespace, position, text, date, retired_on, created_at, session_id, terms)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, {expression})",
            rows,
        )

    def load(self) -> list[Note]:
        """The active notes, in order."""
        return self._notes(f"{_SELECT} AND retired_on IS NULL ORDER BY position, id")

    def retired(self) -> list[Note]:
        """The retired notes, oldest retirement first."""
        return self._notes(f"{_SELECT} AND retired_on IS NOT NULL ORDER BY retired_on, id")

    def checkpoint(self) -> None:
        """After a removal made inside a transaction: truncate the WAL / VACUUM now."""
        self.t.purge("memory_notes")

    def remove(self, predicate: Callable[[Note], bool]) -> list[Note]:
        """Delete every note (active or retired) ``predicate`` picks, scrub the full-text index
        and purge; return the removed notes."""
        with self.t.atomic("notes"):
            rows = self.t.query(
                "SELECT id, text, date, retired_on, session_id FROM memory_notes WHERE namespace = ? ORDER BY id",
                (self.namespace,),
            )
            gone = [(int(r[0]), make_note(r[1], r[2], session_id=r[4], retired_on=r[3])) for r in rows]
            gone = [(i, n) for i, n in gone if predicate(n)]
            if gone:
                self.t.executemany("DELETE FROM memory_notes WHERE id = ?", [(i,) for i, _ in gone])
            self._changed(deleted=bool(gone))
        self.checkpoint()
        return [n for _, n in gone]

    def save(self, notes: Sequence[Note]) -> None:
        """Replace the active notes: unchanged texts keep their rows, others are inserted or deleted."""
        with self.t.atomic("notes"):
            existing: dict[str, int] = {}
            for row_id, text in self.t.query(
                "SELECT id, text FROM memory_notes WHERE namespace = ? AND retired_on IS NULL ORDER BY id",
                (self.namespace,),
            ):
                existing.setdefault(text, int(row_id))
            keep: set[int] = set()
            updates, new, positions = [], [], []
            for position, note in enumerate(notes):
                row_id = existing.get(note.text)
                if row_id is not None and row_id not in keep:
                    updates.append((position, note.date, note.session_id, row_id))
                    keep.add(row_id)
                else:
                    new.append(note)
                    positions.append(position)
            self.t.executemany("UPDATE memory_notes SET position = ?, date = ?, session_id = ? WHERE id = ?", updates)
            self._insert(new, positions)
            gone = [(i,) for i in existing.values() if i not in keep]
            self.t.executemany("DELETE FROM memory_notes WHERE id = ?", gone)
            self._changed(deleted=bool(gone))
        self.checkpoint()

    def retire(self, notes: Sequence[Note], when: str) -> None:
        """Mark these active notes retired on ``when``."""
        with self.t.atomic("notes"):
            self.t.executemany(
                "UPDATE memory_notes SET retired_on = ? WHERE namespace = ? AND text = ? AND retired_on IS NULL",
                [(when, self.namespace, n.text) for n in notes],
            )
            self._changed()

    def restore(self, notes: Sequence[Note]) -> None:
        """Make these retired notes active again, at the end."""
        with self.t.atomic("notes"):
            active = {r[0] for r in self.t.query(f"{_SELECT} AND retired_on IS NULL", (self.namespace,))}
            for note in notes:
                if note.text in active:
                    self.t.execute(
                        "DELETE FROM memory_notes WHERE namespace = ? AND text = ? AND retired_on IS NOT NULL",
                        (self.namespace, note.text),
                    )
                    self.t.dirty = True
                    continue
                top = self.t.scalar(
                    "SELECT coalesce(max(position), -1) + 1 FROM memory_notes WHERE namespace = ?", (self.namespace,)
                )
                row = self.t.scalar(
                    "SELECT id FROM memory_notes WHERE namespace = ? AND text = ? AND retired_on IS NOT NULL"
                    " ORDER BY retired_on DESC, id DESC",
                    (self.namespace, note.text),
                )
                if row is not None:
                    self.t.execute("UPDATE memory_notes SET retired_on = NULL, position = ? WHERE id = ?", (top, row))
                    active.add(note.text)
            self._changed(deleted=self.t.dirty)

    def add_retired(self, notes: Sequence[Note]) -> None:
        """Insert already-retired notes (used when notes move between stores)."""
        if notes:
            with self.t.atomic("notes"):
                self._insert([replace(n, retired_on=n.retired_on or "") for n in notes], [0] * len(notes))
                self._changed()

    def search(self, query_terms: Sequence[str], top_k: int, *, include_retired: bool = True) -> list[Note]:
        """Notes matching any query term, best first: FTS5 ``bm25`` on SQLite (term overlap
        without FTS5), the count of terms held on PostgreSQL (GIN over our tokens)."""
        terms = [t for t in dict.fromkeys(query_terms) if t]
        if not terms or top_k <= 0:
            return []
        where = "" if include_retired else " AND n.retired_on IS NULL"
        if self.t.pg:
            from ovos_memory_plugins.storage.postgres.notes import search_sql

            sql, params = search_sql(terms, where)
            return self._notes(sql, (*params, int(top_k)))
        if not self._fts:
            notes = self.load() + (self.retired() if include_retired else [])
            return term_overlap_search(notes, terms, top_k)
        match = " OR ".join(quote_fts_phrase(t) for t in terms)
        return self._notes(
            "SELECT n.text, n.date, n.retired_on, n.session_id FROM memory_notes_fts"
            " JOIN memory_notes n ON n.id = memory_notes_fts.rowid WHERE n.namespace = ?"
            f" AND memory_notes_fts MATCH ?{where} ORDER BY bm25(memory_notes_fts), n.id LIMIT ?",
            (match, int(top_k)),
        )

    def version(self) -> Hashable:
        """Bumped in the transaction of every write, by any process (one indexed read)."""
        return int(
            self.t.scalar("SELECT version FROM memory_notes_versions WHERE namespace = ?", (self.namespace,)) or 0
        )

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """One transaction around a load-modify-save cycle; other processes' cycles wait."""
        return self.t.atomic("notes")

    def count(self) -> tuple[int, int]:
        """(active, retired) note counts."""
        rows = self.t.query(
            "SELECT retired_on IS NULL, count(*) FROM memory_notes WHERE namespace = ? GROUP BY 1", (self.namespace,)
        )
        counts = {bool(r[0]): int(r[1]) for r in rows}
        return counts.get(True, 0), counts.get(False, 0)

    def close(self) -> None:
        """Purge what a removal left, and close the database when this store opened it."""
        with contextlib.suppress(StorageError, sqlite3.Error):
            self.checkpoint()
        if self._owns_db:
            self.db.close()


#: The name earlier releases used (the class now serves both engines).
SQLiteNotesStore = DatabaseNotesStore
