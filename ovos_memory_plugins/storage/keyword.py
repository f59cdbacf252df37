"""The keyword analysis every engine shares, so every engine finds the same words:

* :func:`split_head`: a document's leading ``[date]`` brackets and ``Speaker:`` label;
* :func:`document_terms`: the stored terms of a document, from
  :func:`ovos_memory_plugins.text.tokenize` (Han/Kana/Hangul/Thai runs as character bigrams,
  folded and stemmed words): body terms, head terms, and whether it is a dialogue turn (a turn
  also carries the words of the session's previous document as lighter *context* terms);
* :func:`query_counts`: a query's terms (no stop words) and how often each counts;
* :func:`bm25_scores`: bm25 of stored terms (FTS5's formula), the second ranking of a large
  memory's candidates on both engines, and the tunables both engines prune and rank with
  (:data:`PRUNE_MIN_DOCUMENTS`, :data:`PRUNE_POSTINGS`, :data:`RESCORE_CANDIDATES`,
  :data:`RESCORE_K1`), read at search time (a test may set them here);
* :class:`StoredTerms`: an index that says which terms it stored for each document.

The engines' indexes: :mod:`ovos_memory_plugins.storage.sqlite.keyword` (FTS5) and
:mod:`ovos_memory_plugins.storage.postgres.keyword` (``tsvector`` and postings).
``SqliteKeywordIndex`` and the SQLite index's own constants still import from here, from there.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.storage.records import KeywordSettings
from ovos_memory_plugins.text import query_terms, tokenize

__all__ = [
    "BM25_B",
    "BM25_K1",
    "MAX_TERM_REPEAT",
    "PRUNE_MIN_DOCUMENTS",
    "PRUNE_POSTINGS",
    "RESCORE_CANDIDATES",
    "RESCORE_K1",
    "StoredTerms",
    "bm25_scores",
    "document_terms",
    "query_counts",
    "split_head",
]

#: Names of the SQLite index (:mod:`ovos_memory_plugins.storage.sqlite.keyword`) that earlier
#: releases imported from here.
_SQLITE_NAMES = frozenset(
    {
        "SqliteKeywordIndex",
        "INDEX_BATCH",
        "TOKENIZER_VERSION",
        "WAL_CHECKPOINT_PAGES",
        "DF_CACHE_SIZE",
        "match_expression",
    }
)


def __getattr__(name: str) -> Any:
    """The SQLite index's names, from their module (imported on first use: it imports this one)."""
    if name in _SQLITE_NAMES:
        from ovos_memory_plugins.storage.sqlite import keyword as sqlite_keyword

        return getattr(sqlite_keyword, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Memories with fewer documents search every query term.
PRUNE_MIN_DOCUMENTS = 5_000
#: On larger memories, query terms are searched rarest first until their documents add up to this.
PRUNE_POSTINGS = 3_000
#: When terms were left out, this many candidates the kept terms found are ranked again on every term.
RESCORE_CANDIDATES = 50
#: FTS5's bm25 constants (fixed in SQLite).
BM25_K1 = 1.2
BM25_B = 0.75
#: bm25's k1 on larger memories (FTS5 with column weights scaled by BM25_K1 / RESCORE_K1, and the
#: second ranking): a term said again adds less than with FTS5's 1.2, so a long text repeating
#: one query word ranks below a text holding more of the query's words.
RESCORE_K1 = 0.5
#: A query term repeated more than this many times counts this many times.
MAX_TERM_REPEAT = 4

_HEAD = re.compile(r"^\s*((?:\[[^\]\n]{0,80}\]\s*)*)(?:([^\s:\[\]][^:\n]{0,40}?):(?=\s))?")


def split_head(text: str) -> tuple[str, str]:
    """``(head, body)``: a document's leading ``[...]`` brackets and ``Speaker:`` label, and the rest.

    >>> split_head("[1:56 pm on 8 May, 2023] Caroline: I went to a support group")
    ('[1:56 pm on 8 May, 2023] Caroline', 'I went to a support group')

    A label is one to four words before a colon at the very start; ``Q:``/``A:`` labels are left
    in the body (the tokenizer drops them).
    """
    m = _HEAD.match(text)
    if m is None:
        return "", text
    brackets, label = m.group(1) or "", m.group(2)
    if label is not None and (len(label.split()) > 4 or label.strip() in ("Q", "A")):
        label = None
    if not brackets and label is None:
        return "", text
    head = (brackets + (label or "")).strip()
    end = m.end() if label is not None else m.end(1)
    return head, text[end:].strip()


def document_terms(text: str) -> tuple[str, str, bool]:
    """The stored ``(body_terms, head_terms)`` of a document (space-joined) and whether it is a
    dialogue turn (a recorded ``Q:`` exchange or a ``Speaker:`` line)."""
    head, body = split_head(text)
    turn = text.lstrip().startswith("Q:") or (bool(head) and not head.endswith("]"))
    head_terms = " ".join(tokenize(head, unigrams=True)) if head else ""
    return " ".join(tokenize(body, unigrams=True)), head_terms, turn


def query_counts(query: str, settings: KeywordSettings) -> Counter[str]:
    """A query's terms and how often each counts, at most ``max_query_terms`` distinct ones.

    The last line's terms count ``last_line_weight`` times (the newest text matters most).
    A turn asks twice (the search, the prompt's term filter): the last few are remembered.
    """
    return Counter(dict(_query_counts(query, settings)))


@functools.lru_cache(maxsize=32)
def _query_counts(query: str, settings: KeywordSettings) -> tuple[tuple[str, int], ...]:
    extra = list(settings.extra_stopwords)
    lines = query.strip().rsplit("\n", 1)
    terms = query_terms(lines[-1], settings.lang, extra_stopwords=extra, unigrams=True)
    if len(lines) == 2:
        earlier = query_terms(lines[0], settings.lang, extra_stopwords=extra, unigrams=True)
        terms = earlier + terms * settings.last_line_weight
    counts = Counter(terms)
    if len(counts) > settings.max_query_terms:
        newest = list(dict.fromkeys(reversed(terms)))[: settings.max_query_terms]
        counts = Counter({t: counts[t] for t in newest})
    return tuple(counts.items())


def bm25_scores(
    counts: Counter[str],
    rows: Sequence[Sequence[str]],
    df: dict[str, int],
    n: int,
    avg_length: float,
    weights: Sequence[float],
    k1: float = BM25_K1,
) -> list[float]:
    """FTS5's ``bm25()`` of each row for a query, computed from the stored terms.

    Args:
        counts: the query's terms and how often each counts (at most :data:`MAX_TERM_REPEAT`).
        rows: each document's stored term columns (space-joined), in the index's column order.
        df: how many documents hold each term (in any column); n: how many documents there are.
        avg_length: the average number of terms of a document (all columns).
        weights: the column weights.
        k1: the term-frequency saturation; FTS5's own (:data:`BM25_K1`) by default, the large
            memories' rescoring passes :data:`RESCORE_K1`.

    The idf is ``log((n - df + 0.5) / (df + 0.5))`` (at least 1e-6), a document's length the
    terms of all its columns, a term's frequency the weighted sum over the columns: the formula
    of SQLite's ``fts5_aux.c``, so with the default ``k1`` the scores equal the index's own for
    the same query.
    """
    # (term, " term ", " term term ", the term's query weight x idf x (k1 + 1))
    terms = []
    for term, times in counts.items():
        freq = df.get(term, 0)
        idf = max(math.log((n - freq + 0.5) / (freq + 0.5)), 1e-6)
        terms.append((term, f" {term} ", f" {term} {term} ", min(times, MAX_TERM_REPEAT) * idf * (k1 + 1)))
    base = k1 * (1 - BM25_B)
    per_term = k1 * BM25_B / max(avg_length, 1e-9)
    columns_weighted = [(i, float(w)) for i, w in enumerate(weights) if w]
    scores = []
    for columns in rows:
        weighted = [(columns[i], w) for i, w in columns_weighted if i < len(columns) and columns[i]]
        score = 0.0
        norm = -1.0  # computed for a row holding a query term only
        for term, spaced, twice, factor in terms:
            tf = 0.0
            for col, weight in weighted:
                if term in col:  # a substring test first: cheap, often false
                    # stored columns are terms joined by single spaces: between two spaces the
                    # count is exact, except for a term beside itself, whose shared space
                    # count() takes once ("art art"): then every space is doubled
                    pad = f" {col} "
                    found = pad.count(spaced)
                    if found and twice in pad:
                        found = pad.replace(" ", "  ").count(spaced)
                    tf += weight * found
            if tf:
                if norm < 0:  # the length: every column's terms, counted by their spaces
                    norm = base + per_term * sum(col.count(" ") + 1 for col in columns if col)
                score += factor * tf / (tf + norm)
        scores.append(score)
    return scores


@runtime_checkable
class StoredTerms(Protocol):
    """A keyword index that can say which terms it stored for each document (prompt selection
    drops a hit that shares no term of its own with the query)."""

    def own_terms(self, doc_ids: Sequence[str]) -> dict[str, frozenset[str]]:
        """Each document's own stored terms, by id."""
        ...
