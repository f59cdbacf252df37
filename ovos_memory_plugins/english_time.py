"""The plain English time phrases read without the parser: what ``dateparser`` would find in
them, at a twentieth of its cost.

A turn that names a time ("what did I say yesterday?", "when did we go camping in June?",
"the trip 2 weeks ago") paid the parser's search, about two milliseconds, most of such a turn.
:func:`read_plain_english` reads the common forms itself:

- ``[in|on] <day> <Month>[,] <year>``, ``[in|on] <Month> <day>[,] <year>`` (a day; the day may
  carry its ordinal, "23rd"), ``<Month>[,] <year>`` (a month), ``[in|on] <Month>`` (a month, this
  year's or last year's, whichever is past), ``<Month> <day>`` and ``<day> <Month>`` (a day, the
  past one), ``<year>`` (a year); a month by its name or its first three letters ("Aug", and
  "Sept");
- ``yesterday``, ``today``, ``last week|month|year``, ``last weekend`` (last week, as the
  parser reads it);
- ``<n> day(s)|week(s)|month(s)|year(s) ago`` and ``past <n> <unit>`` (number words are digits
  by then: the caller's rewrites turn "two weeks" and "the past month" into "2 weeks" and
  "the past 1 month").

It answers only when the text holds exactly one such phrase and nothing else the parser might
read: every time word of the text is in the phrase, the words inside it are plain, and the
words around it (as far as the parser's search looks, :data:`~ovos_memory_plugins.time_words.SPAN_WORDS`)
are plain ASCII words or their possessives ("John's") none of which the parser gives a
meaning near a date (:data:`NEAR_DENIED`: number words, times of day, clock units, time zones,
"a", "we" read as Wednesday). Otherwise it answers None and the parser reads the text as
before. A text whose only time words are units asked for ("what year", "which month's", "how
many weeks") or ages ("one-year-old"), among plain words, names no time: no finds, as the
parser would say. The forms
and the denied words were chosen by comparing both readers' windows over the time-word cases
and LoCoMo's questions at random nows, and over every form beside every word the English
parser knows (and every time zone it knows); ``tests/parts/test_english_time.py`` keeps that
comparison.

:func:`read_anchored_english` reads what the parser reads badly: a time counted from a date
("the Monday before July 24, 2023", "between August 11 and August 15 2023"), as a window from
the time counted to the date.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

__all__ = [
    "NEAR_DENIED",
    "Find",
    "Span",
    "is_time_token",
    "read_anchored_english",
    "read_plain_english",
    "whole_period",
]

#: A find as the parser's search gives it: the words, the date they name, their period.
Find = tuple[str, datetime, str]

_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, start=1)}
_MONTHS |= {name[:3]: number for name, number in _MONTHS.items()} | {"sept": 9}  # "Aug 15th"
_UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week"}
_UNITS |= {"month": "month", "months": "month", "year": "year", "years": "year"}
_PREPOSITIONS = frozenset({"in", "on"})
_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred"
)
_CLOCK_WORDS = (
    "am pm noon midnight tonight morning afternoon evening night early now ago before after later "
    "less than h hour hours hr hrs m min mins minute minutes s sec secs second seconds wk y yr "
    "century centuries decade decades fortnight fortnights weekend next this last past coming"
)
#: Abbreviations the parser reads as weekdays or months ("we", "tu", "th", "fr", "sa", "su",
#: "mo", "d"), and single letters it reads as units or zones.
_SHORT_WORDS = "we tu th fr sa su mo d p q z a an"
#: Words that change what the parser reads when they stand near a date: a phrase beside one of
#: them is left to the parser. Time-zone names are added from the parser's own list
#: (:func:`_zone_names`) where they change its reading.
NEAR_DENIED: frozenset[str] = frozenset((_NUMBER_WORDS + " " + _CLOCK_WORDS + " " + _SHORT_WORDS).split())
_ZONES = frozenset({"gmt", "utc", "ut", "z"})

_LEAD = "\"'(“‘"
_TRAIL = ".,?!;:\"')”’"
_DAY = re.compile(r"(\d{1,2})(st|nd|rd|th)?")
_YEAR_TOKEN = re.compile(r"(19|20)\d\d")
_WORD = re.compile(r"\w+")
_YEAR = re.compile(r"\b(19|20)\d\d\b")
_PLAIN_NEAR = re.compile(r"[a-z]+(['’]s)?")  # a word or its possessive ("John's")
#: Words before a bare unit that ask for a time rather than name one ("what year", "how many weeks").
_ASKING = frozenset({"what", "which", "many"})
#: An age, not a time: "one-year-old", "3-month-old" ("-olds" too).
_AGE = re.compile(r"(\d{1,3}|" + "|".join(_NUMBER_WORDS.split()) + r")-(day|week|month|year)s?-olds?(['’]s)?")


def _day_number(core: str) -> int | None:
    """The day a token names ("3", "23rd"), its ordinal right for the number, or None."""
    match = _DAY.fullmatch(core)
    if match is None:
        return None
    day, suffix = int(match.group(1)), match.group(2)
    if suffix and suffix != ({1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th") if day // 10 != 1 else "th"):
        return None
    return day if 1 <= day <= 31 else None


def _date(year: int, month: int, day: int) -> datetime | None:
    try:
        return datetime(year, month, day)
    except ValueError:
        return None


def _months_before(now: datetime, months: int) -> datetime:
    """``now`` that many calendar months earlier, the day clipped to the month's last."""
    index = now.year * 12 + now.month - 1 - months
    year, month = divmod(index, 12)
    day = now.day
    while _date(year, month + 1, day) is None:
        day -= 1
    return now.replace(year=year, month=month + 1, day=day)


