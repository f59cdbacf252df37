"""A content-hash embedding cache: identical texts are embedded once, across restarts.

Rows live in the memory's own database (table ``embedding_cache``), keyed by the embedder's
id and the SHA-256 of the text, so a vector is reused only by the model that made it. The
text itself is never stored here, only its digest and its vector; forgetting a text removes
its row (:meth:`EmbeddingCache.discard`), forgetting everything empties the table
(:meth:`EmbeddingCache.clear`).

The table is capped (``max_rows``): past the cap the rows used least recently go first. The
wrapper that uses it is :class:`ovos_memory_plugins.embedders.CachedEmbedder`.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from ovos_memory_plugins.storage.sqlite.database import Database, Migration

__all__ = ["EmbeddingCache", "text_digest"]

Vector = npt.NDArray[np.float32]

#: Rows kept by default (about 1.6 kB each at 384 dimensions).
DEFAULT_MAX_ROWS = 50_000
#: Rows looked up per query (SQLite's bound-parameter limit is 999 on old builds).
_CHUNK = 500


def text_digest(text: str) -> str:
    """The cache key of a text: SHA-256 of its UTF-8 bytes (lone surrogates kept), in hex."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE embedding_cache ("
        " embedder_id TEXT NOT NULL, digest TEXT NOT NULL, dimension INTEGER NOT NULL,"
        " vector BLOB NOT NULL, used REAL NOT NULL, PRIMARY KEY (embedder_id, digest)) WITHOUT ROWID"
    )
    conn.execute("CREATE INDEX embedding_cache_used ON embedding_cache (used)")


MIGRATIONS = [Migration("0001_embedding_cache", _v1)]


class EmbeddingCache:
    """Vectors by (embedder id, text digest), in ``db``.

    Args:
        db: the memory's database (the table is created on first use, by migration).
        max_rows: the cap; the least recently used rows are dropped past it.
    """

    def __init__(self, db: Database, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self.db = db
        self.max_rows = max(1, int(max_rows))
        db.migrate("embedding_cache", MIGRATIONS)

    def get_many(self, embedder_id: str, digests: Sequence[str]) -> dict[str, Vector]:
        """The cached vectors among ``digests`` (missing ones are absent from the result)."""
        found: dict[str, Vector] = {}
        wanted = list(dict.fromkeys(digests))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self.db.query(
                f"SELECT digest, dimension, vector FROM embedding_cache WHERE embedder_id = ? AND digest IN ({marks})",
                (embedder_id, *chunk),
            )
            for digest, dimension, blob in rows:
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] == int(dimension):
                    found[str(digest)] = vector.copy()
        if found:
            now = time.time()
            with self.db.atomic() as conn:
                conn.executemany(
                    "UPDATE embedding_cache SET used = ? WHERE embedder_id = ? AND digest = ?",
                    [(now, embedder_id, d) for d in found],
                )
        return found

    def put_many(self, embedder_id: str, items: Iterable[tuple[str, Vector]]) -> int:
        """Store ``(digest, vector)`` pairs (replacing equal keys); return how many."""
        now = time.time()
        rows = [
            (embedder_id, digest, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes(), now)
            for digest, v in items
        ]
        if not rows:
            return 0
        with self.db.atomic() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache (embedder_id, digest, dimension, vector, used)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            count = int(conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0])
            if count > self.max_rows:
                conn.execute(
                    "DELETE FROM embedding_cache WHERE (embedder_id, digest) IN"
                    " (SELECT embedder_id, digest FROM embedding_cache ORDER BY used LIMIT ?)",
                    (count - self.max_rows,),
                )
        return len(rows)

    def discard(self, digests: Iterable[str], embedder_id: str | None = None) -> int:
        """Remove the rows of these digests (of every embedder unless one is named); return how many."""
        keys = list(dict.fromkeys(digests))
        removed = 0
        with self.db.atomic() as conn:
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                if embedder_id is None:
                    cur = conn.execute(f"DELETE FROM embedding_cache WHERE digest IN ({marks})", chunk)
                else:
                    cur = conn.execute(
                        f"DELETE FROM embedding_cache WHERE embedder_id = ? AND digest IN ({marks})",
                        (embedder_id, *chunk),
                    )
                removed += max(0, cur.rowcount)
        return removed

    def discard_texts(self, texts: Iterable[str]) -> int:
        """Remove the rows of these texts, for every embedder (``delete`` and ``forget``)."""
        return self.discard(text_digest(t) for t in texts)

    def clear(self, embedder_id: str | None = None) -> int:
        """Remove every row (of one embedder when named); return how many."""
        with self.db.atomic() as conn:
            if embedder_id is None:
                cur = conn.execute("DELETE FROM embedding_cache")
            else:
                cur = conn.execute("DELETE FROM embedding_cache WHERE embedder_id = ?", (embedder_id,))
            return max(0, cur.rowcount)

    def count(self, embedder_id: str | None = None) -> int:
        """How many vectors are cached (for one embedder when named)."""
        if embedder_id is None:
            return int(self.db.scalar("SELECT COUNT(*) FROM embedding_cache") or 0)
        return int(self.db.scalar("SELECT COUNT(*) FROM embedding_cache WHERE embedder_id = ?", (embedder_id,)) or 0)
