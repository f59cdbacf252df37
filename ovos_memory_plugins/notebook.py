"""What curated notes (:mod:`~ovos_memory_plugins.notes`) and sticky notes
(:mod:`~ovos_memory_plugins.sticky`) share: the one description matcher, the one prompt
selection and budget, the knob names, and input checks.

Both memories implement :class:`~ovos_memory_plugins.protocols.NotesKeeper`; this module holds
the parts of it that must behave the same in both:

* :func:`match_note` picks the note a description names: an exact id first (an id-shaped
  description that is no note's id matches nothing: ids are exact), then the same words, then a
  long quoted piece of one note, then the best overlap of content words weighted by rarity.
  Retired notes are candidates like active ones. Two candidates scoring within
  ``forget_ambiguity`` of each other are a close call: nothing changes and both come back.
* :func:`select_for_prompt` picks the notes a turn carries: every note up to
  ``max_notes_in_context``; past it the ``newest_in_context`` newest plus those relevant to the
  utterance; all cut to ``max_context_chars`` characters (newest kept first), in list order.
* :data:`DEPRECATED_ALIASES` maps the knob names each memory used before to the shared ones
  (the options classes declare them as ``deprecated_keys``; the config parser renames them, with
  a log line).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ovos_memory_plugins.common import normalize_content
from ovos_memory_plugins.protocols import Note, NoteChange, words_key
from ovos_memory_plugins.text import query_terms, tokenize

LOG = logging.getLogger(__name__)

__all__ = [
    "DEPRECATED_ALIASES",
    "ID_SHAPE",
    "Match",
    "as_fact",
    "change_for",
    "match_note",
    "refused",
    "select_for_prompt",
]

#: What an id looks like (``n-…`` curated notes, ``d-…`` documents and sticky notes): a
#: description of this shape is taken as an id, matched exactly and never loosely.
ID_SHAPE = re.compile(r"^[a-z]-[0-9a-f]{12,64}$")
#: A quoted piece of a note at least this long names that note when no other note holds it.
QUOTE_CHARS = 20
#: How many close candidates an ``ambiguous`` answer lists at most.
MAX_CANDIDATES = 5


def default_terms(text: str) -> list[str]:
    """Content words of ``text`` (stop words out); all its terms when it has only stop words."""
    return query_terms(text) or tokenize(text)


@dataclass
class Match:
    """What :func:`match_note` found.

    Attributes:
        status: ``found`` (``note`` is the one), ``ambiguous`` (``candidates`` are too close to
            call) or ``not_found``.
        note: the note found.
        candidates: the close candidates, best first (``ambiguous``).
        exact: whether the note was named by its id or its exact words.
    """

    status: Literal["found", "ambiguous", "not_found"]
    note: Note | None = None
    candidates: list[Note] = field(default_factory=list)
    exact: bool = False


def _prefer_active(notes: Sequence[Note]) -> Note:
    return next((n for n in notes if n.active), notes[0])


def match_note(
    description: Any,
    notes: Sequence[Note],
    *,
    min_score: float = 0.0,
    ambiguity: float = 0.8,
    terms: Callable[[str], Sequence[str]] = default_terms,
    key: Callable[[str], str] = words_key,
) -> Match:
    """The note ``description`` names among ``notes`` (active and retired alike).

    Args:
        description: a note's id, its words, or words that name it ("the bakery one").
        notes: the candidates.
        min_score: the share (0 to 1) of the description's content words a note must hold to
            be a candidate. Candidates are then ranked by the shared words weighted by rarity
            (idf over ``notes``), plus a little for how much of the note they are.
        ambiguity: a second candidate scoring at least this fraction of the best makes a close
            call (``ambiguous``).
        terms: a text's content words (a memory passes its language's stop words here).
        key: the normal form two texts are "the same words" by.
    """
    if not isinstance(description, str) or not notes:
        return Match("not_found")
    wanted_text = " ".join(description.split())
    if not wanted_text:
        return Match("not_found")
    by_id = [n for n in notes if n.id == wanted_text]
    if by_id:
        return Match("found", _prefer_active(by_id), exact=True)
    if ID_SHAPE.match(wanted_text):
        return Match("not_found")  # ids are exact: an unknown id never matches loosely
    wanted_key = key(wanted_text)
    if not wanted_key:
        return Match("not_found")
    same = [n for n in notes if key(n.text) == wanted_key]
    if same:
        return Match("found", _prefer_active(same), exact=True)
    folded = normalize_content(wanted_text)
    if len(folded) >= QUOTE_CHARS:
        inside = {n.id: n for n in notes if folded in normalize_content(n.text)}
        if len(inside) == 1:
            return Match("found", _prefer_active([n for n in notes if n.id in inside]))
    wanted = set(terms(wanted_text))
    if not wanted:
        return Match("not_found")
    note_terms = [set(terms(n.text)) for n in notes]
    count = len(notes)
    df: dict[str, int] = {}
    for ts in note_terms:
        for t in ts & wanted:
            df[t] = df.get(t, 0) + 1

    def idf(term: str) -> float:
        n = df.get(term, 0)
        return math.log(1.0 + (count - n + 0.5) / (n + 0.5))

    total = sum(idf(t) for t in wanted) or 1.0
    scored: list[tuple[float, int, Note]] = []
    for i, (note, ts) in enumerate(zip(notes, note_terms, strict=True)):
        shared = wanted & ts
        if not shared:
            continue
        if len(shared) / len(wanted) < min_score:  # the share of the description's words it holds
            continue
        weighted = sum(idf(t) for t in shared) / total  # rare words tell notes apart
        scored.append((weighted + 0.25 * len(shared) / len(wanted | ts), i, note))
    if not scored:
        return Match("not_found")
    scored.sort(key=lambda s: (-s[0], not s[2].active, -s[1]))
    best = scored[0][0]
    close = [n for s, _, n in scored if s >= ambiguity * best]
    distinct = list({n.id: n for n in close}.values())
    if len(distinct) == 1:
        return Match("found", _prefer_active(close))
    return Match("ambiguous", candidates=distinct[:MAX_CANDIDATES])


def change_for(match: Match, what: str = "note") -> NoteChange | None:
    """The :class:`NoteChange` a verb returns when ``match`` found nothing to act on, else None."""
    if match.status == "ambiguous":
        listing = "; ".join(repr(n.text) for n in match.candidates)
        return NoteChange(
            "ambiguous",
            candidates=list(match.candidates),
            message=f"several {what}s match ({listing}); nothing changed",
        )
    if match.status == "not_found" or match.note is None:
        return NoteChange("not_found", message=f"no {what} matches; nothing changed")
    return None


def refused(reason: str) -> NoteChange:
    """A verb's answer to input it will not store or act on (nothing changes)."""
    return NoteChange("refused", message=reason)