def _before(now: datetime, count: int, unit: str) -> datetime:
    if unit == "day":
        return now - timedelta(days=count)
    if unit == "week":
        return now - timedelta(weeks=count)
    return _months_before(now, count * (12 if unit == "year" else 1))


class _Tokens:
    """The text split on spaces: each token's core (casefolded, its quotes and closing
    punctuation stripped) and what was stripped off its end."""

    def __init__(self, text: str) -> None:
        self.raw = text.split()
        self.cores: list[str] = []
        self.tails: list[str] = []
        for token in self.raw:
            opened = token.lstrip(_LEAD)
            core = opened.rstrip(_TRAIL)
            self.cores.append(core.casefold())
            self.tails.append(opened[len(core) :])

    def __len__(self) -> int:
        return len(self.raw)

    def core(self, i: int) -> str:
        return self.cores[i] if 0 <= i < len(self.cores) else ""


#: A phrase read: its first and past-the-end token, the token its find starts at, and the find.
_Phrase = tuple[int, int, int, datetime, str]


def _month_day(month: int, day: int, now: datetime, start: int, end: int) -> _Phrase | None:
    """ "May 3" without a year: this year's if it is past, else last year's."""
    year = now.year if (month, day) <= (now.month, now.day) else now.year - 1
    when = _date(year, month, day)
    return None if when is None else (start, end, start, when, "day")


def _read_date(tokens: _Tokens, i: int, start: int, now: datetime) -> _Phrase | None:
    """A date starting at token ``i`` (a day number, a month name or a year), ``start``
    being the preposition before it when there is one."""
    core = tokens.core
    day = _day_number(core(i))
    if day is not None and core(i + 1) in _MONTHS:  # 23 May [2023]
        month = _MONTHS[core(i + 1)]
        if _YEAR_TOKEN.fullmatch(core(i + 2)):
            when = _date(int(core(i + 2)), month, day)
            return None if when is None else (start, i + 3, start, when, "day")
        return None if core(i + 2).isdigit() else _month_day(month, day, now, start, i + 2)
    if core(i) in _MONTHS:
        month = _MONTHS[core(i)]
        day = _day_number(core(i + 1))
        if day is not None:  # May 23[,] [2023]
            if _YEAR_TOKEN.fullmatch(core(i + 2)):
                when = _date(int(core(i + 2)), month, day)
                return None if when is None else (start, i + 3, start, when, "day")
            return None if core(i + 2).isdigit() else _month_day(month, day, now, start, i + 2)
        if _YEAR_TOKEN.fullmatch(core(i + 1)):  # July[,] 2023
            return start, i + 2, start, datetime(int(core(i + 1)), month, min(now.day, 28)), "month"
        if core(i) == "may" and start == i:  # "may" alone is the verb
            return None
        year = now.year if month <= now.month else now.year - 1  # [in] June: the past one
        return start, i + 1, start, datetime(year, month, min(now.day, 28)), "month"
    if _YEAR_TOKEN.fullmatch(core(i)):  # [in] 2023
        year = int(core(i))
        when = datetime(year, 1, 1) if year != now.year else now.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, i + 1, start, when, "year"
    return None


