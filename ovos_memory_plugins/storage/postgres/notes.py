"""Curated notes, sticky notes and rolling summaries in PostgreSQL: the schema, the full-text
search, the undo history.

With ``"database": "postgresql://..."`` every note lives in the database the memory's documents
and history live in (:mod:`ovos_memory_plugins.storage.postgres`), so every persona server that
shares the memory sees a note another one wrote on its next turn, and nothing is written under
``root``. The stores themselves serve both engines
(:class:`~ovos_memory_plugins.storage.notes_store.DatabaseNotesStore`,
:class:`~ovos_memory_plugins.storage.sticky_store.StickyStore`, over
:class:`~ovos_memory_plugins.storage.tables.TableAccess`): the same tables and statements,
``namespace`` included. This module holds what is PostgreSQL's own. The tables are shared by the
memories of the database; ``namespace`` and ``session_id`` are indexed columns and every
statement filters on the namespace::

    memory_notes(id, namespace, position, text, date, retired_on, created_at, session_id, terms)
    memory_notes_versions(namespace, version, dreamed)  -- bumped by every write (cache check)
    memory_notes_rewrites(id, namespace, reason, created, body)  -- previous bodies, for undo
    memory_sticky_notes(namespace, id, session_id, text, norm, lang, created, updated,
                        metadata, retired_on)
    memory_sticky_asks(namespace, session_id, utterance_key, at, reply)
    memory_summaries(namespace, session_id, summary, folded, updated)  -- the rolling summaries

The rolling summaries' store serves both engines too
(:class:`~ovos_memory_plugins.storage.summary_store.SummaryStore`); their schema is
:data:`SUMMARY_MIGRATIONS`.

``terms`` is a ``tsvector`` built from OUR tokens (:func:`ovos_memory_plugins.text.tokenize`,
so CJK bigrams, folding and stemming carry over, as in the keyword index), GIN-indexed;
:func:`search_sql` ranks the notes holding a query term by how many they hold.

The schema is a versioned migration applied through :meth:`PgDatabase.migrate` (one transaction
under an advisory lock: many processes starting at once apply it exactly once). A load-modify-
save cycle of the notes holds a transaction-scoped advisory lock of the namespace, so two
servers never interleave them. After a deletion the notes tables are vacuumed (see
``docs/postgres.md`` for what VACUUM does to the bytes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.storage.records import Migration as PgMigration
from ovos_memory_plugins.storage.tables import TableAccess, scrub_lines, tsquery_literal

if TYPE_CHECKING:
    import psycopg

LOG = logging.getLogger(__name__)

__all__ = ["NOTES_MIGRATIONS", "SUMMARY_MIGRATIONS", "PgRewrites", "search_sql"]


def _v1(conn: psycopg.Connection[Any]) -> None:
    for sql in (
        "CREATE TABLE IF NOT EXISTS memory_notes (id bigserial PRIMARY KEY, namespace text NOT NULL,"
        " position integer NOT NULL, text text NOT NULL, date text NOT NULL DEFAULT '', retired_on text,"
        " created_at double precision NOT NULL, session_id text NOT NULL DEFAULT '', terms tsvector NOT NULL)",
        "CREATE INDEX IF NOT EXISTS memory_notes_active ON memory_notes (namespace, retired_on, position)",
        "CREATE INDEX IF NOT EXISTS memory_notes_session ON memory_notes (namespace, session_id)",
        "CREATE INDEX IF NOT EXISTS memory_notes_terms ON memory_notes USING gin (terms)",
        "CREATE TABLE IF NOT EXISTS memory_notes_versions (namespace text PRIMARY KEY, version bigint NOT NULL)",
        "CREATE TABLE IF NOT EXISTS memory_sticky_notes (namespace text NOT NULL, id text NOT NULL,"
        " session_id text NOT NULL, text text NOT NULL, norm text NOT NULL, lang text,"
        " created double precision NOT NULL, updated double precision NOT NULL,"
        " metadata text NOT NULL DEFAULT '{}', retired_on text, PRIMARY KEY (namespace, id))",
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


def _summaries_v1(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS memory_summaries ("
        " namespace text NOT NULL, session_id text NOT NULL, summary text NOT NULL,"
        " folded integer NOT NULL, updated double precision NOT NULL,"
        " PRIMARY KEY (namespace, session_id))"
    )


#: The rolling summaries' schema (store ``summary`` in ``memory_migrations``; the table and
#: statements are :class:`~ovos_memory_plugins.storage.summary_store.SummaryStore`'s, the same on
#: both engines). Append only.
SUMMARY_MIGRATIONS = [PgMigration("0001_memory_summaries", _summaries_v1)]


def search_sql(terms: Sequence[str], where: str) -> tuple[str, tuple[Any, ...]]:
    """The statement (``?`` placeholders: namespace, then these params, then the limit) that
    finds notes holding any of ``terms`` through the GIN index, most terms held first."""
    return (
        "SELECT n.text, n.date, n.retired_on, n.session_id FROM memory_notes n"
        " WHERE n.namespace = ? AND n.terms @@ ?::tsquery" + where + " ORDER BY"
        " (SELECT count(*) FROM unnest(tsvector_to_array(n.terms)) AS t WHERE t = ANY(?)) DESC, n.id LIMIT ?",
        (tsquery_literal(terms), list(terms)),
    )


class PgRewrites:
    """Previous note bodies and the last dream's time of one namespace (see
    :class:`~ovos_memory_plugins.storage.notes_store.Rewrites`): nothing under ``root``."""

    def __init__(self, db: Any, namespace: str) -> None:
        """``db``: the memory's :class:`~ovos_memory_plugins.storage.postgres.PgDatabase`."""
        self.db = db
        self.namespace = namespace
        self._t = TableAccess(db, namespace, ("notes", []), lambda: ("notes", NOTES_MIGRATIONS))

    def _purge(self) -> None:
        self._t.dirty = True
        self._t.purge("memory_notes_rewrites")

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
        self._purge()

    def scrub(self, drop_line: Callable[[str], bool]) -> None:
        """Rewrite the kept bodies without the picked lines."""
        for name, body in self.bodies():
            kept = scrub_lines(body, drop_line)
            if kept is not None:
                self.db.execute(
                    "UPDATE memory_notes_rewrites SET body = %s WHERE namespace = %s AND id = %s",
                    (kept, self.namespace, int(name.split("-")[0])),
                )
                self._purge()

    def clear(self) -> None:
        """Delete every kept body."""
        self.db.execute("DELETE FROM memory_notes_rewrites WHERE namespace = %s", (self.namespace,))
        self._purge()

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
