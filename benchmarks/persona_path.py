"""What reaches the prompt on the host's path: hit, precision and latency of a turn's memories.

ovos-persona does not call ``store``/``search``: after each turn it calls
``update_history([USER, ASSISTANT], session_id)`` and before the next one
``build_conversation_context(utterance, session_id)``. This benchmark drives a memory exactly so
on the dev data of ``../shared/bench`` (see its README) and reads the prompt that comes back:

* **LongMemEval_S**: one fresh memory per question; each haystack session is fed exchange by
  exchange (a user message and the assistant message after it; a message without its partner
  alone), then the question is asked in a new session. Relevant: the exchanges holding a message
  marked ``has_answer`` (questions with none and ``_abs`` questions are skipped).
* **LoCoMo**: one fresh memory per conversation; each session's turns are paired in order into
  exchanges (``Speaker: text``, plus ``(shared an image: ...)`` when the turn has one; an odd last
  turn goes alone and is never archived, as on the host), then each question is asked in a new
  session. Relevant: the exchanges holding one of the question's ``evidence`` turns.

A past exchange *reached the prompt* when both its user and its assistant text (each
normalised, the first 120 characters) occur in a message of the prompt other than the final
USER message. Figures, per set and setup:

* **hit**: share of questions where at least one relevant exchange reached the prompt;
* **precision**: share of the exchanges that reached the prompt that are relevant (over all
  questions: relevant injected / injected);
* **inj/q**, **irr/q**: exchanges, and irrelevant exchanges, per prompt;
* **mem/q**, **irr mem/q**, **mem precision**: the same counted in *memories*, the chunks of the
  prompt's memory block (each starts with ``context.chunk_prefix``, ``- `` by default, its
  continuation lines indented): consecutive exchanges of one conversation that recall joined into
  one memory count once, relevant when one of them is. The exchanges are still each counted in
  inj/q and irr/q and their characters in ctx chars/q;
* **ctx chars/q**: characters of the prompt's memory messages per prompt (context included);
* **ans kept** (LongMemEval): of the questions whose reference answer occurs (normalised) in a
  relevant exchange that reached the prompt, the share whose answer is still in the prompt's
  text: what shortening a long memory (``context.memory_chars``) cost. Answers that are
  derived rather than quoted ("3.5 weeks") never count; a short one ("25") may occur by chance;
* **p50/p95 ms**, **CPU p50/p95**: latency of ``build_conversation_context``, wall clock and CPU
  time of the process (on a shared machine the wall clock includes waiting for a core).

Time: each session is fed at its date through the memory's ``clock=`` seam (LongMemEval's
``haystack_dates``, LoCoMo's ``session_N_date_time``; an exchange every 30 seconds) and each
question asked at its date (LongMemEval's ``question_date``; LoCoMo gives none: a day after the
last session). ``--undated`` feeds no dates (the run's own time); a memory whose constructor has
no ``clock`` is fed undated. Per question type it also prints:

* **dated**: of the memories that reached the prompt holding a relevant exchange, the share whose
  label (``[YYYY-MM-DD``) is the date of a session they hold evidence of;
* **ans in prompt**: the share of questions whose normalised reference answer occurs in the
  prompt's memory messages (derived answers, "3.5 weeks", never do);
* **newest 1st**: of the questions whose evidence lies in sessions of two dates or more and with
  a relevant memory in the prompt, the share whose first relevant memory holds evidence of the
  newest such session (knowledge updates: the updated fact first).

Usage (from the project root)::

    python benchmarks/persona_path.py lexical [more setups ...] [--sets longmemeval,locomo]
        [--limit 20] [--config '{"retrieval": {"max_num_results": 3}}']
        [--recipe '{"module": "ovos-memory-plugin-lexical", "config": {...}}']

A setup is a name of ``benchmarks/recall.py``'s ``SETUPS`` or an entry-point name; ``--config``
is merged into every setup's config; ``--recipe`` (repeatable) adds a setup given as JSON.
``--limit`` keeps the first N memories of each set (LongMemEval questions, LoCoMo conversations)
for a quick run. Skips (exit code 0, a clear message) when the data folder is absent.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
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
from recall import SETUPS, load_plugin

KEY_CHARS = 120
NEW_SESSION = "persona-path-question"


def norm(text: str) -> str:
    """Case-folded words and digits only: rendering (labels, indents, bullets) does not matter."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


@dataclass
class Exchange:
    """One fed turn: the user text and the assistant text ('' when alone), and whether relevant."""

    user: str
    assistant: str
    tags: set[str] = field(default_factory=set)

    def keys(self) -> tuple[str, str]:
        return norm(self.user)[:KEY_CHARS], norm(self.assistant)[:KEY_CHARS]


