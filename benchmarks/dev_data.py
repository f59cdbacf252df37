"""The dev sets of ``../shared/bench`` read once, for every benchmark (see its README).

Each benchmark turns these records into its own units (``recall.py``: a document per message or
turn; ``persona_path.py``: exchanges fed through ``update_history``); the reading, the skipped
questions and the evidence references are the same for all of them, so they live here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# ``OVOS_MEMORY_BENCH_DATA`` points elsewhere (a git worktree has no ../shared next to it)
DATA = Path(os.environ.get("OVOS_MEMORY_BENCH_DATA") or ROOT.parent / "shared" / "bench")
LONGMEMEVAL = Path("longmemeval") / "longmemeval_s_dev.json"
LOCOMO = Path("locomo") / "locomo_dev.json"

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass
class LongMemEvalSession:
    """One haystack session of a LongMemEval question: its id, date and messages."""

    session_id: str
    date: str
    messages: list[dict[str, Any]]


@dataclass
class LongMemEvalQuestion:
    """A LongMemEval_S question (abstention ``_abs`` questions are left out) and its haystack."""

    question_id: str
    question: str
    question_type: str
    sessions: list[LongMemEvalSession]
    answer: str = ""
    date: str = ""  # when the question is asked (``question_date``)


def longmemeval_questions(data: Path = DATA) -> Iterator[LongMemEvalQuestion]:
    """The dev questions in file order, each with its haystack sessions in order (``data``: the
    bench folder)."""
    for q in json.loads((data / LONGMEMEVAL).read_text("utf-8")):
        if str(q["question_id"]).endswith("_abs"):
            continue
        sessions = [
            LongMemEvalSession(str(sid), str(date), list(messages))
            for sid, date, messages in zip(
                q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True
            )
        ]
        yield LongMemEvalQuestion(
            str(q["question_id"]),
            str(q["question"]),
            str(q["question_type"]),
            sessions,
            str(q.get("answer", "")),
            str(q.get("question_date", "")),
        )


@dataclass
class LoCoMoSession:
    """One session of a LoCoMo conversation: its key (``session_N``), date and turns."""

    key: str
    date: str
    turns: list[dict[str, Any]]


@dataclass
class LoCoMoConversation:
    """A LoCoMo conversation: its sessions in order and its question records."""

    sample_id: str
    sessions: list[LoCoMoSession]
    qa: list[dict[str, Any]]


def locomo_conversations(data: Path = DATA) -> Iterator[LoCoMoConversation]:
    """The dev conversations, sessions sorted by number (``data``: the bench folder)."""
    for conv in json.loads((data / LOCOMO).read_text("utf-8")):
        c = conv["conversation"]
        keys = sorted(
            (k for k in c if re.fullmatch(r"session_\d+", k) and isinstance(c[k], list)),
            key=lambda k: int(k.split("_")[1]),
        )
        sessions = [LoCoMoSession(k, str(c.get(f"{k}_date_time", "")), list(c[k])) for k in keys]
        yield LoCoMoConversation(str(conv.get("sample_id", "conv")), sessions, list(conv["qa"]))


def locomo_turn_text(turn: dict[str, Any]) -> str:
    """A turn as ``Speaker: text``, with ``(shared an image: ...)`` when it has one."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" (shared an image: {turn['blip_caption']})"
    return text


def locomo_evidence(qa: dict[str, Any], known: set[str]) -> set[str]:
    """The ``dia_id`` references of a question's evidence that name a known turn."""
    return {r for r in re.split(r"[;,\s]+", " ".join(qa.get("evidence") or [])) if r} & known


def locomo_category(qa: dict[str, Any]) -> str:
    """A question's category name."""
    return LOCOMO_CATEGORIES.get(int(qa["category"]), str(qa["category"]))
