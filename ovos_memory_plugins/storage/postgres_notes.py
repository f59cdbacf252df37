"""Curated notes and sticky notes in PostgreSQL: the stores of the notes backends, one memory per ``namespace``.

With ``"database": "postgresql://..."`` every note lives in the database the memory's documents
and history live in (:mod:`ovos_memory_plugins.storage.postgres`), so every persona server that
shares the memory sees a note another one wrote on its next turn, and nothing is written under
``root``. The tables are shared by the memories of the database; ``namespace`` and
``session_id`` are indexed columns and every statement filters on the namespace::

    memory_notes(id, namespace, position, text, date, retired_on, created_at, session_id, terms)
    memory_notes_versions(namespace, version, dreamed)  -- bumped by every write (cache check)
    memory_notes_rewrites(id, namespace, reason, created, body)  -- previous bodies, for undo
    memory_sticky_notes(namespace, id, session_id, text, norm, lang, created, updated,
                        metadata, retired_on)
    memory_sticky_asks(namespace, session_id, utterance_key, at, reply)

``terms`` is a ``tsvector`` built from OUR tokens (:func:`ovos_memory_plugins.text.tokenize`,
so CJK bigrams, folding and stemming carry over, as in the keyword index), GIN-indexed;
:meth:`PgNotesStore.search` ranks the notes holding a query term by how many they hold.

The schema is a versioned migration applied through :meth:`PgDatabase.migrate` (one transaction
under an advisory lock: many processes starting at once apply it exactly once). A load-modify-
save cycle of the notes (:meth:`PgNotesStore.transaction`) holds a transaction-scoped advisory
lock of the namespace, so two servers never interleave them. After a deletion, :meth:`checkpoint`
runs ``VACUUM`` on the notes tables (see ``docs/postgres.md`` for what that does to the bytes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.protocols import Note
from ovos_memory_plugins.storage.notes_store import make_note
from ovos_memory_plugins.storage.postgres import PgMigration
from ovos_memory_plugins.storage.sticky_store import (
    COLUMNS,
    StickyRow,
    asks_quoting,
    note_key,
    reply_lines,
    row_from,
)

if TYPE_CHECKING:
    import psycopg

    from ovos_memory_plugins.storage.postgres import PgDatabase

LOG = logging.getLogger(__name__)

__all__ = ["NOTES_MIGRATIONS", "PgNotesStore", "PgRewrites", "PgStickyStore"]


def _v1(conn: psycopg.Connection[Any]) -> None:
    for sql in (
        "CREATE TABLE IF NOT EXISTS memory_notes ("
        " id bigserial PRIMARY KEY,"
        " namespace text NOT NULL,"
        " position integer NOT NULL,"
        " text text NOT NULL,"
        " date text NOT NULL DEFAULT '',"
        " retired_on text,"
        " created_at double precision NOT NULL,"
        " session_id text NOT NULL DEFAULT '',"
        " terms tsvector NOT NULL)",
        "CREATE INDEX IF NOT EXISTS memory_notes_active ON memory_notes (namespace, retired_on, position)",
        "CREATE INDEX IF NOT EXISTS memory_notes_session ON memory_notes (namespace, session_id)",
        "CREATE INDEX IF NOT EXISTS memory_notes_terms ON memory_notes USING gin (terms)",
        "CREATE TABLE IF NOT EXISTS memory_notes_versions (namespace text PRIMARY KEY, version bigint NOT NULL)",
        "CREATE TABLE IF NOT EXISTS memory_sticky_notes ("
        " namespace text NOT NULL,"
        " id text NOT NULL,"
        " session_id text NOT NULL,"
        " text text NOT NULL,"
        " norm text NOT NULL,"
        " lang text,"
        " created double precision NOT NULL,"
        " updated double precision NOT NULL,"
        " metadata text NOT NULL DEFAULT '{}',"
        " retired_on text,"
        " PRIMARY KEY (namespace, id))",
        "CREATE INDEX IF NOT EXISTS memory_sticky_notes_session"
        " ON memory_sticky_notes (namespace, session_id, created)",
        "CREATE INDEX IF NOT EXISTS memory_sticky_notes_norm ON memory_sticky_notes (namespace, norm)",
        "CREATE TABLE IF NOT EXISTS memory_sticky_asks ("
        " namespace text NOT NULL, session_id text NOT NULL, utterance_key text NOT NULL,"
        " at double precision NOT NULL, reply text NOT NULL, PRIMARY KEY (namespace, session_id))",
    ):
        conn.execute(sql)


def _v2(conn: psycopg.Connection[Any]) -> None:
    """Previous note bodies (``undo``) and the time of the last dream, in the database too."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_notes_rewrites ("
        " id bigserial PRIMARY KEY, namespace text NOT NULL, reason text NOT NULL,"
        " created double precision NOT NULL, body text NOT NULL)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS memory_notes_rewrites_ns ON memory_notes_rewrites (namespace, id)")
    conn.execute("ALTER TABLE memory_notes_versions ADD COLUMN IF NOT EXISTS dreamed double precision")