def _read_phrase(tokens: _Tokens, i: int, now: datetime) -> _Phrase | None:
    """The phrase whose first time word is token ``i``, or None when it is none of the forms."""
    core = tokens.core
    word = core(i)
    if word in ("yesterday", "today"):
        return i, i + 1, i, now - timedelta(days=1 if word == "yesterday" else 0), "day"
    if word == "last" and core(i + 1) in ("year", "month", "week", "weekend"):
        unit = "week" if core(i + 1) == "weekend" else core(i + 1)  # the parser's "last weekend": last week
        return i, i + 2, i, _before(now, 1, unit), unit
    if word.isdigit() and core(i + 1) in _UNITS:
        count, unit = int(word), _UNITS[core(i + 1)]
        if word.startswith("0") or count > 100 or core(i - 1) == "in":  # "in 4 years ago": no date
            return None
        if core(i + 2) == "ago":  # 2 weeks ago
            start, end = i, i + 3
        elif core(i - 1) == "past":  # the past 3 days (a duration: the caller tells it by "past")
            start, end = i - 1, i + 2
        else:
            return None
        if core(end) == "in":
            return None
        return start, end, i, _before(now, count, unit), unit
    start = i - 1 if core(i - 1) in _PREPOSITIONS else i
    return _read_date(tokens, i, start, now)


def _commas_allowed(tokens: _Tokens, start: int, end: int) -> set[int]:
    """The tokens of a date that may end in a comma: a day or month before a year."""
    return {
        k
        for k in range(start, end - 1)
        if tokens.core(k) not in _PREPOSITIONS and _YEAR_TOKEN.fullmatch(tokens.core(k + 1))
    }


def read_plain_english(text: str, now: datetime, time_words: frozenset[str], span_words: int) -> list[Find] | None:
    """The parser's finds in ``text`` (``[(words, date, period)]``, dates naive in ``now``'s
    clock) when the text holds one plain English time phrase and nothing else the parser might
    read; None when it holds anything else, for the parser to read. ``time_words`` are the
    parser's own words (a token holding one, a number or a year is a time token);
    ``span_words`` is how far from the phrase the parser's reading can be changed."""
    tokens = _Tokens(text)
    times = [i for i, token in enumerate(tokens.raw) if is_time_token(token, time_words)]
    if not times:
        return None
    if _asks_for_a_time(tokens, times, span_words):
        return []
    phrase = _read_phrase(tokens, times[0], now.replace(tzinfo=None))
    if phrase is None:
        return None
    start, end, found_from, when, period = phrase
    if any(not start <= i < end for i in times):
        return None
    commas = _commas_allowed(tokens, start, end)
    for k in range(start, end):
        if k > start and tokens.raw[k][:1] in _LEAD:
            return None
        if not _WORD.fullmatch(tokens.cores[k]):
            return None
        if k < end - 1 and tokens.tails[k] and not (tokens.tails[k] == "," and k in commas):
            return None
    if not _plain_around(tokens, start, end, span_words):
        return None
    return [(" ".join(tokens.cores[found_from:end]), when, period)]


def _plain_around(tokens: _Tokens, start: int, end: int, span_words: int) -> bool:
    """Whether the words as far as ``span_words`` around tokens ``start:end`` are plain: ASCII
    words or their possessives, none of which the parser gives a meaning near a date."""
    for k in range(max(0, start - span_words), min(len(tokens), end + span_words)):
        if start <= k < end:
            continue
        near = tokens.cores[k]
        if near and (not _PLAIN_NEAR.fullmatch(near) or near in NEAR_DENIED or near in _ZONES):
            return False
    return True


