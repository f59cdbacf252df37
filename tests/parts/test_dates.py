"""Memories that say when: the labels, the prompt's dates, the clock seam, and dates kept through
ingest, import and migrate."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.dates import LANGUAGES, memory_time, relative_phrase, today_line, when_label
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage.migrate import migrate_memory
from ovos_memory_plugins.transfer import export_jsonl, import_jsonl, ingest_paths

UTC = timezone.utc
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)  # a Wednesday


def at(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[misc]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def say(mem: LexicalMemory, user: str, assistant: str, session: str = "s") -> None:
    pair = [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]
    mem.update_history(pair, session)


@pytest.mark.parametrize(
    ("when", "lang", "expected"),
    [
        (at(2026, 9, 5), "en", "2026-09-05, 3 months ago"),
        (at(2026, 12, 1, 18, 30), "en", "2026-12-01 18:30, yesterday"),
        (at(2026, 12, 2, 8, 15), "en", "2026-12-02 08:15, today"),
        (at(2026, 11, 27), "en", "2026-11-27, 5 days ago"),
        (at(2026, 11, 11), "en", "2026-11-11, 3 weeks ago"),
        (at(2024, 6, 1), "en", "2024-06-01, 2 years ago"),
        (at(2026, 9, 5), "de", "2026-09-05, vor 3 Monaten"),
        (at(2026, 12, 1, 18, 30), "de-DE", "2026-12-01 18:30, gestern"),
        (at(2026, 11, 27), "es", "2026-11-27, hace 5 días"),
        (at(2026, 11, 12), "fr", "2026-11-12, il y a 2 semaines"),
        (at(2026, 9, 5), "pt-BR", "2026-09-05, há 3 meses"),
        (at(2026, 11, 30), "it", "2026-11-30, 2 giorni fa"),
        (at(2025, 12, 1), "nl", "2025-12-01, 1 jaar geleden"),
        (at(2026, 11, 27), "zh", "2026-11-27, 5天前"),
        (at(2026, 11, 27), "xx", "2026-11-27, 5 days ago"),
    ],
)
def test_labels_in_the_memory_language(when: float, lang: str, expected: str) -> None:
    assert when_label(when, NOW, lang) == expected


def test_modes_and_the_today_line() -> None:
    yesterday = at(2026, 12, 1, 18, 30)
    assert when_label(yesterday, NOW, "en", "absolute") == "2026-12-01 18:30"
    assert when_label(yesterday, NOW, "en", "relative") == "yesterday, 18:30"
    assert when_label(at(2026, 9, 5), NOW, "en", "relative") == "3 months ago"
    assert when_label(yesterday, NOW, "en", "off") == ""
    assert when_label(None, NOW) == ""
    assert relative_phrase(at(2027, 1, 1), NOW) == "later"
    assert today_line(NOW) == "Today is Wednesday, 2026-12-02."
    assert today_line(NOW, "de") == "Heute ist Mittwoch, der 2026-12-02."
    assert today_line(NOW, "zh") == "今天是2026-12-02，星期三。"
    for lang in LANGUAGES:  # every table is complete
        assert when_label(at(2026, 9, 5), NOW, lang) and today_line(NOW, lang)


def test_a_label_is_in_the_clock_time_zone() -> None:
    tokyo = timezone(timedelta(hours=9))
    assert when_label(at(2026, 12, 1, 18, 30), NOW.astimezone(tokyo)) == "2026-12-02 03:30, today"


def test_memory_time_reads_numbers_and_iso_strings() -> None:
    assert memory_time({"time": 1710408600}) == 1710408600.0
    assert memory_time({"time": "2024-03-14T09:30:00Z"}) == 1710408600.0
    assert memory_time({"created": "2024-03-14T09:30:00"}) == 1710408600.0
    assert memory_time({"time": True}) is None and memory_time({"time": "soon"}) is None and memory_time({}) is None


def _prompt(mem: LexicalMemory, utterance: str) -> str:
    return "\n".join(m.content for m in mem.build_conversation_context(utterance, "s"))


@pytest.mark.parametrize(
    ("lang", "label", "today"),
    [
        ("en", "[2026-09-05, 3 months ago] Q: My sister Ingrid lives", "Today is Wednesday, 2026-12-02."),
        ("de", "[2026-09-05, vor 3 Monaten] Q: My sister Ingrid lives", "Heute ist Mittwoch, der 2026-12-02."),
        ("es", "[2026-09-05, hace 3 meses] Q: My sister Ingrid lives", "Hoy es miércoles, 2026-12-02."),
    ],
)
def test_the_prompt_dates_each_memory_in_the_memory_language(tmp_path: Path, lang: str, label: str, today: str) -> None:
    clock = Clock(datetime(2026, 9, 5, 10, 0, tzinfo=UTC))
    config = {"root": str(tmp_path / "m"), "max_history": 0, "lang": lang}
    with LexicalMemory(config, clock=clock) as mem:
        say(mem, "My sister Ingrid lives in Tromsø", "Noted: Ingrid, Tromsø.")
        clock.now = NOW
        text = _prompt(mem, "Ingrid Tromsø")
    assert label in text
    assert text.count(today) == 1


def test_a_stretch_of_one_sitting_carries_one_date_and_a_later_sitting_its_own(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 9, 5, 10, 0, tzinfo=UTC))
    with LexicalMemory({"root": str(tmp_path / "m"), "max_history": 0}, clock=clock) as mem:
        say(mem, "the kayak club meets at the lake", "noted")
        clock.now += timedelta(minutes=3)
        say(mem, "the kayak club fee is 40 euros", "noted")
        clock.now = datetime(2026, 12, 1, 18, 30, tzinfo=UTC)
        say(mem, "the kayak club moved its meetings to the river", "noted")
        clock.now = NOW
        text = _prompt(mem, "kayak club")
    assert text.count("[2026-09-05") == 1  # the two exchanges minutes apart: one chunk, one date
    assert "[2026-09-05, 3 months ago] Q: the kayak club meets at the lake" in text
    assert "\n  Q: the kayak club fee is 40 euros" in text
    # about the same thing as the older stretch (the kayak club): first, and marked the newer
    assert "[2026-12-01 18:30, yesterday, newer] Q: the kayak club moved" in text
    assert text.index("the kayak club moved") < text.index("the kayak club meets")


def test_dates_off_leaves_the_prompt_undated(tmp_path: Path) -> None:
    config = {"root": str(tmp_path / "m"), "max_history": 0, "context": {"dates": "off"}}
    with LexicalMemory(config, clock=Clock(NOW)) as mem:
        say(mem, "the piano tuner comes on tuesday", "ok")
        text = _prompt(mem, "piano tuner")
    assert "- Q: the piano tuner comes on tuesday" in text and "Today is" not in text and "[2026" not in text


def test_the_clock_dates_documents_and_history_rows(tmp_path: Path) -> None:
    clock = Clock(datetime(2025, 1, 2, 3, 4, tzinfo=UTC))
    with LexicalMemory({"root": str(tmp_path / "m")}, clock=clock) as mem:
        say(mem, "my bike is green", "green, noted")
        mem.store("a plain fact about bikes", "s")
        path = mem.storage.db.location
    with sqlite3.connect(path) as conn:
        created = {r[0] for r in conn.execute("SELECT created FROM documents")}
        history = {r[0] for r in conn.execute("SELECT created FROM history")}
    assert created == history == {clock.now.timestamp()}


def test_ingest_import_and_migrate_keep_the_dates(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        json.dumps({"role": "user", "content": "my dentist is Dr Farouk", "time": "2024-03-14T09:30:00Z"})
        + "\n"
        + json.dumps({"role": "assistant", "content": "Dr Farouk, noted."})
        + "\n"
    )
    clock = Clock(NOW)
    with LexicalMemory({"root": str(tmp_path / "a"), "max_history": 0}, clock=clock) as mem:
        ingest_paths(mem, [chat])
        assert "[2024-03-14, 2 years ago] Q: my dentist is Dr Farouk" in _prompt(mem, "dentist Farouk")
        lines: list[str] = []

        class Out:
            def write(self, text: str) -> None:
                lines.append(text)

        export_jsonl(mem, Out())  # type: ignore[arg-type]
        migrate_memory(mem, str(tmp_path / "c"))
    export = "".join(lines).splitlines()
    with LexicalMemory({"root": str(tmp_path / "b"), "max_history": 0}, clock=clock) as mem:
        import_jsonl(mem, export)
        assert "[2024-03-14, 2 years ago] Q: my dentist is Dr Farouk" in _prompt(mem, "dentist Farouk")
        assert {d.created for d in mem.storage.documents.iter()} == {1710408600.0}
    with LexicalMemory({"root": str(tmp_path / "c"), "max_history": 0}, clock=clock) as mem:
        assert "[2024-03-14, 2 years ago] Q: my dentist is Dr Farouk" in _prompt(mem, "dentist Farouk")
        assert {d.created for d in mem.storage.documents.iter()} == {1710408600.0}


def test_an_earlier_file_gets_created_from_its_metadata_time(tmp_path: Path) -> None:
    with LexicalMemory({"root": str(tmp_path / "m")}) as mem:
        mem.put_document("d1", "an old ingested exchange", "s", {"time": 1000000.0})
        path = mem.storage.db.location
    with sqlite3.connect(path) as conn:  # as an earlier release wrote it: created = the write's time
        conn.execute("UPDATE documents SET created = 1.7e9")
        conn.execute("DELETE FROM _migrations WHERE name = '0006_documents_created_from_time'")
    with LexicalMemory({"root": str(tmp_path / "m")}) as mem:
        assert [d.created for d in mem.storage.documents.iter()] == [1000000.0]


def test_month_labels_of_curated_notes() -> None:
    from ovos_memory_plugins.dates import month_label

    assert month_label("2026-09", NOW) == "2026-09, 3 months ago"
    assert month_label("2026-12", NOW, "de") == "2026-12, diesen Monat"
    assert month_label("2026-11", NOW, "es") == "2026-11, el mes pasado"
    assert month_label("2024-11", NOW, "zh") == "2024-11, 2年前"
    assert month_label("2026-09", NOW, "en", "absolute") == "2026-09"
    assert month_label("next week", NOW) == "next week"


def test_notes_and_sticky_notes_are_dated_like_memories(tmp_path: Path) -> None:
    from ovos_memory_plugins.notes import NotesMemory
    from ovos_memory_plugins.sticky import StickyMemory

    with NotesMemory({"root": str(tmp_path / "n")}, clock=Clock(NOW)) as notes:
        notes.remember("[2026-09] User's sister Ingrid lives in Tromsø")
        block = notes.context_blocks("Ingrid", "s")[0]
    assert "- [2026-09, 3 months ago] User's sister Ingrid lives in Tromsø" in block
    clock = Clock(datetime(2026, 12, 1, 18, 30, tzinfo=UTC))
    with StickyMemory({"root": str(tmp_path / "s")}, clock=clock) as sticky:
        sticky.remember("the spare key is under the blue pot", session_id="s")
        clock.now = NOW
        text = "\n".join(sticky.context_blocks("hello", "s"))
    assert '- [2026-12-01 18:30, yesterday] "the spare key is under the blue pot"' in text


# -- time words in the utterance ---------------------------------------------------------------

dateparser = pytest.importorskip("dateparser", reason="the dates extra (dateparser) is not installed")

TIME_WORDS = json.loads((Path(__file__).parents[1] / "data" / "time_words.json").read_text(encoding="utf-8"))


def _expected(case: dict[str, object], now: datetime) -> tuple[float, float] | None:
    window = case["window"]
    if window is None:
        return None
    assert isinstance(window, list)
    since, until = (datetime.fromisoformat(d).replace(tzinfo=now.tzinfo) for d in window)
    return since.timestamp(), until.timestamp()


@pytest.mark.parametrize("lang", sorted({c["lang"] for c in TIME_WORDS["cases"]}))
def test_the_time_words_of_each_language_name_their_window(lang: str) -> None:
    from ovos_memory_plugins.time_words import time_window

    now = datetime.fromisoformat(TIME_WORDS["now"])
    cases = [c for c in TIME_WORDS["cases"] if c["lang"] == lang]
    right = [c["text"] for c in cases if time_window(c["text"], now, lang) == _expected(c, now)]
    assert len(right) >= len(cases) - 1, f"{lang}: right {right} of {[c['text'] for c in cases]}"


def test_the_whole_set_is_at_least_95_percent_right() -> None:
    from ovos_memory_plugins.time_words import time_window

    now = datetime.fromisoformat(TIME_WORDS["now"])
    cases = TIME_WORDS["cases"]
    right = sum(time_window(c["text"], now, c["lang"]) == _expected(c, now) for c in cases)
    assert right / len(cases) >= 0.95


def test_a_time_word_naming_a_time_zone_still_names_its_window() -> None:
    """dateparser gives an aware date for "yesterday UTC"; compared with the naive now it
    raised, and the window was lost with a warning."""
    from ovos_memory_plugins.time_words import time_window

    day = (at(2026, 12, 1), at(2026, 12, 2))
    assert time_window("what did I say yesterday UTC?", NOW) == day
    assert time_window("what did I say yesterday?", NOW) == day
    assert time_window("what did we do in 2023 GMT?", NOW) == (at(2023, 1, 1), at(2024, 1, 1))


def _fill(mem: LexicalMemory, clock: Clock) -> None:
    clock.now = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    say(mem, "I planted tulips in the garden", "Lovely, tulips.")
    clock.now = datetime(2026, 12, 1, 18, 30, tzinfo=UTC)
    say(mem, "I booked the dentist for Friday", "Dentist on Friday, noted.")
    clock.now += timedelta(minutes=2)
    say(mem, "and the garden needs new tulips bulbs", "Tulip bulbs, noted.")
    clock.now = NOW


def test_what_did_i_tell_you_yesterday_brings_yesterdays_memories_dated(tmp_path: Path) -> None:
    clock = Clock(NOW)
    with LexicalMemory({"root": str(tmp_path / "m"), "max_history": 0}, clock=clock) as mem:
        _fill(mem, clock)
        text = _prompt(mem, "what did I tell you yesterday?")
        assert "[2026-12-01 18:30, yesterday] Q: I booked the dentist for Friday" in text
        assert "tulips in the garden" not in text  # 20 November is not yesterday
        garden = _prompt(mem, "what did I say about the garden yesterday?")
        assert garden.index("garden needs new tulips") < garden.index("planted tulips")  # yesterday's first
        older = _prompt(mem, "what did I say about the garden?")  # no time words: both
        assert "garden needs new tulips" in older and "planted tulips" in older


def test_an_empty_window_falls_back_to_ordinary_recall(tmp_path: Path) -> None:
    clock = Clock(NOW)
    with LexicalMemory({"root": str(tmp_path / "m"), "max_history": 0}, clock=clock) as mem:
        _fill(mem, clock)
        assert mem.recall_window("what did I say about the garden last year?") is not None
        text = _prompt(mem, "what did I say about the garden last year?")
        assert "planted tulips" in text and "garden needs new tulips" in text


def test_time_words_off_and_the_window_in_search(tmp_path: Path) -> None:
    clock = Clock(NOW)
    config = {"root": str(tmp_path / "m"), "max_history": 0, "retrieval": {"time_words": False}}
    with LexicalMemory(config, clock=clock) as mem:
        _fill(mem, clock)
        assert mem.recall_window("what did I tell you yesterday?") is None
        week = (at(2026, 11, 16), at(2026, 11, 23))
        assert [h.content.split("\n")[0] for h in mem.search("tulips garden", window=week)] == [
            "Q: I planted tulips in the garden"
        ]


def test_a_german_memory_reads_german_time_words(tmp_path: Path) -> None:
    clock = Clock(NOW)
    with LexicalMemory({"root": str(tmp_path / "m"), "max_history": 0, "lang": "de"}, clock=clock) as mem:
        clock.now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
        say(mem, "Ich habe Tulpen gepflanzt", "Schön.")
        clock.now = NOW
        text = _prompt(mem, "Was habe ich dir letzte Woche erzählt?")
    assert "[2026-11-25, vor 7 Tagen] Q: Ich habe Tulpen gepflanzt" in text


# -- the newer fact first ----------------------------------------------------------------------


def test_the_newer_of_two_memories_about_the_same_thing_comes_first_marked(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 3, 3, 20, 0, tzinfo=UTC))
    with LexicalMemory({"root": str(tmp_path / "m"), "max_history": 0}, clock=clock) as mem:
        say(mem, "I stream on Tuesdays, every Tuesday evening", "Tuesdays, noted.")
        clock.now = datetime(2026, 11, 10, 20, 0, tzinfo=UTC)
        say(mem, "No, I moved my stream to Thursdays", "Thursdays it is.")
        clock.now = datetime(2026, 11, 12, 9, 0, tzinfo=UTC)
        say(mem, "my cat knocks the stream camera over", "Oh no.")
        clock.now = NOW
        hits = mem.recall("what day do I stream on Tuesdays or other days?", "s", [])
        text = _prompt(mem, "what day do I stream on Tuesdays or other days?")
    firsts = [h.content.split("\n")[0] for h in hits]
    assert firsts.index("Q: No, I moved my stream to Thursdays") < firsts.index(
        "Q: I stream on Tuesdays, every Tuesday evening"
    )
    assert hits[firsts.index("Q: No, I moved my stream to Thursdays")].metadata.get("newer") is True
    assert "[2026-11-10, 3 weeks ago, newer] Q: No, I moved my stream to Thursdays" in text
    assert "[2026-03-03, 9 months ago] Q: I stream on Tuesdays" in text  # the older stays, dated


def test_newer_first_leaves_unrelated_memories_in_their_ranked_places() -> None:
    from ovos_memory_plugins.common import MemoryHit
    from ovos_memory_plugins.shaping import excerpt_terms, newer_first

    hits = [
        MemoryHit("Q: I stream on Tuesdays\nA: ok", "a", 3.0, {"time": at(2026, 1, 1)}),
        MemoryHit("Q: my sister Ingrid lives in Tromsø\nA: ok", "b", 2.0, {"time": at(2026, 5, 1)}),
        MemoryHit("Q: I moved my stream to Thursdays\nA: ok", "c", 1.0, {"time": at(2026, 6, 1)}),
        MemoryHit("Q: an undated stream note\nA: ok", "d", 0.5, {}),
    ]
    out = newer_first(hits, "when do I stream", excerpt_terms)
    assert [h.source for h in out] == ["c", "b", "a", "d"]
    assert out[0].metadata["newer"] is True and "newer" not in out[2].metadata
    assert "newer" not in hits[2].metadata  # never mutates
    assert [h.source for h in newer_first(hits, "Ingrid Tromsø", excerpt_terms)] == ["a", "b", "c", "d"]


def test_the_window_follows_the_clock_and_spans_several_time_words() -> None:
    from ovos_memory_plugins.time_words import time_window

    first = time_window("what did I do in December?", datetime(2024, 1, 10, 12, 0, tzinfo=UTC))
    assert first == (at(2023, 12, 1), at(2024, 1, 1))
    again = time_window("what did I do in December?", datetime(2026, 12, 20, 12, 0, tzinfo=UTC))
    assert again == (at(2026, 12, 1), at(2027, 1, 1))  # each call reads its own now
    both = time_window("which airline did I fly with in March and April?", datetime(2023, 4, 27, tzinfo=UTC))
    assert both == (at(2023, 3, 1), at(2023, 5, 1))


def test_a_duration_is_a_span_up_to_today_and_ago_is_a_day() -> None:
    from ovos_memory_plugins.time_words import time_window

    assert time_window("what did I do in the past 3 days?", NOW) == (at(2026, 11, 29), at(2026, 12, 3))
    assert time_window("what did I say 3 days ago?", NOW) == (at(2026, 11, 29), at(2026, 11, 30))
    assert time_window("which events did I go to during the past month?", NOW) == (at(2026, 11, 2), at(2026, 12, 3))
    assert time_window("what did we discuss last month?", NOW) == (at(2026, 11, 1), at(2026, 12, 1))  # calendar
    assert time_window("was habe ich in den letzten zwei Wochen gemacht?", NOW, "de") == (
        at(2026, 11, 18),
        at(2026, 12, 3),
    )
    assert time_window("il y a trois jours j'ai dit quoi ?", NOW, "fr") == (at(2026, 11, 29), at(2026, 11, 30))
    assert time_window("pendant les deux dernières semaines", NOW, "fr") == (at(2026, 11, 18), at(2026, 12, 3))
    assert time_window("vendredi dernier", NOW, "fr") == (at(2026, 11, 27), at(2026, 11, 28))  # a day, not a span
    assert time_window("which one did I pick?", NOW) is None  # a number word before no time unit


def test_a_parser_without_periods_in_its_search_is_read_again() -> None:
    from ovos_memory_plugins.time_words import _search

    def old_search_dates(text: str, languages: list[str], settings: dict[str, object]) -> list[tuple[str, datetime]]:
        return [("yesterday", datetime(2026, 12, 1, 9))]  # dateparser before 1.5: no add_period

    assert _search(old_search_dates, "what did I say yesterday?", "en", {}) == [("yesterday", None, None)]


def test_the_parser_searches_only_the_words_around_time_words() -> None:
    from ovos_memory_plugins.time_words import _time_spans, time_window

    question = "What kind of professional experience did Gina get accepted for on May 23, 2023?"
    assert _time_spans(question, "en") == "accepted for on May 23, 2023?"
    far = "Yesterday my sister, who lives in the far north of Norway with her two cats, visited in May"
    assert _time_spans(far, "en") == "Yesterday my sister, who . cats, visited in May"
    assert _time_spans("我上周说了什么", "zh") == "我上周说了什么"  # no spaces: searched whole
    assert time_window(question, NOW) == (at(2023, 5, 23), at(2023, 5, 24))  # the find is the same


def test_the_parser_warms_up_once_beside_the_caller() -> None:
    from ovos_memory_plugins.time_words import time_window, warm_parser

    first = warm_parser("nl")
    if first is not None:  # another test may have warmed Dutch already
        assert first.result(timeout=30) is None
    assert warm_parser("nl") is None  # once per process and language
    assert time_window("wat zei ik gisteren?", NOW, "nl") == (at(2026, 12, 1), at(2026, 12, 2))


def test_wait_ready_returns_once_the_warm_up_has_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import Future

    from ovos_memory_plugins import time_words

    with LexicalMemory({"root": str(tmp_path)}) as mem:
        assert mem.wait_ready(30) is True
        assert time_words.wait_warm(0) is True  # ended: no wait at all
        assert all(f.done() for k, f in time_words._PARSER_STATE.items() if isinstance(k, tuple) and k[0] == "future")
        stuck: Future[None] = Future()  # a warm-up that never ends: the wait keeps its deadline
        monkeypatch.setitem(time_words._PARSER_STATE, ("future", "xx"), stuck)
        assert mem.wait_ready(0.05) is False


def test_the_english_warm_up_has_the_parser_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain English reader reads "yesterday" itself; the warm-up must still have the parser
    search (its first search is its load), or the first turn it reads pays a quarter second."""
    from ovos_memory_plugins import time_words

    searched: list[str] = []
    search = time_words._search

    def recording(search_dates: object, text: str, code: str, settings: dict[str, object]) -> object:
        searched.append(text)
        return search(search_dates, text, code, settings)

    monkeypatch.setattr(time_words, "_search", recording)
    monkeypatch.delitem(time_words._PARSER_STATE, ("warm", "en"), raising=False)
    warming = time_words.warm_parser("en")
    assert warming is not None
    assert warming.result(timeout=30) is None
    assert searched == ["yesterday"]
    searched.clear()
    assert time_words.time_window("what did I say yesterday?", NOW) == (at(2026, 12, 1), at(2026, 12, 2))
    assert searched == []  # a turn's plain phrase is read without it
