"""What one recorded exchange costs: statements and CPU per ``update_history`` (issue 25).

The host's workload of ``benchmarks/host_path.py`` (LoCoMo exchanges, a counter appended, round
robin over 50 sessions, keyword backend, defaults unless ``--config``), in this process: ``--fill``
exchanges first, then ``--measure`` more, timed (CPU time of the process) and, unless
``--no-trace``, with every SQL statement counted through ``sqlite3``'s trace callback (each row
of an ``executemany`` counts; FTS5's own statements, which start with a comment, are listed but
not counted; ``--profile FILE`` writes a cProfile of the timed writes). ``os.getppid()`` and
``os.getpgrp()`` are called right before and after the timed loop, so callgrind can count its
instructions alone::

    valgrind --tool=callgrind --zero-before=getppid --dump-before=getpgrp \\
        python benchmarks/write_cost.py --fill 500 --measure 512 --no-trace \\
        --config '{"retrieval": {"time_words": false}}'

(the dump's ``summary`` line divided by ``--measure`` is instructions per write; time words off,
else the thread that loads ``dateparser`` at open is counted too). ``PYTHONPATH`` picks the
checkout measured.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import logging
import os
import re
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dev_data import DATA  # sibling scripts, not a package
from host_path import CHECKOUT_PLUGIN, _load, _pair_maker, base_exchanges, exchanges


def _shape(sql: str) -> str:
    text = re.sub(r"'(?:[^']|'')*'", "?", " ".join(sql.split()))
    return re.sub(r"\b\d+(\.\d+)?\b", "N", text)[:110]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fill", type=int, default=3000, help="exchanges recorded before the timed ones")
    parser.add_argument("--measure", type=int, default=2000, help="exchanges timed and counted")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--config", default="{}", help="JSON merged into the defaults")
    parser.add_argument("--no-trace", action="store_true", help="count no statements (for callgrind)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the timed writes to this file")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    if not (args.data / "locomo").is_dir():
        print(f"SKIPPED: the benchmark data folder {args.data} is absent (see ../shared/bench/README.md).")
        return 0
    logging.disable(logging.WARNING)
    counts: collections.Counter[str] = collections.Counter()
    counting = False

    def trace(sql: str) -> None:
        if counting:
            counts[_shape(sql)] += 1

    if not args.no_trace:
        connect = sqlite3.connect

        def traced(*a: Any, **k: Any) -> sqlite3.Connection:
            conn = connect(*a, **k)
            conn.set_trace_callback(trace)
            return conn

        sqlite3.connect = traced  # type: ignore[assignment]
    pair = _pair_maker()
    base = base_exchanges(args.data)
    root = tempfile.mkdtemp(prefix="write-cost-")
    memory = _load(CHECKOUT_PLUGIN)({"root": root, **json.loads(args.config)})
    todo = [(i, pair(u, a)) for i, u, a in exchanges(args.fill + args.measure, base)]
    for i, messages in todo[: args.fill]:
        memory.update_history(messages, f"host-{i % args.sessions}")
    os.getppid()  # callgrind: --zero-before=getppid
    counting = True
    profile = cProfile.Profile() if args.profile else None
    start = time.process_time()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    if profile:
        profile.enable()
    for i, messages in todo[args.fill :]:
        memory.update_history(messages, f"host-{i % args.sessions}")
    if profile:
        profile.disable()
    cpu = time.process_time() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    user, system = after.ru_utime - usage.ru_utime, after.ru_stime - usage.ru_stime
    counting = False
    os.getpgrp()  # callgrind: --dump-before=getpgrp
    memory.close()
    if profile:
        profile.dump_stats(args.profile)
    own = sum(n for sql, n in counts.items() if not sql.startswith("--"))
    print(f"{args.measure} writes after {args.fill}: CPU {1e6 * cpu / args.measure:.0f} µs per write", end="")
    print(f" (user {1e6 * user / args.measure:.0f}, system {1e6 * system / args.measure:.0f})", end="")
    print("" if args.no_trace else f", {own / args.measure:.2f} statements per write")
    for sql, n in counts.most_common(20):
        print(f"  {n / args.measure:6.2f}  {sql}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
