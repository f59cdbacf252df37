"""The PostgreSQL engine's documents table (:class:`PgDocuments`): a namespace's rows of
``memory_documents``, the one documents table of a memory that every index shares (its schema:
:mod:`ovos_memory_plugins.storage.postgres.schema`)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.storage.postgres.database import PgDatabase, load_metadata
from ovos_memory_plugins.storage.records import Document, StoredDocument, document_time, dump_metadata, stored_document

if TYPE_CHECKING:
    import psycopg

__all__ = ["PgDocuments"]


#: Whether the planner still believes ``memory_documents`` empty (``ANALYZE`` saw it so: after a
#: ``forget_all``, by the background VACUUM or autovacuum) although it has grown past 8 pages.
_STALE_STATISTICS = (
    "SELECT c.reltuples = 0 AND pg_relation_size(c.oid) > 8 * current_setting('block_size')::int"
    " FROM pg_class c WHERE c.oid = 'memory_documents'::regclass"
)

#: The tables a batch writes, analysed again when their statistics are stale.
_BATCH_TABLES = (
    "memory_documents",
    "memory_keywords",
    "memory_keyword_df",
    "memory_keyword_postings",
    "memory_vectors",
)


def _refresh_stale_statistics(conn: psycopg.Connection[Any]) -> None:
    """Before a batch of documents: ``ANALYZE`` the tables a batch writes when the planner still
    believes them empty. A connection keeps a generic plan for a statement it runs often; one made
    while the tables were analysed empty scans a whole table where an index finds one row, so
    every write of a bulk load after a ``forget_all`` cost more than the one before (measured: from
    1,741 to 263 documents/s within 8,000 documents, until autovacuum analysed the tables again).
    ``ANALYZE`` invalidates those plans. One cheap read per batch otherwise; a user who does not
    own the tables gets PostgreSQL's warning and the batch goes on."""
    row = conn.execute(_STALE_STATISTICS).fetchone()
    if row is not None and row[0]:
        for table in _BATCH_TABLES:
            conn.execute(f"ANALYZE {table}")


_SELECT = "SELECT id, doc_id, session_id, content, metadata, created FROM memory_documents"


def _row_document(row: Sequence[Any], changed: bool = False) -> StoredDocument:
    return StoredDocument(
        key=int(row[0]),
        doc_id=row[1],
        session_id=row[2],
        text=row[3],
        metadata=load_metadata(row[4]),
        created=float(row[5]),
        changed=changed,
    )


#: Insert or replace one document; returns its key, its creation time and whether its text or
#: session changed (the row as it was is read in the same snapshot).
_DOCUMENT_PUT = (
    "WITH old AS (SELECT session_id, content FROM memory_documents"
    "  WHERE namespace = %(ns)s AND doc_id = %(doc)s),"
    " up AS (INSERT INTO memory_documents (namespace, doc_id, session_id, content, metadata, created)"
    "  VALUES (%(ns)s, %(doc)s, %(session)s, %(text)s, %(meta)s, %(now)s)"
    "  ON CONFLICT (namespace, doc_id) DO UPDATE SET session_id = excluded.session_id,"
    "  content = excluded.content, metadata = excluded.metadata RETURNING id, created, (xmax = 0) AS inserted)"
    " SELECT up.id, up.created, NOT EXISTS (SELECT 1 FROM old WHERE old.session_id = %(session)s"
    "  AND old.content = %(text)s), up.inserted FROM up"
)


