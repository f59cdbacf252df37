"""Recall at scale: each LoCoMo dev conversation hidden among ~100,000 other documents.

The keyword backend searches every query term on small memories, but above
``keyword.PRUNE_MIN_DOCUMENTS`` documents (``ovos_memory_plugins.storage.keyword``) it leaves out
terms found in more than half the documents and searches the rest rarest first until their
postings add up to the posting budget (``keyword.PRUNE_POSTINGS``); the best
``keyword.RESCORE_CANDIDATES`` documents those terms find are then ranked again on every query
term, with bm25's ``k1`` = ``keyword.RESCORE_K1``. This measures what that costs and gains: LoCoMo
R@5/R@10 (the protocol of ``../shared/bench/README.md``) of each conversation alone against the
same conversation stored into a memory already holding the distractors, and the search latency
there (wall clock and CPU time of the process, and the share of that CPU time spent ranking
again in Python, ``keyword.bm25_scores``).

Distractors, all distinct texts: the turns of the other LoCoMo dev conversations, then the user
messages of the LongMemEval_S haystacks and their assistant messages paragraph by paragraph
(``[date] text``, each haystack session once), up to ``--size`` documents in all (about 93,000:
that is all the dev data holds). The conversation is stored last, in its own sessions, and
searched across every session as ``benchmarks/recall.py`` does, once with the backend as it is
and once with term pruning switched off (the same memory: FTS5's own ranking of every term, no
second ranking), which isolates what pruning costs from what the extra documents cost.

Usage (from the project root)::

    python benchmarks/recall_scale.py [--size 100000] [--conversations 6] [--config '{...}'] \\
        [--postings 3000,6000] [--rescore 50,100] [--k1 1.2]

The LongMemEval part is stored once (a minute or two) and copied for each conversation; the run
takes about ten minutes on a loaded 2-core machine. Skips (exit code 0) when the data folder is absent.
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


def longmemeval_documents(size: int) -> list[tuple[str, str]]:
    """Up to ``size`` distinct ``(text, session_id)`` documents from the LongMemEval_S haystacks:
    every user message, then the assistant messages paragraph by paragraph (each haystack
    session once, identical texts once)."""
    data = json.loads((DATA / "longmemeval" / "longmemeval_s_dev.json").read_text("utf-8"))
    users: list[tuple[str, str]] = []
    paragraphs: list[tuple[str, str]] = []
    seen_sessions: set[str] = set()
    seen_texts: set[str] = set()
    for q in data:
        for sid, date, session in zip(
            q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True
        ):
            if sid in seen_sessions:
                continue
            seen_sessions.add(sid)
            for m in session:
                parts = [str(m["content"])] if m.get("role") == "user" else str(m["content"]).split("\n\n")
                for part in parts:
                    part = part.strip()
                    if len(part) < 40 or part in seen_texts:
                        continue
                    seen_texts.add(part)
                    (users if m.get("role") == "user" else paragraphs).append((f"[{date}] {part}", f"lme-{sid}"))
    return (users + paragraphs)[:size]


#: CPU seconds spent in the keyword index's second ranking (``keyword.bm25_scores``), summed.
RESCORING_CPU = [0.0]


def time_the_rescoring() -> None:
    """Count the CPU time of ``keyword.bm25_scores`` (the Python half of a large memory's search)
    in :data:`RESCORING_CPU` (the index calls it through its module, so wrapping it there works)."""
    from ovos_memory_plugins.storage import keyword

    inner = getattr(keyword, "bm25_scores", None)
    if inner is None:  # before the rescoring existed
        return

    def timed(*args: Any, **kwargs: Any) -> Any:
        cpu = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            RESCORING_CPU[0] += time.process_time() - cpu

    keyword.bm25_scores = timed


def recall_of(mem: Any, unit: Any) -> tuple[dict[int, list[float]], list[tuple[float, float, float]]]:
    """Per k the recall of each question, and each search's ``(wall, CPU, rescoring CPU)`` seconds."""
    scores: dict[int, list[float]] = {k: [] for k in KS}
    seconds: list[tuple[float, float, float]] = []
    for q in unit.questions:
        start, cpu, rescoring = time.perf_counter(), time.process_time(), RESCORING_CPU[0]
        hits = mem.search(q.query, top_k=max(KS))
        seconds.append((time.perf_counter() - start, time.process_time() - cpu, RESCORING_CPU[0] - rescoring))
        refs = [h.metadata.get("ref") for h in hits]
        for k in KS:
            scores[k].append(len(q.relevant & set(refs[:k])) / len(q.relevant))
    return scores, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="distractor documents")
    parser.add_argument("--conversations", type=int, default=6, help="LoCoMo conversations to measure")
    parser.add_argument("--config", default="{}", help="JSON merged into the keyword backend's config")
    parser.add_argument(
        "--postings",
        default="",
        help="also measure these values of keyword.PRUNE_POSTINGS (comma-separated), on the same memory",
    )
    parser.add_argument(
        "--rescore",
        default="",
        help="also measure these values of keyword.RESCORE_CANDIDATES (comma-separated), on the same memory",
    )
    parser.add_argument(
        "--k1",
        default="",
        help="also measure these values of keyword.RESCORE_K1 (comma-separated; 1.2 is FTS5's own), on the same memory",
    )
    args = parser.parse_args(argv)
    if not (DATA / "locomo" / "locomo_dev.json").exists() or not (DATA / "longmemeval").is_dir():
        print(f"SKIPPED: the benchmark data ({DATA}) is absent.")
        return 0
    from ovos_memory_plugins.lexical import LexicalMemory
    from ovos_memory_plugins.storage import keyword

    prune_at = keyword.PRUNE_MIN_DOCUMENTS
    postings_now = keyword.PRUNE_POSTINGS
    rescore_now = getattr(keyword, "RESCORE_CANDIDATES", None)  # absent before the rescoring existed
    k1_now = getattr(keyword, "RESCORE_K1", None)  # absent before the rescoring had its own k1
    # what is measured on the hidden memory:
    # (label, PRUNE_MIN_DOCUMENTS, PRUNE_POSTINGS, RESCORE_CANDIDATES, RESCORE_K1)
    variants: list[tuple[str, int, int, int | None, float | None]] = [
        ("as shipped", prune_at, postings_now, rescore_now, k1_now),
        ("no term pruning", 10**12, postings_now, None, None),
    ]
    variants += [
        (f"PRUNE_POSTINGS {int(v):,}", prune_at, int(v), rescore_now, k1_now)
        for v in args.postings.split(",")
        if v.strip()
    ]
    if rescore_now is not None:
        variants += [
            (f"RESCORE_CANDIDATES {int(v):,}", prune_at, postings_now, int(v), k1_now)
            for v in args.rescore.split(",")
            if v.strip()
        ]
    if k1_now is not None:
        variants += [
            (f"RESCORE_K1 {float(v)}", prune_at, postings_now, rescore_now, float(v))
            for v in args.k1.split(",")
            if v.strip()
        ]

    extra = json.loads(args.config)
    units = list(locomo_units())[: args.conversations]
    alone: dict[int, list[float]] = {k: [] for k in KS}
    hidden: dict[str, dict[int, list[float]]] = {v[0]: {k: [] for k in KS} for v in variants}
    lat_alone: list[tuple[float, float, float]] = []
    lat_hidden: dict[str, list[tuple[float, float, float]]] = {v[0]: [] for v in variants}
    time_the_rescoring()
    with tempfile.TemporaryDirectory(prefix="recall-scale-") as tmp:
        # one memory of LongMemEval documents, copied for each conversation, which then gets the
        # other conversations' turns and its own
        build_start = time.perf_counter()
        others = sum(len(u.documents) for u in units) - min(len(u.documents) for u in units)
        pool = longmemeval_documents(args.size - others)
        template = Path(tmp) / "template"
        with LexicalMemory({**extra, "root": str(template)}) as mem:
            for i, (text, session) in enumerate(pool):
                mem.store(text, session, {"ref": f"x{i}"})
        print(f"LongMemEval documents: {len(pool)}, stored in {time.perf_counter() - build_start:.0f} s")
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
                for other in units:
                    if other.name != unit.name:
                        for ref, text, session in other.documents:
                            mem.store(text, f"{other.name}-{session}", {"ref": f"{other.name}:{ref}"})
                for ref, text, session in unit.documents:
                    mem.store(text, f"{unit.name}-{session}", {"ref": ref})
                total = mem.stats()["documents"]
                mem.search("warm up", top_k=1)  # index the conversation before timing
                for label, min_docs, postings, rescore, k1 in variants:
                    keyword.PRUNE_MIN_DOCUMENTS, keyword.PRUNE_POSTINGS = min_docs, postings
                    if rescore is not None:
                        keyword.RESCORE_CANDIDATES = rescore
                    if k1 is not None:
                        keyword.RESCORE_K1 = k1
                    try:
                        scores, seconds = recall_of(mem, unit)
                    finally:
                        keyword.PRUNE_MIN_DOCUMENTS, keyword.PRUNE_POSTINGS = prune_at, postings_now
                        if rescore_now is not None:
                            keyword.RESCORE_CANDIDATES = rescore_now
                        if k1_now is not None:
                            keyword.RESCORE_K1 = k1_now
                    for k in KS:
                        hidden[label][k].extend(scores[k])
                    lat_hidden[label].extend(seconds)
            shutil.rmtree(root)
            n = len(unit.questions)
            print(
                f"{unit.name} among {total:,} documents: R@10 alone "
                f"{100 * statistics.mean(alone[10][-n:]):.1f}, hidden "
                + ", ".join(f"{label} {100 * statistics.mean(hidden[label][10][-n:]):.1f}" for label, *_ in variants),
                flush=True,
            )

    def pct(values: list[float]) -> str:
        return f"{100 * statistics.mean(values):.1f}"

    def ms(values: list[tuple[float, float, float]], q: float, which: int) -> str:
        ordered = sorted(v[which] for v in values)
        return f"{1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.2f}"

    def share(values: list[tuple[float, float, float]]) -> str:
        total = sum(v[1] for v in values)
        return f"{100 * sum(v[2] for v in values) / total:.0f}%" if total else "-"

    print("(latency of search: wall clock, CPU time of this process, and the rescoring's share of that CPU time)")
    head = f"{'n':>6}{'R@5':>8}{'R@10':>8}{'p50 ms':>9}{'p95 ms':>9}{'CPU p50':>9}{'CPU p95':>9}{'rescore':>9}"
    print(f"\n{'memory':<52}{head}")
    rows = [
        ("the conversation alone", alone, lat_alone),
        *[
            (f"among {others + len(pool):,} others, {label}", hidden[label], lat_hidden[label])
            for label, *_ in variants
        ],
    ]
    for label, scores_k, lat in rows:
        cells = f"{len(scores_k[5]):>6}{pct(scores_k[5]):>8}{pct(scores_k[10]):>8}"
        cells += "".join(f"{ms(lat, q, w):>9}" for w in (0, 1) for q in (0.5, 0.95)) + f"{share(lat):>9}"
        print(f"{label:<52}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
