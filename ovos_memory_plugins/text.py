"""Text helpers shared by every backend: cleaning user text so any input is safe to store and query."""

from __future__ import annotations

import re

__all__ = ["MAX_QUERY_CHARS", "clean_text", "clip_query"]

#: Recall queries are cut to this many characters (the utterance itself is never cut).
MAX_QUERY_CHARS = 4000

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` without NUL and other control characters (tab and newlines stay) and with lone
    surrogates replaced by U+FFFD, so it can be encoded as UTF-8 and stored anywhere."""
    text = _CONTROL.sub(" ", text)
    return _SURROGATE.sub("\ufffd", text)


def clip_query(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """A cleaned query of at most ``limit`` characters (the end is kept: it is the newest text)."""
    text = clean_text(text)
    return text if len(text) <= limit else text[-limit:]
