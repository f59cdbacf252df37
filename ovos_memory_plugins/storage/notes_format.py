"""The text form of curated notes: the ``- [YYYY-MM] fact`` lines of ``MEMORY.md`` and ``RETIRED.md``.

A note is one fact with the month it was learned and the session it was learned in
(:class:`~ovos_memory_plugins.protocols.Note`, whose id is derived from its words):
:func:`make_note` builds one, :func:`parse_notes` reads a body, :func:`format_note` and
:func:`render_notes` write one. Lines that are not bullets (headings, blank lines, comments) are
ignored; a bullet without a date is a note with an unknown date; a bullet whose leading ``[...]``
is not a ``YYYY-MM`` (or ``YYYY-MM-DD``) date raises
:class:`~ovos_memory_plugins.errors.CorruptFileError` naming the line.
:func:`term_overlap_search` is the plain search over notes' words both stores fall back to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ovos_memory_plugins.errors import CorruptFileError
from ovos_memory_plugins.storage.records import Note, note_id

__all__ = [
    "FILE_HEADER",
    "RETIRED_HEADER",
    "format_note",
    "make_note",
    "parse_notes",
    "prompt_line",
    "render_notes",
    "term_overlap_search",
]

FILE_HEADER = (
    "# Memory\n\n"
    "<!-- One durable fact per line: `- [YYYY-MM] fact`. You may edit this file; lines that are\n"
    "     not bullets are ignored and are not kept when the memory rewrites the file. -->\n\n"
)
RETIRED_HEADER = "# Retired notes\n\n<!-- Facts that stopped being true: `- [YYYY-MM retired YYYY-MM-DD] fact`. -->\n\n"

_BULLET = re.compile(r"^\s*[-*]\s+(.*?)\s*$")
_DATED = re.compile(r"^\[([^\]]*)\]\s*(.*)$")
_DATE = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?$")
_RETIRED_DATE = re.compile(
    r"^(\d{4}-(?:0[1-9]|1[0-2])|)\s*retired\s+(\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))$"
)


def make_note(text: str, date: str = "", *, session_id: str = "", retired_on: str | None = None) -> Note:
    """A :class:`Note` whose id is derived from ``text``."""
    return Note(id=note_id(text), text=text, date=date, session_id=session_id, retired_on=retired_on)


def prompt_line(note: Note) -> str:
    """The line a note is shown as in a prompt: ``- [YYYY-MM] fact`` (no session, no retirement)."""
    return f"- [{note.date}] {note.text}" if note.date else f"- {note.text}"


def format_note(note: Note) -> str:
    """The ``MEMORY.md`` line of a note (``RETIRED.md`` form when it is retired)."""
    if note.retired_on:
        return f"- [{note.date + ' ' if note.date else ''}retired {note.retired_on}] {note.text}"
    return prompt_line(note)


def parse_notes(body: str, *, source: str = "<text>", retired: bool = False) -> list[Note]:
    """The notes in a ``MEMORY.md`` body (or ``RETIRED.md`` with ``retired=True``).

    Raises :class:`CorruptFileError` naming ``source`` and the line when a bullet's leading
    ``[...]`` is not a date.
    """
    notes: list[Note] = []
    for number, line in enumerate(body.splitlines(), start=1):
        match = _BULLET.match(line)
        if not match or not match.group(1):
            continue
        content = match.group(1)
        dated = _DATED.match(content)
        date, retired_on = "", None
        if dated:
            label, content = dated.group(1).strip(), dated.group(2).strip()
            if retired:
                rmatch = _RETIRED_DATE.match(label)
                if rmatch:
                    date, retired_on = rmatch.group(1), rmatch.group(2)
                elif _DATE.match(label):
                    date = label[:7]
                else:
                    raise CorruptFileError(f"{source}, line {number}: {label!r} is not 'YYYY-MM retired YYYY-MM-DD'")
            else:
                if not _DATE.match(label):
                    raise CorruptFileError(f"{source}, line {number}: [{label}] is not a date (expected [YYYY-MM])")
                date = label[:7]
        if not content:
            continue
        if retired and retired_on is None:
            retired_on = ""
        notes.append(make_note(content, date, retired_on=retired_on))
    return notes


def render_notes(notes: Sequence[Note], header: str = FILE_HEADER) -> str:
    """A whole ``MEMORY.md`` (or ``RETIRED.md``) body."""
    return header + "".join(format_note(n) + "\n" for n in notes)


def term_overlap_search(notes: Sequence[Note], query_terms: Sequence[str], top_k: int) -> list[Note]:
    """The notes sharing the most of ``query_terms``, best first (ties in their order), at most ``top_k``."""
    from ovos_memory_plugins.text import tokenize

    wanted = set(query_terms)
    if not wanted or top_k <= 0:
        return []
    scored = []
    for i, note in enumerate(notes):
        overlap = len(wanted.intersection(tokenize(note.text)))
        if overlap:
            scored.append((-overlap, i, note))
    scored.sort(key=lambda t: (t[0], t[1]))
    return [note for _, _, note in scored[:top_k]]
