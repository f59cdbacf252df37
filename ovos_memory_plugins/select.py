"""Which of a search's hits a turn injects, and the neighbouring turn a hit brings along (pure).

``BaseRetrievalMemory.recall`` searches, then hands the hits to :func:`select_hits`:

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

:func:`needs_context` and :func:`clip_context` decide, when an exchange is recorded, whether its
user turn is a short answer to a question that cannot stand alone ("yes, the blue one", "last
Tuesday") and what of the question goes with it (``metadata["context_before"]``, at most
:data:`CONTEXT_CHARS` characters); the exchange that asked gets the answer as
``metadata["context_after"]``. The prompt renders both marked as context.

See ``docs/recall.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from ovos_memory_plugins.common import MemoryHit, exchange_text, normalize_content

__all__ = [
    "CONTEXT_CHARS",
    "CONTEXT_MAX_TERMS",
    "clip_context",
    "needs_context",
    "recall_query",
    "select_hits",
    "shown_in_window",
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


def select_hits(
    hits: Sequence[MemoryHit],
    *,
    limit: int,
    min_relative: float | None = None,
    exclude: frozenset[str] | set[str] = frozenset(),
    query_terms: frozenset[str] | set[str] | None = None,
    hit_terms: Sequence[frozenset[str] | set[str]] | None = None,
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
        hit_terms: each hit's own terms (aligned with ``hits``), by the backend's tokenizer.
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
        if check and query_terms and hit_terms is not None and not (set(hit_terms[i]) & set(query_terms)):
            continue
        kept.append(hit)
    if min_relative and kept:
        best = max(h.score for h in kept)
        if best > 0:
            kept = [h for h in kept if h.score >= min_relative * best]
    return kept[:limit]


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
