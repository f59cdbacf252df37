"""Time words in an utterance: the window of time they name ("yesterday", "last week", "in May",
"two days ago", "letzte Woche", "上周"), read by ``dateparser`` (the ``dates`` extra).

:func:`time_window` is what a turn asks (``retrieval.time_words``): the window recall is
restricted or boosted to, or None when the utterance names no time (or the parser is not
installed). The parser is costly (about a millisecond per expression) and slow to load (a
quarter of a second): a gate of the parser's own time words (:func:`_might_say_when`) keeps it
from turns that name no time, its search reads only the words around them (:func:`_time_spans`),
and :func:`warm_parser` loads it beside the caller when a memory is built. English's common
phrases ("yesterday", "in June", "2 weeks ago"), alone in an utterance, are read without it
(:mod:`ovos_memory_plugins.english_time`, which names the parser's window at a small part of
its cost).

Rendering dates in the prompt (labels, today's line, the clock seam) is
:mod:`ovos_memory_plugins.dates`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime, timedelta, timezone
from typing import Any

from ovos_memory_plugins.concurrency import DaemonPool
from ovos_memory_plugins.dates import Window, language
from ovos_memory_plugins.english_time import is_time_token, read_anchored_english, read_plain_english, whole_period

LOG = logging.getLogger(__name__)

__all__ = ["SPAN_WORDS", "parser_available", "time_window", "wait_warm", "warm_parser"]

_PARSER_STATE: dict[Any, Any] = {}


def parser_available() -> bool:
    """Whether the time-word parser (``dateparser``, the ``dates`` extra) is installed."""
    if "available" not in _PARSER_STATE:
        try:
            import dateparser  # noqa: F401

            _PARSER_STATE["available"] = True
        except ImportError:
            _PARSER_STATE["available"] = False
    return bool(_PARSER_STATE["available"])


#: What :func:`warm_parser` has the parser read: "yesterday", in each language.
_WARM_UP = {
    "en": "yesterday",
    "de": "gestern",
    "es": "ayer",
    "fr": "hier",
    "pt": "ontem",
    "it": "ieri",
    "nl": "gisteren",
    "zh": "昨天",
}

#: Held while the parser searches or warms up: its first search builds shared tables (the time
#: zones' patterns) that two threads should not build at once.
_PARSER_LOCK = threading.Lock()


def warm_parser(lang: str | None = None) -> Future[None] | None:
    """Load the time-word parser beside the caller, once per process and language: its import,
    its language data and the tables its first search builds (about a quarter of a second,
    which the first turn naming a time would otherwise wait for). A memory with
    ``retrieval.time_words`` on calls it when it is built; a turn that comes first waits for the
    warm-up instead of doing the same work. None when already warmed (or warming) for
    ``lang``; without the parser installed the warm-up finds that out on its thread and ends."""
    code = language(lang)
    with _PARSER_LOCK:
        if ("warm", code) in _PARSER_STATE:
            return None
        _PARSER_STATE[("warm", code)] = True
        pool = _PARSER_STATE.get("pool")
        if pool is None:
            pool = _PARSER_STATE["pool"] = DaemonPool("time-words", 1)

    def warm() -> None:
        if not parser_available():
            return
        try:
            _window(_WARM_UP[code], datetime.now(timezone.utc), code, plain_english=False)  # the parser's own
        except Exception:  # a warm-up is an optimisation: the turn reports a real failure
            LOG.debug("time words: the parser's warm-up failed", exc_info=True)

    future = pool.submit(warm)
    _PARSER_STATE[("future", code)] = future
    return future


def wait_warm(timeout: float | None = None) -> bool:
    """Wait, at most ``timeout`` seconds in all (None: as long as it takes), for the warm-ups
    :func:`warm_parser` started in this process to end; whether they all have (True when none
    was started). A host need not call it: a turn that comes first waits for what it needs."""
    deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
    with _PARSER_LOCK:
        futures = [f for k, f in _PARSER_STATE.items() if isinstance(k, tuple) and k[0] == "future"]
    for future in futures:
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            future.result(timeout=left)
        except FutureTimeout:
            return False
        except Exception:  # a failed warm-up has ended too (its turn reports the failure)
            continue
    return True


def _vocabulary(code: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The parser's own time words for a language (month and weekday names, the words for day,
    week, month, year, ago, and its relative phrases such as "la semana pasada"), without the
    language's stop words: ``(single words, phrases)``. An utterance holding none of them (and
    no four-digit year) is not given to the parser, so a turn without time words costs a set
    lookup, not a parse."""
    cached = _PARSER_STATE.get(("vocabulary", code))
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    from dateparser.languages.loader import LocaleDataLoader

    from ovos_memory_plugins.text import stop_words

    info = LocaleDataLoader().get_locale(code).info
    entries: list[str] = []
    keys = ["january", "february", "march", "april", "may", "june", "july", "august", "september"]
    keys += ["october", "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday"]
    keys += ["saturday", "sunday", "year", "month", "week", "day", "ago"]
    for key in keys:
        entries.extend(str(e) for e in info.get(key, []) if isinstance(e, str))
    for phrases in dict(info.get("relative-type", {})).values():
        entries.extend(str(p) for p in phrases)
    for patterns in dict(info.get("relative-type-regex", {})).values():
        entries.extend(p.split("(")[0] for p in patterns)  # the words before the number
        entries.extend(p.rsplit(")", 1)[-1] for p in patterns if code == "zh")  # and after it ("天前")
    stops = stop_words(code)
    names = {str(e).casefold() for key in keys[:19] for e in info.get(key, []) if isinstance(e, str)}
    phrases = tuple(sorted({e.casefold().strip() for e in entries if len(e.strip()) >= 2}, key=len, reverse=True))
    words = frozenset(
        w
        for e in phrases
        for w in e.replace(".", " ").split()
        if len(w) >= 3 and (w not in stops or w in names) and w.isalpha()
    )
    found = (words, phrases)
    _PARSER_STATE[("vocabulary", code)] = found
    return found


