"""How often the time-word parser names the right window: ``tests/data/time_words.json`` (8
languages, several phrasings each, windows relative to a fixed now).

    python benchmarks/time_words.py            # the shipped parser (dateparser, dates.time_window)
    python benchmarks/time_words.py --compare  # and ovos-date-parser, for the choice (docs/recall.md)

ovos-date-parser's ``extract_datetime`` gives a point in time, not a period: its window here is
the day of that point (it has no Chinese). A case is right when the window is exactly the
expected one (null for an utterance without time words).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ovos_memory_plugins.dates import time_window

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", action="store_true", help="also run ovos-date-parser")
    parser.add_argument("--show", action="store_true", help="print the wrong cases")
    args = parser.parse_args()
    data = json.loads(DATA.read_text(encoding="utf-8"))
    now = datetime.fromisoformat(data["now"])
    cases = data["cases"]
    run("dateparser (dates.time_window)", time_window, cases, now, args.show)
    if args.compare:
        run("ovos-date-parser (day of extract_datetime)", ovos_window, cases, now, args.show)


if __name__ == "__main__":
    main()
