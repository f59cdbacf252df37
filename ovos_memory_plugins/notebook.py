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
* :class:`NotebookOptions` holds the knobs both share, one name and one default each (both
  options classes derive from it).
* :class:`Notebook` is the one implementation of the verbs (``list_notes``, ``remember``,
  ``forget``, ``update``, ``retire``, ``restore``): the scope rule (with ``session_id`` only
  that session's notes are candidates), refusals, duplicates, the description matcher, the
  :class:`~ovos_memory_plugins.protocols.NoteChange` answers and the forget listeners. It works
  on a :class:`NoteShelf`, the small row protocol both stores offer
  (:class:`~ovos_memory_plugins.storage.notes_store.NotesShelf` over ``MEMORY.md`` or the
  ``memory_notes`` table, :class:`~ovos_memory_plugins.storage.sticky_store.StickyShelf` over the
  sticky-note table); the plugins pass in only what is theirs (how a fact is tidied, today's
  date, stop words by language, what else goes when a note is forgotten).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ovos_memory_plugins.common import normalize_content
from ovos_memory_plugins.config import option
from ovos_memory_plugins.protocols import Note, NoteChange, words_key
from ovos_memory_plugins.storage.records import NewNote
from ovos_memory_plugins.text import query_terms, tokenize

LOG = logging.getLogger(__name__)

__all__ = [
    "DEPRECATED_ALIASES",
    "ID_SHAPE",
    "Match",
    "NoteShelf",
    "Notebook",
    "NotebookOptions",
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


# -- the shared knobs -------------------------------------------------------------------------

#: One default for both kinds of notes: a verb acts on a loose description only when the note
#: holds at least 60 % of the description's content words (stop words do not count; an exact
#: id or the exact words always match). Curated notes took any overlap (0.0) and let the
#: ranking decide, sticky notes asked 0.6; a forget deletes for good, so the stricter bar is
#: the one: "forget that my bike is blue" holds one of two content words of "my bike is red"
#: and deletes nothing, while "graphics card", "the bakery one" or "locker code 4417" still name
#: their note.
FORGET_MIN_SCORE = 0.6


@dataclass
class NotebookOptions:
    """The knobs curated notes and sticky notes share: one name and one default each.

    Both options classes derive from it (:class:`~ovos_memory_plugins.notes.NotesOptions`,
    :class:`~ovos_memory_plugins.sticky.StickyOptions`); ``docs/architecture.md`` says why each
    default is what it is.
    """

    max_context_chars: int = option(
        8000,
        doc="Characters of notes the prompt carries at most (curated notes show it as a meter; "
        "formerly `notes_budget` there, still accepted).",
        minimum=100,
    )
    max_notes_in_context: int = option(
        60,
        doc="Up to this many notes, all travel every turn; past it, only the ones relevant to the "
        "utterance (BM25) plus the `newest_in_context` newest (formerly `context_facts`); 0: no "
        "notes block. Also caps a sticky 'what do you remember' listing.",
        minimum=0,
    )
    newest_in_context: int = option(
        5,
        doc="Newest notes that always travel once `max_notes_in_context` is exceeded (formerly `newest_facts`).",
        minimum=0,
    )
    max_note_chars: int = option(
        500,
        doc="A note is one short fact: the verbs refuse a longer one (`refused`); a spoken sticky ask "
        "is cut to it at a word boundary.",
        minimum=20,
    )
    forget_min_score: float = option(
        FORGET_MIN_SCORE,
        doc="How much of a description (0 to 1: the share of its content words) a note must hold to be picked "
        "by `forget`/`update`/`retire`/`restore` (and a spoken 'forget …'); an exact id or the exact words "
        "always match.",
        minimum=0,
    )
    forget_ambiguity: float = option(
        0.8,
        doc="A second note scoring at least this fraction of the best makes a description ambiguous: "
        "nothing changes and the candidates come back.",
        minimum=0,
    )


# -- the one verb implementation ----------------------------------------------------------------


@runtime_checkable
class NoteShelf(Protocol):
    """The rows a :class:`Notebook` works on: what both notes stores offer, with note ids."""

    def rows(self, *, include_retired: bool = False, fresh: bool = True) -> list[Note]:
        """The notes in the store's order (active ones, and retired ones with ``include_retired``).
        ``fresh``: read now (inside a transaction), not from a cache."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """A block in which a read-modify-write cycle is not interleaved with another process's."""
        ...

    def insert(self, new: NewNote) -> Note:
        """Add an active note (dated ``new.date``, else today as the store dates notes); return it."""
        ...

    def touch(self, note: Note) -> None:
        """The note was said again (a store that keeps when may note it)."""
        ...

    def replace(self, old: Note, text: str, *, date: str, day: str) -> tuple[Note, Note]:
        """Retire ``old`` (on ``day``) and put ``text`` in its place (its session, language and
        metadata); return the retired ``old`` and the new note."""
        ...

    def set_retired(self, note: Note, day: str | None) -> Note:
        """Retire the note (on ``day``) or make it active again (None); return it as it is now."""
        ...

    def delete(self, note: Note, *, session_id: str | None = None) -> list[Note]:
        """Delete, for real, the note's rows (only ``session_id``'s with it); return them."""
        ...


def _no_date(text: str) -> tuple[str, str]:
    return " ".join(text.split()), ""


class Notebook:
    """The verbs of :class:`~ovos_memory_plugins.protocols.NotesKeeper`, once, for every kind of note.

    Args:
        shelf: the notes' rows.
        options: the shared knobs (read on every call: the memory's options object).
        lock: held around every read-modify-write (with the shelf's transaction inside it).
        tidy: a fact or description as one line, and a date it starts with (``""``: none).
        today: the day a note is retired on (``YYYY-MM-DD``).
        terms: the content words matching uses, for a language (None: any).
        same_scope: where a fact said again is the same note: None (anywhere) or the session.
        erase: what deletes a picked note (by default the shelf's ``delete``); a memory whose
            notes are also kept elsewhere (sticky notes' turns in the history) passes its own.
        after_forget: called outside the transaction with the rows a forget removed (purges,
            backups).
        changed: called after every change (``grew`` when a note was added).
        what: the word answers use for a note.
        name: the memory's name in log lines.
    """

    def __init__(
        self,
        shelf: NoteShelf,
        options: NotebookOptions,
        *,
        lock: contextlib.AbstractContextManager[Any],
        today: Callable[[], str],
        tidy: Callable[[str], tuple[str, str]] = _no_date,
        terms: Callable[[str | None], Callable[[str], Sequence[str]]] = lambda lang: default_terms,
        same_scope: Callable[[str], str | None] = lambda session_id: None,
        erase: Callable[[Note, str | None], list[Note]] | None = None,
        after_forget: Callable[[list[Note]], None] = lambda gone: None,
        changed: Callable[[bool], None] = lambda grew: None,
        what: str = "note",
        name: str = "notes",
    ) -> None:
        self.shelf = shelf
        self.options = options
        self._lock = lock
        self._today = today
        self._tidy = tidy
        self._terms = terms
        self._same_scope = same_scope
        self._erase = erase or (lambda note, session_id: shelf.delete(note, session_id=session_id))
        self._after_forget = after_forget
        self._changed = changed
        self._what = what
        self._name = name
        self._listeners: list[Callable[[Note], None]] = []

    # -- reading -----------------------------------------------------------------------------

    def list_notes(self, *, include_retired: bool = False, session_id: str | None = None) -> list[Note]:
        """The notes in the store's order (retired ones too with ``include_retired``); only those
        learned in ``session_id`` when it is given."""
        return self._candidates(session_id, retired=include_retired, fresh=False)

    def _candidates(
        self, session_id: str | None, *, active: bool = True, retired: bool = True, fresh: bool = True
    ) -> list[Note]:
        """The scope rule, the one place: with ``session_id`` only that session's notes."""
        rows = self.shelf.rows(include_retired=retired, fresh=fresh)
        return [
            n
            for n in rows
            if (active or not n.active) and (retired or n.active) and (session_id is None or n.session_id == session_id)
        ]

    def same_words(self, text: str, session_id: str) -> Note | None:
        """The active note holding the words of ``text`` where a fact said in ``session_id``
        would be the same note, else None."""
        key = words_key(text)
        scope = self._same_scope(session_id)
        for note in self.shelf.rows(include_retired=False):
            if words_key(note.text) == key and (scope is None or note.session_id == scope):
                return note
        return None

    # -- input -------------------------------------------------------------------------------

    def fact(self, value: Any) -> tuple[str, str] | NoteChange:
        """``(text, date)`` of a fact to store, or the ``refused`` change saying why not."""
        if as_fact(value) is None:
            return refused(f"a {self._what} must be text with a letter or digit in it, not {value!r:.40}")
        text, date = self._tidy(value)
        if as_fact(text) is None:
            return refused(f"cannot remember an empty {self._what}")
        limit = self.options.max_note_chars
        if len(text) > limit:
            return refused(f"a {self._what} is one short fact (at most {limit} characters), not {len(text)}")
        return text, date

    def pick(self, description: Any, notes: Sequence[Note], lang: str | None = None) -> Note | NoteChange:
        """The note ``description`` names among ``notes`` (:func:`match_note` with the knobs),
        or the change saying why none is."""
        if isinstance(description, str):
            description = self._tidy(description)[0] or description
        match = match_note(
            description,
            notes,
            min_score=self.options.forget_min_score,
            ambiguity=self.options.forget_ambiguity,
            terms=self._terms(lang),
        )
        failed = change_for(match, self._what)
        if failed is not None:
            return failed
        assert match.note is not None
        return match.note

    # -- the verbs ---------------------------------------------------------------------------

    def remember(
        self,
        fact: Any,
        session_id: str = "default",
        *,
        date: str | None = None,
        lang: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> NoteChange:
        """Add a fact learned in ``session_id`` (``added``); the same words again are one note
        (``duplicate``); input that is no fact changes nothing (``refused``)."""
        parsed = self.fact(fact)
        if isinstance(parsed, NoteChange):
            return parsed
        text, given = parsed
        sid = session_id if isinstance(session_id, str) else "default"
        with self._lock, self.shelf.transaction():
            same = self.same_words(text, sid)
            if same is not None:
                self.shelf.touch(same)
                return NoteChange("duplicate", note=same, message=f"already noted: {same.text}")
            note = self.shelf.insert(NewNote(text, sid, date or given, lang, dict(metadata or {})))
        self._changed(True)
        return NoteChange("added", note=note, message=f"noted: {text}")

    def update(self, description: Any, new_fact: Any, *, session_id: str | None = None) -> NoteChange:
        """Replace the active note ``description`` names with ``new_fact``: the old one is
        retired, the new one takes its place and its session."""
        parsed = self.fact(new_fact)
        if isinstance(parsed, NoteChange):
            return parsed
        text, given = parsed
        with self._lock, self.shelf.transaction():
            picked = self.pick(description, self._candidates(session_id, retired=False))
            if isinstance(picked, NoteChange):
                return picked
            if words_key(picked.text) == words_key(text):
                return NoteChange("duplicate", note=picked, message=f"already noted: {picked.text}")
            held = self.same_words(text, picked.session_id)
            if held is not None:  # the new words are a note already: the old one only retires
                old, new = self.shelf.set_retired(picked, self._today()), held
            else:
                old, new = self.shelf.replace(picked, text, date=given, day=self._today())
        self._changed(True)
        return NoteChange("updated", note=old, replaced_by=new, message=f"updated: {picked.text} -> {new.text}")

    def retire(self, description: Any, *, session_id: str | None = None) -> NoteChange:
        """Mark the active note ``description`` names as no longer true (kept, out of the prompt)."""
        with self._lock, self.shelf.transaction():
            picked = self.pick(description, self._candidates(session_id, retired=False))
            if isinstance(picked, NoteChange):
                return picked
            old = self.shelf.set_retired(picked, self._today())
        self._changed(False)
        return NoteChange("retired", note=old, message=f"retired: {picked.text}")

    def restore(self, description: Any, *, session_id: str | None = None) -> NoteChange:
        """Make the retired note ``description`` names active again."""
        with self._lock, self.shelf.transaction():
            picked = self.pick(description, self._candidates(session_id, active=False))
            if isinstance(picked, NoteChange):
                return picked
            note = self.shelf.set_retired(picked, None)
        self._changed(True)
        return NoteChange("restored", note=note, message=f"restored: {picked.text}")

    def forget(
        self,
        description: Any,
        *,
        session_id: str | None = None,
        lang: str | None = None,
        among: Sequence[Note] | None = None,
    ) -> NoteChange:
        """Delete, for real, the note ``description`` names (active or retired) and every copy
        of it in the scope; the forget listeners hear of it. ``among``: the candidates (a memory
        that scopes a spoken "forget …" its own way), else the scope rule's."""
        with self._lock:
            with self.shelf.transaction():
                notes = list(among) if among is not None else self._candidates(session_id)
                picked = self.pick(description, notes, lang)
                if isinstance(picked, NoteChange):
                    return picked
                gone = self._erase(picked, session_id)
            self._after_forget(gone)
        self._changed(False)
        self.tell_forgotten(picked)
        return NoteChange("forgotten", note=picked, message=f"forgot: {picked.text}")

    # -- forget listeners --------------------------------------------------------------------

    def add_forget_listener(self, listener: Callable[[Note], None]) -> None:
        """Call ``listener(note)`` after every note forgotten, whatever asked."""
        self._listeners.append(listener)

    def tell_forgotten(self, note: Note) -> None:
        """Tell every listener ``note`` was forgotten (a listener that raises is logged)."""
        for listener in list(self._listeners):
            try:
                listener(note)
            except Exception:
                LOG.exception("%s: a forget listener failed for note %s", self._name, note.id)
