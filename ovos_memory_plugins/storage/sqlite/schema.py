"""The SQLite engine's schema of a memory's file: the append-only migrations of the store
``memory`` (applied atomically across processes, see :meth:`Database.migrate`), as
``storage/postgres/schema.py`` is PostgreSQL's.

* ``documents``: ``id`` (the key: the rowid, so a new document's key is above every other's), ``doc_id`` (unique),
  ``session_id``, ``content``, ``metadata`` (JSON), ``created``;
* ``keyword_terms`` / ``keyword_meta``: the keyword index (:mod:`ovos_memory_plugins.storage.sqlite.keyword`
  adds its FTS5 table);
* ``vector_spaces`` / ``vectors``: the vector index (:mod:`ovos_memory_plugins.storage.sqlite.vector`).

The history's tables are its module's own migrations (:mod:`ovos_memory_plugins.storage.sqlite.history`).
Tables of earlier releases inside the file move in here, once, in the same transaction as the
schema: ``lexical_docs`` (the keyword backend's table) and ``vec_documents``/``vec_vectors``
(the vector backend's) into ``documents``, ``keyword_terms`` and ``vectors``; the old history
catalogue (``documents`` without text) becomes rows of the new ``documents``.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3

from ovos_memory_plugins.storage.sqlite.database import Migration

LOG = logging.getLogger("ovos_memory_plugins.storage.sqlite.engine")  # the name its records always had

__all__ = ["MIGRATIONS", "table_columns"]


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """The column names of ``table`` (none when the file has no such table)."""
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _documents_v1(conn: sqlite3.Connection) -> None:
    old = table_columns(conn, "documents")
    legacy_catalogue = bool(old) and "content" not in old
    if legacy_catalogue:  # the history store's catalogue of earlier releases: no text
        conn.execute("DROP INDEX IF EXISTS documents_session")
        conn.execute("ALTER TABLE documents RENAME TO _catalogue_v0")
    conn.execute(
        "CREATE TABLE documents ("
        " id INTEGER PRIMARY KEY,"
        " doc_id TEXT NOT NULL UNIQUE,"
        " session_id TEXT NOT NULL,"
        " content TEXT NOT NULL,"
        " metadata TEXT NOT NULL,"
        " created REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX documents_session ON documents (session_id, id)")
    if legacy_catalogue:
        conn.execute(
            "INSERT INTO documents (doc_id, session_id, content, metadata, created)"
            " SELECT doc_id, session_id, '', metadata, created FROM _catalogue_v0 ORDER BY created, doc_id"
        )
        conn.execute("DROP TABLE _catalogue_v0")


def _keyword_v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE keyword_terms ("
        " id INTEGER PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,"
        " body_terms TEXT NOT NULL, head_terms TEXT NOT NULL, ctx_terms TEXT NOT NULL, ctx_id INTEGER)"
    )
    # no index on ctx_id: it would cost every store; a delete scans for the turns that held its words
    conn.execute("CREATE TABLE keyword_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def _vector_v1(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE vector_spaces (space TEXT PRIMARY KEY, dimension INTEGER NOT NULL, created REAL)")
    conn.execute(
        "CREATE TABLE vectors ("
        " id INTEGER PRIMARY KEY,"
        " space TEXT NOT NULL REFERENCES vector_spaces (space) ON DELETE CASCADE,"
        " doc INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,"
        " vector BLOB NOT NULL, UNIQUE (space, doc))"
    )
    conn.execute("CREATE INDEX vectors_doc ON vectors (doc)")


def _move_old_documents(conn: sqlite3.Connection, table: str, text: str, order: str) -> int | None:
    """Copy the rows of an earlier release's documents ``table`` (its ``text`` column, in
    ``order``) into ``documents``, upserting by doc id; return how many it held, None when the
    file has no such table. ``table``, ``text`` and ``order`` are this module's constants."""
    if not table_columns(conn, table):
        return None
    n = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    conn.execute(
        "INSERT INTO documents (doc_id, session_id, content, metadata, created)"
        f" SELECT doc_id, session_id, {text}, metadata, created FROM {table} WHERE true ORDER BY {order}"
        " ON CONFLICT (doc_id) DO UPDATE SET session_id = excluded.session_id, content = excluded.content,"
        " metadata = excluded.metadata"
    )
    return n


