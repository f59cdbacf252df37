"""How often the time-word parser names the right window: ``tests/data/time_words.json`` (8
languages, several phrasings each, windows relative to a fixed now).

    python benchmarks/time_words.py            # the shipped parser (dateparser, time_words.time_window)
    python benchmarks/time_words.py --compare  # and ovos-date-parser, for the choice (docs/recall.md)
    python benchmarks/time_words.py --cost     # CPU per utterance: this set and LoCoMo's questions

``--cost`` times ``time_window`` (process time) on every utterance of this set and on LoCoMo's
1,157 dev questions (``../shared/bench``, asked a day after the last session, as
``persona_path.py`` does), after one warm-up pass, and reports the mean over all of them and
the mean, p50 and p95 over those that reach the parser (the gate lets them through: they take
more than 50 µs). Run it with ``PYTHONPATH`` set to another checkout to time that one's parser.

``--turn-cost`` measures what time words add to a whole turn: LoCoMo's first ``--conversations``
conversations fed as ``persona_path.py`` feeds them (dated, through ``update_history``) to two
copies of each setup, ``retrieval.time_words`` on and off, then every question whose words name
a window asked of both in turn (``build_conversation_context``, process time: the composite's
member threads included); the difference is the parse plus the window's search.

    python benchmarks/time_words.py --turn-cost [--conversations 2]

``--host-cost N`` measures what time words and dates add on the host's path at scale, paired in
one process: one keyword memory fed ``N`` exchanges through ``update_history`` exactly as
``host_path.py`` feeds them (LoCoMo text, 50 sessions, made now), then each of ``--questions``
LoCoMo questions (file order) asked twice in a row, once with the defaults and once with
``retrieval.time_words`` off and ``context.dates`` ``off`` (the order alternating), process time
per turn; mean, p50 and p95 of each and of the paired difference, for all turns and for those
the gate lets through to the parser. A busy machine slows both halves of a pair alike.

    python benchmarks/time_words.py --host-cost 100000 [--questions 800]

``--plain-english N`` checks the plain English reader (:mod:`ovos_memory_plugins.english_time`)
against the parser it stands in for: every English utterance of this set, LoCoMo's dev
questions and turns and LongMemEval's dev questions, each at ``N`` random nows (seeded) and
LoCoMo's own, read by ``time_window`` with the reader and with it switched off. It prints the
windows that differ (none is the bar), how many texts the reader answered, and the CPU of both.

    python benchmarks/time_words.py --plain-english 3

ovos-date-parser's ``extract_datetime`` gives a point in time, not a period: its window here is
the day of that point (it has no Chinese). A case is right when the window is exactly the
expected one (null for an utterance without time words).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ovos_memory_plugins.time_words import time_window

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "time_words.json"


def expected(case: dict[str, Any], now: datetime) -> tuple[float, float] | None:
    if case["window"] is None:
        return None
    since, until = (datetime.fromisoformat(d).replace(tzinfo=now.tzinfo) for d in case["window"])
    return since.timestamp(), until.timestamp()


def ovos_window(text: str, now: datetime, lang: str) -> tuple[float, float] | None:
    from ovos_date_parser import extract_datetime

    try:
        found = extract_datetime(text, anchorDate=now, lang=lang)
    except Exception:  # a language it does not know, or a parse error
        return None
    if not found:
        return None
    when = found[0]
    start = when.replace(hour=0, minute=0, second=0, microsecond=0)
    return start.timestamp(), (start + timedelta(days=1)).timestamp()


def run(name: str, parse: Any, cases: list[dict[str, Any]], now: datetime, show: bool) -> float:
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    started = time.perf_counter()
    for case in cases:
        got = parse(case["text"], now, case["lang"])
        ok = got == expected(case, now)
        total[case["lang"]] += 1
        right[case["lang"]] += ok
        if show and not ok:
            print(f"  wrong [{case['lang']}] {case['text']!r}: got {got}, expected {case['window']}")
    seconds = time.perf_counter() - started
    share = sum(right.values()) / sum(total.values())
    per = ", ".join(f"{lang} {right[lang]}/{total[lang]}" for lang in total)
    print(f"{name}: {sum(right.values())}/{sum(total.values())} right ({share:.1%}); {per}; {seconds:.2f} s")
    return share


def _locomo_date(text: str) -> datetime:
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %b, %Y")


def _locomo_questions() -> list[tuple[str, datetime]]:
    path = _bench_root() / "locomo" / "locomo_dev.json"
    if not path.exists():
        return []
    out = []
    for conv in json.loads(path.read_text(encoding="utf-8")):
        dates = [v for k, v in conv["conversation"].items() if k.endswith("_date_time")]
        last = max(_locomo_date(d) for d in dates)
        asked = (last + timedelta(days=1)).replace(tzinfo=timezone.utc)
        out.extend((str(qa["question"]), asked) for qa in conv["qa"])
    return out


def cost(cases: list[dict[str, Any]], now: datetime) -> None:
    sets = {"time_words.json": [(c["text"], now, c["lang"]) for c in cases]}
    locomo = _locomo_questions()
    if locomo:
        sets["LoCoMo questions"] = [(q, asked, "en") for q, asked in locomo]
    for name, items in sets.items():
        for text, when, lang in items:  # warm up: imports, the parser's language data
            time_window(text, when, lang)
        spent = []
        for text, when, lang in items:
            started = time.process_time()
            time_window(text, when, lang)
            spent.append((time.process_time() - started) * 1000)
        parsed = sorted(t for t in spent if t > 0.05)
        mean = sum(spent) / len(spent)
        if parsed:
            p50, p95 = parsed[len(parsed) // 2], parsed[min(len(parsed) - 1, int(0.95 * len(parsed)))]
            reached = (
                f"{len(parsed)} reach the parser: mean {sum(parsed) / len(parsed):.2f}, p50 {p50:.2f}, p95 {p95:.2f} ms"
            )
        else:
            reached = "none reach the parser"
        print(f"{name}: {len(spent)} utterances, mean {mean:.3f} ms CPU; {reached}")


def turn_cost(conversations: int) -> None:
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from persona_path import NEW_SESSION, BenchClock, feed, locomo_units

    from ovos_memory_plugins.composite import CompositeMemory
    from ovos_memory_plugins.lexical import LexicalMemory

    composite = {"members": [{"module": "ovos-memory-plugin-lexical"}, {"module": "ovos-memory-plugin-vector"}]}
    composite["members"][1]["config"] = {"embedder": "hash"}
    setups: list[tuple[str, Any, dict[str, Any]]] = [
        ("keyword", LexicalMemory, {}),
        ("composite keyword + vector (hash)", CompositeMemory, composite),
    ]
    units = [u for _, u in zip(range(conversations), locomo_units(), strict=False)]
    for name, cls, config in setups:
        spent: dict[bool, list[float]] = {True: [], False: []}
        asked = 0
        for unit in units:
            with tempfile.TemporaryDirectory(prefix="turn-cost-") as tmp:
                clocks = {on: BenchClock() for on in (True, False)}
                mems = {
                    on: cls({**config, "root": f"{tmp}/{on}", "retrieval": {"time_words": on}}, clock=clocks[on])
                    for on in (True, False)
                }
                try:
                    for on, mem in mems.items():
                        feed(mem, unit, clocks[on])
                    for ask in unit.asks:
                        for clock in clocks.values():
                            clock.set(ask.when)
                        if mems[True].recall_window(ask.question) is None:
                            continue
                        asked += 1
                        for on in (True, False, True, False):  # warm both, then time both, alternating
                            started = time.process_time()
                            mems[on].build_conversation_context(ask.question, NEW_SESSION)
                            spent[on].append((time.process_time() - started) * 1000)
                finally:
                    for mem in mems.values():
                        mem.close()
        on, off = (sorted(spent[x][1::2]) for x in (True, False))
        if not on:
            print(f"{name}: no question names a window")
            continue

        def pct(values: list[float], q: float) -> float:
            return values[min(len(values) - 1, int(q * len(values)))]

        extra = sum(on) / len(on) - sum(off) / len(off)
        print(
            f"{name}: {asked} turns naming a window; CPU ms with time words mean {sum(on) / len(on):.2f}"
            f" p50 {pct(on, 0.5):.2f} p95 {pct(on, 0.95):.2f}; without mean {sum(off) / len(off):.2f}"
            f" p50 {pct(off, 0.5):.2f} p95 {pct(off, 0.95):.2f}; extra per turn {extra:.2f} ms"
        )


def host_cost(exchanges: int, questions: int) -> None:
    import statistics
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import host_path
    from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

    from ovos_memory_plugins import time_words as dates
    from ovos_memory_plugins.lexical import LexicalMemory

    base, asks = host_path.base_exchanges(), host_path.questions()
    rows: list[tuple[float, float, bool]] = []
    asked: list[str] = []
    with tempfile.TemporaryDirectory(prefix="host-cost-") as root:
        mem = LexicalMemory({"root": root})
        try:
            for i, user, assistant in host_path.exchanges(exchanges, base):
                pair = [
                    AgentMessage(role=MessageRole.USER, content=user),
                    AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
                ]
                mem.update_history(pair, f"host-{i % 50}")
            retrieval, context = mem.settings.retrieval, mem.settings.context

            def turn(question: str, session: str, on: bool) -> float:
                object.__setattr__(retrieval, "time_words", on)  # one memory, both settings
                object.__setattr__(context, "dates", "both" if on else "off")
                started = time.process_time()
                mem.build_conversation_context(question, session)
                return (time.process_time() - started) * 1000

            for j in range(host_path.WARM_UP):
                for on in (True, False):
                    turn(asks[-1 - j % len(asks)], f"host-{j % 50}", on)
            for j in range(questions):
                question, session = asks[j % len(asks)], f"host-{j % 50}"
                spent = {on: turn(question, session, on) for on in ((True, False) if j % 2 == 0 else (False, True))}
                text = dates._with_digits(dates._with_past_one(question, "en"), "en")
                rows.append((spent[True], spent[False], dates._might_say_when(text, "en")))
                asked.append(question)
        finally:
            mem.close()

    def figures(values: list[float]) -> str:
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        return f"mean {statistics.fmean(ordered):.3f} p50 {statistics.median(ordered):.3f} p95 {p95:.3f}"

    worst = max(range(len(rows)), key=lambda i: rows[i][0] - rows[i][1]) if rows else None
    if worst is not None:  # a one-time cost (a first use inside the parser) shows here
        print(f"largest pair: {rows[worst][0] - rows[worst][1]:.1f} ms more with them on, {asked[worst]!r}")
    for label, chosen in (
        ("all", rows),
        ("through the gate", [r for r in rows if r[2]]),
        ("not through it", [r for r in rows if not r[2]]),
    ):
        if chosen:
            print(
                f"{label} (n={len(chosen)}): on {figures([r[0] for r in chosen])} | off"
                f" {figures([r[1] for r in chosen])} | on - off {figures([r[0] - r[1] for r in chosen])}"
            )


def _bench_root() -> Path:
    import os

    return Path(
        os.environ.get("OVOS_MEMORY_BENCH_DATA", Path(__file__).resolve().parent.parent.parent / "shared" / "bench")
    )


def _english_texts(cases: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(set, text)``: this set's English cases, LoCoMo's dev questions and turns and
    LongMemEval's dev questions (those whose files are there)."""
    texts = [("time_words.json", str(c["text"])) for c in cases if c["lang"] == "en"]
    locomo = _bench_root() / "locomo" / "locomo_dev.json"
    if locomo.exists():
        convs = json.loads(locomo.read_text(encoding="utf-8"))
        texts += [("locomo questions", str(qa["question"])) for conv in convs for qa in conv["qa"]]
        for conv in convs:
            for turns in conv["conversation"].values():
                if isinstance(turns, list):
                    texts += [("locomo turns", str(t["text"])) for t in turns if t.get("text")]
    lme = _bench_root() / "longmemeval" / "longmemeval_s_dev.json"
    if lme.exists():
        texts += [("longmemeval questions", str(e["question"])) for e in json.loads(lme.read_text(encoding="utf-8"))]
    return texts


