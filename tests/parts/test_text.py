"""Tokenization: every script, labels and markers, stop words, hostile input."""

from __future__ import annotations

import pytest

from ovos_memory_plugins.testing import HOSTILE_TEXTS
from ovos_memory_plugins.text import MAX_QUERY_CHARS, clean_text, clip_query, query_terms, stop_words, tokenize


def test_clean_and_clip() -> None:
    assert clean_text("a\x00b\ud800c") == "a b\ufffdc"
    assert len(clip_query("x" * (MAX_QUERY_CHARS + 10))) == MAX_QUERY_CHARS


def test_english_is_lowercased_and_stemmed() -> None:
    assert tokenize("Hiking HIKES hiked") == ["hike", "hike", "hike"]
    assert tokenize("my cats") == ["my", "cat"]


def test_latin_diacritics_and_clitics_fold() -> None:
    assert tokenize("Café") == tokenize("cafe")
    assert tokenize("Zürich naïve façade") == ["zurich", "naiv", "facad"]
    assert tokenize("Straße") == tokenize("strasse")
    assert tokenize("don't") == ["don"]
    assert tokenize("Caroline's") == ["carolin"]
    assert tokenize("l'amour") == ["amour"]
    assert tokenize("São João") == ["sao", "joao"]


def test_labels_and_markers_are_never_content() -> None:
    assert tokenize("Q: my locker\nA: noted") == ["my", "locker", "note"]
    assert tokenize('<BOD>\n<Bart>:"hello"\n<EOD>') == ["hello"]
    # a Q or A inside a line is text
    assert "q" in tokenize("plan Q: budget")


def test_chinese_runs_become_bigrams() -> None:
    assert tokenize("红色自行车") == ["红色", "色自", "自行", "行车"]
    assert tokenize("猫") == ["猫"]
    # a two-character word inside a sentence is found
    assert "自行" in tokenize("我喜欢红色自行车")


def test_japanese_kana_and_kanji() -> None:
    assert tokenize("東京に行った") == ["東京", "京に", "に行", "行っ", "った"]
    assert tokenize("カタカナ") == ["カタ", "タカ", "カナ"]


def test_korean_words_become_bigrams() -> None:
    assert tokenize("학교에 갔다") == ["학교", "교에", "갔다"]


def test_thai_keeps_marks_on_their_letter() -> None:
    terms = tokenize("ฉันชอบกินข้าว")
    assert "กิน" in terms and "ข้า" in terms
    assert all(not t.startswith(("\u0e34", "\u0e31", "\u0e49")) for t in terms)


def test_mixed_scripts_split_cleanly() -> None:
    assert tokenize("iPhone手机") == ["iphon", "手机"]


def test_query_terms_drop_stop_words() -> None:
    assert query_terms("tell me a joke") == ["joke"]
    assert query_terms("what is it, and why?") == []
    assert query_terms("the cat and the hat") == ["cat", "hat"]
    assert query_terms("o que é isso", "pt-BR") == []
    assert query_terms("was ist das", "de") == []
    assert query_terms("我们的什么") == []
    assert query_terms("私は東京に行った") != []


def test_query_terms_keep_repeats_and_extra_stop_words() -> None:
    assert query_terms("cat cat dog") == ["cat", "cat", "dog"]
    assert query_terms("Ada, tell me about cats", extra_stopwords=["ADA"]) == ["cat"]
    assert query_terms("café", extra_stopwords=["cafe"]) == []


def test_stop_word_lists() -> None:
    en = stop_words()
    assert "the" in en and "的" in en
    assert "que" in stop_words("es") and "que" not in en
    assert stop_words("xx") == en
    for lang in ("pt", "es", "fr", "de", "it", "nl"):
        assert len(stop_words(lang)) > len(en)


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_hostile_text_never_raises(text: str) -> None:
    assert isinstance(tokenize(text), list)
    assert isinstance(query_terms(text), list)


def test_huge_words_are_cut() -> None:
    assert tokenize("q" * 1_000_000) == ["q" * 64]
    assert query_terms("zebra" * 100) == ["zebra" * 12 + "zebr"]


def test_cut_long_cuts_at_the_last_separator_that_fits() -> None:
    from ovos_memory_plugins.text import cut_long

    assert cut_long("  short  ", 10) == ["short"]
    assert cut_long("aaaa bbbb cccc", 9) == ["aaaa bbbb", "cccc"]
    assert cut_long("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]  # no separator: cut at the size
    assert cut_long("a bbbbbbbbbbbb", 10, lowest=5) == ["a bbbbbbbb", "bbbb"]  # a space too early is not used
    assert cut_long("one\ntwo three\nfour", 12, at="\n") == ["one", "two three", "four"]
    assert cut_long("", 5) == []
