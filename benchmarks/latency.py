"""Latency benchmark: ``store`` throughput and ``build_conversation_context`` p50/p95 by memory size.

Usage (from the project root)::

    python benchmarks/latency.py [plugin or setup ...] [--sizes 1000,10000,100000] [--queries 300]
        [--config '{json}'] [--seed 7]

Default plugin: ``lexical`` (``ovos-memory-plugin-lexical``); names are resolved like in
``benchmarks/recall.py``. One memory per plugin is filled with synthetic exchanges
(``Q: ...\\nA: ...``, 8-40 words: English function words and a Zipf-distributed vocabulary of
20,000 made-up content words, 200 sessions), one ``store`` call at a time, each its own committed
transaction (WAL). At each size it prints:

* ``store/s``: exchanges stored per second while growing to that size;
* ``p50``/``p95``: milliseconds per ``build_conversation_context`` (single thread, utterances
  of 4-12 words, each of 50 sessions with 10 messages of history), wall clock and CPU time of
  the process (on a busy machine the wall clock also counts waiting for a CPU);
* ``RSS MB``: resident memory of a fresh process that imports the plugin (its entry point
  alone), opens the memory and answers 50 turns.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall import SETUPS, resolve  # a sibling script, not a package

FUNCTION_WORDS = (  # noqa: SIM905  # a word list reads better as one string
    "the a an and or but of to in on at for with my your his her our their is are was were be been i you "
    "he she we they it this that what when where how why do did does have has had not no yes can will "
    "would should could about from by as so if then than just really very"
).split()
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "bo", "si", "de", "fa", "gu", "pe", "zo", "ri", "ma", "tu", "xe", "an"]


class TextMaker:
    """Synthetic sentences: function words plus a Zipf-distributed content vocabulary."""

    def __init__(self, seed: int, vocabulary: int = 20_000) -> None:
        self.rng = random.Random(seed)
        words = set()
        while len(words) < vocabulary:
            words.add("".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(2, 4))))
        self.words = sorted(words)
        # Zipf's law continued past the ~100 most frequent English words, which are function
        # words (drawn separately, from FUNCTION_WORDS): content word n has weight 1 / (n + 100).
        self.cum_weights = list(itertools.accumulate(1.0 / (rank + 101) for rank in range(len(self.words))))

    def sentence(self, low: int, high: int) -> str:
        n = self.rng.randint(low, high)
        content = self.rng.choices(self.words, cum_weights=self.cum_weights, k=n)
        out = [w if self.rng.random() < 0.55 else self.rng.choice(FUNCTION_WORDS) for w in content]
        return " ".join(out).capitalize()


def _pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[int(p / 100 * (len(ordered) - 1))] if ordered else float("nan")


def rss_mb(plugin: str, config: dict[str, Any], utterances: list[str]) -> float:
    """Resident memory (VmRSS) of a fresh process that imports one plugin, opens the memory and
    answers turns."""
    script = textwrap.dedent(
        """
        import json, sys
        from importlib.metadata import entry_points
        # load this one plugin's entry point (OPM's loader would import every installed plugin)
        (ep,) = entry_points(group="opm.agents.memory", name=sys.argv[2])
        cls = ep.load()
        config = json.loads(sys.argv[3])
        utterances = json.loads(sys.argv[4])
        mem = cls(config)
        for i, u in enumerate(utterances):
            mem.build_conversation_context(u, f"session-{i % 50}")
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                print(int(line.split()[1]) / 1024)
        mem.close()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, "", plugin, json.dumps(config), json.dumps(utterances)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def run(name: str, extra: dict[str, Any], sizes: list[int], n_queries: int, seed: int) -> None:
    label, cls, config = resolve(name, extra)
    maker = TextMaker(seed)
    print(f"\n## {label}")
    print(
        f"{'exchanges':>10}{'store/s':>10}{'p50 ms':>12}{'p95 ms':>12}{'p50 cpu ms':>12}{'p95 cpu ms':>12}{'RSS MB':>9}"
    )
    with tempfile.TemporaryDirectory(prefix="latency-") as tmp:
        config = {**config, "root": tmp}
        mem = cls(config)
        try:
            for s in range(50):  # 10 messages of history in each of 50 sessions
                for _ in range(5):
                    mem.update_history(
                        [
                            {"role": "user", "content": maker.sentence(4, 12)},
                            {"role": "assistant", "content": maker.sentence(6, 20)},
                        ],
                        f"session-{s}",
                    )
            stored = int(mem.stats().get("documents", 0))
            for size in sizes:
                todo = [
                    (f"Q: {maker.sentence(4, 15)}\nA: {maker.sentence(4, 25)}", f"session-{maker.rng.randrange(200)}")
                    for _ in range(max(size - stored, 0))
                ]
                start = time.perf_counter()
                for text, session in todo:
                    mem.store(text, session)
                elapsed = time.perf_counter() - start
                stored = max(stored, size)
                rate = len(todo) / elapsed if todo else float("nan")
                utterances = [maker.sentence(4, 12) for _ in range(n_queries)]
                for u in utterances[:20]:  # warm the page cache and statement cache
                    mem.build_conversation_context(u, "session-0")
                wall, cpu = [], []
                for i, u in enumerate(utterances):
                    t0, c0 = time.perf_counter(), time.process_time()
                    mem.build_conversation_context(u, f"session-{i % 50}")
                    wall.append((time.perf_counter() - t0) * 1000)
                    cpu.append((time.process_time() - c0) * 1000)
                rss = rss_mb(SETUPS.get(name, (name, {}))[0], config, utterances[:50])
                print(
                    f"{size:>10}{rate:>10.0f}{_pct(wall, 50):>12.2f}{_pct(wall, 95):>12.2f}"
                    f"{_pct(cpu, 50):>12.2f}{_pct(cpu, 95):>12.2f}{rss:>9.1f}"
                )
                sys.stdout.flush()
        finally:
            mem.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plugins", nargs="*", default=["lexical"], help="setup or plugin entry-point names")
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated memory sizes")
    parser.add_argument("--queries", type=int, default=300, help="turns measured at each size")
    parser.add_argument("--config", default="{}", help="JSON merged into every plugin's config")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    for name in args.plugins:
        run(name, json.loads(args.config), sizes, args.queries, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