_WORD = re.compile(r"\w+")
_YEAR = re.compile(r"\b(19|20)\d\d\b")


def _might_say_when(text: str, code: str) -> bool:
    folded = text.casefold()
    if _YEAR.search(folded):
        return True
    words, phrases = _vocabulary(code)
    if code == "zh":  # no spaces: the parser's phrases as substrings, or a number of units ("3天")
        if any(p in folded for p in phrases if len(p) >= 2):
            return True
        return any(ch.isdigit() for ch in folded) and any(
            f"{d}{u}" in folded for d in "0123456789" for u in _units(code)[0]
        )
    return any(w in words for w in _WORD.findall(folded))


#: Words kept on each side of a time word when the parser searches an utterance
#: (:func:`_time_spans`): "the past 3 days", "il y a 3 jours", "on May 23, 2023" fit in it.
SPAN_WORDS = 3


def _time_spans(text: str, code: str) -> str:
    """The parts of ``text`` around its time words (:func:`_vocabulary`'s words, four-digit
    years, numbers), :data:`SPAN_WORDS` words on each side, joined by ``" . "``: what the parser
    searches. Its search tries every stretch of the text it is given, so a long question costs
    several times a short one; the words far from any time word cannot be part of a date.
    Chinese, written without spaces, is searched whole."""
    if code == "zh":
        return text
    words = _vocabulary(code)[0]
    tokens = text.split()
    keep = [False] * len(tokens)
    for i, token in enumerate(tokens):
        if is_time_token(token, words):
            for j in range(max(0, i - SPAN_WORDS), min(len(tokens), i + SPAN_WORDS + 1)):
                keep[j] = True
    spans: list[list[str]] = []
    for i, token in enumerate(tokens):
        if not keep[i]:
            continue
        if i == 0 or not keep[i - 1]:
            spans.append([])
        spans[-1].append(token)
    return " . ".join(" ".join(span) for span in spans) if spans else text


