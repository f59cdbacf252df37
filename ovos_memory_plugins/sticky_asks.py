"""What counts as an explicit ask to the sticky memory: per-language phrase books and :func:`detect_ask`.

The user's explicit asks are recognised from per-language phrase lists
(``ovos_memory_plugins/data/sticky/<lang>.json``, extendable by config, :func:`load_phrasebooks`):
a **remember** ask ("remember that my bike is red"), a **forget** ask ("forget about my bike")
and a **list** ask ("what do you remember (about …)?"). Only the start of an utterance is
searched (after polite openers such as "please", "can you", "ok," or a short "Ada,"), so "I
can't remember where I parked" or "do you remember when …" are not asks. Pure rules: no model,
no storage; :class:`~ovos_memory_plugins.sticky.StickyMemory` acts on what they find.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ovos_memory_plugins.text import clean_text

__all__ = [
    "PHRASE_KINDS",
    "Ask",
    "AskKind",
    "PhraseBook",
    "bundled_languages",
    "check_phrases",
    "detect_ask",
    "fold",
    "load_phrasebooks",
    "tidy",
]

#: The lists a phrase file may hold; each is a list of strings.
PHRASE_KINDS = (
    "prefixes",
    "remember",
    "forget",
    "list",
    "not_before",
    "not_alone",
    "question_endings",
    "trailing",
    "topic_trailing",
    "stop_words",
)

AskKind = Literal["remember", "forget", "list"]

#: Only this many characters of an utterance are searched for an ask's phrase.
_SCAN_CHARS = 240
#: The longest utterance treated as an ask (longer text is dictation, not a request).
_MAX_ASK_CHARS = 4000
#: How many polite openers may precede the phrase.
_MAX_PREFIXES = 4


# -- folding and phrase patterns -------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def _fold_char(ch: str) -> str:
    if ch in "’‘ʼ`´′":
        return "'"
    decomposed = unicodedata.normalize("NFKD", ch)
    base = "".join(c for c in decomposed if not unicodedata.combining(c))
    return base.casefold()


def fold(text: str) -> tuple[str, list[int]]:
    """``text`` case- and accent-folded, and for each folded character its index in ``text``."""
    chars: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        for c in _fold_char(ch):
            chars.append(c)
            index.append(i)
    index.append(len(text))
    return "".join(chars), index


def _fold_phrase(text: str) -> str:
    return " ".join(fold(text)[0].split())


_SPACELESS = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u0e00-\u0e7f]")
_SEP = r"[\s,\-–]+"
_SKIP = re.compile(r"[\s,，、:：;；.。!！\-–—…\"'«»“”„¿¡(\[]*")
_LEAD = re.compile(r"[\s\"'«»“”„¿¡(\[*]*")
_VOCATIVE = re.compile(r"([^,，:：.!?。！？\n]{1,30}?)[,，:：]")
_CLAUSE_END = re.compile(r"[,，.。!！?？;；:：\n]")
_END_JUNK = " \t\r\n.。!！?？,，;；:：…\"'»”)]*"
_WORDY = re.compile(r"[^\W_]")


def _pattern(phrase: str) -> str:
    """A regex for a folded phrase: words apart by spaces, commas or hyphens; apostrophes loose."""
    words = [w for w in re.split(r"[\s\-]+", phrase) if w]
    parts = [re.escape(w).replace("'", r"'\s*") for w in words]
    body = _SEP.join(parts)
    if words and not _SPACELESS.match(words[-1][-1]):
        body += r"(?![^\W_])"
    return body


def _starts_with(text: str, phrase: str) -> bool:
    """Whether folded ``text`` starts with folded ``phrase`` as whole words."""
    if not phrase or not text.startswith(phrase):
        return False
    if _SPACELESS.match(phrase[-1]) or len(text) == len(phrase):
        return True
    return not _WORDY.match(text[len(phrase)])


def _ends_with(text: str, phrase: str) -> bool:
    """Whether folded ``text`` ends with folded ``phrase`` as whole words."""
    if not phrase or not text.endswith(phrase):
        return False
    if _SPACELESS.match(phrase[0]) or len(text) == len(phrase):
        return True
    return not _WORDY.match(text[-len(phrase) - 1])


@dataclass
class PhraseBook:
    """One language's phrase lists, folded and compiled.

    Attributes:
        lang: the language code (``"en"``).
        lists: the folded lists by kind (see :data:`PHRASE_KINDS`).
    """

    lang: str
    lists: dict[str, list[str]]
    _prefixes: list[re.Pattern[str]] = field(default_factory=list, repr=False)
    _phrases: list[tuple[AskKind, str, re.Pattern[str]]] = field(default_factory=list, repr=False)

    @classmethod
    def build(cls, lang: str, raw: Mapping[str, Sequence[str]]) -> PhraseBook:
        """Fold and compile ``raw`` (kind -> phrases); unknown kinds and non-strings are skipped."""
        lists: dict[str, list[str]] = {}
        for kind in PHRASE_KINDS:
            seen: dict[str, None] = {}
            for phrase in raw.get(kind, ()) or ():
                if isinstance(phrase, str) and phrase.strip():
                    seen[_fold_phrase(phrase)] = None
            lists[kind] = sorted(seen, key=len, reverse=True)
        book = cls(lang=lang, lists=lists)
        book._prefixes = [re.compile(_pattern(p)) for p in lists["prefixes"]]
        kinds: tuple[AskKind, ...] = ("remember", "forget", "list")
        phrases = [(k, p) for k in kinds for p in lists[k]]
        phrases.sort(key=lambda kp: len(kp[1]), reverse=True)
        book._phrases = [(k, p, re.compile(_pattern(p))) for k, p in phrases]
        return book

    def starts(self, folded: str, start: int) -> list[tuple[int, bool]]:
        """Positions where a phrase may begin: ``start`` and after each polite opener."""
        out = [(start, False)]
        pos = start
        for _ in range(_MAX_PREFIXES):
            for prefix in self._prefixes:
                m = prefix.match(folded, pos)
                if m:
                    nxt = _SKIP.match(folded, m.end())
                    pos = nxt.end() if nxt else m.end()
                    out.append((pos, True))
                    break
            else:
                break
        return out

    def phrase_at(self, folded: str, pos: int) -> tuple[AskKind, str, int] | None:
        """The longest phrase matching at ``pos``: its kind, text and end."""
        for kind, phrase, pattern in self._phrases:
            m = pattern.match(folded, pos)
            if m:
                return kind, phrase, m.end()
        return None


@dataclass(frozen=True)
class Ask:
    """An explicit ask found in an utterance.

    Attributes:
        kind: ``remember``, ``forget`` or ``list``.
        text: the fact to remember, the description of what to forget, or the topic to list
            (empty: everything), as the user said it, lightly normalised.
        lang: the language of the phrase that matched.
        phrase: the (folded) phrase that matched.
    """

    kind: AskKind
    text: str
    lang: str
    phrase: str


def tidy(text: str, limit: int) -> str:
    """One line: whitespace collapsed, enclosing quotes and end punctuation dropped, cut at ``limit``."""
    text = " ".join(clean_text(text).split())
    for _ in range(3):
        stripped = text.strip(" \"'«»“”„`").rstrip(" .。!！,，;；:：…")
        if stripped == text:
            break
        text = stripped
    if len(text) > limit:
        cut = text[:limit]
        space = cut.rfind(" ")
        text = (cut[:space] if space > limit // 2 else cut).rstrip() + "…"
    return text


def detect_ask(utterance: str, books: Sequence[PhraseBook], max_chars: int = 300) -> Ask | None:
    """The explicit ask at the start of ``utterance``, or None.

    Tries every language's phrases at the start of the utterance (after leading quotes), after
    polite openers, and after a short leading clause ending in a comma ("Ada, …"). The longest
    phrase wins. A remember or forget ask is refused when what follows the phrase starts with one
    of the language's ``not_before`` words ("where", "when", "me to"), is one of its ``not_alone``
    words ("it", "that"), or when the utterance is a question without a polite opener.
    """
    if not isinstance(utterance, str) or not utterance.strip() or len(utterance) > _MAX_ASK_CHARS:
        return None
    utterance = clean_text(utterance)
    folded_head, _ = fold(utterance[:_SCAN_CHARS])
    lead = _LEAD.match(folded_head)
    first = lead.end() if lead else 0
    openings = [first]
    voc = _VOCATIVE.match(folded_head, first)
    if voc and len(voc.group(1).split()) <= 3:
        skip = _SKIP.match(folded_head, voc.end())
        openings.append(skip.end() if skip else voc.end())
    best: tuple[int, int, PhraseBook, AskKind, str, int, bool] | None = None
    for book in books:
        for opening in openings:
            for pos, polite in book.starts(folded_head, opening):
                found = book.phrase_at(folded_head, pos)
                if found is None:
                    continue
                kind, phrase, end = found
                rank = (len(phrase), -pos)
                if best is None or rank > (best[0], best[1]):
                    best = (len(phrase), -pos, book, kind, phrase, end, polite)
    if best is None:
        return None
    _, _, book, kind, phrase, head_end, polite = best
    # re-fold the whole utterance and map the phrase end back to the original text
    folded, index = fold(utterance)
    return _validate(utterance, folded, index, head_end, book, kind, phrase, polite, max_chars)


_SENTENCE_END = re.compile(r"[.!?](?=[\s\"'»”)]|$)|[。！？\n]")
#: Words that a full stop after them does not end a sentence ("Dr. Silva").
_ABBREVIATIONS = frozenset({"dr", "dra", "mr", "mrs", "ms", "st", "jr", "sr", "sra", "prof", "hr", "fr", "nr", "no"})


def _sentence_end(folded: str, start: int) -> tuple[int, str]:
    """Where the sentence starting at ``start`` ends (exclusive) and the mark ending it ("" at the end)."""
    for m in _SENTENCE_END.finditer(folded, start):
        if m.group() == ".":
            before = folded[start : m.start()].rsplit(None, 1)
            if before and before[-1] in _ABBREVIATIONS:
                continue
        return m.start(), m.group()
    return len(folded), ""


def _validate(
    utterance: str,
    folded: str,
    index: list[int],
    start: int,
    book: PhraseBook,
    kind: AskKind,
    phrase: str,
    polite: bool,
    max_chars: int,
) -> Ask | None:
    lists = book.lists
    skip = _SKIP.match(folded, start)
    start = skip.end() if skip else start
    # the ask is the first sentence after the phrase; what follows it is another request
    end, terminator = _sentence_end(folded, start)
    sentence = folded[start:end].rstrip(_END_JUNK)
    is_question = terminator in ("?", "？") or any(sentence.endswith(q) for q in lists["question_endings"])
    # drop trailing punctuation and courtesy words ("please", "thanks"), repeatedly
    trailing = lists["trailing"] + (lists["topic_trailing"] if kind == "list" else [])
    changed = True
    while changed and end > start:
        changed = False
        trimmed = folded[start:end].rstrip(_END_JUNK)
        if len(trimmed) != end - start:
            end = start + len(trimmed)
            changed = True
        for word in trailing:
            if len(word) < len(trimmed) and _ends_with(trimmed, word):
                end -= len(word)
                changed = True
                break
    content = folded[start:end].strip()
    if kind != "list":
        if not content or (is_question and not polite):
            return None
        if any(_starts_with(content, w) for w in lists["not_before"]):
            return None
        clause = _CLAUSE_END.split(content, maxsplit=1)[0].strip()
        if clause in lists["not_alone"] or content in lists["not_alone"]:
            return None
        if not _WORDY.search(content):
            return None
    if kind == "list" and content in lists["not_alone"]:
        end = start  # "what do you remember about me": everything
    text = tidy(utterance[index[start] : index[end]], max_chars) if end > start else ""
    if kind != "list" and not _WORDY.search(text):
        return None
    return Ask(kind=kind, text=text, lang=book.lang, phrase=phrase)


# -- phrase files ----------------------------------------------------------------------------


def bundled_languages() -> list[str]:
    """The language codes with a phrase file shipped in ``ovos_memory_plugins/data/sticky``."""
    folder = resources.files("ovos_memory_plugins").joinpath("data", "sticky")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


@functools.lru_cache(maxsize=32)
def _bundled(lang: str) -> dict[str, list[str]]:
    raw = resources.files("ovos_memory_plugins").joinpath("data", "sticky", f"{lang}.json").read_text("utf-8")
    data = json.loads(raw)
    return {k: list(v) for k, v in data.items() if k in PHRASE_KINDS and isinstance(v, list)}


def _check_phrase_block(lang: Any, block: Any) -> str | None:
    if not isinstance(lang, str) or not lang.strip():
        return "language codes as keys"
    if not isinstance(block, Mapping):
        return f"an object of phrase lists for language {lang!r}"
    for kind, phrases in block.items():
        if kind == "lang" or kind == "name":
            continue
        if kind not in PHRASE_KINDS:
            return f"phrase lists named {', '.join(PHRASE_KINDS)} (not {kind!r})"
        if not isinstance(phrases, list) or not all(isinstance(p, str) for p in phrases):
            return f"a list of strings for {lang}.{kind}"
    return None


def check_phrases(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "an object: language code -> {kind: [phrases]}"
    for lang, block in value.items():
        problem = _check_phrase_block(lang, block)
        if problem:
            return problem
    return None


def load_phrasebooks(
    languages: Iterable[str] | None = None,
    extra: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    files: Iterable[str | Path] = (),
) -> tuple[list[PhraseBook], list[str]]:
    """The phrase books for ``languages`` (None: every bundled one plus those in ``extra``/``files``).

    ``extra`` (language -> kind -> phrases) and the JSON ``files`` (the bundled format, with a
    ``lang`` key) extend a bundled language or add a new one. Returns the books and the problems
    found (a missing language, an unreadable file); never raises.
    """
    problems: list[str] = []
    merged: dict[str, dict[str, list[str]]] = {}

    def add(lang: str, block: Mapping[str, Any]) -> None:
        target = merged.setdefault(lang, {})
        for kind in PHRASE_KINDS:
            values = block.get(kind)
            if isinstance(values, list):
                target.setdefault(kind, []).extend(v for v in values if isinstance(v, str))

    bundled = bundled_languages()
    wanted = list(dict.fromkeys(languages)) if languages is not None else None
    for lang in wanted if wanted is not None else bundled:
        if lang in bundled:
            add(lang, _bundled(lang))
    for path in files:
        try:
            data = json.loads(Path(path).expanduser().read_text("utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"sticky phrase file {path}: cannot be read ({exc}); skipped")
            continue
        code = data.get("lang") if isinstance(data, dict) else None
        problem = _check_phrase_block(code, data) if isinstance(code, str) else "a 'lang' key"
        if problem or not isinstance(code, str):
            problems.append(f"sticky phrase file {path}: expected {problem}; skipped")
            continue
        if wanted is None or code in wanted:
            add(code, data)
    for lang, block in (extra or {}).items():
        if _check_phrase_block(lang, block) is None and (wanted is None or lang in wanted):
            add(lang, block)
    for lang in wanted or []:
        if lang not in merged:
            problems.append(f"sticky language {lang!r} has no phrase list (bundled: {', '.join(bundled)})")
    return [PhraseBook.build(lang, block) for lang, block in merged.items()], problems
