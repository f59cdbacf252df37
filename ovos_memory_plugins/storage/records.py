"""Records the storage hands out and takes in, shared by the stores and the protocols above them.

:class:`Note` (a curated or sticky note) and its content-derived id live here, below both the
notes stores and :mod:`ovos_memory_plugins.protocols`, so neither imports the other for them.
``ovos_memory_plugins.protocols.Note`` stays importable.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ovos_memory_plugins.common import normalize_content

__all__ = ["NewNote", "Note", "note_id", "words_key"]


@dataclass(frozen=True)
class Note:
    """One note, curated or sticky: a durable fact shown to the model.

    Attributes:
        id: exact and stable (derived from the content); verbs accept it in place of a description.
        text: the fact, one line.
        date: when it was learned, ``YYYY-MM`` or ``YYYY-MM-DD`` (``""`` when unknown).
        session_id: the session it was learned in (``""`` when unknown); ``forget_session`` removes it.
        retired_on: the day it stopped being true (``YYYY-MM-DD``); None while it is active.
        metadata: what was stored with it.
    """

    id: str
    text: str
    date: str = ""
    session_id: str = ""
    retired_on: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def active(self) -> bool:
        """Whether the note is still true (not retired)."""
        return self.retired_on is None


@dataclass(frozen=True)
class NewNote:
    """A note to add, before a store gives it its id and date.

    Attributes:
        text: the fact, one line.
        session_id: the session it is learned in.
        date: when it was learned (``""``: the store dates it, today).
        lang: the language it was said in (None: not known; kept by sticky notes).
        metadata: what to store with it (kept by sticky notes).
    """

    text: str
    session_id: str
    date: str = ""
    lang: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


_TRAILING = " \t\r\n.。!！?？;；,，…"


def words_key(text: str) -> str:
    """What makes two notes "the same words": NFKC, case-folded, spacing collapsed, end
    punctuation dropped ("My bike is red." is "my bike is red")."""
    return normalize_content(text).rstrip(_TRAILING)


def note_id(text: str) -> str:
    """The id of a curated note: ``n-`` and a digest of its words (:func:`words_key`), so it
    stays the same across processes, restarts and stores."""
    digest = hashlib.sha256(words_key(text).encode("utf-8", "surrogatepass")).hexdigest()
    return "n-" + digest[:16]
