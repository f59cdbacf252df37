"""A long recalled exchange is shortened in the prompt around the query's words (``context.memory_chars``)."""

from __future__ import annotations

from pathlib import Path

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.shaping import HEAD_CHARS, excerpt, excerpt_hits, excerpt_terms
from ovos_memory_plugins.testing import exchange

FILLER = " ".join(f"Tip number {i} is to keep a steady rhythm and enjoy the view." for i in range(40))
USER = "Can you suggest some hiking trails for my trip? By the way, my sister Ana turns 40 on the 12th of May."
ASSISTANT = f"Happy to help with trails! {FILLER} Also, wish Ana a happy birthday on the 12th of May from me."


def test_a_text_that_fits_is_unchanged() -> None:
    text = "Q: short\nA: also short"
    assert excerpt(text, excerpt_terms("short"), 1000) is text
    long = exchange_text_of(USER, ASSISTANT)
    assert excerpt(long, excerpt_terms("birthday"), 0) is long  # 0: never shortened


def exchange_text_of(user: str, assistant: str) -> str:
    return f"Q: {user}\nA: {assistant}"


def test_the_openings_and_the_matching_sentences_stay_the_rest_is_marked_as_cut() -> None:
    text = exchange_text_of(USER, ASSISTANT)
    short = excerpt(text, excerpt_terms("When is Ana's birthday?"), 600)
    assert len(short) < 700 < len(text)
    user_line, assistant_line = short.split("\n")
    assert user_line == "Q: " + USER  # a short turn stays whole
    assert assistant_line.startswith("A: Happy to help with trails! Tip number 0")  # the turn's opening
    assert "wish Ana a happy birthday on the 12th of May" in assistant_line  # the sentence asked about
    assert "Tip number 30" not in short  # the filler between went
    assert "\u2026" in assistant_line  # and the cut is marked
    assert assistant_line.index("Tip number 0") < assistant_line.index("\u2026") < assistant_line.index("wish Ana")


def test_each_turn_keeps_its_opening_even_when_nothing_matches() -> None:
    text = exchange_text_of("I like " + "very " * 100 + "long sentences.", "Noted. " + FILLER)
    short = excerpt(text, excerpt_terms("quantum chromodynamics"), 500)
    lines = short.split("\n")
    assert lines[0].startswith("Q: I like very") and lines[1].startswith("A: Noted.")
    # openings only: sentences up to HEAD_CHARS, a sentence longer than that cut at a space
    assert len(lines[0]) <= HEAD_CHARS + 2 and "long sentences" not in short
    assert len(lines[1]) <= 2 * HEAD_CHARS and "Tip number 10" not in short


def test_the_line_after_a_matching_line_comes_with_it() -> None:
    song = "\n".join(f"Verse line {i}: la la la la la la la la la la la la la la la." for i in range(30))
    text = exchange_text_of("Write me a sad song.", f"Here it is.\n{song}\nChorus:\nG G G G A G F\nThe end.")
    short = excerpt(text, excerpt_terms("What were the notes of the chorus?"), 400)
    assert "Chorus:\nG G G G A G F" in short  # the notes have none of the query's words
    assert "Verse line 20" not in short


def test_sentences_in_chinese_are_split_at_their_full_stops() -> None:
    filler = "今天天气很好，我们去公园散步吧。" * 60
    text = exchange_text_of("你好。", f"好的。{filler}我妹妹的生日是五月十二日。{filler}")
    short = excerpt(text, excerpt_terms("我妹妹的生日是哪天？"), 400)
    assert "我妹妹的生日是五月十二日。" in short
    assert len(short) < 500


def test_excerpt_hits_marks_what_it_shortened_and_never_mutates() -> None:
    long = MemoryHit(exchange_text_of(USER, ASSISTANT), "a", 2.0, {"session_id": "s"})
    short = MemoryHit("Q: hi\nA: hello", "b", 1.0)
    out = excerpt_hits([long, short], "Ana birthday", 600)
    assert out[1] is short
    assert out[0].metadata["shortened_from"] == len(long.content) and out[0].metadata["session_id"] == "s"
    assert "shortened_from" not in long.metadata and long.content.endswith("from me.")  # untouched
    assert excerpt_hits([long], "Ana", 0) == [long]


def test_a_joined_stretch_gets_the_budget_once_per_exchange() -> None:
    text = "\n".join([exchange_text_of(USER, ASSISTANT)] * 3)
    stretch = MemoryHit(text, "a", 1.0, {"sources": ["a", "b", "c"]})
    alone = MemoryHit(text, "a", 1.0)
    query = "steady rhythm"  # matches every tip: the budget decides how many stay
    long = excerpt_hits([stretch], query, 600)[0].content
    short = excerpt_hits([alone], query, 600)[0].content
    assert len(short) + 400 < len(long) <= 3 * 600 + 20
    assert long.count("Q: ") == 3 and short.count("Q: ") == 3  # every turn keeps its opening


def _memory_block(messages: list[object]) -> str:
    return "\n".join(str(getattr(m, "content", "")) for m in messages[:-1])


def test_the_prompt_shows_the_excerpt_and_memory_chars_zero_the_whole_exchange(tmp_path: Path) -> None:
    for chars, root in ((None, "default"), (0, "whole")):
        config: dict[str, object] = {"root": str(tmp_path / root)}
        if chars is not None:
            config["context"] = {"memory_chars": chars}
        with LexicalMemory(config) as mem:
            mem.update_history(exchange(USER, ASSISTANT), "trip")
            block = _memory_block(mem.build_conversation_context("When is Ana's birthday?", "later"))
            assert "wish Ana a happy birthday on the 12th of May" in block
            if chars is None:
                assert "Tip number 30" not in block and "\u2026" in block
            else:
                assert "Tip number 30" in block and "\u2026" not in block
            # the archive keeps everything: only the prompt is shortened
            assert mem.search("Tip number 30 rhythm")[0].content.endswith("from me.")


def test_a_composite_shortens_what_it_recalls_too(tmp_path: Path) -> None:
    from ovos_memory_plugins.composite import CompositeMemory

    cfg = {"root": str(tmp_path / "c"), "members": [{"module": "ovos-memory-plugin-lexical"}]}
    with CompositeMemory(cfg) as mem:
        mem.update_history(exchange(USER, ASSISTANT), "trip")
        block = _memory_block(mem.build_conversation_context("When is Ana's birthday?", "later"))
        assert "wish Ana a happy birthday on the 12th of May" in block
        assert "Tip number 30" not in block and "\u2026" in block


def test_a_word_whose_stem_is_spelt_otherwise_is_still_found() -> None:
    # the English stemmer turns "dying" into "die" and "skies" into "sky": the quick test that
    # rules sentences out must not lose them
    text = exchange_text_of("Garden talk.", f"Sure. {FILLER} My fern is dying under grey skies. {FILLER}")
    short = excerpt(text, excerpt_terms("Which plant is dying?"), 500)
    assert "My fern is dying under grey skies." in short
    assert "My fern is dying" in excerpt(text, excerpt_terms("clear skies"), 500)
