"""Recall benchmark: the protocol of ``../shared/bench/README.md``, for any memory plugin by name.

Usage (from the project root)::

    python benchmarks/recall.py ovos-memory-plugin-lexical [more plugins or setups ...] \\
        [--sets locomo,madial-zh,madial-en,longmemeval] [--config '{"lang": "en"}']

Each positional argument is a named setup from :data:`SETUPS` (``lexical``, ...) or an
entry-point name of the ``opm.agents.memory`` group, loaded through OPM. ``--config`` is merged
into every plugin's config. One fresh memory (a fresh temporary ``root``) is built per LoCoMo
conversation, per MADial user and per LongMemEval question; documents go in with ``store``,
queries with ``search(query, top_k=10)``. Score = mean over questions of
|relevant ∩ top-k| / |relevant|, at k = 5 and 10, overall and per category, side by side.

Skips (exit code 0, a clear message) when the data folder is absent.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# sibling scripts, not a package
from dev_data import (
    DATA,
    locomo_category,
    locomo_conversations,
    locomo_evidence,
    locomo_turn_text,
    longmemeval_questions,
)

KS = (5, 10)

#: Named setups: name -> (entry-point name, config). Other helpers add theirs here.
SETUPS: dict[str, tuple[str, dict[str, Any]]] = {
    "lexical": ("ovos-memory-plugin-lexical", {}),
    # the vector backend (docs/vector.md): vectors alone, and its keyword | vector hybrid
    "vector": ("ovos-memory-plugin-vector", {"embedder": "local"}),
    "vector-e5": ("ovos-memory-plugin-vector", {"embedder": "local-e5"}),
    "hybrid": ("ovos-memory-plugin-vector", {"embedder": "local", "hybrid": True}),
    "hybrid-e5": ("ovos-memory-plugin-vector", {"embedder": "local-e5", "hybrid": True}),
    # composite recipes (docs/composite.md): keyword + vector members fused with RRF
    "composite-lexical": (  # one member: the composite's own overhead (benchmarks/latency.py)
        "ovos-memory-plugin-composite",
        {"members": [{"module": "ovos-memory-plugin-lexical"}], "member_timeout_ms": 600_000},
    ),
    "composite-lexical+vector": (
        "ovos-memory-plugin-composite",
        {
            "members": [
                {"module": "ovos-memory-plugin-lexical"},
                {"module": "ovos-memory-plugin-vector", "config": {"embedder": "local"}},
            ],
            "member_timeout_ms": 600_000,  # a benchmark waits for every member
        },
    ),
    "composite-lexical+vector-e5": (
        "ovos-memory-plugin-composite",
        {
            "members": [
                {"module": "ovos-memory-plugin-lexical"},
                {"module": "ovos-memory-plugin-vector", "config": {"embedder": "local-e5"}},
            ],
            "member_timeout_ms": 600_000,
        },
    ),
}


@dataclass
class Question:
    """One query of a unit, the refs that answer it and its category."""

    query: str
    relevant: set[str]
    category: str


@dataclass
class Unit:
    """What one fresh memory holds: documents ``(ref, text, session_id)`` and the questions."""

    name: str
    documents: list[tuple[str, str, str]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


# -- data sets -------------------------------------------------------------------------------


def locomo_units() -> Iterator[Unit]:
    """One unit per conversation: a document per dialogue turn."""
    for conv in locomo_conversations(DATA):
        unit = Unit(conv.sample_id)
        for session in conv.sessions:
            for turn in session.turns:
                unit.documents.append((turn["dia_id"], f"[{session.date}] {locomo_turn_text(turn)}", session.key))
        known = {ref for ref, _, _ in unit.documents}
        for qa in conv.qa:
            refs = locomo_evidence(qa, known)
            if refs:
                unit.questions.append(Question(str(qa["question"]), refs, locomo_category(qa)))
        yield unit


def _jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def madial_units(lang: str) -> Iterator[Unit]:
    """One unit per user: a document per memory event of that user."""
    folder = DATA / "madial"
    owner: dict[str, str] = {}
    for line in _jsonl(folder / "madial_zh_memory.jsonl"):
        for key, event in line.items():
            owner[str(event.get("id", key))] = str(event["user-id"])
    events: dict[str, dict[str, Any]] = {}
    for line in _jsonl(folder / f"madial_{lang}_memory.jsonl"):
        for key, event in line.items():
            events[str(event.get("id", key))] = event
    dialogues = _jsonl(folder / f"madial_{lang}_dialogue_dev.jsonl")
    users = sorted({str(d["user-id"]) for d in dialogues}, key=lambda u: (len(u), u))
    for user in users:
        unit = Unit(f"user-{user}")
        for ref, event in events.items():
            if owner.get(ref) == user:
                text = f"[{event['time']}] {event['scene']} {event['emotion']} {event['event']}"
                unit.documents.append((ref, text, f"user-{user}"))
        for d in dialogues:
            if str(d["user-id"]) != user:
                continue
            query = "".join(d["dialogue"][: d["test-turn"][0]])
            unit.questions.append(Question(query, {str(r) for r in d["relevant-id"]}, "all"))
        yield unit


def longmemeval_units() -> Iterator[Unit]:
    """One unit per question: a document per user message of its haystack."""
    for q in longmemeval_questions(DATA):
        unit = Unit(q.question_id)
        relevant: set[str] = set()
        for session in q.sessions:
            for i, msg in enumerate(session.messages, start=1):
                if msg.get("role") != "user":
                    continue
                ref = f"{session.session_id}_{i}"
                unit.documents.append((ref, f"[{session.date}] {msg['content']}", session.session_id))
                if msg.get("has_answer"):
                    relevant.add(ref)
        if relevant:
            unit.questions.append(Question(q.question, relevant, q.question_type))
            yield unit


SETS: dict[str, tuple[str, Callable[[], Iterator[Unit]]]] = {
    "locomo": ("locomo/locomo_dev.json", locomo_units),
    "madial-zh": ("madial/madial_zh_dialogue_dev.jsonl", lambda: madial_units("zh")),
    "madial-en": ("madial/madial_en_dialogue_dev.jsonl", lambda: madial_units("en")),
    "longmemeval": ("longmemeval/longmemeval_s_dev.json", longmemeval_units),
}


# -- running ---------------------------------------------------------------------------------


def load_plugin(name: str) -> type[Any]:
    """A memory plugin class by entry-point name, through OPM."""
    from ovos_plugin_manager.agents import load_memory_plugin

    cls = load_memory_plugin(name)
    if cls is None:
        raise SystemExit(f"no memory plugin named {name!r} is installed (entry-point group opm.agents.memory)")
    return cls  # type: ignore[no-any-return]


def resolve(name: str, extra: dict[str, Any]) -> tuple[str, type[Any], dict[str, Any]]:
    """``(label, class, config)`` for a setup name or a plugin name."""
    plugin, config = SETUPS.get(name, (name, {}))
    return name, load_plugin(plugin), {**config, **extra}


def evaluate(cls: type[Any], config: dict[str, Any], units: Iterator[Unit]) -> dict[str, dict[int, list[float]]]:
    """Per category (and ``overall``), per k, the recall of every question."""
    scores: dict[str, dict[int, list[float]]] = defaultdict(lambda: {k: [] for k in KS})
    for unit in units:
        with tempfile.TemporaryDirectory(prefix="recall-") as tmp:
            mem = cls({**config, "root": tmp})
            try:
                for ref, text, session in unit.documents:
                    mem.store(text, session, {"ref": ref})
                for q in unit.questions:
                    hits = mem.search(q.query, top_k=max(KS))
                    refs = [h.metadata.get("ref") for h in hits]
                    for k in KS:
                        found = len(q.relevant & set(refs[:k])) / len(q.relevant)
                        scores[q.category][k].append(found)
                        scores["overall"][k].append(found)
            finally:
                mem.close()
    return scores


def _mean(values: list[float]) -> float:
    return 100.0 * sum(values) / len(values) if values else float("nan")


def report(set_name: str, results: dict[str, dict[str, dict[int, list[float]]]], seconds: dict[str, float]) -> None:
    """Print one table: a row per category, R@5 and R@10 per setup."""
    labels = list(results)
    cats = ["overall", *sorted({c for r in results.values() for c in r if c not in ("overall", "all")})]
    print(f"\n## {set_name}")
    header = f"{'category':<28}{'n':>6}" + "".join(f"{label[:22]:>24}" for label in labels)
    print(header)
    print(f"{'':<28}{'':>6}" + "".join(f"{'R@5':>12}{'R@10':>12}" for _ in labels))
    for cat in cats:
        n = max(len(r.get(cat, {5: []})[5]) for r in results.values())
        row = f"{cat:<28}{n:>6}"
        for label in labels:
            per_k = results[label].get(cat, {k: [] for k in KS})
            row += "".join(f"{_mean(per_k[k]):>12.1f}" for k in KS)
        print(row)
    print(f"{'seconds':<34}" + "".join(f"{seconds[label]:>24.1f}" for label in labels))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = ", ".join(SETUPS)
    parser.add_argument("plugins", nargs="+", help=f"setup names ({names}) or plugin entry-point names")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    parser.add_argument("--config", default="{}", help="JSON merged into every plugin's config")
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"SKIPPED: the benchmark data folder {DATA} is absent (see the project docs).")
        return 0
    extra = json.loads(args.config)
    setups = [resolve(name, extra) for name in args.plugins]
    for set_name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        if set_name not in SETS:
            raise SystemExit(f"unknown set {set_name!r}; known: {', '.join(SETS)}")
        path, units = SETS[set_name]
        if not (DATA / path).exists():
            print(f"\n## {set_name}\nSKIPPED: {DATA / path} is absent.")
            continue
        results: dict[str, dict[str, dict[int, list[float]]]] = {}
        seconds: dict[str, float] = {}
        for label, cls, config in setups:
            start = time.perf_counter()
            results[label] = evaluate(cls, config, units())
            seconds[label] = time.perf_counter() - start
        report(set_name, results, seconds)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
