"""Per-turn overhead of the notes backend with 1,000 notes, no language-model work in the turn.

Wall-clock figures include waiting for a busy CPU; the CPU-time row is the process's own work
(``time.process_time``), the better measure on a shared machine. A turn is what ovos-persona
does around one answer: ``build_conversation_context(utterance)`` before it and
``update_history([user, assistant])`` after it. Run::

    python benchmarks/notes_latency.py [--notes 1000] [--turns 400] [--store file|sqlite] [--archive] [--curate]

``--archive`` adds the default keyword archive (exchanges indexed and searched every turn);
without it the archive is null and the figures are the notes block alone. ``--curate`` (with
``--archive``) turns the digest on, inline, with a scripted model that admits nothing: every
exchange is marked pending and queued, and every ``curate_every_turns`` (20) turns a digest
reads the transcript and clears the marks.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

from ovos_memory_plugins.fakes import ScriptedLLM
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.testing import exchange

TOPICS = ["cat", "bakery", "bike", "sister", "garden", "boiler", "car", "dentist", "football", "piano", "work", "tea"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--store", choices=["file", "sqlite"], default="file")
    parser.add_argument("--archive", action="store_true", help="use the keyword archive (default: null)")
    parser.add_argument("--curate", action="store_true", help="digest inline with a scripted model (needs --archive)")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as root:
        config = {"root": root, "store": args.store}
        if not args.archive:
            config["archive"] = None
        llm = None
        if args.curate:
            config["curate_in_background"] = False
            llm = ScriptedLLM(default='{"new": [], "replace": [], "retire": [], "forget": [], "episode": ""}')
        mem = NotesMemory(config, llm=llm)
        body = "\n".join(
            f"- [2025-{1 + i % 12:02d}] note {i}: the user's {rng.choice(TOPICS)} fact number {i} "
            f"with {rng.choice(TOPICS)} details"
            for i in range(args.notes)
        )
        mem.replace_notes(body)
        build, update, cpu = [], [], []
        for t in range(args.turns):
            utterance = f"what do you remember about my {rng.choice(TOPICS)} and the {rng.choice(TOPICS)}?"
            cpu_start = time.process_time()
            start = time.perf_counter()
            mem.build_conversation_context(utterance, "bench")
            build.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            mem.update_history(exchange(utterance, f"answer {t} about it"), "bench")
            update.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - cpu_start) * 1000)
        mem.close()
    turn = [b + u for b, u in zip(build, update, strict=True)]
    label = f"{args.notes} notes, store={args.store}, archive={'keyword' if args.archive else 'null'}"
    label += ", digest inline" if args.curate else ""
    print(f"{label}, {args.turns} turns (ms):")
    rows = (
        ("build_conversation_context", build),
        ("update_history", update),
        ("whole turn (wall)", turn),
        ("whole turn (CPU of process)", cpu),
    )
    for name, values in rows:
        print(
            f"  {name:28s} p50 {statistics.median(values):6.3f}  p95 {percentile(values, 0.95):6.3f}"
            f"  max {max(values):6.3f}"
        )


if __name__ == "__main__":
    main()
