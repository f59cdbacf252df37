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
sentence that states today's date in the prompt. The phrases are small tables per language
(:data:`LANGUAGES`: the stop-word languages and Chinese); any other language gets English.

A :data:`Clock` is the memories' ``clock=`` seam: a callable returning an aware ``datetime``
(:func:`system_clock` by default, the local time zone); dates are shown in ``now``'s zone.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
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


# Per language: today, yesterday, "<n> <unit> ago" for one and for several of each unit (day,
# week, month, year), "Today is {weekday}, {date}." and the weekday names (Monday first).
_EN = {
    "today": "today",
    "newer": "newer",
    "this_month": "this month",
    "last_month": "last month",
    "yesterday": "yesterday",
    "day": ("{n} day ago", "{n} days ago"),
    "week": ("{n} week ago", "{n} weeks ago"),
    "month": ("{n} month ago", "{n} months ago"),
    "year": ("{n} year ago", "{n} years ago"),
    "later": "later",
    "now": "Today is {weekday}, {date}.",
    "weekdays": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
}
_PHRASES: dict[str, dict[str, Any]] = {
    "en": _EN,
    "de": {
        "today": "heute",
        "newer": "neuer",
        "this_month": "diesen Monat",
        "last_month": "letzten Monat",
        "yesterday": "gestern",
        "day": ("vor {n} Tag", "vor {n} Tagen"),
        "week": ("vor {n} Woche", "vor {n} Wochen"),
        "month": ("vor {n} Monat", "vor {n} Monaten"),
        "year": ("vor {n} Jahr", "vor {n} Jahren"),
        "later": "später",
        "now": "Heute ist {weekday}, der {date}.",
        "weekdays": ("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag"),
    },
    "es": {
        "today": "hoy",
        "newer": "más reciente",
        "this_month": "este mes",
        "last_month": "el mes pasado",
        "yesterday": "ayer",
        "day": ("hace {n} día", "hace {n} días"),
        "week": ("hace {n} semana", "hace {n} semanas"),
        "month": ("hace {n} mes", "hace {n} meses"),
        "year": ("hace {n} año", "hace {n} años"),
        "later": "después",
        "now": "Hoy es {weekday}, {date}.",
        "weekdays": ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
    },
    "fr": {
        "today": "aujourd'hui",
        "newer": "plus récent",
        "this_month": "ce mois-ci",
        "last_month": "le mois dernier",
        "yesterday": "hier",
        "day": ("il y a {n} jour", "il y a {n} jours"),
        "week": ("il y a {n} semaine", "il y a {n} semaines"),
        "month": ("il y a {n} mois", "il y a {n} mois"),
        "year": ("il y a {n} an", "il y a {n} ans"),
        "later": "plus tard",
        "now": "Nous sommes le {weekday} {date}.",
        "weekdays": ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
    },
    "pt": {
        "today": "hoje",
        "newer": "mais recente",
        "this_month": "este mês",
        "last_month": "o mês passado",
        "yesterday": "ontem",
        "day": ("há {n} dia", "há {n} dias"),
        "week": ("há {n} semana", "há {n} semanas"),
        "month": ("há {n} mês", "há {n} meses"),
        "year": ("há {n} ano", "há {n} anos"),
        "later": "depois",
        "now": "Hoje é {weekday}, {date}.",
        "weekdays": (
            "segunda-feira",
            "terça-feira",
            "quarta-feira",
            "quinta-feira",
            "sexta-feira",
            "sábado",
            "domingo",
        ),
    },
    "it": {
        "today": "oggi",
        "newer": "più recente",
        "this_month": "questo mese",
        "last_month": "il mese scorso",
        "yesterday": "ieri",
        "day": ("{n} giorno fa", "{n} giorni fa"),
        "week": ("{n} settimana fa", "{n} settimane fa"),
        "month": ("{n} mese fa", "{n} mesi fa"),
        "year": ("{n} anno fa", "{n} anni fa"),
        "later": "dopo",
        "now": "Oggi è {weekday}, {date}.",
        "weekdays": ("lunedì", "martedì", "mercoledì", "giovedì", "venerdì", "sabato", "domenica"),
    },
    "nl": {
        "today": "vandaag",
        "newer": "nieuwer",
        "this_month": "deze maand",
        "last_month": "vorige maand",
        "yesterday": "gisteren",
        "day": ("{n} dag geleden", "{n} dagen geleden"),
        "week": ("{n} week geleden", "{n} weken geleden"),
        "month": ("{n} maand geleden", "{n} maanden geleden"),
        "year": ("{n} jaar geleden", "{n} jaar geleden"),
        "later": "later",
        "now": "Vandaag is het {weekday} {date}.",
        "weekdays": ("maandag", "dinsdag", "woensdag", "donderdag", "vrijdag", "zaterdag", "zondag"),
    },
    "zh": {
        "today": "今天",
        "newer": "较新",
        "this_month": "本月",
        "last_month": "上个月",
        "yesterday": "昨天",
        "day": ("{n}天前", "{n}天前"),
        "week": ("{n}周前", "{n}周前"),
        "month": ("{n}个月前", "{n}个月前"),
        "year": ("{n}年前", "{n}年前"),
        "later": "之后",
        "now": "今天是{date}，{weekday}。",
        "weekdays": ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"),
    },
}
#: The languages with their own phrases; any other gets English.
LANGUAGES: tuple[str, ...] = tuple(_PHRASES)


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
    words = _PHRASES[language(lang)]
    then = _local(ts, now)
    days = (now.date() - then.date()).days
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
    absolute = then.strftime("%Y-%m-%d %H:%M" if recent else "%Y-%m-%d")
    if mode == "absolute":
        return absolute
    phrase = relative_phrase(ts, now, lang)
    if mode == "relative":
        return f"{phrase}, {then.strftime('%H:%M')}" if recent else phrase
    return f"{absolute}, {phrase}"


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
    return str(words["now"]).format(weekday=words["weekdays"][now.weekday()], date=now.strftime("%Y-%m-%d"))


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
