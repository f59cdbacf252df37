"""Speed of the vector backend: exact k-NN search paths and local embedding throughput.

Usage (from the project root)::

    python benchmarks/vector_speed.py search [--n 100000] [--dim 384] [--k 10] [--queries 200]
    python benchmarks/vector_speed.py embed [--model minilm|e5-small] [--threads 2] [--sentences 512]

``search`` pins BLAS to one thread (set before numpy loads) and times, per query, each exact
path over the same random unit vectors stored through the vector store of a memory's file:

* ``numpy (columns)``: the store's own path, one column per document;
* ``numpy (rows)``: the same product over the row layout, for comparison;
* ``sqlite-vec SQL``: the store's sqlite-vec path (``vec_distance_cosine`` over the BLOBs);
* ``sqlite-vec vec0``: a ``vec0`` virtual table's KNN query, for comparison.

The sqlite-vec rows are skipped with a reason when no sqlite3 module can load the extension.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # after the thread pins above

from ovos_memory_plugins.storage.sqlite_engine import SqliteStorage, open_sqlite
from ovos_memory_plugins.storage.vector_store import SqliteVectorStore


def _percentiles(times: tuple[list[float], list[float]]) -> str:
    wall, cpu = (np.array(t) * 1000 for t in times)
    return (
        f"wall p50 {np.percentile(wall, 50):7.2f} ms  p90 {np.percentile(wall, 90):7.2f} ms   "
        f"CPU p50 {np.percentile(cpu, 50):7.2f} ms  p90 {np.percentile(cpu, 90):7.2f} ms"
    )


def _time(fn: Callable[[np.ndarray], object], queries: np.ndarray) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds per query (CPU time shows the work on a machine shared with
    other jobs, where wall clock also counts waiting for a core)."""
    fn(queries[0])  # warm-up (loads the RAM matrix on the numpy path)
    wall, cpu = [], []
    for q in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(q)
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start)
    return wall, cpu


def _fill(store: SqliteVectorStore, vectors: np.ndarray) -> None:
    now = time.time()
    n = vectors.shape[0]
    with store.db.atomic() as conn:
        conn.executemany(
            "INSERT INTO documents (id, doc_id, session_id, content, metadata, created) VALUES (?, ?, 's', ?, '{}', ?)",
            [(i + 1, f"d{i:07d}", f"text {i}", now) for i in range(n)],
        )
        conn.execute(
            "INSERT INTO vector_spaces (space, dimension, created) VALUES ('bench', ?, ?)", (vectors.shape[1], now)
        )
        conn.executemany(
            "INSERT INTO vectors (space, doc, vector) VALUES ('bench', ?, ?)",
            [(i + 1, vectors[i].tobytes()) for i in range(n)],
        )


def search(args: argparse.Namespace) -> int:
    """Time the exact search paths."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, args.dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    print(f"exact k={args.k} over {args.n} x {args.dim} float32, {args.queries} queries, BLAS threads 1")
    with tempfile.TemporaryDirectory() as tmp:
        storage: SqliteStorage = open_sqlite(Path(tmp) / "bench.db", vector_extension=True)
        db, ext = storage.db, storage.vector_driver
        try:
            np_store = SqliteVectorStore(db, "numpy", ext)
            _fill(np_store, vectors)
            start = time.perf_counter()
            reference = np_store.search("bench", queries[0], args.k)
            print(f"{'load RAM matrix from SQLite':<28} {1000 * (time.perf_counter() - start):9.1f} ms (once)")
            print(
                f"{'numpy (columns)':<28} {_percentiles(_time(lambda q: np_store.search('bench', q, args.k), queries))}"
            )

            def rows(q: np.ndarray) -> object:
                scores = vectors @ q
                top = np.argpartition(-scores, args.k - 1)[: args.k]
                return top[np.argsort(-scores[top])]

            print(f"{'numpy (rows)':<28} {_percentiles(_time(rows, queries))}")
            if ext is None:
                print("sqlite-vec: SKIPPED (no sqlite3 module here can load extensions; pip install sqlean-py)")
                return 0
            sql_store = SqliteVectorStore(db, "sqlite-vec", ext)
            assert [d for d, _ in sql_store.search("bench", queries[0], args.k)] == [d for d, _ in reference]
            sql_times = _time(lambda q: sql_store.search("bench", q, args.k), queries[:50])
            print(f"{'sqlite-vec SQL (' + ext + ')':<28} {_percentiles(sql_times)}")
            conn = db.conn
            conn.execute(
                f"CREATE VIRTUAL TABLE bench_vec0 USING vec0(embedding float[{args.dim}] distance_metric=cosine)"
            )
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO bench_vec0 (rowid, embedding) VALUES (?, ?)",
                [(i, vectors[i].tobytes()) for i in range(args.n)],
            )
            conn.execute("COMMIT")

            def vec0(q: np.ndarray) -> object:
                sql = "SELECT rowid, distance FROM bench_vec0 WHERE embedding MATCH ? AND k = ?"
                return conn.execute(sql, (q.tobytes(), args.k)).fetchall()

            print(f"{'sqlite-vec vec0':<28} {_percentiles(_time(vec0, queries[:50]))}")
        finally:
            db.close()
    return 0


def embed(args: argparse.Namespace) -> int:
    """Time a local model on short sentences."""
    from ovos_memory_plugins.embedders import embed_documents, make_embedder

    subjects = ["my sister", "the neighbour", "our dog", "my boss", "the doctor", "grandma", "Tom", "the team"]
    actions = ["moved to Lisbon", "likes jazz", "starts a new job", "is allergic to nuts", "bought a boat"]
    times = ["last week", "in May", "yesterday", "two years ago"]
    sentences = [
        f"{subjects[i % 8]} {actions[(i // 8) % 5]} {times[(i // 40) % 4]}, number {i}" for i in range(args.sentences)
    ]
    start = time.perf_counter()
    emb = make_embedder({"type": "local", "model": args.model, "threads": args.threads})
    print(f"model {emb.id}: loaded (and hash-checked) in {time.perf_counter() - start:.2f} s")
    embed_documents(emb, sentences[:16])
    start, start_cpu = time.perf_counter(), time.process_time()
    embed_documents(emb, sentences, 64)
    batch = len(sentences) / (time.perf_counter() - start)
    cpu = time.process_time() - start_cpu
    start = time.perf_counter()
    for s in sentences[:64]:
        embed_documents(emb, [s])
    single = 64 / (time.perf_counter() - start)
    print(f"threads {args.threads}: {batch:.0f} sentences/s in batches of 64, {single:.0f} sentences/s one at a time")
    print(
        f"CPU time of the batched run: {cpu:.2f} s for {len(sentences)} sentences "
        f"({len(sentences) / cpu:.0f} sentences per CPU-second; x{args.threads} if the cores were free)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("search", help="exact k-NN search paths")
    s.add_argument("--n", type=int, default=100_000)
    s.add_argument("--dim", type=int, default=384)
    s.add_argument("--k", type=int, default=10)
    s.add_argument("--queries", type=int, default=200)
    e = sub.add_parser("embed", help="local embedding throughput")
    e.add_argument("--model", default="minilm")
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--sentences", type=int, default=512)
    args = parser.parse_args(argv)
    return search(args) if args.command == "search" else embed(args)


if __name__ == "__main__":
    sys.exit(main())
