"""The PostgreSQL engine's vector store (:class:`PgVectorStore`): pgvector, exact for small
namespaces, HNSW (an expression index per dimension, built concurrently in the background) once a
namespace is large."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage.postgres.database import STATS_TTL
from ovos_memory_plugins.storage.shared import EngineVectors

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ovos_memory_plugins.storage.postgres.database import PgDatabase

    Vector = npt.NDArray[np.float32]

LOG = logging.getLogger(__name__)

__all__ = ["PgVectorStore"]

#: The vector tables: the vectors first (what a drop counts), then the spaces.
_TABLES = ("memory_vectors", "memory_vector_spaces")
#: A namespace's vectors are searched through the HNSW index from this many on (exact below).
HNSW_MIN_VECTORS = 20_000


class PgVectorStore(EngineVectors):
    """Vectors per embedder space with pgvector (see :class:`~ovos_memory_plugins.storage.engine.VectorStore`).

    Exact search (a scan of the namespace's rows of the space) below ``HNSW_MIN_VECTORS``; from
    there on, through an HNSW expression index per dimension (``embedding::vector(N)``, partial
    on ``dims = N``), built once with ``CREATE INDEX CONCURRENTLY`` in the background under an
    advisory lock, and searched with pgvector's iterative scan so the namespace filter cannot
    starve it.
    """

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        self.db = db
        self.namespace = namespace
        self.path = "pgvector"  # the search path, as the SQLite store names "numpy" or "sqlite-vec"
        self._counts: dict[str, tuple[float, int]] = {}
        self._ann: set[int] = set()
        self._building = False

    def dimension(self, space: str) -> int | None:
        """The dimension recorded for a space, or None."""
        value = self.db.scalar(
            "SELECT dims FROM memory_vector_spaces WHERE namespace = %s AND space = %s", (self.namespace, space)
        )
        return int(value) if value is not None else None

    def put_vectors(self, space: str, items: Sequence[tuple[str, Vector]]) -> int:
        """Store vectors for existing documents (by doc id); return how many were stored."""
        import numpy as np

        if not items:
            return 0
        vecs = [(d, np.asarray(v, dtype=np.float32).ravel()) for d, v in items]
        dims = {int(v.shape[0]) for _, v in vecs}
        if len(dims) != 1:
            raise StorageError(f"vectors of one batch differ in dimension: {sorted(dims)}")
        dim = dims.pop()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO memory_vector_spaces (namespace, space, dims, created) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (namespace, space) DO NOTHING",
                (self.namespace, space, dim, time.time()),
            )
            known_dim = conn.execute(
                "SELECT dims FROM memory_vector_spaces WHERE namespace = %s AND space = %s", (self.namespace, space)
            ).fetchone()
            if known_dim is not None and int(known_dim[0]) != dim:
                raise StorageError(f"space {space!r} holds {known_dim[0]}-dimensional vectors, not {dim}")
            rows = conn.execute(
                "SELECT doc_id, id, session_id FROM memory_documents WHERE namespace = %s AND doc_id = ANY(%s)",
                (self.namespace, [d for d, _ in vecs]),
            ).fetchall()
            known = {r[0]: (int(r[1]), r[2]) for r in rows}
            data = [(known[d][0], space, self.namespace, known[d][1], dim, v) for d, v in vecs if d in known]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memory_vectors (id, space, namespace, session_id, dims, embedding)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id, space) DO UPDATE"
                    " SET embedding = excluded.embedding, dims = excluded.dims, session_id = excluded.session_id",
                    data,
                )
        self._counts.pop(space, None)
        return len(data)

    def missing(self, space: str, limit: int = 64) -> list[tuple[str, str]]:
        """Up to ``limit`` ``(doc_id, text)`` without a vector in ``space``, oldest first."""
        rows = self.db.query(
            "SELECT d.doc_id, d.content FROM memory_documents d WHERE d.namespace = %s AND NOT EXISTS ("
            " SELECT 1 FROM memory_vectors v WHERE v.id = d.id AND v.space = %s) ORDER BY d.id LIMIT %s",
            (self.namespace, space, int(limit)),
        )
        return [(r[0], r[1]) for r in rows]

    def missing_count(self, space: str) -> int:
        """How many documents have no vector in ``space``."""
        value = self.db.scalar(
            "SELECT count(*) FROM memory_documents d WHERE d.namespace = %s AND NOT EXISTS ("
            " SELECT 1 FROM memory_vectors v WHERE v.id = d.id AND v.space = %s)",
            (self.namespace, space),
        )
        return int(value or 0)

    def spaces(self) -> dict[str, int]:
        """Vectors stored per space."""
        rows = self.db.query(
            "SELECT s.space, (SELECT count(*) FROM memory_vectors v WHERE v.namespace = s.namespace"
            " AND v.space = s.space) FROM memory_vector_spaces s WHERE s.namespace = %s ORDER BY s.space",
            (self.namespace,),
        )
        return {r[0]: int(r[1]) for r in rows}

    def drop_space(self, space: str) -> int:
        """Delete a space's vectors; return how many went."""
        n = self.db.delete_rows(_TABLES, "namespace = %s AND space = %s", (self.namespace, space))
        self._counts.pop(space, None)
        return n

    def remove(self, keys: Sequence[int]) -> int:
        """Delete every vector of these document keys (every space); return how many."""
        if not keys:
            return 0
        n = self.db.execute(
            "DELETE FROM memory_vectors WHERE namespace = %s AND id = ANY(%s)", (self.namespace, list(keys))
        )
        self._counts.clear()
        return int(n)

    def remove_all(self) -> int:
        """Delete every vector of the namespace; return how many."""
        n = self.db.delete_rows(_TABLES, "namespace = %s", (self.namespace,))
        self._counts.clear()
        return n

    def iter_vectors(self, space: str, batch: int = 500) -> Iterator[list[tuple[str, Vector]]]:
        """The namespace's vectors of ``space`` as ``(doc_id, vector)``, oldest document first, in
        batches (``storage.migrate`` copies them out)."""
        last = 0
        while True:
            rows = self.db.query(
                "SELECT v.id, d.doc_id, v.embedding FROM memory_vectors v JOIN memory_documents d ON d.id = v.id"
                " WHERE v.namespace = %s AND v.space = %s AND v.id > %s ORDER BY v.id LIMIT %s",
                (self.namespace, space, last, int(batch)),
            )
            if not rows:
                return
            yield [(r[1], r[2].to_numpy().astype("float32")) for r in rows]
            last = int(rows[-1][0])

    def count(self, space: str) -> int:
        """How many vectors the namespace holds in ``space`` (cached for ``STATS_TTL`` s)."""
        now = time.monotonic()
        cached = self._counts.get(space)
        if cached is None or now - cached[0] > STATS_TTL:
            value = self.db.scalar(
                "SELECT count(*) FROM memory_vectors WHERE namespace = %s AND space = %s", (self.namespace, space)
            )
            cached = (now, int(value or 0))
            self._counts[space] = cached
        return cached[1]

    def nearest(
        self, space: str, q: Vector, k: int, session_id: str | None, window: tuple[float, float] | None
    ) -> list[tuple[str, float]]:
        """The search of :meth:`search` (the seam's :class:`~ovos_memory_plugins.storage.shared.EngineVectors`):
        exact, or through the HNSW index once the namespace is large and no window is asked."""
        dims = int(q.shape[0])
        session_filter = " AND v.session_id = %(session)s" if session_id is not None else ""
        params: dict[str, Any] = {"ns": self.namespace, "space": space, "q": q, "k": int(k), "session": session_id}
        if window is not None:
            session_filter += " AND d.namespace = %(ns)s AND d.created >= %(since)s AND d.created < %(until)s"
            params["since"], params["until"] = float(window[0]), float(window[1])
        large = self.count(space) >= HNSW_MIN_VECTORS
        # a window of time is searched exactly, its documents found by their `created`: an HNSW
        # scan filtered to a few days of a large namespace can stop (hnsw.max_scan_tuples) before
        # it reaches them
        if large and window is None and self._has_ann(dims):
            with self.db.transaction() as conn:
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                conn.execute("SET LOCAL hnsw.ef_search = 100")
                rows = conn.execute(
                    "SELECT doc_id, score FROM ("
                    f" SELECT d.doc_id, 1 - (v.embedding::vector({dims}) <=> %(q)s) AS score"
                    " FROM memory_vectors v JOIN memory_documents d ON d.id = v.id"
                    f" WHERE v.dims = {dims} AND v.namespace = %(ns)s AND v.space = %(space)s"
                    + session_filter
                    + f" ORDER BY v.embedding::vector({dims}) <=> %(q)s LIMIT %(k)s) AS hits"
                    " ORDER BY score DESC, doc_id",
                    params,
                ).fetchall()
        else:
            if large:
                self._build_ann_soon(dims)
            rows = self.db.query(
                "SELECT d.doc_id, 1 - (v.embedding <=> %(q)s) AS score"
                " FROM memory_vectors v JOIN memory_documents d ON d.id = v.id"
                " WHERE v.namespace = %(ns)s AND v.space = %(space)s"
                + session_filter
                + " ORDER BY v.embedding <=> %(q)s, d.doc_id LIMIT %(k)s",
                params,
            )
        return [(r[0], float(r[1])) for r in rows]

    def _has_ann(self, dims: int) -> bool:
        if dims in self._ann:
            return True
        valid = self.db.scalar(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s",
            (f"memory_vectors_hnsw_{dims}",),
        )
        if valid:
            self._ann.add(dims)
        return bool(valid)

    def _build_ann_soon(self, dims: int) -> None:
        if self._building:
            return
        self._building = True
        threading.Thread(target=self.build_ann_index, args=(dims,), name="ovos-memory-hnsw", daemon=True).start()

    def build_ann_index(self, dims: int, maintenance_work_mem: str | None = None) -> bool:
        """Build the HNSW index for ``dims``-dimensional vectors unless it exists; True when valid.

        ``CREATE INDEX CONCURRENTLY`` (writers go on), without a statement deadline, one process
        at a time (an advisory lock; the others return at once). Give it ``maintenance_work_mem``
        (``"1GB"``) for a fast build: see docs/postgres.md.
        """
        name = f"memory_vectors_hnsw_{int(dims)}"
        try:
            with self.db.pooled() as conn:
                got = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (name,)).fetchone()
                if not got or not got[0]:
                    return False
                try:
                    conn.execute("SET statement_timeout = 0")
                    if maintenance_work_mem:
                        conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (maintenance_work_mem,))
                    invalid = conn.execute(
                        "SELECT NOT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
                        " WHERE c.relname = %s",
                        (name,),
                    ).fetchone()
                    if invalid and invalid[0]:
                        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                    conn.execute(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON memory_vectors"
                        f" USING hnsw ((embedding::vector({int(dims)})) vector_cosine_ops) WHERE dims = {int(dims)}"
                    )
                finally:
                    conn.execute("RESET statement_timeout")
                    conn.execute("RESET maintenance_work_mem")
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (name,))
        except Exception as exc:
            LOG.warning("PostgreSQL: could not build the HNSW index %s (%s); exact search goes on", name, exc)
            return False
        finally:
            self._building = False
        return self._has_ann(dims)
