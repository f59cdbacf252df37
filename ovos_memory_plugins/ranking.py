"""In-process BM25 ranking over :func:`ovos_memory_plugins.text.tokenize`, on rank-bm25.

For small corpora held in RAM (sticky notes, notes, the keyword backend's no-FTS5 fallback)::

    ranker = BM25Ranker(["my cat is called Bartholomew", "the boiler code is 4471"])
    ranker.rank("what is my cat called", top_k=3)   # [(0, 1.2...)]

Documents are tokenized with :func:`~ovos_memory_plugins.text.tokenize`, queries with
:func:`~ovos_memory_plugins.text.query_terms` (stop words removed, repeats kept).

The idf is Lucene's ``log(1 + (N - n + 0.5) / (n + 0.5))``, always positive, instead of rank-bm25's
Okapi idf, which goes negative for a term in more than half of the documents (with two notes
that both mention the cat, "cat" would push them down). ``idf="okapi"`` keeps rank-bm25's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from rank_bm25 import BM25Okapi

from ovos_memory_plugins.text import query_terms, tokenize

__all__ = ["BM25Ranker"]


class _LuceneIdfBM25(BM25Okapi):  # type: ignore[misc]  # rank-bm25 ships no type information
    """rank-bm25's Okapi scoring with Lucene's non-negative idf."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        for word, freq in nd.items():
            self.idf[word] = math.log(1.0 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


class BM25Ranker:
    """BM25 over an in-memory list of texts.

    Args:
        corpus: the documents; :meth:`rank` returns indexes into it.
        k1: term-frequency saturation (rank-bm25's ``k1``).
        b: document-length normalisation, 0 (none) to 1 (full).
        lang: the stop-word language of queries (see :func:`~ovos_memory_plugins.text.stop_words`).
        extra_stopwords: more words queries ignore.
        idf: ``"lucene"`` (default, never negative) or ``"okapi"`` (rank-bm25's own, with its
            epsilon floor).
        tokenized: the documents' terms when the caller already has them (must match ``corpus``).
    """

    def __init__(
        self,
        corpus: Sequence[str],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        lang: str | None = None,
        extra_stopwords: Iterable[str] = (),
        idf: Literal["lucene", "okapi"] = "lucene",
        tokenized: Sequence[list[str]] | None = None,
    ) -> None:
        if tokenized is not None and len(tokenized) != len(corpus):
            raise ValueError(f"got {len(tokenized)} tokenized documents for {len(corpus)} texts")
        self.corpus = list(corpus)
        self.lang = lang
        self.extra_stopwords = tuple(extra_stopwords)
        docs = [list(t) for t in tokenized] if tokenized is not None else [tokenize(t) for t in self.corpus]
        self._empty = not any(docs)
        self._bm25: Any = None
        if not self._empty:
            cls = BM25Okapi if idf == "okapi" else _LuceneIdfBM25
            self._bm25 = cls(docs, k1=k1, b=b)

    def __len__(self) -> int:
        return len(self.corpus)

    def scores(self, query: str) -> list[float]:
        """The BM25 score of every document for ``query`` (0.0 where no query term occurs)."""
        terms = query_terms(query, self.lang, extra_stopwords=self.extra_stopwords)
        if self._empty or not terms:
            return [0.0] * len(self.corpus)
        return [float(s) for s in self._bm25.get_scores(terms)]

    def rank(self, query: str, top_k: int = 10) -> list[tuple[int, float]]:
        """``(index, score)`` of the best ``top_k`` documents sharing a query term, best first.

        Ties keep corpus order. Documents without any query term are left out.
        """
        return self.rank_terms(query_terms(query, self.lang, extra_stopwords=self.extra_stopwords), top_k)

    def rank_terms(self, terms: Sequence[str], top_k: int = 10) -> list[tuple[int, float]]:
        """Like :meth:`rank` for terms already chosen (a term listed twice weighs twice)."""
        if top_k <= 0 or self._empty or not terms:
            return []
        wanted = set(terms)
        scores = self._bm25.get_scores(list(terms))
        matching = [i for i, freqs in enumerate(self._bm25.doc_freqs) if not wanted.isdisjoint(freqs)]
        matching.sort(key=lambda i: (-scores[i], i))
        return [(i, float(scores[i])) for i in matching[:top_k]]
