"""Text helpers shared by every backend: cleaning user text, and the one tokenizer keyword recall uses.

Cleaning: :func:`clean_text` makes any input safe to store and query; :func:`clip_query` also cuts
it to :data:`MAX_QUERY_CHARS`.

Tokenizing (the same pipeline for documents and queries):

1. ``Q:``/``A:`` line labels and dialogue markers such as ``<BOD>`` or ``<Assistant>`` are removed:
   they are never content.
2. The text is case-folded; Latin and Greek words have their diacritics folded (``café`` ->
   ``cafe``), contractions lose their clitic (``don't`` -> ``don``, ``l'amour`` -> ``amour``) and
   words of letters are stemmed with the English Snowball stemmer (``hiking`` -> ``hike``).
3. Runs of Han, Kana, Hangul, Thai (and Lao, Khmer, Myanmar) characters, which are written
   without spaces between words, become overlapping character bigrams (``自行车`` -> ``自行``,
   ``行车``); a run of one character is kept as that character.

:func:`tokenize` gives the index terms of a text; :func:`query_terms` the same minus stop words
(per :func:`stop_words`), so "tell me a joke" has no term that can drive a match on its own.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from importlib import resources
from itertools import pairwise

import snowballstemmer

__all__ = [
    "MAX_QUERY_CHARS",
    "STOPWORD_LANGUAGES",
    "clean_text",
    "clip_query",
    "cut_long",
    "fold_word",
    "more_query_terms_than",
    "query_terms",
    "stop_words",
    "tokenize",
]

#: Recall queries are cut to this many characters (the utterance itself is never cut).
MAX_QUERY_CHARS = 4000

#: Longer words are cut to this many characters before they become terms.
MAX_WORD_CHARS = 64

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` without NUL and other control characters (tab and newlines stay) and with lone
    surrogates replaced by U+FFFD, so it can be encoded as UTF-8 and stored anywhere."""
    text = _CONTROL.sub(" ", text)
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def cut_long(text: str, size: int, at: str = " ", lowest: int = 0) -> list[str]:
    """``text`` in stripped parts of at most ``size`` characters, each cut at the last ``at``
    between ``lowest`` and ``size`` when there is one, else at ``size``; empty parts dropped."""
    parts: list[str] = []
    text = text.strip()
    while len(text) > size:
        cut = text.rfind(at, lowest, size + 1)
        cut = cut if cut > 0 else size
        parts.append(text[:cut].strip())
        text = text[cut:].strip()
    if text:
        parts.append(text)
    return parts


