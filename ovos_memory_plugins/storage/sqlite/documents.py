"""The SQLite engine's documents table (:class:`SqliteDocuments`): the one table of a memory's
file that every index shares (its schema: :mod:`ovos_memory_plugins.storage.sqlite.schema`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ovos_memory_plugins.storage.records import Document, StoredDocument, document_time, dump_metadata, stored_document
from ovos_memory_plugins.storage.sqlite.database import Database, chunked

__all__ = ["SqliteDocuments"]


def _row_document(row: Any, changed: bool = True) -> StoredDocument:
    return StoredDocument(
        key=int(row[0]),
        doc_id=row[1],
        session_id=row[2],
        text=row[3],
        metadata=json.loads(row[4]),
        created=float(row[5]),
        changed=changed,
    )


_SELECT = "SELECT id, doc_id, session_id, content, metadata, created FROM documents"


class SqliteDocuments:
    """The documents table (see :class:`ovos_memory_plugins.storage.seam.DocumentStore`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, docs: Sequence[Document]) -> list[StoredDocument]:
        """Insert or replace by ``doc_id``; a replaced document keeps its key and ``created``."""
        out: dict[str, StoredDocument] = {}
        now = time.time()
        with self.db.atomic(savepoint=False) as conn:
            for doc in docs:
                meta = dump_metadata(doc.metadata)
                made = document_time(doc.metadata, now)
                cur = conn.execute(
                    "INSERT INTO documents (doc_id, session_id, content, metadata, created) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (doc_id) DO NOTHING",
                    (doc.doc_id, doc.session_id, doc.text, meta, made),
                )
                prior = out.get(doc.doc_id)
                if cur.rowcount:
                    out[doc.doc_id] = stored_document(doc, int(cur.lastrowid or 0), made, True, True, prior)
                    continue
                old = conn.execute(
                    "SELECT id, session_id, content, created FROM documents WHERE doc_id = ?", (doc.doc_id,)
                ).fetchone()
                changed = old[1] != doc.session_id or old[2] != doc.text
                conn.execute(
                    "UPDATE documents SET session_id = ?, content = ?, metadata = ? WHERE id = ?",
                    (doc.session_id, doc.text, meta, old[0]),
                )
                out[doc.doc_id] = stored_document(doc, int(old[0]), float(old[3]), changed, False, prior)
        return list(out.values())

    def get(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]:
        """The stored documents among ``doc_ids``."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, StoredDocument] = {}
        for chunk, marks in chunked(ids):
            for row in self.db.query(f"{_SELECT} WHERE doc_id IN ({marks})", chunk):
                out[row[1]] = _row_document(row, False)
        return out

    def by_keys(self, keys: Iterable[int]) -> dict[int, StoredDocument]:
        """The stored documents with these keys."""
        wanted = list(dict.fromkeys(int(k) for k in keys))
        out: dict[int, StoredDocument] = {}
        for chunk, marks in chunked(wanted):
            for row in self.db.query(f"{_SELECT} WHERE id IN ({marks})", chunk):
                out[int(row[0])] = _row_document(row, False)
        return out

    def ids(self, session_id: str | None = None) -> list[str]:
        """The ids of a session's documents (None: all), oldest first."""
        if session_id is None:
            return [r[0] for r in self.db.query("SELECT doc_id FROM documents ORDER BY id")]
        return [
            r[0] for r in self.db.query("SELECT doc_id FROM documents WHERE session_id = ? ORDER BY id", (session_id,))
        ]

    def ids_with_text(self, session_id: str, text: str) -> list[str]:
        """The ids of a session's documents whose text is exactly ``text``, oldest first."""
        rows = self.db.query(
            "SELECT doc_id FROM documents WHERE session_id = ? AND content = ? ORDER BY id", (session_id, text)
        )
        return [r[0] for r in rows]

    def iter(self, batch: int = 500) -> Iterator[StoredDocument]:
        """Every document, oldest first, in pages of ``batch``."""
        last = 0
        while True:
            rows = self.db.query(f"{_SELECT} WHERE id > ? ORDER BY id LIMIT ?", (last, int(batch)))
            if not rows:
                return
            for row in rows:
                yield _row_document(row, False)
            last = int(rows[-1][0])

    def count(self, session_id: str | None = None) -> int:
        """How many documents (of a session)."""
        if session_id is None:
            return int(self.db.scalar("SELECT count(*) FROM documents") or 0)
        return int(self.db.scalar("SELECT count(*) FROM documents WHERE session_id = ?", (session_id,)) or 0)

    def made_between(
        self, since: float, until: float, limit: int, session_id: str | None = None
    ) -> list[StoredDocument]:
        """The newest ``limit`` documents made in ``[since, until)`` (``created``), newest first."""
        where = " AND session_id = ?" if session_id is not None else ""
        params: tuple[Any, ...] = (float(since), float(until), *((session_id,) if session_id is not None else ()))
        rows = self.db.query(
            f"{_SELECT} WHERE created >= ? AND created < ?{where} ORDER BY created DESC, id DESC LIMIT ?",
            (*params, int(limit)),
        )
        return [_row_document(r) for r in rows]

    def sessions(self) -> list[str]:
        """Every session that has documents, sorted."""
        return [r[0] for r in self.db.query("SELECT DISTINCT session_id FROM documents ORDER BY session_id")]

    def remove(self, doc_ids: Sequence[str]) -> int:
        """Delete by id (index rows cascade); return how many existed."""
        ids = list(dict.fromkeys(doc_ids))
        n = 0
        with self.db.atomic(savepoint=False) as conn:
            for chunk, marks in chunked(ids):
                n += conn.execute(f"DELETE FROM documents WHERE doc_id IN ({marks})", chunk).rowcount
        return n

    def remove_all(self) -> int:
        """Delete every document; return how many existed."""
        with self.db.atomic(savepoint=False) as conn:
            return int(conn.execute("DELETE FROM documents").rowcount)

    def set_created(self, items: Sequence[tuple[str, float]]) -> None:
        """Set the ``created`` of these documents (by doc id); inside :meth:`Database.atomic`."""
        if items:
            self.db.executemany(
                "UPDATE documents SET created = ? WHERE doc_id = ?", [(created, doc_id) for doc_id, created in items]
            )
