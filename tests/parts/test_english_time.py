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
WORDS |= frozenset({"year", "years", "month", "months", "week", "weeks", "day", "days"})


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
    ],
)
def test_anything_else_is_left_to_the_parser(text: str) -> None:
    assert read(text) is None


FORMS = [
    "in June", "in May", "June", "in December", "in 2023", "in 2019", "2022", "in July 2023",
    "on October 13, 2023", "on 1 February, 2023", "May 23rd, 2023", "23 May 2023", "on May 3",
    "March 15th", "last year", "last month", "last week", "yesterday", "today", "4 years ago",
    "2 weeks ago", "1 day ago", "3 months ago", "the past 3 days", "the past 1 month", "a year ago",
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


@pytest.mark.parametrize("word", ["the", "my", "on", "in", "Melanie", "est", "noon", "a", "we", "two"])
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