def as_fact(value: Any) -> str | None:
    """``value`` when it is text with a letter or digit in it, else None (``None``, numbers,
    bytes and blank text are never stored as notes)."""
    if not isinstance(value, str) or not re.search(r"[^\W_]", value):
        return None
    return value


def select_for_prompt(
    notes: Sequence[Note],
    utterance: str,
    *,
    max_notes: int,
    newest: int,
    max_chars: int,
    line: Callable[[Note], str],
    rank: Callable[[str, int], Sequence[int]],
) -> list[Note]:
    """The notes a turn carries, in list order (``notes`` is oldest first).

    Up to ``max_notes`` notes, all go; past it the ``newest`` newest plus the ones ``rank``
    finds relevant to the utterance (indexes into ``notes``, best first). The choice is then cut
    to ``max_chars`` characters of rendered lines (``line``), newest first, then most relevant.
    """
    if not notes or max_notes <= 0:
        return []
    last = len(notes) - 1
    if len(notes) <= max_notes:
        priority = list(range(last, -1, -1))
    else:
        fresh = list(range(last, max(last - min(newest, max_notes), -1), -1))
        wanted = max(max_notes - len(fresh), 0)
        relevant = [i for i in rank(utterance, wanted + len(fresh)) if 0 <= i <= last] if wanted and utterance else []
        relevant = [i for i in relevant if i not in fresh][:wanted]
        priority = list(dict.fromkeys([*fresh, *relevant]))
    chosen: list[int] = []
    used = 0
    for i in priority:
        size = len(line(notes[i])) + 1
        if used + size > max_chars:
            continue
        chosen.append(i)
        used += size
    return [notes[i] for i in sorted(chosen)]


#: Knob names each memory used before the shared ones, by options class name.
DEPRECATED_ALIASES: dict[str, dict[str, str]] = {
    "NotesOptions": {
        "notes_budget": "max_context_chars",
        "context_facts": "max_notes_in_context",
        "newest_facts": "newest_in_context",
        "notes_header": "header",
    },
    "StickyOptions": {},
}