def clip_query(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """A cleaned query of at most ``limit`` characters (the end is kept: it is the newest text)."""
    text = clean_text(text)
    return text if len(text) <= limit else text[-limit:]


# -- tokenizing ------------------------------------------------------------------------------

#: Scripts written without spaces between words: Han (with the iteration marks), Hiragana,
#: Katakana, Hangul, Thai, Lao, Myanmar, Khmer. Runs of them become character bigrams.
_SPACELESS = (
    "\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
    "\U00020000-\U0003134f"
)
#: Combining marks that belong inside a word (Latin diacritics, Hebrew, Arabic, Indic vowel signs).
_MARKS = "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed\u0900-\u0dff"
_TOKEN = re.compile(
    rf"(?P<run>[{_SPACELESS}]+)"
    rf"|(?P<word>(?:[^\W_{_SPACELESS}]|[{_MARKS}])+(?:['’](?:[^\W_{_SPACELESS}]|[{_MARKS}])+)*)"
)
#: ``Q:`` / ``A:`` labels at the start of a line, as in the documents exchanges become.
_LABEL = re.compile(r"(?m)^[ \t]*[QA][ \t]*:")
#: Dialogue and markup markers: ``<BOD>``, ``<EOD>``, ``<Assistant>``, ``</s>``.
_MARKER = re.compile(r"</?[A-Za-z][\w.-]{0,39}>")
_RUN_MARK = re.compile(r"[\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ecd\u102b-\u103e\u17b4-\u17d3]")
_FOLD_EXTRA = str.maketrans({"ø": "o", "æ": "ae", "œ": "oe", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "ı": "i"})
#: Apostrophe prefixes that are elided articles or pronouns (French and Italian: l', d', qu', ...).
_ELISIONS = frozenset({"l", "d", "j", "m", "n", "s", "t", "c", "qu", "dell", "all", "dall", "nell", "sull", "un"})
#: Apostrophe suffixes that are English clitics (don't, I'm, she'll, Caroline's).
_CLITICS = frozenset({"s", "t", "re", "ve", "ll", "d", "m"})

_stemmer = snowballstemmer.stemmer("english")


def _foldable(word: str) -> bool:
    return all(ord(c) < 0x0400 or 0x1E00 <= ord(c) <= 0x1FFF for c in word)


@functools.lru_cache(maxsize=200_000)
def fold_word(word: str) -> str:
    """One case-folded word, diacritics folded (Latin and Greek) and clitics removed, not stemmed.

    Stop-word lists are compared against this form.
    """
    if _foldable(word):
        word = unicodedata.normalize("NFKD", word.translate(_FOLD_EXTRA))
        word = "".join(c for c in word if not unicodedata.combining(c))
    if "'" in word or "’" in word:
        parts = word.replace("’", "'").split("'")
        if len(parts) == 2 and parts[0] in _ELISIONS and parts[1]:
            word = parts[1]
        elif len(parts) == 2 and parts[1] in _CLITICS:
            word = parts[0]
        else:
            word = "".join(parts)
    return word


@functools.lru_cache(maxsize=200_000)
def _stem(folded: str) -> str:
    if len(folded) > 3 and folded.isascii() and folded.isalpha():
        return str(_stemmer.stemWord(folded))
    return folded


@functools.lru_cache(maxsize=200_000)
def _index_term(word: str) -> str:
    """A word's index term: folded and stemmed (one cached call on the hot path)."""
    return _stem(fold_word(word))


def _units(run: str) -> list[str] | str:
    """The characters of a spaceless run, a Thai (Lao, Khmer, ...) base letter kept together
    with the vowel and tone marks written on it."""
    if not _RUN_MARK.search(run):
        return run
    units: list[str] = []
    for c in run:
        if units and unicodedata.category(c) in ("Mn", "Mc"):
            units[-1] += c
        else:
            units.append(c)
    return units


def _stop_cover(units: list[str] | str, stops: frozenset[str]) -> list[bool]:
    """Which units of a run belong to a stop word (longest match first, up to 4 units)."""
    n = len(units)
    covered = [False] * n
    i = 0
    while i < n:
        for size in (4, 3, 2, 1):
            if i + size <= n and "".join(units[i : i + size]) in stops:
                covered[i : i + size] = [True] * size
                i += size
                break
        else:
            i += 1
    return covered


def _prepare(text: str) -> str:
    text = _MARKER.sub(" ", _LABEL.sub(" ", clean_text(text)))
    if text.isascii():  # NFKC leaves ASCII as it is, and casefold() is lower() there
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold()


#: :data:`_TOKEN` on ASCII text: there it matches exactly these words (no spaceless runs, no
#: combining marks, no typographic apostrophe), one group, so ``findall`` gives the words.
_ASCII_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


#: The index terms of ASCII words without digits (a vocabulary: words with digits are their own
#: terms and never kept), at most :data:`_ASCII_CACHE_SIZE` of them (emptied when full).
_ascii_index: dict[str, str] = {}
_ASCII_CACHE_SIZE = 50_000


def _ascii_index_term(word: str) -> str:
    """An ASCII word's index term (the cache's miss path)."""
    cut = word[:MAX_WORD_CHARS]
    if "'" in cut:
        term = _stem(fold_word(cut))
    elif cut.isalpha():
        term = _stem(cut) if len(cut) > 3 else cut
    else:
        return cut  # a word with digits is its own term: never cached (counters, codes, dates)
    if len(_ascii_index) >= _ASCII_CACHE_SIZE:
        _ascii_index.clear()
    _ascii_index[word] = term
    return term


def _ascii_terms(text: str, stops: frozenset[str] | None) -> list[str]:
    """:func:`_analyze` of prepared ASCII text. A word without an apostrophe folds to itself
    and only words of four letters or more are stemmed; words with digits skip the caches (a
    counter or a code in every text would otherwise fill them)."""
    if stops is None:  # a document's terms: one dictionary look-up per word
        get = _ascii_index.get
        return [get(w) or _ascii_index_term(w) for w in _ASCII_WORD.findall(text)]
    return list(_ascii_query_terms(text, stops))


def _ascii_query_terms(text: str, stops: frozenset[str]) -> Iterator[str]:
    """:func:`_ascii_terms` of prepared ASCII text with stop words dropped, one at a time."""
    for word in _ASCII_WORD.findall(text):
        word = word[:MAX_WORD_CHARS]
        if "'" in word:
            folded = fold_word(word)
            if folded and folded not in stops:
                yield _stem(folded)
        elif word not in stops:
            yield _stem(word) if len(word) > 3 and word.isalpha() else word


def _analyze(text: str, stops: frozenset[str] | None, unigrams: bool = False) -> list[str]:
    """The terms of ``text`` in order; stop words (in folded form) dropped when ``stops`` is given.

    With ``unigrams``, each character of a spaceless run of two or more is a term too (after
    the run's bigrams).
    """
    prepared = _prepare(text)
    if prepared.isascii():
        return _ascii_terms(prepared, stops)
    out: list[str] = []
    for run, word in _TOKEN.findall(prepared):
        if word:
            word = word[:MAX_WORD_CHARS]  # a 1 MB "word" (a blob, a key held down) stays cheap
            if stops is None:
                term = _index_term(word)
                if term:
                    out.append(term)
                continue
            folded = fold_word(word)
            if folded and folded not in stops:
                out.append(_stem(folded))
            continue
        if run:
            units = _units(run)
            if len(units) == 1:
                if stops is None or run not in stops:
                    out.append(run)
                continue
            if stops is None:
                out.extend(a + b for a, b in pairwise(units))
                if unigrams:
                    out.extend(units)
                continue
            covered = _stop_cover(units, stops)
            out.extend(units[i] + units[i + 1] for i in range(len(units) - 1) if not covered[i] or not covered[i + 1])
            if unigrams:
                out.extend(u for u in units if u not in stops)
    return out


def tokenize(text: str, *, unigrams: bool = False) -> list[str]:
    """The index terms of ``text``, in order (stop words kept).

    Lower-cased, diacritics folded, English words stemmed, Han/Kana/Hangul/Thai runs as
    overlapping character bigrams (a one-character run as that character); ``Q:``/``A:``
    labels and markers such as ``<BOD>`` dropped. Never raises on any ``str``.

    ``unigrams=True`` also adds each character of a longer run (after its bigrams): recall
    finds words the bigrams split differently, and ranking still prefers whole bigrams.
    """
    return _analyze(text, None, unigrams)


def query_terms(
    text: str, lang: str | None = None, *, extra_stopwords: Iterable[str] = (), unigrams: bool = False
) -> list[str]:
    """The terms of ``text`` that may drive a match: :func:`tokenize` minus stop words.

    Args:
        text: any text.
        lang: a language code (``"pt"``, ``"pt-BR"``, ``"de_DE"``) selecting a stop-word list
            (see :func:`stop_words`); None means English.
        extra_stopwords: more words to ignore, compared after folding (case and accents).

    Repeated terms are kept: a term said twice weighs twice in a query. ``unigrams`` as in
    :func:`tokenize` (single characters that are stop words are left out).
    """
    return _analyze(text, _stop_set(lang, tuple(extra_stopwords)), unigrams)


def more_query_terms_than(text: str, limit: int, lang: str | None = None, *, unigrams: bool = False) -> bool:
    """Whether ``text`` has more than ``limit`` distinct :func:`query_terms` (the same answer
    as ``len(set(query_terms(text, lang, unigrams=unigrams))) > limit``); ASCII text is read
    only as far as it takes (a long reply's first few words settle it)."""
    stops = _stop_set(lang, ())
    prepared = _prepare(text)
    if not prepared.isascii():
        return len(set(_analyze(text, stops, unigrams))) > limit
    seen: set[str] = set()
    for term in _ascii_query_terms(prepared, stops):
        seen.add(term)
        if len(seen) > limit:
            return True
    return False


@functools.lru_cache(maxsize=64)
def _stop_set(lang: str | None, extra: tuple[str, ...]) -> frozenset[str]:
    return stop_words(lang) | _fold_list(extra) if extra else stop_words(lang)


# -- stop words ------------------------------------------------------------------------------

#: The languages with a stop-word list in ``data/stopwords`` (plus ``cjk``, always used).
STOPWORD_LANGUAGES = ("en", "pt", "es", "fr", "de", "it", "nl")


def _fold_list(words: Iterable[str]) -> frozenset[str]:
    out: set[str] = set()
    for word in words:
        for m in _TOKEN.finditer(unicodedata.normalize("NFKC", word).casefold()):
            out.add(m.group("run") or fold_word(m.group("word")))
    return frozenset(out)


@functools.lru_cache(maxsize=32)
def _load_list(name: str) -> frozenset[str]:
    try:
        raw = resources.files("ovos_memory_plugins").joinpath("data", "stopwords", f"{name}.txt").read_text("utf-8")
    except (FileNotFoundError, OSError):
        return frozenset()
    words = [w for line in raw.splitlines() if not line.lstrip().startswith("#") for w in line.split()]
    return _fold_list(words)


@functools.lru_cache(maxsize=32)
def stop_words(lang: str | None = None) -> frozenset[str]:
    """The stop words for ``lang`` (folded forms): English, the language's own list and the CJK list.

    ``lang`` may carry a region (``"pt-BR"``); a language without a list gets English and CJK.
    """
    code = (lang or "en").replace("_", "-").split("-")[0].lower()
    words = _load_list("en") | _load_list("cjk")
    if code != "en" and code in STOPWORD_LANGUAGES:
        words = words | _load_list(code)
    return words