def _asks_for_a_time(tokens: _Tokens, times: list[int], span_words: int) -> bool:
    """Whether every time token is a bare unit asked for ("what year", "which month's game",
    "how many weeks passed") or an age ("John's one-year-old child"), among plain words: no time
    named, nothing for the parser to find."""
    for i in times:
        if _AGE.fullmatch(tokens.cores[i]) and tokens.raw[i][:1].isalnum():
            if not _plain_around(tokens, i, i + 1, span_words):
                return False
            continue
        unit = tokens.cores[i]
        if unit.endswith(("'s", "’s")):
            unit = unit[:-2]
        if unit not in _UNITS or tokens.core(i - 1) not in _ASKING or not tokens.raw[i][:1].isalpha():
            return False
        if not _plain_around(tokens, i - 1, i + 1, span_words):
            return False
    return True


def is_time_token(token: str, words: frozenset[str]) -> bool:
    """Whether a token holds a time word of ``words``, a number or a four-digit year."""
    folded = token.casefold()
    if _YEAR.search(folded):
        return True
    return any(
        w in words or w.isdigit() or (w[:1].isdigit() and _day_number(w) is not None)  # "8th"
        for w in _WORD.findall(folded)
    )


# -- a time counted from a date: "the Monday before July 24, 2023" -----------------------------

_WEEKDAYS = {
    name: number
    for number, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
}
_PIVOTS = frozenset({"before", "after"})
#: Words that may open the offset ("the Monday before", "last weekend before", "a week after").
_OFFSET_OPENERS = frozenset({"the", "last", "a", "that"})

#: A window of naive datetimes, ``[since, until)``.
Span = tuple[datetime, datetime]


def _midnight(when: datetime) -> datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


def whole_period(when: datetime, period: str) -> Span:
    """The whole day, week (from Monday), month or year holding ``when`` (any other period: its day)."""
    start = _midnight(when)
    if period == "week":
        start -= timedelta(days=start.weekday())
        return start, start + timedelta(days=7)
    if period == "month":
        start = start.replace(day=1)
        return start, (start + timedelta(days=32)).replace(day=1)
    if period == "year":
        start = start.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    return start, start + timedelta(days=1)


def _shifted(day: datetime, count: int, unit: str) -> datetime:
    """``day`` moved ``count`` units (negative: earlier), months clipped to their last day."""
    if unit in ("day", "week"):
        return day + timedelta(days=count * (7 if unit == "week" else 1))
    return _months_before(day, -count * (12 if unit == "year" else 1))


def _offset(tokens: _Tokens, pivot: int) -> tuple[int, str, int] | None:
    """The offset ending right before the pivot word: its first token, its kind and its
    count. The kinds: a unit (``"2 weeks before"``, count 2), a weekday name, ``"weekend"``,
    and ``"the day"`` and ``"the week"`` (count 1: one day, seven days)."""
    core = tokens.core
    word = core(pivot - 1)
    if word in _UNITS and core(pivot - 2).isdigit():  # 2 weeks before
        count = int(core(pivot - 2))
        if core(pivot - 2).startswith("0") or not 0 < count <= 100:
            return None
        return pivot - 2, _UNITS[word], count
    opened = core(pivot - 2) in _OFFSET_OPENERS
    if word in _WEEKDAYS or word == "weekend":
        return (pivot - 2 if opened else pivot - 1), word, 1
    if word in ("day", "week") and opened:  # the day before, a week after
        return pivot - 2, f"the {word}", 1
    return None