#: Number words the parser reads only as digits ("hace dos días" -> "hace 2 días"), one to ten;
#: before a time unit only ("two weeks": a duration is told by its number).
_NUMBERS: dict[str, tuple[str, ...]] = {
    "en": ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    "de": ("ein", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn"),
    "es": ("un", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez"),
    "fr": ("un", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf", "dix"),
    "pt": ("um", "dois", "três", "quatro", "cinco", "seis", "sete", "oito", "nove", "dez"),
    "it": ("un", "due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove", "dieci"),
    "nl": ("een", "twee", "drie", "vier", "vijf", "zes", "zeven", "acht", "negen", "tien"),
    "zh": ("一", "两", "三", "四", "五", "六", "七", "八", "九", "十"),
}
_ALSO = {"zh": {"二": "2"}, "de": {"zwei": "2"}, "pt": {"duas": "2"}}


def _with_digits(text: str, code: str) -> str:
    """``text`` with the number words one to ten of ``code`` before a time unit as digits."""
    words = _NUMBERS.get(code)
    if not words:
        return text
    table = {w: str(i) for i, w in enumerate(words, start=1)} | _ALSO.get(code, {})
    if code == "zh":
        return re.sub(r"([一两二三四五六七八九十])(?=(天|周|星期|个月|年))", lambda m: table[m.group(1)], text)
    if not any(w in text.casefold() for w in table):
        return text
    units = "|".join(map(re.escape, sorted((u for u in _units(code)[0] if u.isalpha()), key=len, reverse=True)))
    pattern = r"\b(" + "|".join(map(re.escape, table)) + r")\b(?=\s+(?:" + units + r")\b)"
    return re.sub(pattern, lambda m: table.get(m.group(1).casefold(), m.group(1)), text, flags=re.I)


#: Words for "the past ..." that the parser does not read before a time unit without a number
#: ("the past month", "im vergangenen Monat", "el último mes", "de afgelopen maand"): a 1 is put
#: between ("the past 1 month"), which the parser reads as a duration, a span up to now. Calendar
#: words the parser knows ("last month", "letzten Monat", "el mes pasado") are left to it.
_PAST: dict[str, tuple[str, ...]] = {
    "en": ("past",),
    "de": ("vergangenen", "vergangene", "vergangener"),
    "es": ("último", "última"),
    "fr": ("dernier", "dernière", "derniers", "dernières"),
    "pt": ("último", "última"),
    "it": ("ultimo", "ultima"),
    "nl": ("afgelopen",),
}


def _units(code: str) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """The parser's words for a language's time units (day, week, month, year, their plurals),
    its month and weekday names, and its words for "ago" (``vor``, ``hace``, ``il y a``, 前)."""
    cached = _PARSER_STATE.get(("units", code))
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    from dateparser.languages.loader import LocaleDataLoader

    info = LocaleDataLoader().get_locale(code).info

    def entries(*keys: str) -> list[str]:
        return [str(e).casefold() for k in keys for e in info.get(k, []) if isinstance(e, str)]

    units = frozenset(e for e in entries("day", "week", "month", "year") if len(e) >= 3 or code == "zh")
    months = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october"]
    days = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    names = frozenset(entries(*months, "november", "december", *days))
    found = (units, names, tuple(entries("ago")))
    _PARSER_STATE[("units", code)] = found
    return found


def _with_past_one(text: str, code: str) -> str:
    """``text`` with a 1 between a word of :data:`_PAST` and the time unit right after it, and
    such a word between a number and its unit left out ("ces 3 derniers jours": "ces 3 jours",
    which the parser finds)."""
    words = _PAST.get(code)
    if not words or not any(w in text.casefold() for w in words):
        return text
    units = "|".join(map(re.escape, sorted((u for u in _units(code)[0] if u.isalpha()), key=len, reverse=True)))
    past = "|".join(map(re.escape, words))
    number = "|".join([r"\d+", *map(re.escape, _NUMBERS.get(code, ()))])
    text = re.sub(r"\b(" + number + r")\s+(?:" + past + r")\s+(" + units + r")\b", r"\1 \2", text, flags=re.I)
    return re.sub(r"\b(" + past + r")\s+(" + units + r")\b", r"\1 1 \2", text, flags=re.I)


def _is_duration(found: str, text: str, code: str) -> bool:
    """Whether the parser's find in ``text`` is a bare duration ("3 days", "2 Wochen", "1个月"):
    a number and a time unit, no month or weekday name, and no word for "ago" in it or around it
    ("3 days ago", "il y a 3 jours", found as "a 3 jours", are a day)."""
    folded = found.casefold()
    if not any(ch.isdigit() for ch in folded):
        return False
    units, names, ago = _units(code)
    if code == "zh":
        return any(u in folded for u in units) and not any(a in folded for a in ago)
    words = set(_WORD.findall(folded))
    if not words & units or words & names:
        return False
    where = text.casefold().find(folded)
    around = text.casefold()[max(where - 12, 0) : where + len(folded) + 12] if where >= 0 else folded
    spaced = f" {' '.join(_WORD.findall(around))} "
    return not any(f" {a} " in spaced for a in ago)


def _search(search_dates: Any, text: str, code: str, settings: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The parser's finds in ``text`` as ``(text, date, period)``: the periods come with the
    search from dateparser 1.5 on (``add_period``); an older one gives None (read again)."""
    try:
        found = search_dates(text, languages=[code], settings=settings, add_period=True) or []
    except TypeError:  # dateparser before 1.5: no add_period
        return [(f[0], None, None) for f in search_dates(text, languages=[code], settings=settings) or []]
    return [(f[0], f[1], f[2]) for f in found]


def time_window(utterance: str, now: datetime, lang: str | None = None) -> Window | None:
    """The window of time the utterance's time words name ("yesterday", "last week", "in May",
    "two days ago", "letzte Woche", "上周"), in ``now``'s time zone, or None when it names none
    (or the parser, the ``dates`` extra, is not installed).

    ``dateparser`` finds the words and says their period (day, week, month, year); the window
    is that whole period: a day from midnight, a week from Monday, a calendar month or year;
    several ("in March and April") span from the first to the end of the last. A duration
    ("the past 3 days", "in den letzten 2 Wochen", "过去一个月", and "the past month", read as
    one month) is a span, from the day that long ago to the end of today. A date after
    ``now`` is no window (memories are of the past). A found date whose words are
    all stop words ("we" read as Wednesday) is ignored.
    """
    return _window(utterance, now, language(lang), plain_english=True)


def _window(utterance: str, now: datetime, code: str, *, plain_english: bool) -> Window | None:
    """:func:`time_window` for a language code; ``plain_english`` False has the parser read
    what the plain English reader would (the warm-up: the parser's first search is its load)."""
    if not utterance.strip() or not parser_available():
        return None
    # the rewrites below only turn number words into digits and move "past" words, so an
    # utterance the gate turns away is turned away before them (not Chinese: "三天" becomes "3天")
    if code != "zh" and not _might_say_when(utterance, code):
        return None
    text = _with_digits(_with_past_one(utterance, code), code)
    if not _might_say_when(text, code):
        return None
    from dateparser.date import DateDataParser
    from dateparser.search import search_dates

    from ovos_memory_plugins.text import stop_words

    naive = now.replace(tzinfo=None)
    settings = {"RELATIVE_BASE": naive, "PREFER_DATES_FROM": "past", "RETURN_TIME_AS_PERIOD": True}
    stops = stop_words(code)
    candidates: list[tuple[str, datetime | None, str | None]] = []
    spans = _time_spans(text, code)
    finds: list[tuple[str, Any, Any]] | None = None
    if code == "en" and plain_english:
        counted = read_anchored_english(spans, naive, _vocabulary(code)[0])  # "the Monday before July 24"
        if counted is not None:
            return None if counted[0] > naive + timedelta(hours=1) else _stamps(counted, now)
        # the common phrases, read without the parser (what it would find)
        finds = read_plain_english(spans, naive, _vocabulary(code)[0], SPAN_WORDS)
    if finds is None:  # not one plain English phrase: the parser searches
        with _PARSER_LOCK:
            finds = _search(search_dates, spans, code, settings)
    for found, when, period in finds:
        words = _WORD.findall(found.casefold())
        if code == "zh" or len(words) > 1 or (words and words[0] not in stops):  # not "we" as Wednesday
            candidates.append((found, when, period))
    if not candidates:  # a phrase the search missed in a long sentence ("la semana pasada")
        folded = text.casefold()
        phrases = [p for p in _vocabulary(code)[1] if " " in p and p in folded][:1]
        candidates = [(p, None, None) for p in phrases]
    windows = []
    today = naive.replace(hour=0, minute=0, second=0, microsecond=0)
    parser: Any = None  # made when needed: its settings hold this turn's now
    for found, when, period in candidates:
        if when is None or period is None:  # not searched, or a parser without periods: read it
            parser = parser or DateDataParser(languages=[code], settings=settings)
            data = parser.get_date_data(found)
            when, period = data.date_obj, data.period
        if when is not None and when.tzinfo is not None:  # "yesterday UTC": the parser's zone, as now's
            when = when.astimezone(now.tzinfo or timezone.utc).replace(tzinfo=None)
        if when is None or when > naive + timedelta(hours=1):
            continue
        if _is_duration(found, text, code):  # "the past 3 days": from that day to the end of today
            windows.append((when.replace(hour=0, minute=0, second=0, microsecond=0), today + timedelta(days=1)))
        else:
            windows.append(whole_period(when, period or "day"))
    if not windows:
        return None
    # "in March and April": from the first to the end of the last
    return _stamps((min(w[0] for w in windows), max(w[1] for w in windows)), now)


def _stamps(span: tuple[datetime, datetime], now: datetime) -> Window:
    """A span of naive datetimes in ``now``'s clock as a window of timestamps."""
    zone = now.tzinfo or timezone.utc
    return span[0].replace(tzinfo=zone).timestamp(), span[1].replace(tzinfo=zone).timestamp()
