"""When a memory was made, said compactly in the memory's language (pure; no clock read here).

A memory's time is ``metadata["time"]`` (seconds since the epoch, set when the exchange was
recorded, ingested or imported; :func:`memory_time`). :func:`when_label` turns it into the
bracketed label the prompt puts before each recalled memory, relative to ``now`` (the memory's
``clock``)::

    both       2026-09-05, 3 months ago      2026-12-01 18:30, yesterday
    absolute   2026-09-05                    2026-12-01 18:30
    relative   3 months ago                  yesterday, 18:30

(``context.dates``; ``off``: no label). The date is always ``YYYY-MM-DD`` (read alike in every
language); today and yesterday add the time of day, ``HH:MM``. :func:`today_line` is the one
sentence that states today's date in the prompt. The phrases are small tables per language,
``ovos_memory_plugins/data/dates/<code>.json``
(:data:`LANGUAGES`: the stop-word languages and Chinese); any other language gets English.

A :data:`Clock` is the memories' ``clock=`` seam: a callable returning an aware ``datetime``
(:func:`system_clock` by default, the local time zone); dates are shown in ``now``'s zone.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from importlib import resources
from typing import Any, Literal

LOG = logging.getLogger(__name__)

__all__ = [
    "CONVERSATION_GAP_S",
    "DATES_MODES",
    "LANGUAGES",
    "Clock",
    "DatesMode",
    "Window",
    "clock_of",
    "language",
    "memory_time",
    "month_label",
    "newer_word",
    "relative_phrase",
    "stamp",
    "system_clock",
    "today_line",
    "when_label",
]

#: The memories' time source: an aware ``datetime`` (the seam tests and benchmarks set).
Clock = Callable[[], datetime]
DatesMode = Literal["both", "absolute", "relative", "off"]
DATES_MODES: tuple[str, ...] = ("both", "absolute", "relative", "off")
#: Consecutive exchanges more than this many seconds apart are not one stretch of a
#: conversation: the prompt shows them as separate memories, each with its own date.
CONVERSATION_GAP_S = 2 * 3600.0


def system_clock() -> datetime:
    """Now, in the machine's local time zone (the default :data:`Clock`)."""
    return datetime.now().astimezone()


def clock_of(clock: Clock | None) -> Clock:
    """``clock``, or :func:`system_clock` when None."""
    return system_clock if clock is None else clock


#: The languages with their own phrases (``ovos_memory_plugins/data/dates/<code>.json``); any
#: other gets English. Each file holds today, yesterday, "this month", "last month", the word
#: for the newer of two memories, "<n> <unit> ago" for one and for several of each unit (day,
#: week, month, year), "later", "Today is {weekday}, {date}." and the weekday names (Monday
#: first).
LANGUAGES: tuple[str, ...] = ("en", "de", "es", "fr", "pt", "it", "nl", "zh")


def _load_phrases(code: str) -> dict[str, Any]:
    raw = resources.files("ovos_memory_plugins").joinpath("data", "dates", f"{code}.json").read_text("utf-8")
    table: dict[str, Any] = json.loads(raw)
    return {key: tuple(value) if isinstance(value, list) else value for key, value in table.items()}


_PHRASES: dict[str, dict[str, Any]] = {code: _load_phrases(code) for code in LANGUAGES}


def language(lang: str | None) -> str:
    """The phrase table's code for ``lang`` (``"pt-BR"`` -> ``"pt"``, ``"zh_TW"`` -> ``"zh"``;
    unknown or None -> ``"en"``)."""
    code = (lang or "en").replace("_", "-").split("-")[0].lower()
    return code if code in _PHRASES else "en"


def memory_time(metadata: Mapping[str, Any]) -> float | None:
    """When a memory was made, from its metadata: ``time`` (epoch seconds, or an ISO 8601 string;
    ``created`` as a fallback); None when it has no usable time."""
    for key in ("time", "created"):
        value = metadata.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
            return float(value)
        if isinstance(value, str) and value.strip():
            try:
                when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                continue
            return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
    return None


def _local(ts: float, now: datetime) -> datetime:
    return datetime.fromtimestamp(ts, tz=now.tzinfo or timezone.utc)


