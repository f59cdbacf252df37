"""What the notes' operations hand back and keep: :class:`StaleNotesError`, the results of a
digest and of a dream, :func:`normalize_fact` (a fact as the notes keep it), and the pending
record (a session's exchanges waiting for the digest, and their mark in storage). Part of
:class:`~ovos_memory_plugins.notes.NotesMemory`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.protocols import Note
from ovos_memory_plugins.text import clean_text

_LEADING_DATE = re.compile(r"^\[(\d{4}-(?:0[1-9]|1[0-2]))(?:-\d{2})?\]\s*")


class StaleNotesError(BackendError):
    """``replace_notes(body, expected_version=...)``: the notes changed since that version was read."""


@dataclass
class DigestResult:
    """What a digest did: ``status`` is ``applied``, ``nothing`` (no new exchanges), ``failed``
    (no model answer: the transcript is kept for the next try) or ``garbled`` (unusable reply)."""

    status: Literal["applied", "nothing", "failed", "garbled"]
    added: list[Note] = field(default_factory=list)
    retired: list[Note] = field(default_factory=list)
    episode: str = ""
    #: the notes the user asked to forget, removed for good (every copy, backups, undo history)
    forgotten: list[Note] = field(default_factory=list)


@dataclass
class DreamResult:
    """What a dream did: ``status`` is ``rewritten``, ``unchanged``, ``rejected`` (the reply was
    unusable or invented something: notes untouched), ``failed`` (no model answer) or ``skipped``
    (no model, or no notes). It is truthy when the notes were rewritten."""

    status: Literal["rewritten", "unchanged", "rejected", "failed", "skipped"]
    before: int = 0
    after: int = 0
    reason: str = ""

    def __bool__(self) -> bool:
        return self.status == "rewritten"


def normalize_fact(text: str) -> tuple[str, str]:
    """``(fact, date)`` from user or model text: one line, spaces collapsed, a leading bullet
    and ``[YYYY-MM]`` date taken off (date ``""`` when there was none)."""
    text = " ".join(clean_text(str(text)).split())
    text = re.sub(r"^(?:[-*]\s+)+", "", text)
    date = ""
    match = _LEADING_DATE.match(text)
    if match:
        date, text = match.group(1), text[match.end() :]
    return text.strip(), date


#: The metadata key of an archived exchange not digested yet (value ``"pending"``): what is
#: pending is derived from storage after a restart (see :meth:`NotesMemory.pending_exchanges`).
DIGEST_KEY = "digest"


@dataclass
class _Pending:
    #: The session's exchanges since the last digest, oldest first: document id -> text.
    exchanges: dict[str, str] = field(default_factory=dict)
    last_activity: float = 0.0
    turns: int = 0
    garbled: int = 0
