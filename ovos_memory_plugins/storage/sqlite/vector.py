"""Vectors for a memory's documents, in the memory's SQLite file, with exact nearest-neighbour search.

Tables (the store ``memory``'s migrations, :mod:`ovos_memory_plugins.storage.sqlite.schema`):

* ``vector_spaces``: one row per embedder id seen (a *space*), with its dimension;
* ``vectors``: one float32 BLOB per (space, document key), cascading with the document. The
  documents themselves (text, session, metadata) are the memory's one ``documents`` table, so
  vectors can always be rebuilt from the text: a document is never lost because its vector is.

Vectors of different embedders never mix: a search reads only the active space. A document
without a vector in the active space is *pending* (:meth:`SqliteVectorStore.missing`); pending
is derived from the tables, so re-embedding resumes after a crash or restart.

Two exact search paths, same results (cosine similarity of unit vectors):

* ``numpy`` (the default): the active space's vectors in a RAM matrix laid out one *column* per
  document (dimension x count, C order), so a query is one BLAS matrix-vector product that
  streams memory in order, then a partial sort. The matrix follows this process's writes as
  they commit and reloads when another connection (another process: the CLI, the editor) has
  committed to the file (``PRAGMA data_version``).
* ``sqlite-vec``: ``vec_distance_cosine`` over the BLOB column in SQL, when the extension loads
  (stdlib ``sqlite3`` or, failing that, ``sqlean-py``). Keeps no vectors in RAM; slower.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.shared import EngineVectors
from ovos_memory_plugins.storage.sqlite.database import Database, chunked

LOG = logging.getLogger(__name__)

__all__ = ["SEARCH_PATHS", "SqliteVectorStore"]

Vector = npt.NDArray[np.float32]

#: Accepted values of the ``vector_search`` option.
SEARCH_PATHS = ("auto", "numpy", "sqlite-vec")


class _Matrix:
    """One space's vectors in RAM: a (dimension x capacity) float32 array, one column per
    document, each column's session as an integer code and its document's ``created`` (so a
    session filter or a window of time is one vectorised comparison)."""

    def __init__(self, dimension: int, capacity: int = 64) -> None:
        self.dimension = dimension
        self.data: Vector = np.zeros((dimension, capacity), dtype=np.float32)
        self.codes: npt.NDArray[np.int32] = np.zeros(capacity, dtype=np.int32)
        self.created: npt.NDArray[np.float64] = np.zeros(capacity, dtype=np.float64)
        self.ids: list[str] = []
        self.position: dict[str, int] = {}
        self.session_codes: dict[str, int] = {}

    def _code(self, session_id: str) -> int:
        return self.session_codes.setdefault(session_id, len(self.session_codes))

    def load(self, ids: list[str], sessions: list[str], created: list[float], vectors: Vector) -> None:
        """Fill an empty matrix with ``vectors`` (one row per id)."""
        n = len(ids)
        capacity = max(64, 1 << max(n - 1, 0).bit_length())
        self.data = np.zeros((self.dimension, capacity), dtype=np.float32)
        self.data[:, :n] = vectors.T
        self.codes = np.zeros(capacity, dtype=np.int32)
        self.codes[:n] = [self._code(sid) for sid in sessions]
        self.created = np.zeros(capacity, dtype=np.float64)
        self.created[:n] = created
        self.ids = list(ids)
        self.position = {doc_id: i for i, doc_id in enumerate(ids)}

    def put(self, doc_id: str, session_id: str, created: float, vector: Vector) -> None:
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
                made = np.zeros(capacity, dtype=np.float64)
                made[:i] = self.created[:i]
                self.created = made
            self.ids.append(doc_id)
            self.position[doc_id] = i
        self.data[:, i] = vector
        self.codes[i] = self._code(session_id)
        self.created[i] = created

    def remove(self, doc_id: str) -> None:
        i = self.position.pop(doc_id, None)
        if i is None:
            return
        last = len(self.ids) - 1
        if i != last:
            moved = self.ids[last]
            self.data[:, i] = self.data[:, last]
            self.codes[i] = self.codes[last]
            self.created[i] = self.created[last]
            self.ids[i] = moved
            self.position[moved] = i
        self.ids.pop()

    def search(
        self, query: Vector, k: int, session_id: str | None, window: tuple[float, float] | None = None
    ) -> list[tuple[str, float]]:
        n = len(self.ids)
        if n == 0 or k <= 0:
            return []
        scores = query @ self.data[:, :n]
        mask: npt.NDArray[np.bool_] | None = None
        if session_id is not None:
            code = self.session_codes.get(session_id)
            if code is None:
                return []
            mask = self.codes[:n] == code
        if window is not None:
            made = self.created[:n]
            inside = (made >= window[0]) & (made < window[1])
            mask = inside if mask is None else mask & inside
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
            k = min(k, int(mask.sum()))
            if k == 0:
                return []
        k = min(k, n)
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), self.ids[i]))
        return [(self.ids[i], float(scores[i])) for i in order]


class SqliteVectorStore(EngineVectors):
    """Vectors per embedder id over the memory's documents, with exact search
    (see :class:`ovos_memory_plugins.storage.seam.VectorStore`).

    Args:
        db: the memory's database.
        search: ``"auto"`` (numpy, the fastest here), ``"numpy"`` or ``"sqlite-vec"`` (falls
            back to numpy, with an error logged, when the extension did not load).
        extension: the driver that loaded sqlite-vec on ``db``, or None.
    """

    def __init__(self, db: Database, search: str = "auto", extension: str | None = None) -> None:
        if search not in SEARCH_PATHS:
            raise ValueError(f"search must be one of {', '.join(SEARCH_PATHS)}, not {search!r}")
        self.db = db
        # the database's own lock guards the RAM matrices too: one lock, so no lock-order
        # inversion between a write (which holds it) and a search or the re-embedding thread
        self._lock = db.lock
        self._matrices: dict[str, _Matrix] = {}
        self._version = -1
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

    # -- vectors -----------------------------------------------------------------------------

    def dimension(self, space: str) -> int | None:
        """The dimension recorded for an embedder id, or None if it has no vectors yet."""
        value = self.db.scalar("SELECT dimension FROM vector_spaces WHERE space = ?", (space,))
        return int(value) if value is not None else None

    def put_vectors(self, space: str, items: Sequence[tuple[str, Vector]]) -> int:
        """Store unit vectors of ``space`` for existing documents; return how many were stored.

        Raises :class:`StorageError` when their dimension differs from the space's recorded one.
        """
        if not items:
            return 0
        dim = int(items[0][1].shape[0])
        placed: list[tuple[str, str, float, Vector]] = []
        with self._lock, self.db.atomic(savepoint=False) as conn:
            known = conn.execute("SELECT dimension FROM vector_spaces WHERE space = ?", (space,)).fetchone()
            if known is None:
                conn.execute(
                    "INSERT INTO vector_spaces (space, dimension, created) VALUES (?, ?, ?)", (space, dim, time.time())
                )
            elif int(known[0]) != dim:
                raise StorageError(
                    f"embedder {space!r} returned {dim}-dimensional vectors, but {known[0]} were stored before"
                )
            for doc_id, vector in items:
                if vector.shape != (dim,):
                    raise StorageError(f"vector for {doc_id} has shape {vector.shape}, expected ({dim},)")
                row = conn.execute(
                    "SELECT id, session_id, created FROM documents WHERE doc_id = ?", (doc_id,)
                ).fetchone()
                if row is None:
                    continue  # deleted meanwhile
                v = np.asarray(vector, dtype=np.float32)
                conn.execute(
                    "INSERT INTO vectors (space, doc, vector) VALUES (?, ?, ?)"
                    " ON CONFLICT (space, doc) DO UPDATE SET vector = excluded.vector",
                    (space, row[0], v.tobytes()),
                )
                placed.append((doc_id, row[1], float(row[2]), v))

            def follow() -> None:
                with self._lock:
                    matrix = self._matrices.get(space)
                    if matrix is not None:
                        for doc_id, session_id, created, v in placed:
                            matrix.put(doc_id, session_id, created, v)

            self.db.on_commit(follow)
        return len(placed)

    def missing(self, space: str, limit: int = 64) -> list[tuple[str, str]]:
        """Up to ``limit`` ``(doc_id, text)`` of documents without a vector in ``space``, oldest first."""
        rows = self.db.query(
            "SELECT d.doc_id, d.content FROM documents d WHERE NOT EXISTS ("
            " SELECT 1 FROM vectors v WHERE v.space = ? AND v.doc = d.id) ORDER BY d.id LIMIT ?",
            (space, int(limit)),
        )
        return [(r[0], r[1]) for r in rows]

    def missing_count(self, space: str) -> int:
        """How many documents have no vector in ``space``."""
        return int(
            self.db.scalar(
                "SELECT count(*) FROM documents d WHERE NOT EXISTS ("
                " SELECT 1 FROM vectors v WHERE v.space = ? AND v.doc = d.id)",
                (space,),
            )
            or 0
        )

    def spaces(self) -> dict[str, int]:
        """Vectors stored per embedder id."""
        rows = self.db.query("SELECT space, count(*) FROM vectors GROUP BY space")
        return {r[0]: int(r[1]) for r in rows}

    def iter_vectors(self, space: str, batch: int = 500) -> Iterator[list[tuple[str, Vector]]]:
        """Every vector of ``space`` as ``(doc_id, vector)``, oldest document first, in batches."""
        last = 0
        while True:
            rows = self.db.query(
                "SELECT d.id, d.doc_id, v.vector FROM vectors v JOIN documents d ON d.id = v.doc"
                " WHERE v.space = ? AND d.id > ? ORDER BY d.id LIMIT ?",
                (space, last, int(batch)),
            )
            if not rows:
                return
            yield [(r[1], np.frombuffer(r[2], dtype=np.float32).copy()) for r in rows]
            last = int(rows[-1][0])

    def count(self) -> int:
        """How many vectors are stored (every space)."""
        return int(self.db.scalar("SELECT count(*) FROM vectors") or 0)

    def drop_space(self, space: str) -> int:
        """Delete every vector of an embedder id (its documents stay); return how many went."""
        with self._lock, self.db.atomic(savepoint=False) as conn:
            n = conn.execute("DELETE FROM vectors WHERE space = ?", (space,)).rowcount
            conn.execute("DELETE FROM vector_spaces WHERE space = ?", (space,))
            self.db.on_commit(lambda: self._forget_matrix(space))
        return int(n)

    def _forget_matrix(self, space: str | None = None) -> None:
        with self._lock:
            if space is None:
                self._matrices.clear()
            else:
                self._matrices.pop(space, None)

    def remove(self, keys: Sequence[int]) -> int:
        """Delete every vector of these document keys (every space); return how many went."""
        n = 0
        gone: list[str] = []
        with self._lock, self.db.atomic(savepoint=False) as conn:
            for chunk, marks in chunked(list(keys)):
                gone.extend(r[0] for r in conn.execute(f"SELECT doc_id FROM documents WHERE id IN ({marks})", chunk))
                n += conn.execute(f"DELETE FROM vectors WHERE doc IN ({marks})", chunk).rowcount

            def follow() -> None:
                with self._lock:
                    for matrix in self._matrices.values():
                        for doc_id in gone:
                            matrix.remove(doc_id)

            self.db.on_commit(follow)
        return n

    def remove_all(self) -> int:
        """Delete every vector; return how many went."""
        with self._lock, self.db.atomic(savepoint=False) as conn:
            n = int(conn.execute("DELETE FROM vectors").rowcount)
            self.db.on_commit(self._forget_matrix)
        return n

    # -- search ------------------------------------------------------------------------------

    def _matrix(self, space: str) -> _Matrix | None:
        version = self.db.data_version()
        if version != self._version:  # another connection committed: its rows are not in RAM
            self._matrices.clear()
            self._version = version
        matrix = self._matrices.get(space)
        if matrix is not None:
            return matrix
        dim = self.dimension(space)
        if dim is None:
            return None
        matrix = _Matrix(dim)
        rows = self.db.query(
            "SELECT d.doc_id, d.session_id, d.created, v.vector FROM vectors v JOIN documents d ON d.id = v.doc"
            " WHERE v.space = ? ORDER BY v.doc",
            (space,),
        )
        if rows:
            flat = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), dim)
            matrix.load([r[0] for r in rows], [r[1] for r in rows], [float(r[2]) for r in rows], flat)
        self._matrices[space] = matrix
        return matrix

    def nearest(
        self, space: str, q: Vector, k: int, session_id: str | None, window: tuple[float, float] | None
    ) -> list[tuple[str, float]]:
        """The search of :meth:`search` (the seam's :class:`~ovos_memory_plugins.storage.shared.EngineVectors`):
        the RAM matrix, or sqlite-vec in SQL."""
        dim = self.dimension(space)
        if dim is None:
            return []
        if q.shape[0] != dim:
            raise StorageError(f"query vector has dimension {q.shape[0]}, the space {space!r} has {dim}")
        if self.path == "sqlite-vec":
            return self._search_sql(space, q, k, session_id, window)
        with self._lock:
            matrix = self._matrix(space)
            return matrix.search(q, k, session_id, window) if matrix is not None else []

    def _search_sql(
        self, space: str, q: Vector, k: int, session_id: str | None, window: tuple[float, float] | None
    ) -> list[tuple[str, float]]:
        sql = (
            "SELECT d.doc_id, 1.0 - vec_distance_cosine(v.vector, ?) AS score FROM vectors v"
            " JOIN documents d ON d.id = v.doc WHERE v.space = ?"
            + (" AND d.session_id = ?" if session_id is not None else "")
            + (" AND d.created >= ? AND d.created < ?" if window is not None else "")
            + " ORDER BY score DESC, d.doc_id LIMIT ?"
        )
        params: list[Any] = [q.tobytes(), space]
        if session_id is not None:
            params.append(session_id)
        if window is not None:
            params.extend((float(window[0]), float(window[1])))
        params.append(int(k))
        return [(r[0], float(r[1])) for r in self.db.query(sql, params)]
