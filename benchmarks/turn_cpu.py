"""The host's turn on a prebuilt memory: CPU per turn, statements per turn, a profile, the output.

``benchmarks/host_path.py`` builds a fresh memory for every run (a 100k build takes minutes)
and times wall clock on a shared machine. This script splits the two, so a change to the turn
can be measured many times on one memory, with robust counts:

* ``build DIR --exchanges N``: the host-path workload's memory (its LoCoMo exchanges, cycled
  with a counter, round robin over ``--sessions``, one ``update_history`` each), written once
  into ``DIR`` by the package on ``PYTHONPATH`` (a checkout: ``PYTHONPATH=<checkout>``; the
  versions' files differ, so build one folder per version).
* ``turns DIR``: a copy of ``DIR`` (in a temporary folder, so every run starts from the same
  file) opened by the package on ``PYTHONPATH``; ``--warm`` untimed turns, then ``--turns``
  ``build_conversation_context`` calls for the host path's 400 LoCoMo questions (file order,
  cycled, session ``host-<j % sessions>``). Prints the CPU time per turn (mean, p50, p95), and with

  * ``--statements N``: the SQL statements per turn (every connection's trace callback; it
    slows the turn) and the ``N`` most frequent;

  * ``--profile FILE``: a cProfile of the timed turns (``python -m pstats FILE``);
  * ``--dump FILE``: every timed turn's messages (role and content) as JSON, to check that a
    change leaves the turn's output identical (``cmp`` two dumps);
  * ``--callgrind``: under ``valgrind --tool=callgrind --instr-atstart=no``, switches
    instrumentation on for the timed turns only (``callgrind_control -i on``), so the file's
    instruction count (``callgrind_annotate FILE | head``) is the turns' alone.

Usage (from the project root; 0.1.0a1 from a worktree of c2ddf8e)::

    PYTHONPATH=. python benchmarks/turn_cpu.py build /tmp/turn-main --exchanges 100000
    PYTHONPATH=. python benchmarks/turn_cpu.py turns /tmp/turn-main --turns 400
    PYTHONPATH=. valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.out \\
        python benchmarks/turn_cpu.py turns /tmp/turn-main --turns 100 --callgrind
    callgrind_annotate /tmp/cg.out | head -30

``--config JSON`` is merged into the memory's config at build and at turn time (the same keys
as ``host_path.py``'s ``.@{...}``). Skips (exit code 0, a clear message) when the data folder is
absent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dev_data import DATA  # sibling scripts, not a package
from host_path import CHECKOUT_PLUGIN, _load, _pair_maker, _pct, base_exchanges, exchanges, questions

#: SQL statements run by every connection opened after :func:`count_statements`, by text.
STATEMENTS: Counter[str] = Counter()


def count_statements() -> None:
    """Count every statement of every SQLite connection opened from now on (a trace callback
    set by a wrapper of ``sqlite3.connect``). SQLite reports the statements FTS5 runs on its
    shadow tables too (one read of ``keyword_fts_docsize`` per document bm25 ranks)."""
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def seen(sql: str) -> None:
            STATEMENTS[sql[:90]] += 1

        conn.set_trace_callback(seen)
        return conn

    sqlite3.connect = traced  # type: ignore[assignment]


def _config(root: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {"root": root, "db_path": str(Path(root) / "lexical.db"), **extra}


def build(args: argparse.Namespace) -> int:
    import logging

    logging.disable(logging.WARNING)
    where = Path(args.dir)
    if where.exists() and any(where.iterdir()):
        raise SystemExit(f"{where} is not empty")
    where.mkdir(parents=True, exist_ok=True)
    pair = _pair_maker()
    cls = _load(args.plugin)
    mem = cls(_config(str(where), json.loads(args.config)))
    base = base_exchanges(Path(args.data))
    start = time.perf_counter()
    for i, user, assistant in exchanges(args.exchanges, base):
        mem.update_history(pair(user, assistant), f"host-{i % args.sessions}")
    close = getattr(mem, "close", None)
    if callable(close):
        close()
    print(f"built {where}: {args.exchanges} exchanges in {time.perf_counter() - start:.0f} s by {cls.__module__}")
    return 0


def _messages(out: Any) -> list[list[str]]:
    rows = []
    for m in out:
        role = m.get("role") if isinstance(m, dict) else getattr(m, "role", "")
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", "")
        rows.append([str(getattr(role, "value", role)), str(content)])
    return rows


def turns(args: argparse.Namespace) -> int:
    import logging

    logging.disable(logging.WARNING)
    if args.statements:
        count_statements()
    cls = _load(args.plugin)
    asks = questions(Path(args.data))
    with tempfile.TemporaryDirectory(prefix="turn-cpu-") as tmp:
        root = str(Path(tmp) / "memory")
        shutil.copytree(args.dir, root)
        env_home = {k: os.environ.get(k) for k in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
        for k in env_home:
            os.environ[k] = tmp
        mem = cls(_config(root, json.loads(args.config)))
        for j in range(args.warm):
            mem.build_conversation_context(asks[-1 - j % len(asks)], f"host-{j % args.sessions}")
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
        if args.callgrind:
            subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True, capture_output=True)
        cpu: list[float] = []
        dumped: list[Any] = []
        before = Counter(STATEMENTS)
        c_all = time.process_time()
        if profiler is not None:
            profiler.enable()
        for j in range(args.turns):
            c0 = time.process_time()
            out = mem.build_conversation_context(asks[j % len(asks)], f"host-{j % args.sessions}")
            cpu.append((time.process_time() - c0) * 1000)
            if args.dump:
                dumped.append(_messages(out))
        if profiler is not None:
            profiler.disable()
        total = time.process_time() - c_all
        statements = STATEMENTS - before
        if args.callgrind:
            subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True, capture_output=True)
        close = getattr(mem, "close", None)
        if callable(close):
            close()
        for k, v in env_home.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    n = max(args.turns, 1)
    print(
        f"{cls.__module__} ({sys.modules[cls.__module__].__file__}): {args.turns} turns, CPU per turn"
        f" mean {statistics.fmean(cpu) if cpu else float('nan'):.2f} ms (total {1000 * total / n:.2f}),"
        f" p50 {_pct(cpu, 50):.2f}, p95 {_pct(cpu, 95):.2f}"
    )
    if args.statements:
        print(f"SQL statements per turn: {sum(statements.values()) / n:.2f}; the most frequent:")
        for sql, times in statements.most_common(args.statements):
            print(f"  {times / n:8.2f}  {sql}")
    if profiler is not None:
        profiler.dump_stats(args.profile)
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumped, ensure_ascii=False, indent=0))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("build", "turns"):
        p = sub.add_parser(name)
        p.add_argument("dir", help="the memory's folder")
        p.add_argument("--sessions", type=int, default=50)
        p.add_argument("--config", default="{}", help="JSON merged into the memory's config")
        p.add_argument("--plugin", default=CHECKOUT_PLUGIN, help="module:Class or an entry-point name")
        p.add_argument("--data", default=str(DATA), help="the bench folder (../shared/bench)")
    sub.choices["build"].add_argument("--exchanges", type=int, default=100_000)
    t = sub.choices["turns"]
    t.add_argument("--turns", type=int, default=400)
    t.add_argument("--warm", type=int, default=20, help="untimed turns first")
    t.add_argument("--profile", default=None, help="write a cProfile of the timed turns here")
    t.add_argument("--dump", default=None, help="write every timed turn's messages here (JSON)")
    t.add_argument(
        "--statements", type=int, default=0, help="count SQL statements (a trace callback); show the N most frequent"
    )
    t.add_argument("--callgrind", action="store_true", help="instrument only the timed turns (under callgrind)")
    args = parser.parse_args(argv)
    if not Path(args.data).is_dir():
        print(f"SKIPPED: the benchmark data folder {args.data} is absent (see ../shared/bench/README.md).")
        return 0
    return build(args) if args.command == "build" else turns(args)


if __name__ == "__main__":
    sys.exit(main())
