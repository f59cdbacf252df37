"""Admission: which recorded exchanges are worth archiving for recall.

"ok, thanks", "stop", "good morning", "what time is it" are turns of a conversation, not
memories: recalled later they only take room in the prompt. Such an exchange stays in the
session's history (the model still sees it in the window) but is not stored as a document.

An exchange is *low-signal* when:

* every sentence of its user turn is a known low-signal phrase, or made only of one-word
  phrases ("ok thanks", "yes please"), in any supported language (en, pt, es, fr, de, it, nl,
  zh: ``data/admission/<lang>.txt``); case, punctuation and apostrophes do not matter, and
* the assistant's reply is short (at most :data:`MAX_REPLY_CHARS` characters): "yes" followed by
  a recipe is kept, because the recipe is worth recalling.

Pure functions; the lists load once. Config: the shared key ``admission`` (true by default).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from importlib import resources

__all__ = ["LANGUAGES", "MAX_REPLY_CHARS", "is_low_signal", "low_signal_phrases", "normalize_phrase"]

#: The languages with a list (the package's stop-word and sticky-note languages).
LANGUAGES = ("en", "pt", "es", "fr", "de", "it", "nl", "zh")
#: A low-signal user turn is archived anyway when the reply is longer than this.
MAX_REPLY_CHARS = 240
#: A user turn longer than this is never low-signal.
MAX_USER_CHARS = 120

_SENTENCE = re.compile(r"[.!?;:,\u3002\uff01\uff1f\uff1b\uff1a\uff0c\u3001\u2026\n]+")
_APOSTROPHES = str.maketrans("", "", "'\u2019\u02bc`")


def normalize_phrase(text: str) -> str:
    """NFKC, case-folded, apostrophes removed, other punctuation and symbols as spaces, collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold().translate(_APOSTROPHES)
    chars = [" " if unicodedata.category(ch)[0] in "PSZC" and ch != "-" else ch for ch in text]
    return " ".join("".join(chars).replace("-", " ").split())


@functools.lru_cache(maxsize=1)
def low_signal_phrases() -> tuple[frozenset[str], frozenset[str]]:
    """``(phrases, words)``: every list's normalised phrases, and those that are one word."""
    phrases: set[str] = set()
    for lang in LANGUAGES:
        raw = resources.files("ovos_memory_plugins").joinpath("data", "admission", f"{lang}.txt").read_text("utf-8")
        for line in raw.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                phrase = normalize_phrase(line)
                if phrase:
                    phrases.add(phrase)
    words = {p for p in phrases if " " not in p}
    return frozenset(phrases), frozenset(words)


def _low_signal_sentence(sentence: str, phrases: frozenset[str], words: frozenset[str]) -> bool:
    norm = normalize_phrase(sentence)
    if not norm or norm in phrases:
        return True
    return all(w in words for w in norm.split())


@functools.lru_cache(maxsize=1024)  # the rolling summary asks again of the exchanges admission saw
def is_low_signal(user: str, assistant: str) -> bool:
    """Whether an exchange is small talk or a command not worth archiving (see the module doc)."""
    if len(assistant.strip()) > MAX_REPLY_CHARS:
        return False
    text = user.strip()
    if not text or len(text) > MAX_USER_CHARS:
        return not text and not assistant.strip()
    phrases, words = low_signal_phrases()
    return all(_low_signal_sentence(s, phrases, words) for s in _SENTENCE.split(text))
