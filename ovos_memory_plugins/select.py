"""Which of a search's hits a turn injects, and the neighbouring turn a hit brings along (pure).

``BaseRetrievalMemory.recall`` searches and a composite asks its members (fused), then both
hand the candidates to :func:`choose_hits`, the one selection, which runs :func:`select_hits`
on the ordinary hits, each alternative's and the window's (:func:`alternatives_first`,
:func:`window_first`); :func:`select_hits`:

1. hits the history window already shows are dropped (the caller passes their keys);
2. one copy of identical texts (the first, best-scored, wins);
3. on backends that match words (they declare it by answering
   ``BaseRetrievalMemory.word_terms``), a hit whose own text shares no term with the query is
   dropped: it matched only through the words of the turn before it (the keyword backend
   indexes them so that a reply such as "yes, last Tuesday" is found by what it answers), and
   the turn it really answers is the one to show;
4. a cut-off relative to the best remaining hit (``min_relative``): a hit must score at least
   that share of the best one, so a query with one strong match brings that match alone, and a
   query that matches many turns about equally brings several;
5. at most ``limit`` hits.

Then :func:`~ovos_memory_plugins.shaping.prompt_memories` (the base's recall and the
composite's both end there): consecutive exchanges joined, long memories shortened around the
query's words, the newer of memories about the same thing first. Those steps live in
:mod:`ovos_memory_plugins.shaping`; their names are importable from here too.

:func:`needs_context` and :func:`clip_context` decide, when an exchange is recorded, whether its
user turn is a short answer to a question that cannot stand alone ("yes, the blue one", "last
Tuesday") and what of the question goes with it (``metadata["context_before"]``, at most
:data:`CONTEXT_CHARS` characters); the exchange that asked gets the answer as
``metadata["context_after"]``. The prompt renders both marked as context.

See ``docs/recall.md``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ovos_memory_plugins.common import MemoryHit, exchange_text, normalize_content
from ovos_memory_plugins.dates import language
from ovos_memory_plugins.shaping import (
    HEAD_CHARS,
    SAME_THING_OVERLAP,
    SENTENCE_END,
    excerpt,
    excerpt_hits,
    excerpt_terms,
    merge_adjacent,
    newer_first,
    prompt_memories,
)

__all__ = [
    "CONTEXT_CHARS",
    "CONTEXT_MAX_TERMS",
    "HEAD_CHARS",
    "ORDER_WORDS",
    "SAME_THING_OVERLAP",
    "SENTENCE_END",
    "Candidates",
    "alternatives",
    "alternatives_first",
    "choose_hits",
    "clip_context",
    "excerpt",
    "excerpt_hits",
    "excerpt_terms",
    "merge_adjacent",
    "needs_context",
    "newer_first",
    "prompt_memories",
    "recall_query",
    "score_cut",
    "select_hits",
    "shown_in_window",
    "without_order_words",
]

#: The turn before a hit is shown in at most this many characters.
CONTEXT_CHARS = 240
#: A user turn answering a question with at most this many content terms needs the question.
CONTEXT_MAX_TERMS = 4
_QUESTION_MARKS = ("?", "\uff1f", "\u061f")


def _role(message: Any) -> str:
    role = getattr(message, "role", "")
    return str(getattr(role, "value", role))


def recall_query(utterance: str, history: Sequence[Any], retrieval: Any) -> str:
    """The text recall searches with: the utterance, or (``retrieval.query_mode == "history"``)
    the last ``retrieval.query_history_turns`` user turns of the window and then the utterance."""
    if retrieval.query_mode == "history" and retrieval.query_history_turns > 0:
        users = [m.content for m in history if _role(m) == "user"][-retrieval.query_history_turns :]
        return "\n".join([*users, utterance])
    return utterance


def shown_in_window(history: Sequence[Any]) -> set[str]:
    """The normalised exchange texts the history window already shows (never recalled again)."""
    return {
        normalize_content(exchange_text(prev.content, cur.content))
        for prev, cur in pairwise(history)
        if _role(prev) == "user" and _role(cur) == "assistant"
    }


def score_cut(hits: list[MemoryHit], min_score: float | None, min_relative: float | None) -> list[MemoryHit]:
    """``hits`` scoring at least ``min_score`` (None: any) and at least ``min_relative`` of the
    best one's score (None or 0, or a best score of 0 or less: no relative cut). The one cut of
    a search's hits: a single memory's ``search`` (with its backend's
    ``default_min_relative_score`` when ``retrieval.min_relative_score`` is null) and a
    composite's fused hits (``retrieval.min_relative_score`` only) both apply it."""
    if min_score is not None:
        hits = [h for h in hits if h.score >= min_score]
    if min_relative and hits:
        best = max(h.score for h in hits)
        if best > 0:
            hits = [h for h in hits if h.score >= min_relative * best]
    return hits