def plain_english(cases: list[dict[str, Any]], nows: int) -> None:
    import random

    from ovos_memory_plugins import english_time, time_words

    rng = random.Random(25)
    start, span = datetime(2020, 1, 1, 9, tzinfo=timezone.utc), timedelta(days=6 * 365)
    moments = [datetime(2023, 8, 15, 12, tzinfo=timezone.utc)] + [start + span * rng.random() for _ in range(nows)]
    reader = english_time.read_plain_english
    answered: Counter[str] = Counter()
    asked: Counter[str] = Counter()
    differ: Counter[str] = Counter()
    seconds = {"parser": 0.0, "reader": 0.0}

    def counting(*args: Any) -> Any:
        finds = reader(*args)
        answered[current[0]] += finds is not None
        asked[current[0]] += 1
        return finds

    current = [""]
    shown = 0
    for name, text in _english_texts(cases):
        current[0] = name
        for now in moments:
            time_words.read_plain_english = lambda *args: None  # type: ignore[assignment]
            began = time.process_time()
            parsed = time_window(text, now, "en")
            middle = time.process_time()
            time_words.read_plain_english = counting  # type: ignore[assignment]
            read = time_window(text, now, "en")
            seconds["parser"] += middle - began
            seconds["reader"] += time.process_time() - middle
            if parsed != read:
                differ[name] += 1
                if shown < 20:
                    shown += 1
                    print(f"  differs at {now:%Y-%m-%d}: {text[:120]!r}: parser {parsed}, reader {read}")
    time_words.read_plain_english = reader
    for name in asked:
        print(
            f"{name}: {asked[name]} searches at {len(moments)} nows, the reader answered {answered[name]}"
            f" ({answered[name] / asked[name]:.0%}), windows differing {differ[name]}"
        )
    print(f"time_window CPU: parser only {seconds['parser']:.2f} s, with the reader {seconds['reader']:.2f} s")
    print(f"windows differing in all: {sum(differ.values())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", action="store_true", help="also run ovos-date-parser")
    parser.add_argument("--show", action="store_true", help="print the wrong cases")
    parser.add_argument("--cost", action="store_true", help="CPU per utterance instead (see the docstring)")
    parser.add_argument("--turn-cost", action="store_true", help="what time words add to a turn (docstring)")
    parser.add_argument("--conversations", type=int, default=2, help="LoCoMo conversations for --turn-cost")
    parser.add_argument("--host-cost", type=int, default=0, help="time words and dates at N exchanges (docstring)")
    parser.add_argument("--questions", type=int, default=800, help="turns for --host-cost")
    parser.add_argument("--plain-english", type=int, default=-1, help="check the plain reader at N nows")
    args = parser.parse_args()
    data = json.loads(DATA.read_text(encoding="utf-8"))
    now = datetime.fromisoformat(data["now"])
    cases = data["cases"]
    if args.cost:
        cost(cases, now)
        return
    if args.turn_cost:
        turn_cost(args.conversations)
        return
    if args.host_cost:
        host_cost(args.host_cost, args.questions)
        return
    if args.plain_english >= 0:
        plain_english(cases, args.plain_english)
        return
    run("dateparser (time_words.time_window)", time_window, cases, now, args.show)
    if args.compare:
        run("ovos-date-parser (day of extract_datetime)", ovos_window, cases, now, args.show)


if __name__ == "__main__":
    main()
