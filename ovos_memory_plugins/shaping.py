"""What a turn shows of the hits it chose (pure): :func:`prompt_memories`, the last step of
recall for a single memory and a composite alike (after ``select.choose_hits``).

1. :func:`merge_adjacent` joins hits that are consecutive exchanges of one conversation (the
   caller says which follows which) into one memory, in time order: the prompt shows a stretch
   of a past conversation once, as one chunk, instead of its exchanges as separate memories
   each with the other as context;
2. :func:`excerpt_hits` shortens a memory longer than the budget around the query's words
   (:func:`excerpt`), found without the stop words of the memory's language
   (:func:`excerpt_terms`);
3. :func:`newer_first` puts the newer of memories about the same thing first, marked.

See ``docs/recall.md``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.dates import memory_time
from ovos_memory_plugins.text import cut_long, query_terms, tokenize

__all__ = [
    "HEAD_CHARS",
    "SAME_THING_OVERLAP",
    "SENTENCE_END",
    "excerpt",
    "excerpt_hits",
    "excerpt_terms",
    "merge_adjacent",
    "newer_first",
    "prompt_memories",
]


def merge_adjacent(hits: Sequence[MemoryHit], follows: Callable[[MemoryHit, MemoryHit], bool]) -> list[MemoryHit]:
    """``hits`` with each run of consecutive exchanges joined into one hit; never mutates ``hits``.

    ``follows(a, b)`` says whether ``b`` is the exchange right after ``a`` in one conversation. A
    run becomes one hit: its texts in time order joined by line breaks, the best score of the
    run, the earliest exchange's id as ``source`` and every id in ``metadata["sources"]``, the
    first exchange's ``context_before`` and the last one's ``context_after`` (the turns between
    are in the text itself). Runs keep the order of their best-ranked exchange; a hit that
    follows nothing and is followed by nothing is returned as it is.
    """
    n = len(hits)
    after: dict[int, int] = {}
    has_before: set[int] = set()
    for i in range(n):
        for j in range(n):
            if i != j and j not in has_before and i not in after and follows(hits[i], hits[j]):
                after[i] = j
                has_before.add(j)
                break
    if not after:
        return list(hits)
    runs: list[list[int]] = []
    placed: set[int] = set()
    for start in range(n):
        if start in has_before:
            continue
        run = [start]
        while run[-1] in after and after[run[-1]] not in placed and after[run[-1]] not in run:
            run.append(after[run[-1]])
        placed.update(run)
        runs.append(run)
    runs.extend([i] for i in range(n) if i not in placed)  # a cycle (an exchange said again later): as they are
    runs.sort(key=min)
    return [_joined([hits[i] for i in run]) if len(run) > 1 else hits[run[0]] for run in runs]


def _joined(run: Sequence[MemoryHit]) -> MemoryHit:
    """One hit for consecutive exchanges, in time order (see :func:`merge_adjacent`)."""
    first, last = run[0], run[-1]
    metadata = {k: v for k, v in first.metadata.items() if k != "context_after"}
    if "context_after" in last.metadata:
        metadata["context_after"] = last.metadata["context_after"]
    metadata["sources"] = [h.source for h in run]
    return replace(
        first,
        content="\n".join(h.content.strip() for h in run),
        score=max(h.score for h in run),
        metadata=metadata,
    )


#: Each turn of a shortened memory keeps at least its opening, this many characters.
HEAD_CHARS = 200
#: A turn's label in an exchange's text (``common.exchange_text``): where a turn starts.
_TURN_LABELS = ("Q: ", "A: ")
#: Sentence ends: Latin punctuation then space, or CJK full stops (no space after them).
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[\u3002\uff01\uff1f\uff1b])")
_GAP = "\u2026"


def excerpt(text: str, terms: frozenset[str] | set[str], budget: int) -> str:
    """``text`` shortened to about ``budget`` characters around what matches ``terms``.

    Unchanged when it fits (or ``budget`` <= 0). Else: every turn keeps its opening (its
    sentences until :data:`HEAD_CHARS` characters are reached; a turn starts at a ``Q: ``/``A: ``
    line, or the text at its first line), then the sentences holding the most distinct query
    terms (:func:`text.tokenize` terms, best first, each with the sentence after it when that
    fits too) as long as they fit, shown in their original order; ``…`` marks what was left
    out. ``terms`` are the query's (:func:`excerpt_terms`).
    """
    if budget <= 0 or len(text) <= budget:
        return text
    lines = text.split("\n")
    pieces: list[tuple[int, str]] = []  # (line number, sentence), in order
    heads: set[int] = set()
    for number, line in enumerate(lines):
        sentences = [
            p for s in SENTENCE_END.split(line) if s.strip() for p in cut_long(s, HEAD_CHARS, lowest=HEAD_CHARS // 2)
        ]
        if sentences and (number == 0 or line.startswith(_TURN_LABELS)):
            heads.add(len(pieces))
        pieces.extend((number, sentence) for sentence in sentences)
    chosen: set[int] = set()
    for head in heads:  # a turn's opening: its sentences until HEAD_CHARS are reached
        length, i = 0, head
        while i < len(pieces) and (i == head or i not in heads) and length < HEAD_CHARS:
            chosen.add(i)
            length += len(pieces[i][1]) + 1
            i += 1
    used = sum(len(pieces[i][1]) + 1 for i in chosen)
    scored = []
    if terms:
        wanted = set(terms)
        for i, (_, sentence) in enumerate(pieces):
            if i in chosen:
                continue
            # every sentence is tokenised: a quick spelling test would miss stems spelt
            # otherwise ("dying" is "die"); the stems are cached, so a warm turn pays ~2 ms
            found = len(set(tokenize(sentence)) & wanted)
            if found:
                scored.append((-found, i))
    for _, i in sorted(scored):
        for j in (i, i + 1):
            if j < len(pieces) and j not in chosen and used + len(pieces[j][1]) + 1 <= budget:
                chosen.add(j)
                used += len(pieces[j][1]) + 1
    return _joined_pieces(pieces, chosen)


def _joined_pieces(pieces: Sequence[tuple[int, str]], chosen: set[int]) -> str:
    """The chosen sentences in order, those of one line joined by spaces; ``…`` where sentences
    or lines were left out (at the end of the line before the gap)."""
    lines: list[list[str]] = []
    line = -1
    gap = False
    for i, (number, sentence) in enumerate(pieces):
        if i not in chosen:
            gap = True
            continue
        if gap and lines:
            lines[-1].append(_GAP)
        if number != line or not lines:
            lines.append([])
            line = number
        lines[-1].append(sentence)
        gap = False
    if gap and lines:
        lines[-1].append(_GAP)
    return "\n".join(" ".join(words) for words in lines)


def excerpt_terms(query: str, lang: str | None = None, extra_stopwords: Iterable[str] = ()) -> frozenset[str]:
    """The terms :func:`excerpt` looks for: the query's, without the stop words of ``lang`` and
    ``extra_stopwords`` (:func:`text.query_terms`, the keyword index's own path; ``lang`` None:
    English). A memory passes its keyword index's ``lang`` and ``extra_stopwords``
    (``BaseRetrievalMemory.excerpt_terms``), so a German memory is not shortened around "und"."""
    return frozenset(query_terms(query, lang, extra_stopwords=extra_stopwords))


def excerpt_hits(
    hits: Sequence[MemoryHit], query: str, budget: int, terms: Callable[[str], frozenset[str]] = excerpt_terms
) -> list[MemoryHit]:
    """``hits`` with each text shortened by :func:`excerpt` to ``budget`` characters per
    exchange (a joined stretch of consecutive exchanges gets it per exchange), around the words
    of ``query`` (``terms(query)``, called once and only when a hit is too long; by default
    :func:`excerpt_terms` with English stop words); a shortened hit says so in
    ``metadata["shortened_from"]`` (its full length). Never mutates ``hits``."""
    if budget <= 0:
        return list(hits)
    out = []
    wanted: frozenset[str] | None = None
    for hit in hits:
        sources = hit.metadata.get("sources")
        limit = budget * (len(sources) if isinstance(sources, list) and sources else 1)
        if len(hit.content) <= limit:
            out.append(hit)
            continue
        if wanted is None:
            wanted = terms(query)
        short = excerpt(hit.content, wanted, limit)
        out.append(replace(hit, content=short, metadata={**hit.metadata, "shortened_from": len(hit.content)}))
    return out


def prompt_memories(
    chosen: Sequence[MemoryHit],
    follows: Callable[[MemoryHit, MemoryHit], bool],
    query: str,
    budget: int,
    terms: Callable[[str], frozenset[str]] = excerpt_terms,
) -> list[MemoryHit]:
    """The memories a turn shows, from its chosen hits: consecutive exchanges joined
    (:func:`merge_adjacent`), then each shortened around ``query``'s ``terms`` to ``budget``
    characters per exchange (:func:`excerpt_hits`), then the newer of memories about the same
    thing first (:func:`newer_first`). The base's recall and the composite's both end here,
    each passing the terms of its memory's language."""
    return newer_first(excerpt_hits(merge_adjacent(chosen, follows), query, budget, terms), query, terms)


