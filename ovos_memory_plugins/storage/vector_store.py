"""Documents and their vectors in one SQLite database, with exact nearest-neighbour search.

Tables (named, append-only migrations of the store ``vector``):

* ``vec_documents``: every stored document (id, session, text, metadata). The text is kept so
  vectors can always be rebuilt: a document is never lost because its vector is missing.
* ``vec_spaces``: one row per embedder id seen, with its dimension.
* ``vec_vectors``: one float32 BLOB per (embedder id, document). Vectors of different embedders
  never mix: a search only reads the rows of the active embedder's id.

A document without a vector in the active space is *pending* (:meth:`VectorStore.missing`): its
embedding failed, or the embedder changed. Pending is derived from the tables, so re-embedding
resumes where it stopped after a crash or restart.

Two exact search paths, same results (cosine similarity of unit vectors):

* ``numpy`` (the default): the active space's vectors in a RAM matrix laid out one *column* per
  document (dimension x count, C order), so a query is one BLAS matrix-vector product that
  streams memory in order, then a partial sort. Measured fastest here (docs/benchmarks.md).
* ``sqlite-vec``: ``vec_distance_cosine`` over the BLOB column in SQL, when the extension
  loads (stdlib ``sqlite3`` or, failing that, ``sqlean-py``). Keeps no vectors in RAM; slower.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.sqlite import Database, Migration

LOG = logging.getLogger(__name__)

__all__ = ["SEARCH_PATHS", "StoredDocument", "VectorStore", "open_vector_database"]

Vector = npt.NDArray[np.float32]

#: Accepted values of the ``vector_search`` option.
SEARCH_PATHS = ("auto", "numpy", "sqlite-vec")


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE vec_documents ("
        " doc_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, text TEXT NOT NULL,"
        " metadata TEXT NOT NULL, created REAL NOT NULL)"
    )
    conn.execute("CREATE INDEX vec_documents_session ON vec_documents (session_id)")
    conn.execute("CREATE TABLE vec_spaces (embedder_id TEXT PRIMARY KEY, dimension INTEGER NOT NULL, created REAL)")
    conn.execute(
        "CREATE TABLE vec_vectors ("
        " embedder_id TEXT NOT NULL REFERENCES vec_spaces (embedder_id) ON DELETE CASCADE,"
        " doc_id TEXT NOT NULL REFERENCES vec_documents (doc_id) ON DELETE CASCADE,"
        " vector BLOB NOT NULL, UNIQUE (embedder_id, doc_id))"
    )
    conn.execute("CREATE INDEX vec_vectors_doc ON vec_vectors (doc_id)")


MIGRATIONS = [Migration("0001_documents_spaces_vectors", _v1)]


def _load_sqlite_vec(conn: Any) -> bool:
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        conn.execute("SELECT vec_version()").fetchone()
        return True
    except Exception as exc:  # ImportError, AttributeError, the driver's OperationalError
        LOG.debug("sqlite-vec did not load on %s: %s", type(conn).__module__, exc)
        return False


def open_vector_database(path: str | Path, want_extension: bool) -> tuple[Database, str | None]:
    """Open the database; with ``want_extension``, on a connection that has sqlite-vec loaded.

    Returns the database and the name of the driver that loaded sqlite-vec (``"sqlite3"`` or
    ``"sqlean"``), or None when the extension is not available (stdlib connection).
    """
    path = str(path)
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    if want_extension:
        drivers: list[tuple[str, Any]] = [("sqlite3", sqlite3)]
        try:
            import sqlean

            drivers.append(("sqlean", sqlean))
        except ImportError:
            pass
        for name, module in drivers:
            try:
                conn = module.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
            except Exception as exc:
                raise StorageError(f"cannot open database {path}: {exc}") from exc
            if hasattr(conn, "enable_load_extension") and _load_sqlite_vec(conn):
                db = Database(path, connection=conn)
                # Database installs the stdlib's Row, which another driver's cursors reject
                db.conn.row_factory = getattr(module, "Row", None)
                return db, name
            conn.close()
    return Database(path), None


@dataclass
class StoredDocument:
    """One document read back from the store."""

    doc_id: str
    session_id: str
    text: str
    metadata: dict[str, Any]


class _Matrix:
    """One space's vectors in RAM: a (dimension x capacity) float32 array, one column per
    document, and each column's session as an integer code (so a session filter is one
    vectorised comparison)."""

    def __init__(self, dimension: int, capacity: int = 64) -> None:
        self.dimension = dimension
        self.data: Vector = np.zeros((dimension, capacity), dtype=np.float32)
        self.codes: npt.NDArray[np.int32] = np.zeros(capacity, dtype=np.int32)
        self.ids: list[str] = []
        self.position: dict[str, int] = {}
        self.session_codes: dict[str, int] = {}

    def _code(self, session_id: str) -> int:
        return self.session_codes.setdefault(session_id, len(self.session_codes))

    def load(self, ids: list[str], sessions: list[str], vectors: Vector) -> None:
        """Fill an empty matrix with ``vectors`` (one row per id)."""
        n = len(ids)
        capacity = max(64, 1 << max(n - 1, 0).bit_length())
        self.data = np.zeros((self.dimension, capacity), dtype=np.float32)
        self.data[:, :n] = vectors.T
        self.codes = np.zeros(capacity, dtype=np.int32)
        self.codes[:n] = [self._code(sid) for sid in sessions]
        self.ids = list(ids)
        self.position = {doc_id: i for i, doc_id in enumerate(ids)}

    def put(self, doc_id: str, session_id: str, vector: Vector) -> None:
        i = self.position.get(doc_id)
        if i is None:
            i = len(self.ids)
            if i >= self.data.shape[1]:
                capacity = max(64, self.data.shape[1] * 2)
                grown = np.zeros((self.dimension, capacity), dtype=np.float32)
                grown[:, :i] = self.data[:, :i]
                self.data = grown
                codes = np.zeros(capacity, dtype=np.int32)
                codes[:i] = self.codes[:i]
                self.codes = codes
            self.ids.append(doc_id)
            self.position[doc_id] = i
        self.data[:, i] = vector
        self.codes[i] = self._code(session_id)

    def remove(self, doc_id: str) -> None:
        i = self.position.pop(doc_id, None)
        if i is None:
            return
        last = len(self.ids) - 1
        if i != last:
            moved = self.ids[last]
            self.data[:, i] = self.data[:, last]
            self.codes[i] = self.codes[last]
            self.ids[i] = moved
            self.position[moved] = i
        self.ids.pop()

    def search(self, query: Vector, k: int, session_id: str | None) -> list[tuple[str, float]]:
        n = len(self.ids)
        if n == 0 or k <= 0:
            return []
        scores = query @ self.data[:, :n]
        if session_id is not None:
            code = self.session_codes.get(session_id)
            if code is None:
                return []
            mask = self.codes[:n] == code
            scores = np.where(mask, scores, -np.inf)
            k = min(k, int(mask.sum()))
            if k == 0:
                return []
        k = min(k, n)
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), self.ids[i]))
        return [(self.ids[i], float(scores[i])) for i in order]


class VectorStore:
    """Documents, vectors per embedder id, and exact search over one :class:`Database`.

    Args:
        db: the database (see :func:`open_vector_database` for one with sqlite-vec loaded).
        search: ``"auto"`` (numpy, the fastest here), ``"numpy"`` or ``"sqlite-vec"`` (falls
            back to numpy, with an error logged, when the extension did not load).
        extension: the driver that loaded sqlite-vec on ``db``, or None.
    """

    def __init__(self, db: Database, search: str = "auto", extension: str | None = None) -> None:
        if search not in SEARCH_PATHS:
            raise ValueError(f"search must be one of {', '.join(SEARCH_PATHS)}, not {search!r}")
        self.db = db
        db.migrate("vector", MIGRATIONS)
        self._lock = threading.RLock()
        self._matrices: dict[str, _Matrix] = {}
        if search == "sqlite-vec" and extension is None:
            LOG.error("vector_search 'sqlite-vec': the extension did not load (see docs/vector.md); using numpy")
            search = "numpy"
        self.path = "sqlite-vec" if search == "sqlite-vec" else "numpy"
        if self.path == "sqlite-vec":
            LOG.info(
                "vector search: exact, sqlite-vec vec_distance_cosine in SQL (driver %s) on %s", extension, db.path
            )
        else:
            LOG.info("vector search: exact, numpy matrix-vector product over an in-RAM copy of %s", db.path)

    # -- documents -----------------------------------------------------------------------------

    def put_document(self, doc_id: str, session_id: str, text: str, metadata: dict[str, Any]) -> None:
        """Insert or replace a document; a changed text or session drops its vectors."""
        meta = json.dumps(metadata, ensure_ascii=False, default=str)
        with self._lock, self.db.atomic() as conn:
            old = conn.execute("SELECT text, session_id FROM vec_documents WHERE doc_id = ?", (doc_id,)).fetchone()
            if old is not None and (old[0] != text or old[1] != session_id):
                conn.execute("DELETE FROM vec_vectors WHERE doc_id = ?", (doc_id,))
                for matrix in self._matrices.values():
                    matrix.remove(doc_id)
            conn.execute(
                "INSERT INTO vec_documents (doc_id, session_id, text, metadata, created) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (doc_id) DO UPDATE SET session_id = excluded.session_id, text = excluded.text,"
                " metadata = excluded.metadata",
                (doc_id, session_id, text, meta, time.time()),
            )

    def documents(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]:
        """The stored documents among ``doc_ids``."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, StoredDocument] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.db.query(
                f"SELECT doc_id, session_id, text, metadata FROM vec_documents WHERE doc_id IN ({marks})", chunk
            ):
                out[row[0]] = StoredDocument(row[0], row[1], row[2], json.loads(row[3]))
        return out

    def session_documents(self, session_id: str) -> list[str]:
        """The ids of a session's documents."""
        return [r[0] for r in self.db.query("SELECT doc_id FROM vec_documents WHERE session_id = ?", (session_id,))]

    def all_documents(self) -> list[StoredDocument]:
        """Every stored document, oldest first."""
        rows = self.db.query("SELECT doc_id, session_id, text, metadata FROM vec_documents ORDER BY created, doc_id")
        return [StoredDocument(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

    def delete(self, doc_ids: Sequence[str]) -> int:
        """Delete documents (and their vectors); return how many existed."""
        n = 0
        with self._lock, self.db.atomic() as conn:
            for doc_id in doc_ids:
                n += conn.execute("DELETE FROM vec_documents WHERE doc_id = ?", (doc_id,)).rowcount
                for matrix in self._matrices.values():
                    matrix.remove(doc_id)
        return n

    def delete_all(self) -> int:
        """Delete every document and vector; return how many documents existed."""
        with self._lock, self.db.atomic() as conn:
            n = int(conn.execute("SELECT count(*) FROM vec_documents").fetchone()[0])
            conn.execute("DELETE FROM vec_vectors")
            conn.execute("DELETE FROM vec_documents")
            self._matrices.clear()
        return n

    def count(self) -> int:
        """How many documents are stored."""
        return int(self.db.scalar("SELECT count(*) FROM vec_documents") or 0)

    # -- vectors -----------------------------------------------------------------------------

    def dimension(self, space: str) -> int | None:
        """The dimension recorded for an embedder id, or None if it has no vectors yet."""
        value = self.db.scalar("SELECT dimension FROM vec_spaces WHERE embedder_id = ?", (space,))
        return int(value) if value is not None else None

    def put_vectors(self, space: str, items: Sequence[tuple[str, Vector]]) -> int:
        """Store unit vectors of ``space`` for existing documents; return how many were stored.

        Raises :class:`StorageError` when their dimension differs from the space's recorded one.
        """
        if not items:
            return 0
        dim = int(items[0][1].shape[0])
        with self._lock, self.db.atomic() as conn:
            known = conn.execute("SELECT dimension FROM vec_spaces WHERE embedder_id = ?", (space,)).fetchone()
            if known is None:
                conn.execute(
                    "INSERT INTO vec_spaces (embedder_id, dimension, created) VALUES (?, ?, ?)",
                    (space, dim, time.time()),
                )
            elif int(known[0]) != dim:
                raise StorageError(
                    f"embedder {space!r} returned {dim}-dimensional vectors, but {known[0]} were stored before"
                )
            stored = 0
            sessions: dict[str, str] = {}
            for doc_id, vector in items:
                if vector.shape != (dim,):
                    raise StorageError(f"vector for {doc_id} has shape {vector.shape}, expected ({dim},)")
                row = conn.execute("SELECT session_id FROM vec_documents WHERE doc_id = ?", (doc_id,)).fetchone()
                if row is None:
                    continue  # deleted meanwhile
                conn.execute(
                    "INSERT OR REPLACE INTO vec_vectors (embedder_id, doc_id, vector) VALUES (?, ?, ?)",
                    (space, doc_id, np.asarray(vector, dtype=np.float32).tobytes()),
                )
                sessions[doc_id] = row[0]
                stored += 1
            matrix = self._matrices.get(space)
            if matrix is not None:
                for doc_id, vector in items:
                    if doc_id in sessions:
                        matrix.put(doc_id, sessions[doc_id], np.asarray(vector, dtype=np.float32))
        return stored

    def missing(self, space: str, limit: int = 64) -> list[tuple[str, str]]:
        """Up to ``limit`` ``(doc_id, text)`` of documents without a vector in ``space``, oldest first."""
        rows = self.db.query(
            "SELECT d.doc_id, d.text FROM vec_documents d WHERE NOT EXISTS ("
            " SELECT 1 FROM vec_vectors v WHERE v.embedder_id = ? AND v.doc_id = d.doc_id)"
            " ORDER BY d.created, d.doc_id LIMIT ?",
            (space, int(limit)),
        )
        return [(r[0], r[1]) for r in rows]

    def missing_count(self, space: str) -> int:
        """How many documents have no vector in ``space``."""
        return int(
            self.db.scalar(
                "SELECT count(*) FROM vec_documents d WHERE NOT EXISTS ("
                " SELECT 1 FROM vec_vectors v WHERE v.embedder_id = ? AND v.doc_id = d.doc_id)",
                (space,),
            )
            or 0
        )

    def spaces(self) -> dict[str, int]:
        """Vectors stored per embedder id."""
        rows = self.db.query("SELECT embedder_id, count(*) FROM vec_vectors GROUP BY embedder_id")
        return {r[0]: int(r[1]) for r in rows}

    def drop_space(self, space: str) -> int:
        """Delete every vector of an embedder id (its documents stay); return how many went."""
        with self._lock, self.db.atomic() as conn:
            n = conn.execute("DELETE FROM vec_vectors WHERE embedder_id = ?", (space,)).rowcount
            conn.execute("DELETE FROM vec_spaces WHERE embedder_id = ?", (space,))
            self._matrices.pop(space, None)
        return int(n)

    # -- search ------------------------------------------------------------------------------

    def _matrix(self, space: str) -> _Matrix | None:
        matrix = self._matrices.get(space)
        if matrix is not None:
            return matrix
        dim = self.dimension(space)
        if dim is None:
            return None
        matrix = _Matrix(dim)
        rows = self.db.query(
            "SELECT v.doc_id, d.session_id, v.vector FROM vec_vectors v JOIN vec_documents d USING (doc_id)"
            " WHERE v.embedder_id = ?",
            (space,),
        )
        if rows:
            flat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
            matrix.load([r[0] for r in rows], [r[1] for r in rows], flat)
        self._matrices[space] = matrix
        return matrix

    def search(self, space: str, query: Vector, k: int, session_id: str | None = None) -> list[tuple[str, float]]:
        """The ``k`` documents of ``space`` most similar to the unit vector ``query``, best first,
        as ``(doc_id, cosine similarity)``; ties go to the smaller doc id."""
        if k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        dim = self.dimension(space)
        if dim is None:
            return []
        if q.shape[0] != dim:
            raise StorageError(f"query vector has dimension {q.shape[0]}, the space {space!r} has {dim}")
        if self.path == "sqlite-vec":
            return self._search_sql(space, q, k, session_id)
        with self._lock:
            matrix = self._matrix(space)
            return matrix.search(q, k, session_id) if matrix is not None else []

    def _search_sql(self, space: str, q: Vector, k: int, session_id: str | None) -> list[tuple[str, float]]:
        sql = (
            "SELECT v.doc_id, 1.0 - vec_distance_cosine(v.vector, ?) AS score FROM vec_vectors v"
            + (" JOIN vec_documents d USING (doc_id)" if session_id is not None else "")
            + " WHERE v.embedder_id = ?"
            + (" AND d.session_id = ?" if session_id is not None else "")
            + " ORDER BY score DESC, v.doc_id LIMIT ?"
        )
        params: list[Any] = [q.tobytes(), space]
        if session_id is not None:
            params.append(session_id)
        params.append(int(k))
        return [(r[0], float(r[1])) for r in self.db.query(sql, params)]