def _counted_from(anchor: datetime, kind: str, count: int, after: bool) -> Span:
    """The window from the anchor day to the time ``kind`` counts from it, both included: a
    memory of that time may be dated the day it happened or the day it was told about."""
    day = _midnight(anchor)
    weekday = day.weekday()
    if kind in _WEEKDAYS:  # the nearest such weekday, strictly before or after
        gap = ((_WEEKDAYS[kind] - weekday) if after else (weekday - _WEEKDAYS[kind])) % 7 or 7
        other = whole_period(day + timedelta(days=gap if after else -gap), "day")
    elif kind == "weekend":  # the Saturday and Sunday wholly after, or before, the anchor day
        if after:
            saturday = day + timedelta(days=(5 - weekday) % 7 or 7)
        else:
            back = (weekday - 5) % 7
            saturday = day - timedelta(days=back if back >= 2 else back + 7)
        other = (saturday, saturday + timedelta(days=2))
    elif kind in ("the day", "the week"):  # one day, or seven days, away
        other = whole_period(day + timedelta(days=(1 if kind == "the day" else 7) * (1 if after else -1)), "day")
    else:  # <count> <unit>: that day's whole week, month or year
        other = whole_period(_shifted(day, count if after else -count, kind), kind)
    return min(day, other[0]), max(day + timedelta(days=1), other[1])


def _one_date(tokens: _Tokens, i: int, now: datetime) -> tuple[int, datetime, str] | None:
    """A date at token ``i`` (as :func:`_read_date`): its past-the-end token, date and period."""
    read = _read_date(tokens, i, i, now)
    return None if read is None else (read[1], read[3], read[4])


def read_anchored_english(text: str, now: datetime, time_words: frozenset[str]) -> Span | None:
    """The window an English time counted from a date names, when the text holds one such
    phrase and no other time word; None otherwise (the other readers read the text).

    - ``[the|last] <weekday>|weekend before|after <date>``: from that weekday (that Saturday
      and Sunday) to the date;
    - ``<n> day(s)|week(s)|month(s)|year(s) before|after <date>``: from that day's whole week
      (month, year) to the date;
    - ``the day|week before|after <date>``: the day, the seven days, to the date;
    - ``between <date> and <date>`` (the first taking the second's year when it has none).

    The window holds both ends, dates naive in ``now``'s clock: a memory of "the Monday
    before July 24" may be dated that Monday or the 24th, when it was told about. The date is
    a day ("July 24, 2023", "24 July", "July 24": the past one); for ``between``, a month or a
    year as well. The parser reads these phrases as the date alone, or as a span to today.
    """
    tokens = _Tokens(text)
    times = [i for i, token in enumerate(tokens.raw) if is_time_token(token, time_words)]
    if not times:
        return None
    now = now.replace(tzinfo=None)
    read = _read_counted(tokens, now) or _read_between(tokens, now)
    if read is None:
        return None
    start, end, window = read
    if any(not start <= i < end for i in times):
        return None
    for k in range(start, end - 1):  # a comma only where a date has one (before its year)
        if tokens.tails[k] and not (tokens.tails[k] == "," and _YEAR_TOKEN.fullmatch(tokens.core(k + 1))):
            return None
        if not _WORD.fullmatch(tokens.cores[k]):
            return None
    return window


def _read_counted(tokens: _Tokens, now: datetime) -> tuple[int, int, Span] | None:
    pivots = [i for i, core in enumerate(tokens.cores) if core in _PIVOTS]
    if len(pivots) != 1:
        return None
    pivot = pivots[0]
    offset = _offset(tokens, pivot)
    date = _one_date(tokens, pivot + 1, now)
    if offset is None or date is None or date[2] != "day":
        return None
    first, kind, count = offset
    return first, date[0], _counted_from(date[1], kind, count, tokens.core(pivot) == "after")


def _read_between(tokens: _Tokens, now: datetime) -> tuple[int, int, Span] | None:
    if tokens.cores.count("between") != 1:
        return None
    i = tokens.cores.index("between")
    first = _one_date(tokens, i + 1, now)
    if first is None or tokens.core(first[0]) != "and":
        return None
    second = _one_date(tokens, first[0] + 1, now)
    if second is None:
        return None
    since = first[1]
    has_year = any(_YEAR_TOKEN.fullmatch(tokens.core(k)) for k in range(i + 1, first[0]))
    if not has_year and any(_YEAR_TOKEN.fullmatch(tokens.core(k)) for k in range(first[0] + 1, second[0])):
        moved = _date(second[1].year, since.month, since.day)  # "between August 11 and August 15 2023"
        if moved is None:
            return None
        since = moved
    window = whole_period(since, first[2])[0], whole_period(second[1], second[2])[1]
    return (i, second[0], window) if window[0] < window[1] else None