#: The notes' schema (store ``notes`` in ``memory_migrations``). Append only.
NOTES_MIGRATIONS = [PgMigration("0001_notes_and_sticky_notes", _v1), PgMigration("0002_rewrites", _v2)]


def _terms(text: str) -> list[str]:
    from ovos_memory_plugins.text import tokenize

    return [t for t in dict.fromkeys(tokenize(text)) if t]


class _Vacuum:
    """``VACUUM`` of some tables after deletions, outside any transaction (else later)."""

    def __init__(self, db: PgDatabase, tables: str) -> None:
        self.db = db
        self.tables = tables
        self.dirty = False

    def run(self) -> None:
        if not self.dirty:
            return
        try:
            with self.db.connection() as conn:
                if conn.info.transaction_status.name != "IDLE":
                    return  # inside the caller's transaction: VACUUM cannot run there, next time
                conn.execute(f"VACUUM {self.tables}")
            self.dirty = False
        except StorageError as exc:  # inside a transaction, or the server is away: next time
            LOG.debug("notes: VACUUM %s postponed (%s)", self.tables, exc)


class PgNotesStore:
    """Curated notes of one namespace (see :class:`~ovos_memory_plugins.storage.notes_store.NotesStore`)."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace
        db.migrate("notes", NOTES_MIGRATIONS)
        self._vacuum = _Vacuum(db, "memory_notes")

    def _select(self, where: str, params: Sequence[Any] = ()) -> list[Note]:
        rows = self.db.query(
            "SELECT text, date, retired_on, session_id FROM memory_notes WHERE namespace = %s AND " + where,
            (self.namespace, *params),
        )
        return [make_note(r[0], r[1], session_id=r[3], retired_on=r[2]) for r in rows]

    def _bump(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            "INSERT INTO memory_notes_versions (namespace, version) VALUES (%s, 1)"
            " ON CONFLICT (namespace) DO UPDATE SET version = memory_notes_versions.version + 1",
            (self.namespace,),
        )

    def load(self) -> list[Note]:
        """The active notes, in order."""
        return self._select("retired_on IS NULL ORDER BY position, id")

    def retired(self) -> list[Note]:
        """The retired notes, oldest retirement first."""
        return self._select("retired_on IS NOT NULL ORDER BY retired_on, id")

    def _insert(self, conn: psycopg.Connection[Any], notes: Sequence[Note], position: Callable[[int], int]) -> None:
        now = time.time()
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_notes (namespace, position, text, date, retired_on, created_at, session_id, terms)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, array_to_tsvector(%s::text[]))",
                [
                    (self.namespace, position(i), n.text, n.date, n.retired_on, now, n.session_id, _terms(n.text))
                    for i, n in enumerate(notes)
                ],
            )

    def save(self, notes: Sequence[Note]) -> None:
        """Replace the active notes: unchanged texts keep their rows, others are inserted or deleted."""
        with self.transaction() as conn:
            existing: dict[str, int] = {}
            for row_id, text in conn.execute(
                "SELECT id, text FROM memory_notes WHERE namespace = %s AND retired_on IS NULL ORDER BY id",
                (self.namespace,),
            ):
                existing.setdefault(text, int(row_id))
            keep: set[int] = set()
            updates, new = [], []
            for position, note in enumerate(notes):
                row_id = existing.get(note.text)
                if row_id is not None and row_id not in keep:
                    updates.append((position, note.date, note.session_id, row_id))
                    keep.add(row_id)
                else:
                    new.append((position, note))
            with conn.cursor() as cur:
                if updates:
                    cur.executemany(
                        "UPDATE memory_notes SET position = %s, date = %s, session_id = %s WHERE id = %s", updates
                    )
            gone = [i for i in existing.values() if i not in keep]
            if new:
                self._insert(conn, [n for _, n in new], lambda i: new[i][0])
            if gone:
                conn.execute("DELETE FROM memory_notes WHERE id = ANY(%s)", (gone,))
                self._vacuum.dirty = True
            self._bump(conn)

    def retire(self, notes: Sequence[Note], when: str) -> None:
        """Mark these active notes retired on ``when``."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE memory_notes SET retired_on = %s WHERE namespace = %s AND retired_on IS NULL"
                " AND text = ANY(%s)",
                (when, self.namespace, [n.text for n in notes]),
            )
            self._bump(conn)

    def restore(self, notes: Sequence[Note]) -> None:
        """Make these retired notes active again, at the end."""
        with self.transaction() as conn:
            for note in notes:
                active = conn.execute(
                    "SELECT 1 FROM memory_notes WHERE namespace = %s AND text = %s AND retired_on IS NULL",
                    (self.namespace, note.text),
                ).fetchone()
                if active:
                    conn.execute(
                        "DELETE FROM memory_notes WHERE namespace = %s AND text = %s AND retired_on IS NOT NULL",
                        (self.namespace, note.text),
                    )
                    continue
                conn.execute(
                    "UPDATE memory_notes SET retired_on = NULL, position = (SELECT coalesce(max(position), -1) + 1"
                    " FROM memory_notes WHERE namespace = %(ns)s) WHERE id = (SELECT id FROM memory_notes"
                    " WHERE namespace = %(ns)s AND text = %(text)s AND retired_on IS NOT NULL"
                    " ORDER BY retired_on DESC, id DESC LIMIT 1)",
                    {"ns": self.namespace, "text": note.text},
                )
            self._bump(conn)

    def add_retired(self, notes: Sequence[Note]) -> None:
        """Insert already-retired notes (notes moving between stores)."""
        if not notes:
            return
        with self.transaction() as conn:
            self._insert(conn, [replace(n, retired_on=n.retired_on or "") for n in notes], lambda i: 0)
            self._bump(conn)

    def remove(self, predicate: Callable[[Note], bool]) -> list[Note]:
        """Delete every note (active or retired) ``predicate`` picks; return the removed notes.
        The rows' space is vacuumed at the next :meth:`checkpoint`."""
        with self.transaction() as conn:
            rows = conn.execute(
                "SELECT id, text, date, retired_on, session_id FROM memory_notes WHERE namespace = %s ORDER BY id",
                (self.namespace,),
            ).fetchall()
            gone = [(int(r[0]), make_note(r[1], r[2], session_id=r[4], retired_on=r[3])) for r in rows]
            gone = [(i, n) for i, n in gone if predicate(n)]
            if gone:
                conn.execute("DELETE FROM memory_notes WHERE id = ANY(%s)", ([i for i, _ in gone],))
                self._vacuum.dirty = True
            self._bump(conn)
        return [n for _, n in gone]

    def search(self, query_terms: Sequence[str], top_k: int, *, include_retired: bool = True) -> list[Note]:
        """Notes holding any query term (GIN over our tokens), most terms held first."""
        from ovos_memory_plugins.storage.postgres import tsquery_literal

        terms = [t for t in dict.fromkeys(query_terms) if t]
        if not terms or top_k <= 0:
            return []
        where = "" if include_retired else " AND retired_on IS NULL"
        rows = self.db.query(
            "SELECT text, date, retired_on, session_id,"
            " (SELECT count(*) FROM unnest(tsvector_to_array(terms)) AS t WHERE t = ANY(%s)) AS held"
            " FROM memory_notes WHERE namespace = %s AND terms @@ %s::tsquery"
            + where
            + " ORDER BY held DESC, id LIMIT %s",
            (terms, self.namespace, tsquery_literal(terms), int(top_k)),
        )
        return [make_note(r[0], r[1], session_id=r[3], retired_on=r[2]) for r in rows]

    def version(self) -> Hashable:
        """Bumped in the transaction of every write, by any process (one indexed read)."""
        return int(
            self.db.scalar("SELECT version FROM memory_notes_versions WHERE namespace = %s", (self.namespace,)) or 0
        )

    def checkpoint(self) -> None:
        """After a removal: ``VACUUM`` the notes table (outside a transaction; else later)."""
        self._vacuum.run()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction holding the namespace's notes lock: load-modify-save cycles of many
        processes never interleave."""
        with self.db.atomic() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("ovos_memory_notes:" + self.namespace,))
            yield conn

    def count(self) -> tuple[int, int]:
        """(active, retired) note counts."""
        rows = self.db.query(
            "SELECT retired_on IS NULL, count(*) FROM memory_notes WHERE namespace = %s GROUP BY 1", (self.namespace,)
        )
        counts = {bool(r[0]): int(r[1]) for r in rows}
        return counts.get(True, 0), counts.get(False, 0)

    def close(self) -> None:
        """Vacuum what a removal left (the memory closes the database)."""
        self._vacuum.run()


class PgRewrites:
    """Previous note bodies and the last dream's time of one namespace (see
    :class:`~ovos_memory_plugins.storage.notes_store.Rewrites`): nothing under ``root``."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace
        db.migrate("notes", NOTES_MIGRATIONS)
        self._vacuum = _Vacuum(db, "memory_notes_rewrites")

    def keep(self, body: str, reason: str, when: float, depth: int) -> None:
        """Keep ``body`` as the newest; drop the ones past ``depth``."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO memory_notes_rewrites (namespace, reason, created, body) VALUES (%s, %s, %s, %s)",
                (self.namespace, reason, when, body),
            )
            conn.execute(
                "DELETE FROM memory_notes_rewrites WHERE namespace = %(ns)s AND id NOT IN (SELECT id FROM"
                " memory_notes_rewrites WHERE namespace = %(ns)s ORDER BY id DESC LIMIT %(depth)s)",
                {"ns": self.namespace, "depth": max(int(depth), 1)},
            )

    def bodies(self) -> list[tuple[str, str]]:
        """``(name, body)`` newest first; a name is ``<id>-<reason>``."""
        rows = self.db.query(
            "SELECT id, reason, body FROM memory_notes_rewrites WHERE namespace = %s ORDER BY id DESC",
            (self.namespace,),
        )
        return [(f"{r[0]}-{r[1]}", str(r[2])) for r in rows]

    def drop(self, names: Sequence[str]) -> None:
        """Delete these kept bodies."""
        ids = [int(n.split("-")[0]) for n in names]
        self.db.execute(
            "DELETE FROM memory_notes_rewrites WHERE namespace = %s AND id = ANY(%s)", (self.namespace, ids)
        )
        self._vacuum.dirty = True
        self._vacuum.run()

    def scrub(self, drop_line: Callable[[str], bool]) -> None:
        """Rewrite the kept bodies without the picked lines."""
        from ovos_memory_plugins.storage.notes_store import _scrubbed

        for name, body in self.bodies():
            kept = _scrubbed(body, drop_line)
            if kept is not None:
                self.db.execute(
                    "UPDATE memory_notes_rewrites SET body = %s WHERE namespace = %s AND id = %s",
                    (kept, self.namespace, int(name.split("-")[0])),
                )
                self._vacuum.dirty = True
        self._vacuum.run()

    def clear(self) -> None:
        """Delete every kept body."""
        self.db.execute("DELETE FROM memory_notes_rewrites WHERE namespace = %s", (self.namespace,))
        self._vacuum.dirty = True
        self._vacuum.run()

    def dreamed(self) -> float | None:
        """When the notes were last dreamed over."""
        value = self.db.scalar("SELECT dreamed FROM memory_notes_versions WHERE namespace = %s", (self.namespace,))
        return None if value is None else float(value)

    def mark_dreamed(self, when: float) -> None:
        """Record a dream at ``when``."""
        self.db.execute(
            "INSERT INTO memory_notes_versions (namespace, version, dreamed) VALUES (%s, 0, %s)"
            " ON CONFLICT (namespace) DO UPDATE SET dreamed = excluded.dreamed",
            (self.namespace, when),
        )


class PgStickyStore:
    """Sticky notes of one namespace (see :class:`~ovos_memory_plugins.storage.sticky_store.StickyNotesStore`)."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace
        db.migrate("notes", NOTES_MIGRATIONS)
        self._vacuum = _Vacuum(db, "memory_sticky_notes, memory_sticky_asks")

    def _rows(self, where: str, params: Sequence[Any] = ()) -> list[StickyRow]:
        rows = self.db.query(
            f"SELECT {COLUMNS} FROM memory_sticky_notes WHERE namespace = %s{where}", (self.namespace, *params)
        )
        return [row_from(r) for r in rows]

    def put(
        self,
        note_id: str,
        text: str,
        session_id: str,
        *,
        lang: str | None = None,
        metadata: dict[str, Any] | None = None,
        now: float | None = None,
        created: float | None = None,
        retired_on: str | None = None,
    ) -> None:
        """Insert a note, or replace the text and metadata of the note with that id (its date
        stays; a retired note becomes active again unless ``retired_on`` is given)."""
        stamp = time.time() if now is None else now
        self.db.execute(
            "INSERT INTO memory_sticky_notes"
            " (namespace, id, session_id, text, norm, lang, created, updated, metadata, retired_on)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (namespace, id) DO UPDATE SET text = excluded.text, norm = excluded.norm,"
            " session_id = excluded.session_id, lang = coalesce(excluded.lang, memory_sticky_notes.lang),"
            " updated = excluded.updated, metadata = excluded.metadata, retired_on = excluded.retired_on",
            (
                self.namespace,
                note_id,
                session_id,
                text,
                note_key(text),
                lang,
                stamp if created is None else created,
                stamp,
                json.dumps(metadata or {}, ensure_ascii=False, default=str),
                retired_on,
            ),
        )

    def touch(self, note_id: str, now: float | None = None) -> None:
        """Mark a note as said again."""
        stamp = time.time() if now is None else now
        self.db.execute(
            "UPDATE memory_sticky_notes SET updated = %s WHERE namespace = %s AND id = %s",
            (stamp, self.namespace, note_id),
        )

    def get(self, note_id: str) -> StickyRow | None:
        """The note with that id, or None."""
        rows = self._rows(" AND id = %s", (note_id,))
        return rows[0] if rows else None

    def find_key(self, key: str, session_id: str | None = None) -> StickyRow | None:
        """The active note whose dedup key is ``key`` (in ``session_id`` only, when given)."""
        scoped = "" if session_id is None else " AND session_id = %s"
        params = (key,) if session_id is None else (key, session_id)
        rows = self._rows(f" AND norm = %s AND retired_on IS NULL{scoped} ORDER BY created LIMIT 1", params)
        return rows[0] if rows else None

    def notes(self, session_id: str | None = None, *, include_retired: bool = False) -> list[StickyRow]:
        """Every active note (of ``session_id`` only, when given), oldest first; retired ones too
        with ``include_retired``."""
        where = "" if include_retired else " AND retired_on IS NULL"
        params: tuple[Any, ...] = ()
        if session_id is not None:
            where += " AND session_id = %s"
            params = (session_id,)
        return self._rows(where + " ORDER BY created, id", params)

    def set_retired(self, note_id: str, retired_on: str | None) -> bool:
        """Retire a note (a day ``YYYY-MM-DD``) or make it active again (None); False when absent."""
        return bool(
            self.db.execute(
                "UPDATE memory_sticky_notes SET retired_on = %s WHERE namespace = %s AND id = %s",
                (retired_on, self.namespace, note_id),
            )
        )

    def ids(self, session_id: str) -> list[str]:
        """The ids of a session's notes."""
        return [
            r[0]
            for r in self.db.query(
                "SELECT id FROM memory_sticky_notes WHERE namespace = %s AND session_id = %s",
                (self.namespace, session_id),
            )
        ]

    def delete(self, note_ids: Sequence[str]) -> int:
        """Delete notes by id, and the replay records quoting them; return how many existed."""
        with self.db.transaction() as conn:
            texts = [
                str(r[0])
                for r in conn.execute(
                    "DELETE FROM memory_sticky_notes WHERE namespace = %s AND id = ANY(%s) RETURNING text",
                    (self.namespace, list(note_ids)),
                )
            ]
            records = conn.execute(
                "SELECT session_id, reply FROM memory_sticky_asks WHERE namespace = %s", (self.namespace,)
            ).fetchall()
            doomed = asks_quoting([(str(r[0]), str(r[1])) for r in records], texts)
            if doomed:
                conn.execute(
                    "DELETE FROM memory_sticky_asks WHERE namespace = %s AND session_id = ANY(%s)",
                    (self.namespace, doomed),
                )
        self._vacuum.dirty = self._vacuum.dirty or bool(texts)
        return len(texts)

    def delete_all(self) -> int:
        """Delete every note (and the replay records); return how many notes there were."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM memory_sticky_asks WHERE namespace = %s", (self.namespace,))
            n = conn.execute("DELETE FROM memory_sticky_notes WHERE namespace = %s", (self.namespace,)).rowcount
        self._vacuum.dirty = True
        return int(n)

    def forget_asks(self, session_id: str) -> None:
        """Delete a session's replay record."""
        self.db.execute(
            "DELETE FROM memory_sticky_asks WHERE namespace = %s AND session_id = %s", (self.namespace, session_id)
        )
        self._vacuum.dirty = True

    def last_ask(self, session_id: str) -> tuple[str, float, list[str]] | None:
        """The session's last ask: its digest, when (Unix time), and the lines answered."""
        rows = self.db.query(
            "SELECT utterance_key, at, reply FROM memory_sticky_asks WHERE namespace = %s AND session_id = %s",
            (self.namespace, session_id),
        )
        lines = reply_lines(rows[0][2]) if rows else None
        return None if lines is None else (str(rows[0][0]), float(rows[0][1]), lines)

    def set_last_ask(self, session_id: str, utterance_key: str, lines: Sequence[str], now: float | None = None) -> None:
        """Record the session's last ask and the lines answered to it."""
        stamp = time.time() if now is None else now
        self.db.execute(
            "INSERT INTO memory_sticky_asks (namespace, session_id, utterance_key, at, reply)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, session_id) DO UPDATE SET"
            " utterance_key = excluded.utterance_key, at = excluded.at, reply = excluded.reply",
            (self.namespace, session_id, utterance_key, stamp, json.dumps(list(lines), ensure_ascii=False)),
        )

    def asks(self) -> list[tuple[str, str, float, list[str]]]:
        """Every replay record: ``(session_id, utterance_key, at, lines)``."""
        rows = self.db.query(
            "SELECT session_id, utterance_key, at, reply FROM memory_sticky_asks WHERE namespace = %s"
            " ORDER BY session_id",
            (self.namespace,),
        )
        return [(str(r[0]), str(r[1]), float(r[2]), reply_lines(r[3]) or []) for r in rows]

    def count(self) -> int:
        """How many notes there are (active and retired)."""
        return int(
            self.db.scalar("SELECT count(*) FROM memory_sticky_notes WHERE namespace = %s", (self.namespace,)) or 0
        )

    def checkpoint(self) -> None:
        """After deletions: ``VACUUM`` the sticky tables (outside a transaction; else later)."""
        self._vacuum.run()

    def close(self) -> None:
        """Vacuum what a deletion left (the memory closes the database)."""
        self._vacuum.run()