def select_hits(
    hits: Sequence[MemoryHit],
    *,
    limit: int,
    min_relative: float | None = None,
    exclude: frozenset[str] | set[str] = frozenset(),
    query_terms: frozenset[str] | set[str] | None = None,
    hit_terms: Sequence[frozenset[str] | set[str] | None] | None = None,
    score: Callable[[MemoryHit], float] | None = None,
) -> list[MemoryHit]:
    """The hits to inject, best first; never mutates ``hits``.

    Args:
        hits: a search's hits, best first.
        limit: at most this many.
        min_relative: drop hits scoring below this share of the best kept hit (None or 0: none).
        exclude: normalised contents (:func:`~ovos_memory_plugins.common.normalize_content`) to
            leave out, such as the exchanges the history window shows.
        query_terms: the query's terms, when the backend matches words; with ``hit_terms`` a hit
            sharing none of them in its own text is dropped.
        hit_terms: each hit's own terms (aligned with ``hits``), by the backend's tokenizer; None
            for a hit the check does not apply to (a composite's hit that a member matching
            no words found).
        score: what the relative cut compares (default: ``hit.score``); a composite passes each
            hit's share of its member's best score, the fused scores being ranks.
    """
    if limit <= 0:
        return []
    seen = set(exclude)
    kept: list[MemoryHit] = []
    check = bool(query_terms) and hit_terms is not None and len(hit_terms) == len(hits)
    for i, hit in enumerate(hits):
        key = normalize_content(hit.content)
        if key in seen:
            continue
        seen.add(key)
        own = hit_terms[i] if check and hit_terms is not None else None
        if query_terms and own is not None and not (set(own) & set(query_terms)):
            continue
        kept.append(hit)
    if min_relative and kept:
        value = score or _score
        best = max(value(h) for h in kept)
        if best > 0:
            kept = [h for h in kept if value(h) >= min_relative * best]
    return kept[:limit]


def _score(hit: MemoryHit) -> float:
    return hit.score


@dataclass(frozen=True)
class Candidates:
    """One gathered list of hits for :func:`choose_hits`, best first: a single memory's search,
    or a composite's members' answers fused.

    Attributes:
        hits: the hits, best first.
        by_words: whether the own-term check applies to them (False: the window's newest
            memories, found by time, not by the query's words).
        unchecked: normalised contents the own-term check leaves alone (a composite's hits that
            a member matching no words found too: a vector member's match need share no word).
        score: what the relative cut compares (None: ``hit.score``); a composite's fused scores
            are ranks, so it passes each hit's best share of its member's top score.
    """

    hits: Sequence[MemoryHit] = ()
    by_words: bool = True
    unchecked: frozenset[str] = frozenset()
    score: Callable[[MemoryHit], float] | None = None