#: Two recalled memories are about the same thing when their user turns share at least this
#: share of the smaller one's content terms (the overlap coefficient) and one of the query's.
SAME_THING_OVERLAP = 1 / 3


def _user_terms(text: str, terms: Callable[[str], frozenset[str]]) -> frozenset[str]:
    """The content terms of a memory's user turns (its ``Q:`` lines; the whole text when it
    has none)."""
    users = [line[3:] for line in text.split("\n") if line.startswith("Q: ")]
    return terms("\n".join(users) if users else text)


def newer_first(
    hits: Sequence[MemoryHit], query: str, terms: Callable[[str], frozenset[str]] = excerpt_terms
) -> list[MemoryHit]:
    """``hits`` with the newer of memories about the same thing first, marked; never mutates.

    "About the same thing", simply: two memories whose user turns share at least
    :data:`SAME_THING_OVERLAP` of the smaller one's content terms (``terms``: without the stop
    words of the memory's language) and at least one of the query's terms ("I stream on
    Tuesdays" / "No, I moved my stream to Thursdays", asked "when do I stream?"). Whether they
    disagree is not judged: the newer one is put first, so a changed fact is read in its latest
    form, and the older stays, with its date. Memories joined this way keep the places the
    group held in the ranking, filled newest first (``metadata["time"]``; a memory without a
    time keeps its place); the newest gets ``metadata["newer"] = True``, which the prompt shows
    in its date label.
    """
    made = {i: memory_time(h.metadata) for i, h in enumerate(hits)}
    timed = [i for i, when in made.items() if when is not None]
    if len(timed) < 2:
        return list(hits)
    wanted = terms(query)
    own = {i: _user_terms(hits[i].content, terms) for i in timed}
    parent = {i: i for i in timed}

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for a, b in itertools.combinations(timed, 2):
        ta, tb = own[a], own[b]
        if not ta or not tb or not (ta & tb & wanted):
            continue
        if len(ta & tb) / min(len(ta), len(tb)) >= SAME_THING_OVERLAP:
            parent[root(b)] = root(a)
    groups: dict[int, list[int]] = {}
    for i in timed:
        groups.setdefault(root(i), []).append(i)
    out = list(hits)
    for members in groups.values():
        if len(members) < 2:
            continue
        by_age = sorted(members, key=lambda i: -(made[i] or 0.0))
        for slot, i in zip(sorted(members), by_age, strict=True):
            out[slot] = hits[i]
        newest = by_age[0]
        out[min(members)] = replace(hits[newest], metadata={**hits[newest].metadata, "newer": True})
    return out
