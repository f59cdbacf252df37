"""Recall at scale: each LoCoMo dev conversation hidden among ~100,000 other documents.

The keyword backend searches every query term on small memories, but above
``lexical.PRUNE_MIN_DOCUMENTS`` documents it leaves out terms found in more than half the
documents and searches the rest rarest first until their postings add up to
``lexical.PRUNE_POSTINGS``. This measures what that costs: LoCoMo R@5/R@10 (the protocol of
``../shared/bench/README.md``) of each conversation alone against the same conversation stored
into a memory already holding the distractors, and the search latency there.

Distractors: the turns of the other LoCoMo dev conversations and the user messages of the
LongMemEval_S haystacks (every haystack session once), each ``[date] text``, in rounds until
``--size`` documents; round r > 0 gives each document the date of round r (so the texts differ
and nothing is deduplicated away; the words repeat, as in a real memory of many years).

Usage (from the project root)::

    python benchmarks/recall_scale.py [--size 100000] [--conversations 6] [--config '{...}']

The distractor memory is built once (a few minutes on a loaded 2-core machine) and copied for
each conversation. Skips (exit code 0) when the data folder is absent.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall import DATA, locomo_units  # a sibling script, not a package

KS = (5, 10)


def distractors(exclude: str, size: int) -> list[tuple[str, str]]:
    """``(text, session_id)`` pairs: other conversations' turns and LongMemEval user messages."""
    base: list[tuple[str, str]] = []
    for unit in locomo_units():
        if unit.name != exclude:
            base.extend((text, f"{unit.name}-{session}") for _, text, session in unit.documents)
    data = json.loads((DATA / "longmemeval" / "longmemeval_s_dev.json").read_text("utf-8"))
    seen: set[str] = set()
    for q in data:
        for sid, date, session in zip(
            q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True
        ):
            if sid in seen:
                continue
            seen.add(sid)
            base.extend((f"[{date}] {m['content']}", f"lme-{sid}") for m in session if m.get("role") == "user")
    out: list[tuple[str, str]] = []
    rnd = 0
    while len(out) < size and base:
        for text, session in base:
            if len(out) >= size:
                break
            out.append((text if rnd == 0 else f"[round {rnd}] {text}", f"{session}-r{rnd}"))
        rnd += 1
    return out


def recall_of(mem: Any, unit: Any) -> tuple[dict[int, list[float]], list[float]]:
    """Per k the recall of each question, and each search's seconds."""
    scores: dict[int, list[float]] = {k: [] for k in KS}
    seconds: list[float] = []
    for q in unit.questions:
        start = time.perf_counter()
        hits = mem.search(q.query, top_k=max(KS))
        seconds.append(time.perf_counter() - start)
        refs = [h.metadata.get("ref") for h in hits]
        for k in KS:
            scores[k].append(len(q.relevant & set(refs[:k])) / len(q.relevant))
    return scores, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="distractor documents")
    parser.add_argument("--conversations", type=int, default=6, help="LoCoMo conversations to measure")
    parser.add_argument("--config", default="{}", help="JSON merged into the keyword backend's config")
    args = parser.parse_args(argv)
    if not (DATA / "locomo" / "locomo_dev.json").exists() or not (DATA / "longmemeval").is_dir():
        print(f"SKIPPED: the benchmark data ({DATA}) is absent.")
        return 0
    from ovos_memory_plugins import lexical
    from ovos_memory_plugins.lexical import LexicalMemory

    prune_at = lexical.PRUNE_MIN_DOCUMENTS

    extra = json.loads(args.config)
    units = list(locomo_units())[: args.conversations]
    alone: dict[int, list[float]] = {k: [] for k in KS}
    hidden: dict[bool, dict[int, list[float]]] = {p: {k: [] for k in KS} for p in (True, False)}
    lat_alone: list[float] = []
    lat_hidden: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="recall-scale-") as tmp:
        # one distractor memory (built without the first conversation's turns; the others'
        # turns hide the later ones too, which only makes the task harder for them)
        build_start = time.perf_counter()
        pool = distractors(units[0].name, args.size)
        template = Path(tmp) / "template"
        with LexicalMemory({**extra, "root": str(template)}) as mem:
            for i, (text, session) in enumerate(pool):
                mem.store(text, session, {"ref": f"x{i}"})
        print(f"distractor memory: {len(pool)} documents, built in {time.perf_counter() - build_start:.0f} s")
        for unit in units:
            with LexicalMemory({**extra, "root": str(Path(tmp) / f"alone-{unit.name}")}) as mem:
                for ref, text, session in unit.documents:
                    mem.store(text, session, {"ref": ref})
                scores, seconds = recall_of(mem, unit)
            for k in KS:
                alone[k].extend(scores[k])
            lat_alone.extend(seconds)
            root = Path(tmp) / f"hidden-{unit.name}"
            shutil.copytree(template, root)
            with LexicalMemory({**extra, "root": str(root)}) as mem:
                for ref, text, session in unit.documents:
                    mem.store(text, f"{unit.name}-{session}", {"ref": ref})
                mem.search("warm up", top_k=1)  # index the conversation before timing
                for prune in (True, False):
                    lexical.PRUNE_MIN_DOCUMENTS = prune_at if prune else 10**12
                    try:
                        scores, seconds = recall_of(mem, unit)
                    finally:
                        lexical.PRUNE_MIN_DOCUMENTS = prune_at
                    for k in KS:
                        hidden[prune][k].extend(scores[k])
                    lat_hidden[prune].extend(seconds)
            shutil.rmtree(root)
            n = len(unit.questions)
            print(
                f"{unit.name}: R@10 alone {100 * statistics.mean(alone[10][-n:]):.1f}, hidden "
                f"{100 * statistics.mean(hidden[True][10][-n:]):.1f} (without pruning "
                f"{100 * statistics.mean(hidden[False][10][-n:]):.1f})",
                flush=True,
            )

    def pct(values: list[float]) -> str:
        return f"{100 * statistics.mean(values):.1f}"

    def ms(values: list[float], q: float) -> str:
        ordered = sorted(values)
        return f"{1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.2f}"

    print(f"\n{'memory':<52}{'n':>6}{'R@5':>8}{'R@10':>8}{'p50 ms':>9}{'p95 ms':>9}")
    rows = [
        ("the conversation alone", alone, lat_alone),
        (f"among {len(pool):,} other documents", hidden[True], lat_hidden[True]),
        (f"among {len(pool):,} other documents, no term pruning", hidden[False], lat_hidden[False]),
    ]
    for label, scores_k, lat in rows:
        cells = f"{len(scores_k[5]):>6}{pct(scores_k[5]):>8}{pct(scores_k[10]):>8}{ms(lat, 0.5):>9}{ms(lat, 0.95):>9}"
        print(f"{label:<52}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