def choose_hits(
    ordinary: Candidates,
    *,
    limit: int,
    shown: frozenset[str] | set[str] = frozenset(),
    min_relative: float | None = None,
    query_terms: frozenset[str] | None = None,
    hit_terms: Callable[[Sequence[MemoryHit]], Sequence[frozenset[str] | set[str] | None] | None] | None = None,
    alternatives: Sequence[tuple[Candidates, frozenset[str] | None]] = (),
    dated: Candidates | None = None,
) -> list[MemoryHit]:
    """The hits a turn injects, before :func:`prompt_memories`: the ONE selection of a single
    memory's recall and a composite's (docs/recall.md). Each gathers its hits (a single memory
    searching itself, a composite its members at once, fused) and hands them here:

    * the ``ordinary`` hits through :func:`select_hits` (what the window ``shown`` leaves out,
      the own-term check with ``query_terms`` and ``hit_terms``, the ``min_relative`` cut), at
      most ``limit``;
    * each alternative a comparison question names (``alternatives``: its candidates and its
      own terms) gives its best hit not already picked, chosen the same way, a place first
      (:func:`alternatives_first`);
    * when the utterance names a time (``dated``: what was made then), up to
      :func:`window_places` of those, chosen the same way (without the own-term check when they
      were found by time, not words), go first (:func:`window_first`).

    ``hit_terms`` gives each hit's own terms (None: the backend matches no words, no own-term
    check; a None entry: that hit is not checked); ``query_terms`` None means the same."""

    def choose(found: Candidates, places: int, terms: frozenset[str] | None) -> list[MemoryHit]:
        hits = list(found.hits)
        own: list[frozenset[str] | set[str] | None] | None = None
        if found.by_words and terms is not None and hit_terms is not None and hits:
            every = hit_terms(hits)
            if every is not None:
                own = [
                    None if normalize_content(h.content) in found.unchecked else t
                    for h, t in zip(hits, every, strict=True)
                ]
        return select_hits(
            hits,
            limit=places,
            min_relative=min_relative,
            exclude=frozenset(shown),
            query_terms=terms if found.by_words else None,
            hit_terms=own,
            score=found.score,
        )

    chosen = choose(ordinary, limit, query_terms)
    if alternatives:  # "the thermostat or the mesh network?": a place for each
        picks: list[MemoryHit] = []
        for found, terms in alternatives:
            taken = {h.source for h in picks}
            rest = Candidates(
                [h for h in found.hits if h.source not in taken], found.by_words, found.unchecked, found.score
            )
            picks.extend(choose(rest, 1, terms))
        chosen = alternatives_first(picks, chosen, limit)
    if dated is not None:  # time words: what was made then comes first
        first = choose(dated, window_places(limit), query_terms) if dated.hits else []
        chosen = window_first(first, chosen, limit)
    return chosen


def window_places(limit: int) -> int:
    """How many of a turn's ``limit`` places time words give to what was made in the window they
    name: half, rounded up (3 of 5), at least one."""
    return max(1, (limit + 1) // 2)


def window_first(in_window: Sequence[MemoryHit], ordinary: Sequence[MemoryHit], limit: int) -> list[MemoryHit]:
    """The turn's hits when the utterance names a time (docs/recall.md): up to
    :func:`window_places` of ``in_window`` (what was made then, already chosen, best first) come
    first, the ``ordinary`` hits not among them fill the rest, at most ``limit`` in all. An empty
    ``in_window`` leaves the ordinary hits as they are. The single memory and the composite both
    call this: one rule for time words."""
    first = list(in_window[: window_places(limit)])
    seen = {h.source for h in first}
    return [*first, *(h for h in ordinary if h.source not in seen)][: max(limit, 0)]


def alternatives_first(picks: Sequence[MemoryHit], ordinary: Sequence[MemoryHit], limit: int) -> list[MemoryHit]:
    """The turn's hits when the utterance weighs two alternatives (:func:`alternatives`): each
    alternative's best match (``picks``, already chosen) first, so the evidence of each has a
    place, then the ``ordinary`` hits not among them, at most ``limit`` in all."""
    first = list(picks[: max(limit, 0)])
    seen = {h.source for h in first}
    return [*first, *(h for h in ordinary if h.source not in seen)][: max(limit, 0)]


#: The word for "or" per language (the phrase tables' codes); Chinese has no spaces around it.
_OR_WORDS: dict[str, tuple[str, ...]] = {
    "en": ("or",),
    "de": ("oder",),
    "es": ("o", "u"),
    "fr": ("ou",),
    "pt": ("ou",),
    "it": ("o", "oppure"),
    "nl": ("of",),
    "zh": ("还是", "或者", "或"),
}
#: Where the first alternative starts: after a comma, semicolon or colon (Latin and CJK).
_CLAUSE_MARK = re.compile(r"[,;:\u3001\uff0c\uff1b\uff1a]")
#: Where the second alternative ends: a clause's punctuation (Latin and CJK), a line break.
_CLAUSE_END = re.compile(r"[,;:.!?\n\u3001\uff0c\uff1b\uff1a\u3002\uff01\uff1f]")
_OR_PATTERNS: dict[str, re.Pattern[str]] = {
    code: re.compile("|".join(re.escape(w) for w in words))
    if code == "zh"
    else re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w) for w in words) + r")(?!\w)", re.IGNORECASE)
    for code, words in _OR_WORDS.items()
}