@dataclass
class Ask:
    """A question, the tags of the exchanges that answer it, its category and (LongMemEval) its
    reference answer."""

    question: str
    relevant: set[str]
    category: str
    answer: str = ""
    when: float | None = None  # the question's date (seconds since the epoch), when the set gives one


@dataclass
class Unit:
    """One fresh memory: sessions of exchanges, then questions."""

    name: str
    sessions: list[tuple[str, list[Exchange]]] = field(default_factory=list)
    asks: list[Ask] = field(default_factory=list)
    dates: dict[str, float] = field(default_factory=dict)  # session id -> its date, when the set gives one


def parse_date(text: str) -> float | None:
    """A data set's date as seconds since the epoch (UTC): LongMemEval's ``2023/04/23 (Sun) 18:14``
    or LoCoMo's ``1:56 pm on 8 May, 2023``; None for anything else."""
    for fmt in ("%Y/%m/%d (%a) %H:%M", "%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    return None


def longmemeval_units() -> Iterator[Unit]:
    """One unit per question: its haystack, exchange by exchange."""
    for q in longmemeval_questions(DATA):
        unit = Unit(q.question_id)
        relevant: set[str] = set()
        for session in q.sessions:
            exchanges: list[Exchange] = []
            messages = session.messages
            i = 0
            while i < len(messages):
                msg = messages[i]
                nxt = messages[i + 1] if i + 1 < len(messages) else None
                if msg.get("role") == "user" and nxt is not None and nxt.get("role") == "assistant":
                    ex = Exchange(str(msg["content"]), str(nxt["content"]))
                    marked = bool(msg.get("has_answer")) or bool(nxt.get("has_answer"))
                    i += 2
                elif msg.get("role") == "user":
                    ex = Exchange(str(msg["content"]), "")
                    marked = bool(msg.get("has_answer"))
                    i += 1
                else:  # an assistant message without a user message before it
                    ex = Exchange("", str(msg["content"]))
                    marked = bool(msg.get("has_answer"))
                    i += 1
                if marked:
                    tag = f"{session.session_id}:{i}"
                    ex.tags.add(tag)
                    relevant.add(tag)
                exchanges.append(ex)
            unit.sessions.append((session.session_id, exchanges))
            when = parse_date(session.date)
            if when is not None:
                unit.dates[session.session_id] = when
        if relevant:
            unit.asks.append(Ask(q.question, relevant, q.question_type, q.answer, parse_date(q.date)))
            yield unit


def locomo_units() -> Iterator[Unit]:
    """One unit per conversation: its turns paired into exchanges."""
    for conv in locomo_conversations(DATA):
        unit = Unit(conv.sample_id)
        known: set[str] = set()
        for session in conv.sessions:
            turns = session.turns
            exchanges = []
            for start in range(0, len(turns), 2):
                pair = turns[start : start + 2]
                second = locomo_turn_text(pair[1]) if len(pair) == 2 else ""
                ex = Exchange(locomo_turn_text(pair[0]), second)
                ex.tags = {str(t["dia_id"]) for t in pair}
                known |= ex.tags
                exchanges.append(ex)
            unit.sessions.append((session.key, exchanges))
            when = parse_date(session.date)
            if when is not None:
                unit.dates[session.key] = when
        # LoCoMo gives no question dates: the questions are asked a day after the last session
        asked = max(unit.dates.values()) + 86400 if unit.dates else None
        for qa in conv.qa:
            refs = locomo_evidence(qa, known)
            if refs:
                unit.asks.append(Ask(str(qa["question"]), refs, locomo_category(qa), str(qa.get("answer", "")), asked))
        yield unit


SETS: dict[str, tuple[str, Callable[[], Iterator[Unit]]]] = {
    "longmemeval": ("longmemeval/longmemeval_s_dev.json", longmemeval_units),
    "locomo": ("locomo/locomo_dev.json", locomo_units),
}


@dataclass
class Tally:
    """What one setup did on one set."""

    questions: int = 0
    hits: int = 0
    injected: int = 0
    relevant_injected: int = 0
    memories: int = 0
    relevant_memories: int = 0
    context_chars: int = 0
    answers_shown: int = 0
    answers_kept: int = 0
    latencies: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    per_category: dict[str, list[int]] = field(default_factory=dict)
    per_type: dict[str, Counter[str]] = field(default_factory=dict)

    def row(self) -> dict[str, float]:
        n = max(self.questions, 1)
        lat = sorted(self.latencies) or [float("nan")]
        cpu = sorted(self.cpu) or [float("nan")]
        return {
            "n": self.questions,
            "hit": 100.0 * self.hits / n,
            "precision": 100.0 * self.relevant_injected / self.injected if self.injected else float("nan"),
            "inj/q": self.injected / n,
            "irr/q": (self.injected - self.relevant_injected) / n,
            "mem/q": self.memories / n,
            "irr mem/q": (self.memories - self.relevant_memories) / n,
            "mem prec": 100.0 * self.relevant_memories / self.memories if self.memories else float("nan"),
            "ctx chars/q": self.context_chars / n,
            "ans kept": 100.0 * self.answers_kept / self.answers_shown if self.answers_shown else float("nan"),
            "p50 ms": 1000 * statistics.median(lat),
            "p95 ms": 1000 * lat[min(len(lat) - 1, int(0.95 * len(lat)))],
            "CPU p50": 1000 * statistics.median(cpu),
            "CPU p95": 1000 * cpu[min(len(cpu) - 1, int(0.95 * len(cpu)))],
        }


class BenchClock:
    """The memory's clock (its ``clock=`` seam): set to each session's date while it is fed, and to
    the question's date when it is asked."""

    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def set(self, when: float) -> None:
        self.now = datetime.fromtimestamp(when, tz=timezone.utc)


def takes_clock(cls: type[Any]) -> bool:
    """Whether the memory class's constructor has a ``clock`` argument."""
    try:
        return "clock" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def feed(mem: Any, unit: Unit, clock: BenchClock | None = None) -> None:
    """Record ``unit``'s sessions in ``mem`` as the host does: ``update_history`` per exchange;
    with ``clock``, each session at its date (an exchange every 30 seconds: one sitting)."""
    from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

    for session_id, exchanges in unit.sessions:
        start = unit.dates.get(session_id)
        for i, ex in enumerate(exchanges):
            if clock is not None and start is not None:
                clock.set(start + 30.0 * i)
            msgs = []
            if ex.user:
                msgs.append(AgentMessage(role=MessageRole.USER, content=ex.user))
            if ex.assistant:
                msgs.append(AgentMessage(role=MessageRole.ASSISTANT, content=ex.assistant))
            mem.update_history(msgs, session_id)


def _chunks(memory_text: str, prefix: str) -> list[str]:
    """The normalised texts of the prompt's chunks: a chunk starts at a line that starts with
    ``prefix`` (continuation lines are indented); text before the first chunk is its own."""
    chunks: list[list[str]] = [[]]
    for line in memory_text.splitlines():
        if prefix.strip() and line.startswith(prefix):
            chunks.append([])
        chunks[-1].append(line)
    return [norm("\n".join(c)) for c in chunks if c]


def _injected(prompt: list[Any], unit: Unit, prefix: str = "- ") -> tuple[list[Exchange], list[set[str]], str]:
    """The fed exchanges (one per distinct text) found in the prompt, the tags of each memory
    chunk that holds one or more of them, and the memory text."""
    memory_text = "\n".join(str(m.content or "") for m in prompt[:-1])
    if not memory_text:
        return [], [], ""
    haystack = norm(memory_text)
    chunks = _chunks(memory_text, prefix)
    found: dict[tuple[str, str], Exchange] = {}
    in_chunk: dict[int, set[str]] = {}
    for _, exchanges in unit.sessions:
        for ex in exchanges:
            user, assistant = ex.keys()
            if not (user and assistant):
                continue  # never archived: a message without its partner
            key = (user, assistant)
            if key in found:
                found[key].tags |= ex.tags  # identical exchanges count once, relevant if any is
            elif user in haystack and assistant in haystack:
                found[key] = Exchange(ex.user, ex.assistant, set(ex.tags))
            else:
                continue
            where = next((i for i, c in enumerate(chunks) if user in c and assistant in c), -1 - len(found))
            in_chunk.setdefault(where, set()).update(ex.tags)
    return list(found.values()), list(in_chunk.values()), memory_text


_LABEL_DATE = re.compile(r"\[(\d{4}-\d{2}-\d{2})")


def _dated_memories(prompt: list[Any], unit: Unit, ask: Ask, prefix: str) -> tuple[int, int, bool | None]:
    """Of the prompt's memories that hold a relevant exchange: how many, how many carry in their
    label (``[YYYY-MM-DD``) the date of a session they hold a relevant exchange of, and whether the
    first of them holds one of the newest session with evidence (None when the evidence is in
    sessions of fewer than two dates, or no relevant memory reached the prompt)."""
    memory_text = "\n".join(str(m.content or "") for m in prompt[:-1])
    chunks: list[list[str]] = [[]]
    for line in memory_text.splitlines():
        if prefix.strip() and line.startswith(prefix):
            chunks.append([])
        chunks[-1].append(line)
    evidence: dict[str, str] = {}  # session id -> its date, for the sessions holding evidence
    for session_id, exchanges in unit.sessions:
        if any(ex.tags & ask.relevant for ex in exchanges) and session_id in unit.dates:
            evidence[session_id] = datetime.fromtimestamp(unit.dates[session_id], tz=timezone.utc).strftime("%Y-%m-%d")
    newest = max(evidence.values()) if evidence else None
    relevant = dated = 0
    first: bool | None = None
    for chunk in (c for c in chunks if c):
        text = norm("\n".join(chunk))
        days = set()
        for session_id, exchanges in unit.sessions:
            for ex in exchanges:
                user, assistant = ex.keys()
                if ex.tags & ask.relevant and user and assistant and user in text and assistant in text:
                    days.add(evidence.get(session_id, ""))
        if not days:
            continue
        relevant += 1
        label = _LABEL_DATE.search(chunk[0])
        dated += bool(label and label.group(1) in days)
        if first is None and len(set(evidence.values())) >= 2:
            first = newest in days
    return relevant, dated, first


def evaluate(
    cls: type[Any], config: dict[str, Any], units: Iterator[Unit], limit: int | None, *, dates: bool = True
) -> Tally:
    """Feed each unit to a fresh memory and ask its questions in a new session; with ``dates``
    (and a memory that takes ``clock=``), each session at its date and each question at its own."""
    tally = Tally()
    for index, unit in enumerate(units):
        if limit is not None and index >= limit:
            break
        with tempfile.TemporaryDirectory(prefix="persona-path-") as tmp:
            clock = BenchClock() if dates and takes_clock(cls) else None
            mem = cls({**config, "root": tmp}, clock=clock) if clock is not None else cls({**config, "root": tmp})
            context = getattr(getattr(mem, "settings", None), "context", None)
            prefix = str(getattr(context, "chunk_prefix", "- "))
            try:
                feed(mem, unit, clock)
                for ask in unit.asks:
                    if clock is not None and ask.when is not None:
                        clock.set(ask.when)
                    start, cpu = time.perf_counter(), time.process_time()
                    prompt = mem.build_conversation_context(ask.question, NEW_SESSION)
                    tally.latencies.append(time.perf_counter() - start)
                    tally.cpu.append(time.process_time() - cpu)
                    injected, memories, memory_text = _injected(prompt, unit, prefix)
                    relevant = [ex for ex in injected if ex.tags & ask.relevant]
                    answer = norm(ask.answer)
                    if len(answer) >= 2 and any(answer in norm(ex.user + ex.assistant) for ex in relevant):
                        tally.answers_shown += 1  # the answer's words are in a relevant exchange shown
                        tally.answers_kept += answer in norm(memory_text)  # and survived any shortening
                    tally.questions += 1
                    tally.hits += bool(relevant)
                    tally.injected += len(injected)
                    tally.relevant_injected += len(relevant)
                    tally.memories += len(memories)
                    tally.relevant_memories += sum(bool(tags & ask.relevant) for tags in memories)
                    tally.context_chars += len(memory_text)
                    cat = tally.per_category.setdefault(ask.category, [0, 0])
                    cat[0] += 1
                    cat[1] += bool(relevant)
                    kind = tally.per_type.setdefault(ask.category, Counter())
                    rel_memories, dated, newest_first = _dated_memories(prompt, unit, ask, prefix)
                    kind["n"] += 1
                    kind["hit"] += bool(relevant)
                    kind["mem"] += len(memories)
                    kind["irr mem"] += sum(not (tags & ask.relevant) for tags in memories)
                    kind["rel mem"] += rel_memories
                    kind["dated"] += dated
                    if len(answer) >= 2:
                        kind["answers"] += 1
                        kind["ans in prompt"] += answer in norm(memory_text)
                    if newest_first is not None:
                        kind["newest asked"] += 1
                        kind["newest 1st"] += newest_first
            finally:
                close = getattr(mem, "close", None)
                if callable(close):
                    close()
    return tally


def refused_share(units: Iterator[Unit], limit: int | None) -> tuple[int, int]:
    """``(refused, exchanges)``: how many complete exchanges admission leaves out of the archive."""
    from ovos_memory_plugins.admission import is_low_signal

    refused = total = 0
    for index, unit in enumerate(units):
        if limit is not None and index >= limit:
            break
        for _, exchanges in unit.sessions:
            for ex in exchanges:
                if ex.user and ex.assistant:
                    total += 1
                    refused += is_low_signal(ex.user, ex.assistant)
    return refused, total


def report(set_name: str, tallies: dict[str, Tally], seconds: dict[str, float]) -> None:
    """One table per set: a row per setup, then hit per category."""
    cols = ["n", "hit", "precision", "inj/q", "irr/q", "mem/q", "irr mem/q", "mem prec", "ctx chars/q", "ans kept"]
    cols += ["p50 ms", "p95 ms", "CPU p50", "CPU p95"]
    print(f"\n## {set_name}")
    print(f"{'setup':<30}" + "".join(f"{c:>12}" for c in cols) + f"{'seconds':>9}")
    for label, tally in tallies.items():
        row = tally.row()
        cells = "".join(f"{row[c]:>12.0f}" if c == "n" else f"{row[c]:>12.2f}" for c in cols)
        print(f"{label[:29]:<30}{cells}{seconds[label]:>9.1f}")
    for label, tally in tallies.items():
        cats = ", ".join(f"{cat} {100.0 * h / n:.0f} % (n={n})" for cat, (n, h) in sorted(tally.per_category.items()))
        print(f"  hit per category, {label}: {cats}")
    for label, tally in tallies.items():
        print(f"\n  per question type, {label}:")
        heads = ["n", "hit", "mem/q", "irr mem/q", "dated", "ans in prompt", "newest 1st"]
        print(f"  {'type':<28}" + "".join(f"{h:>14}" for h in heads))
        for kind, c in sorted(tally.per_type.items()):
            n = max(c["n"], 1)
            cells = [
                f"{c['n']:>14}",
                f"{100.0 * c['hit'] / n:>13.1f}%",
                f"{c['mem'] / n:>14.2f}",
                f"{c['irr mem'] / n:>14.2f}",
                f"{100.0 * c['dated'] / c['rel mem']:>13.1f}%" if c["rel mem"] else f"{'-':>14}",
                f"{100.0 * c['ans in prompt'] / c['answers']:>13.1f}%" if c["answers"] else f"{'-':>14}",
                f"{100.0 * c['newest 1st'] / c['newest asked']:>9.1f}% n={c['newest asked']}"
                if c["newest asked"]
                else f"{'-':>14}",
            ]
            print(f"  {kind[:27]:<28}" + "".join(cells))


def _setup(name: str, extra: dict[str, Any]) -> tuple[str, type[Any], dict[str, Any]]:
    plugin, config = SETUPS.get(name, (name, {}))
    return name, load_plugin(plugin), {**config, **extra}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("setups", nargs="*", default=[], help="setup names of benchmarks/recall.py or plugin names")
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    parser.add_argument("--config", default="{}", help="JSON merged into every setup's config")
    parser.add_argument(
        "--recipe",
        action="append",
        default=[],
        help='a setup as JSON: {"module": <entry point>, "config": {...}, "label": <name>}',
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N memories of each set")
    parser.add_argument(
        "--undated", action="store_true", help="feed no dates: the memory's own clock (the time of the run)"
    )
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"SKIPPED: the benchmark data folder {DATA} is absent (see ../shared/bench/README.md).")
        return 0
    extra = json.loads(args.config)
    setups = [_setup(name, extra) for name in args.setups]
    for i, raw in enumerate(args.recipe):
        recipe = json.loads(raw)
        label = str(recipe.get("label") or f"recipe-{i + 1}")
        setups.append((label, load_plugin(recipe["module"]), {**recipe.get("config", {}), **extra}))
    if not setups:
        setups = [_setup("lexical", extra)]
    for set_name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        if set_name not in SETS:
            raise SystemExit(f"unknown set {set_name!r}; known: {', '.join(SETS)}")
        path, units = SETS[set_name]
        if not (DATA / path).exists():
            print(f"\n## {set_name}\nSKIPPED: {DATA / path} is absent.")
            continue
        tallies: dict[str, Tally] = {}
        seconds: dict[str, float] = {}
        for label, cls, config in setups:
            start = time.perf_counter()
            tallies[label] = evaluate(cls, config, units(), args.limit, dates=not args.undated)
            seconds[label] = time.perf_counter() - start
        report(set_name, tallies, seconds)
        refused, total = refused_share(units(), args.limit)
        print(
            f"  admission (when on) leaves out {refused} of {total} exchanges ({100.0 * refused / max(total, 1):.1f} %)"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
