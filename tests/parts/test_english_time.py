"""The plain English reader: the forms it reads, what it leaves to the parser, and the same
windows as the parser it stands in for (on the time-word cases and on a grid of every form
beside plain and denied words, at two nows)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ovos_memory_plugins import time_words
from ovos_memory_plugins.english_time import NEAR_DENIED, read_plain_english

pytest.importorskip("dateparser", reason="the dates extra (dateparser) is not installed")

NOW = datetime(2023, 8, 15, 12, 0)
WORDS = frozenset({"may", "june", "july", "december", "october", "yesterday", "today", "last", "ago"})
WORDS |= frozenset({"year", "years", "month", "months", "week", "weeks", "day", "days", "aug", "sept"})


def read(text: str) -> list[tuple[str, datetime, str]] | None:
    return read_plain_english(text, NOW, WORDS, time_words.SPAN_WORDS)


@pytest.mark.parametrize(
    ("text", "found", "when", "period"),
    [
        ("what did I say yesterday?", "yesterday", datetime(2023, 8, 14, 12), "day"),
        ("camping in June", "in june", datetime(2023, 6, 15), "month"),
        ("camping in December", "in december", datetime(2022, 12, 15), "month"),  # the past one
        ("on October 13, 2022", "on october 13 2022", datetime(2022, 10, 13), "day"),
        ("on 1 July, 2021 I met", "on 1 july 2021", datetime(2021, 7, 1), "day"),
        ("May 23rd, 2023", "may 23rd 2023", datetime(2023, 5, 23), "day"),
        ("in July 2021", "in july 2021", datetime(2021, 7, 15), "month"),
        ("what happened in 2019", "in 2019", datetime(2019, 1, 1), "year"),
        ("the party last month", "last month", datetime(2023, 7, 15, 12), "month"),
        ("the trip 2 weeks ago", "2 weeks ago", datetime(2023, 8, 1, 12), "week"),
        ("the past 3 days", "3 days", datetime(2023, 8, 12, 12), "day"),
        ("reading on 8th December, 2022?", "on 8th december 2022", datetime(2022, 12, 8), "day"),  # an ordinal first
        ("they met on Aug 15th?", "on aug 15th", datetime(2023, 8, 15), "day"),  # a short month name
        ("John's job in Sept 2022?", "in sept 2022", datetime(2022, 9, 15), "month"),  # a possessive beside it
        ("volunteer at last weekend?", "last weekend", datetime(2023, 8, 8, 12), "week"),  # the parser's: last week
    ],
)
def test_the_plain_forms_are_read(text: str, found: str, when: datetime, period: str) -> None:
    assert read(text) == [(found, when, period)]


@pytest.mark.parametrize(
    "text",
    [
        "what may I do",  # "may" alone is the verb
        "yesterday and last week",  # two phrases
        "yesterday at noon",  # a time of day near it
        "a year ago",  # "a": the parser's reading changes
        "we went camping in June",  # "we": Wednesday to the parser
        "yesterday UTC",  # a time zone
        "on May 23nd, 2023",  # a wrong ordinal
        "on February 30, 2023",  # no such day
        "in 4 years ago",
        "yesterday—at the beach",  # not a plain word beside it
        "2 weeks from now",
        "which week, yesterday?",  # a time named beside the one asked for
        "what 3 years",
    ],
)
def test_anything_else_is_left_to_the_parser(text: str) -> None:
    assert read(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "What year did John start",
        "In which month's game did he score",
        "How many weeks passed",
        "the name of John's one-year-old child?",  # an age
        "my 3-year-old son's toy",
        "two-month-olds",
    ],
)
def test_a_time_asked_for_is_no_find(text: str) -> None:
    assert read(text) == []  # nothing named: no parser search, no window


FORMS = [
    "in June", "in May", "June", "in December", "in 2023", "in 2019", "2022", "in July 2023",
    "on October 13, 2023", "on 1 February, 2023", "May 23rd, 2023", "23 May 2023", "on May 3",
    "March 15th", "last year", "last month", "last week", "yesterday", "today", "4 years ago",
    "2 weeks ago", "1 day ago", "3 months ago", "the past 3 days", "the past 1 month", "a year ago",
    "on 8th December, 2022", "15th March", "on Aug 15th", "in Sept 2022", "Dec 3", "what year", "which month's",
    "how many weeks", "last weekend", "one-year-old", "3-year-old", "two-month-old",
]  # fmt: skip
NOWS = [datetime(2023, 8, 15, 12, tzinfo=timezone.utc), datetime(2024, 1, 3, 8, tzinfo=timezone.utc)]


def _beside(word: str) -> list[str]:
    """Each form with ``word`` before and after it, near and further off."""
    out = []
    for form in FORMS:
        out += [f"{word} {form}", f"{word} camping went {form}", f"{form} {word}", f"{form} trip beach {word}"]
        out += [f"What did Melanie do {word} {form}?", f"{form}, {word} house"]
    return out


def _both(text: str, now: datetime, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object, bool]:
    answered: list[bool] = []

    def counting(*args: object) -> object:
        finds = read_plain_english(*args)  # type: ignore[arg-type]
        answered.append(finds is not None)
        return finds

    monkeypatch.setattr(time_words, "read_plain_english", lambda *args: None)
    parsed = time_words.time_window(text, now, "en")
    monkeypatch.setattr(time_words, "read_plain_english", counting)
    read_window = time_words.time_window(text, now, "en")
    return parsed, read_window, any(answered)


@pytest.mark.parametrize("word", ["the", "my", "on", "in", "Melanie", "John's", "est", "noon", "a", "we", "two"])
def test_every_form_beside_a_word_names_the_parsers_window(word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    differ, answered = [], 0
    for text in _beside(word):
        for now in NOWS:
            parsed, read_window, used = _both(text, now, monkeypatch)
            answered += used
            if parsed != read_window:
                differ.append((text, f"{now:%Y-%m-%d}", parsed, read_window))
    assert not differ
    if word.casefold() in NEAR_DENIED:
        assert answered < len(FORMS) * 2  # the form alone, before the word comes in range
    else:
        assert answered > len(FORMS) * 6  # the reader did the reading


def test_the_time_word_cases_name_the_parsers_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    data = json.loads((Path(__file__).parents[1] / "data" / "time_words.json").read_text(encoding="utf-8"))
    cases = [c["text"] for c in data["cases"] if c["lang"] == "en"]
    nows = [datetime.fromisoformat(data["now"]), *NOWS, datetime(2020, 2, 29, 23, 30, tzinfo=timezone.utc)]
    answered = 0
    for text in cases:
        for now in nows:
            parsed, read_window, used = _both(text, now, monkeypatch)
            answered += used
            assert parsed == read_window, (text, now)
    assert answered >= len(cases)


# -- a time counted from a date ------------------------------------------------------------------

UTC_NOW = datetime(2026, 12, 7, 12, tzinfo=timezone.utc)  # a Monday


def _days(window: tuple[float, float] | None) -> tuple[str, str] | None:
    if window is None:
        return None
    since, until = (datetime.fromtimestamp(t, timezone.utc) for t in window)
    return f"{since:%Y-%m-%d}", f"{until:%Y-%m-%d}"


@pytest.mark.parametrize(
    ("text", "window"),
    [
        # from the weekday (the weekend, the week) counted from the date to the date itself
        ("What did Audrey do on the Monday before July 24, 2023?", ("2023-07-17", "2023-07-25")),
        ("the Sunday before October 25, 2022?", ("2022-10-23", "2022-10-26")),
        ("What did Andrew do on the Saturday after October 28, 2023?", ("2023-10-28", "2023-11-05")),
        ("What did Maria do last weekend before April 10, 2023?", ("2023-04-08", "2023-04-11")),  # a Monday
        ("her pups over the weekend before 4th October, 2023?", ("2023-09-30", "2023-10-05")),
        ("the weekend before 8 October 2023", ("2023-09-30", "2023-10-09")),  # a Sunday: the one before
        ("the weekend after 2 December 2026", ("2026-12-02", "2026-12-07")),
        ("Where was Tim in the week before 16 November 2023?", ("2023-11-09", "2023-11-17")),
        ("the day after May 3", ("2026-05-03", "2026-05-05")),  # no year: the past May 3
        # <n> units: that day's whole week (month, year)
        ("John's puppy he got two weeks before August 11, 2023?", ("2023-07-24", "2023-08-12")),
        ("3 days after 1 March 2024", ("2024-03-01", "2024-03-05")),
        ("2 months before 15 May 2024", ("2024-03-01", "2024-05-16")),
        # between two dates, the first taking the second's year
        ("Where was John between August 11 and August 15 2023?", ("2023-08-11", "2023-08-16")),
        ("what happened between 2020 and 2022?", ("2020-01-01", "2023-01-01")),
        ("between March 2024 and May 2024", ("2024-03-01", "2024-06-01")),
    ],
)
def test_a_time_counted_from_a_date_names_both_ends(text: str, window: tuple[str, str] | None) -> None:
    assert _days(time_words.time_window(text, UTC_NOW, "en")) == window


@pytest.mark.parametrize(
    "text",
    [
        "the Monday before July 24, 2023 and last year",  # another time word: not this reader's
        "the day before yesterday",  # not a date after the pivot
        "two weeks before May",  # a month, not a day
        "before July 24, 2023",  # no offset
        "day before July 24, 2023",  # "day" alone
        "between August 15 2023 and August 11 2023",  # backwards
        "the Monday before July 24, 2023 after all",  # two pivots
        "the Monday before July 24—2023",
        "the weekend before Sunday 8 October 2023",  # "Sunday" outside the phrase
    ],
)
def test_other_phrases_are_left_to_the_other_readers(text: str) -> None:
    from ovos_memory_plugins.english_time import read_anchored_english

    words = time_words._vocabulary("en")[0]
    assert read_anchored_english(text, UTC_NOW.replace(tzinfo=None), words) is None


def test_a_counted_time_after_now_is_no_window() -> None:
    assert time_words.time_window("the day after 7 December 2026", UTC_NOW, "en") is not None  # today: past part
    assert time_words.time_window("the week after 9 December 2026", UTC_NOW, "en") is None


def test_the_counted_reader_needs_no_parser_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser's search on these phrases took 9 to 25 ms (and read "the Monday before July 24,
    2023" as all of 2023); the reader answers without it."""
    time_words.time_window("yesterday", UTC_NOW, "en")  # the parser's load and warm-up
    monkeypatch.setattr(time_words, "_search", lambda *args: pytest.fail("the parser searched"))
    assert time_words.time_window("the Monday before July 24, 2023", UTC_NOW, "en") is not None