class PgDocuments:
    """The namespace's rows of ``memory_documents`` (see :class:`~ovos_memory_plugins.storage.seam.DocumentStore`)."""

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace

    def put(self, docs: Sequence[Document]) -> list[StoredDocument]:
        """Insert or replace by ``doc_id``; a replaced document keeps its key and ``created``.

        One statement per document: the row as it was (same snapshot) tells whether the text or
        session changed.
        """
        out: dict[str, StoredDocument] = {}
        now = time.time()
        rows = [
            {
                "ns": self.namespace,
                "doc": doc.doc_id,
                "session": doc.session_id,
                "text": doc.text,
                "meta": dump_metadata(doc.metadata),
                "now": document_time(doc.metadata, now),
            }
            for doc in docs
        ]
        results: list[Any] = []
        with self.db.transaction() as conn, conn.cursor() as cur:
            if len(rows) == 1:  # the common case (one exchange): no pipeline round trips
                results.append(cur.execute(_DOCUMENT_PUT, rows[0]).fetchone())
            else:
                _refresh_stale_statistics(conn)
                cur.executemany(_DOCUMENT_PUT, rows, returning=True)
                while True:
                    results.append(cur.fetchone())
                    if not cur.nextset():
                        break
        for doc, row in zip(docs, results, strict=True):
            assert row is not None  # RETURNING always yields the row
            prior = out.get(doc.doc_id)
            out[doc.doc_id] = stored_document(doc, int(row[0]), float(row[1]), bool(row[2]), bool(row[3]), prior)
        return list(out.values())

    def get(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]:
        """The stored documents among ``doc_ids``."""
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return {}
        rows = self.db.query(f"{_SELECT} WHERE namespace = %s AND doc_id = ANY(%s)", (self.namespace, ids))
        return {r[1]: _row_document(r) for r in rows}

    def by_keys(self, keys: Iterable[int]) -> dict[int, StoredDocument]:
        """The stored documents with these keys."""
        wanted = list(dict.fromkeys(int(k) for k in keys))
        if not wanted:
            return {}
        rows = self.db.query(f"{_SELECT} WHERE namespace = %s AND id = ANY(%s)", (self.namespace, wanted))
        return {int(r[0]): _row_document(r) for r in rows}

    def ids(self, session_id: str | None = None) -> list[str]:
        """The ids of a session's documents (None: all), oldest first."""
        if session_id is None:
            rows = self.db.query(
                "SELECT doc_id FROM memory_documents WHERE namespace = %s ORDER BY id", (self.namespace,)
            )
        else:
            rows = self.db.query(
                "SELECT doc_id FROM memory_documents WHERE namespace = %s AND session_id = %s ORDER BY id",
                (self.namespace, session_id),
            )
        return [r[0] for r in rows]

    def ids_with_text(self, session_id: str, text: str) -> list[str]:
        """The ids of a session's documents whose text is exactly ``text``, oldest first."""
        rows = self.db.query(
            "SELECT doc_id FROM memory_documents WHERE namespace = %s AND session_id = %s AND content = %s ORDER BY id",
            (self.namespace, session_id, text),
        )
        return [r[0] for r in rows]

    def iter(self, batch: int = 500) -> Iterator[StoredDocument]:
        """Every document, oldest first, in pages of ``batch``."""
        last = 0
        while True:
            rows = self.db.query(
                f"{_SELECT} WHERE namespace = %s AND id > %s ORDER BY id LIMIT %s",
                (self.namespace, last, int(batch)),
            )
            if not rows:
                return
            for row in rows:
                yield _row_document(row)
            last = int(rows[-1][0])

    def count(self, session_id: str | None = None) -> int:
        """How many documents (of a session)."""
        if session_id is None:
            value = self.db.scalar("SELECT count(*) FROM memory_documents WHERE namespace = %s", (self.namespace,))
        else:
            value = self.db.scalar(
                "SELECT count(*) FROM memory_documents WHERE namespace = %s AND session_id = %s",
                (self.namespace, session_id),
            )
        return int(value or 0)

    def made_between(
        self, since: float, until: float, limit: int, session_id: str | None = None
    ) -> list[StoredDocument]:
        """The newest ``limit`` documents made in ``[since, until)`` (``created``), newest first."""
        where = " AND session_id = %s" if session_id is not None else ""
        params: tuple[Any, ...] = (self.namespace, float(since), float(until))
        if session_id is not None:
            params = (*params, session_id)
        rows = self.db.query(
            f"{_SELECT} WHERE namespace = %s AND created >= %s AND created < %s{where}"
            " ORDER BY created DESC, id DESC LIMIT %s",
            (*params, int(limit)),
        )
        return [_row_document(r) for r in rows]

    def sessions(self) -> list[str]:
        """Every session that has documents, sorted."""
        return self.db.sessions("memory_documents", self.namespace)

    def remove(self, doc_ids: Sequence[str]) -> int:
        """Delete by id (keyword and vector rows cascade); return how many existed."""
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return 0
        with self.db.transaction() as conn:
            return int(
                conn.execute(
                    "DELETE FROM memory_documents WHERE namespace = %s AND doc_id = ANY(%s)", (self.namespace, ids)
                ).rowcount
            )

    def remove_all(self) -> int:
        """Delete every document of the namespace; return how many existed."""
        with self.db.transaction() as conn:
            return int(conn.execute("DELETE FROM memory_documents WHERE namespace = %s", (self.namespace,)).rowcount)

    def set_created(self, items: Sequence[tuple[str, float]]) -> None:
        """Set the ``created`` of these documents (by doc id); inside :meth:`PgDatabase.atomic`."""
        if items:
            self.db.executemany(
                "UPDATE memory_documents SET created = %s WHERE namespace = %s AND doc_id = %s",
                [(created, self.namespace, doc_id) for doc_id, created in items],
            )