def _from_lexical_docs(conn: sqlite3.Connection) -> None:
    """The keyword backend's ``lexical_docs`` (text, session, metadata and terms in one row)."""
    n = _move_old_documents(conn, "lexical_docs", "content", "rowid")
    if n is None:
        return
    conn.execute(
        "INSERT OR REPLACE INTO keyword_terms (id, body_terms, head_terms, ctx_terms, ctx_id)"
        " SELECT d.id, l.body_terms, l.head_terms, l.ctx_terms, c.id FROM lexical_docs l"
        " JOIN documents d ON d.doc_id = l.doc_id"
        " LEFT JOIN lexical_docs lc ON lc.rowid = l.ctx_rowid LEFT JOIN documents c ON c.doc_id = lc.doc_id"
    )
    version = None
    if table_columns(conn, "lexical_meta"):
        row = conn.execute("SELECT value FROM lexical_meta WHERE key = 'tokenizer'").fetchone()
        version = row[0] if row else None
        conn.execute("DROP TABLE lexical_meta")
    if version is not None:
        conn.execute("INSERT OR REPLACE INTO keyword_meta (key, value) VALUES ('tokenizer', ?)", (version,))
    with contextlib.suppress(sqlite3.OperationalError):  # no FTS5 in this SQLite: the table is unreadable
        conn.execute("DROP TABLE IF EXISTS lexical_fts")
    conn.execute("DROP TABLE lexical_docs")
    LOG.info("storage: moved %d document(s) of the keyword backend's table into the shared documents table", n)


def _from_vec_documents(conn: sqlite3.Connection) -> None:
    """The vector backend's ``vec_documents`` / ``vec_spaces`` / ``vec_vectors``."""
    n = _move_old_documents(conn, "vec_documents", "text", "created, doc_id")
    if n is None:
        return
    if table_columns(conn, "vec_spaces"):
        conn.execute(
            "INSERT OR IGNORE INTO vector_spaces (space, dimension, created)"
            " SELECT embedder_id, dimension, created FROM vec_spaces"
        )
    if table_columns(conn, "vec_vectors"):
        conn.execute(
            "INSERT OR REPLACE INTO vectors (space, doc, vector)"
            " SELECT v.embedder_id, d.id, v.vector FROM vec_vectors v JOIN documents d ON d.doc_id = v.doc_id"
            " WHERE v.embedder_id IN (SELECT space FROM vector_spaces)"
        )
    for table in ("vec_vectors", "vec_spaces", "vec_documents"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    LOG.info("storage: moved %d document(s) of the vector backend's tables into the shared documents table", n)


def _created_from_time(conn: sqlite3.Connection) -> None:
    """A document's ``created`` is when it was made: its ``metadata.time`` where it has one
    (earlier releases stored the time of the write, so an ingested transcript's exchanges were
    all dated the day of the ingest; recall's time windows filter on ``created``, and read a
    window's newest documents through the index on it)."""
    conn.execute("CREATE INDEX IF NOT EXISTS documents_created ON documents (created)")
    conn.execute(
        "UPDATE documents SET created = json_extract(metadata, '$.time')"
        " WHERE json_valid(metadata) AND json_type(metadata, '$.time') IN ('integer', 'real')"
        " AND json_extract(metadata, '$.time') > 0"
    )


#: The schema of a memory's file. Append only; never rename or reorder an applied step.
MIGRATIONS = [
    Migration("0001_documents", _documents_v1),
    Migration("0002_keyword_index", _keyword_v1),
    Migration("0003_vector_index", _vector_v1),
    Migration("0004_from_lexical_docs", _from_lexical_docs),
    Migration("0005_from_vec_documents", _from_vec_documents),
    Migration("0006_documents_created_from_time", _created_from_time),
]