def alternatives(text: str, lang: str | None = None) -> tuple[str, str] | None:
    """The two alternatives a comparison question names after its question ("which did I set
    up first, the smart thermostat or the mesh network system?" -> ``("the smart thermostat",
    "the mesh network system")``), or None. The last "or" of the memory's language
    (:data:`_OR_WORDS`; English for an unknown one) splits its clause: the first alternative
    runs back to the comma (semicolon, colon) before it, the second on to the clause's end. A
    clause without that comma is not a list of alternatives ("what areas has John been to or
    is planning to go to?", "answer yes or no"). Each must hold a letter; whether it holds a
    content word is the caller's to check (its index's terms)."""
    found = list(_OR_PATTERNS[language(lang)].finditer(text))
    if not found:
        return None
    at = found[-1]
    before, after = text[: at.start()], text[at.end() :]
    marks = list(_CLAUSE_MARK.finditer(before))
    if not marks or _CLAUSE_END.search(before, marks[-1].end()):
        return None
    first = before[marks[-1].end() :]
    end = _CLAUSE_END.search(after)
    second = after[: end.start()] if end else after
    first, second = first.strip(), second.strip()
    if not (any(c.isalpha() for c in first) and any(c.isalpha() for c in second)):
        return None
    return first, second


def needs_context(user_terms: int, user_text: str, previous_turn: str) -> bool:
    """Whether a user turn is a reply that needs the turn before it to be understood.

    It does when the turn before (the assistant's) asked something and the reply is short:
    ``user_terms`` content terms (stop words left out), at most :data:`CONTEXT_MAX_TERMS`
    ("yes, the blue one", "Casa Pepe please", "last Tuesday", "是的"). A statement after a
    statement ("I am allergic to peanuts" after "I'll remember that.") stands on its own.
    """
    if not user_text.strip() or user_terms > CONTEXT_MAX_TERMS:
        return False
    return any(mark in previous_turn for mark in _QUESTION_MARKS)


def clip_context(text: str, budget: int = CONTEXT_CHARS) -> str:
    """``text`` on one line, cut to ``budget`` characters (its end kept: a question ends there)."""
    flat = " ".join(text.split())
    if len(flat) <= budget:
        return flat
    return "…" + flat[-(budget - 1) :].lstrip()


#: Words that ask for an order rather than name a thing ("what is the order of ..., from the
#: earliest to the latest?"), per language: left out of recall's query, like stop words, so
#: exchanges sharing only them do not outrank the evidence. Folded (case and accents).
ORDER_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset({"order", "chronological", "chronologically", "earliest", "latest"}),
    "de": frozenset({"reihenfolge", "chronologisch", "fruheste", "fruhesten", "spateste", "spatesten"}),
    "es": frozenset({"orden", "cronologico", "cronologica", "cronologicamente"}),
    "fr": frozenset({"ordre", "chronologique", "chronologiquement"}),
    "pt": frozenset({"ordem", "cronologico", "cronologica", "cronologicamente"}),
    "it": frozenset({"ordine", "cronologico", "cronologica", "cronologicamente"}),
    "nl": frozenset({"volgorde", "chronologisch", "chronologische", "vroegste"}),
    "zh": frozenset({"顺序", "先后", "最早", "最晚"}),
}
_LATIN_WORD = re.compile(r"\w+", re.UNICODE)


def _folded(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word.casefold()) if not unicodedata.combining(c))


def without_order_words(text: str, lang: str | None = None) -> str:
    """``text`` without the words of :data:`ORDER_WORDS` for the memory's language (English for
    an unknown one): what recall searches with. Chinese ones are cut out wherever they occur."""
    code = language(lang)
    words = ORDER_WORDS[code]
    if code == "zh":
        for word in words:
            text = text.replace(word, " ")
        return text
    return _LATIN_WORD.sub(lambda m: " " if _folded(m.group()) in words else m.group(), text)