def relative_phrase(ts: float, now: datetime, lang: str | None = None) -> str:
    """How long before ``now`` the time ``ts`` is, in ``lang``: today, yesterday, n days (2 to
    13), n weeks (to 59 days), n months (rounded, to a year), n whole years; "later" for a time
    after now."""
    return _phrase((now.date() - _local(ts, now).date()).days, _PHRASES[language(lang)])


def _phrase(days: int, words: Mapping[str, Any]) -> str:
    """:func:`relative_phrase` for a time ``days`` calendar days before now, in ``words``."""
    if days < 0:
        return str(words["later"])
    if days == 0:
        return str(words["today"])
    if days == 1:
        return str(words["yesterday"])
    if days < 14:
        unit, n = "day", days
    elif days < 60:
        unit, n = "week", days // 7
    else:
        months = round(days / 30.44)
        if months < 12:
            unit, n = "month", max(months, 2)
        else:
            unit, n = "year", max(int(days // 365.25), 1)
    one, many = words[unit]
    return str((one if n == 1 else many).format(n=n))


def when_label(ts: float | None, now: datetime, lang: str | None = None, mode: str = "both") -> str:
    """The label of a memory made at ``ts`` (see the module docstring), without brackets; empty
    when ``mode`` is ``off`` or ``ts`` is None."""
    if ts is None or mode == "off":
        return ""
    then = _local(ts, now)
    days = (now.date() - then.date()).days
    recent = days in (0, 1)
    clock = f"{then.hour:02d}:{then.minute:02d}"
    absolute = f"{_ymd(then)} {clock}" if recent else _ymd(then)
    if mode == "absolute":
        return absolute
    phrase = _phrase(days, _PHRASES[language(lang)])
    if mode == "relative":
        return f"{phrase}, {clock}" if recent else phrase
    return f"{absolute}, {phrase}"


def _ymd(when: datetime) -> str:
    """``YYYY-MM-DD`` (what ``strftime("%Y-%m-%d")`` gives, a few times cheaper)."""
    return f"{when.year:04d}-{when.month:02d}-{when.day:02d}"


def month_label(month: str, now: datetime, lang: str | None = None, mode: str = "both") -> str:
    """The label of a note dated by its month (``YYYY-MM``): ``2026-09, 3 months ago``,
    ``2026-12, this month``, ``2026-11, last month`` (``both`` and ``relative``; the month stays,
    since the notes' rule "the newer [YYYY-MM] date wins" reads it); the month alone for
    ``absolute`` and ``off``, and for a text that is no ``YYYY-MM`` month."""
    if mode in ("off", "absolute") or not re.fullmatch(r"\d{4}-\d{2}", month):
        return month
    words = _PHRASES[language(lang)]
    year, number = int(month[:4]), int(month[5:])
    behind = (now.year - year) * 12 + now.month - number
    if behind < 0:
        phrase = str(words["later"])
    elif behind == 0:
        phrase = str(words["this_month"])
    elif behind == 1:
        phrase = str(words["last_month"])
    elif behind < 12:
        phrase = str(words["month"][1]).format(n=behind)
    else:
        n = behind // 12
        phrase = str(words["year"][0 if n == 1 else 1]).format(n=n)
    return f"{month}, {phrase}"


def today_line(now: datetime, lang: str | None = None) -> str:
    """The sentence stating today's date, in ``lang`` (``Today is Wednesday, 2026-12-02.``)."""
    words = _PHRASES[language(lang)]
    return str(words["now"]).format(weekday=words["weekdays"][now.weekday()], date=_ymd(now))


def newer_word(lang: str | None = None) -> str:
    """The word that marks the newer of memories that disagree, in ``lang``."""
    return str(_PHRASES[language(lang)]["newer"])


def stamp(metadata: Mapping[str, Any]) -> str:
    """When a memory was made as ``YYYY-MM-DD HH:MM`` in the local time zone (``ovos-memory
    search``, the editor); empty when its metadata has no time."""
    made = memory_time(metadata)
    if made is None:
        return ""
    try:
        return datetime.fromtimestamp(made).astimezone().strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return ""


#: A window of time: ``(since, until)`` in seconds since the epoch, ``until`` excluded.
Window = tuple[float, float]

#: Names that moved to :mod:`ovos_memory_plugins.time_words` (the window parser); importable
#: from here for a release.
_MOVED = frozenset({"parser_available", "time_window", "warm_parser"})


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from ovos_memory_plugins import time_words

        return getattr(time_words, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
