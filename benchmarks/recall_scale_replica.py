"""Where recall at scale goes: the keyword ranking of ``recall_scale.py`` replayed in numpy.

``benchmarks/recall_scale.py`` measures the keyword backend itself (SQLite FTS5) on the LoCoMo dev
questions, each conversation alone and hidden among ~93,000 other documents. This script builds
the same documents with the package's own tokenizer (``keyword.document_terms``, each dialogue
turn with its session's previous turn as context), keeps their terms in an inverted index in
RAM and ranks with the formula of FTS5's ``bm25()`` (``keyword.bm25_scores``' formula, the
index's column weights), the pruning of large memories (``keyword.PRUNE_POSTINGS``), their
saturation (``keyword.RESCORE_K1``) and second ranking (``keyword.RESCORE_CANDIDATES``) and the
backend's 30 % relative cut-off. Every question takes milliseconds, so a ranking rule can be tried in seconds;
the figures it prints match the benchmark's (R@10 alone, unpruned and as shipped).

It prints R@10 along the way from the conversation alone to the shipped search at scale, for
FTS5's k1 and for the second ranking's:

* alone: the conversation's own memory (below ``PRUNE_MIN_DOCUMENTS``: FTS5's ranking);
* own turns only: the large memory's statistics (idf, average length), but only the hidden
  conversation's turns compete: what the shift of the idf costs;
* every document, unpruned: what the other documents cost;
* pruned and ranked again (as shipped): what the candidates cost.

Usage (from the project root)::

    python benchmarks/recall_scale_replica.py [--size 100000] [--head-weight 1.0] [--k1 0.5]

Skips (exit code 0) when the data folder is absent.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall import DATA, Unit, locomo_units  # sibling scripts, not a package
from recall_scale import longmemeval_documents

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.storage import keyword
from ovos_memory_plugins.storage.engine import KeywordSettings

#: The backend's relative cut-off of ``search`` (hits below 30 % of the best are dropped).
RELATIVE = float(LexicalMemory.default_min_relative_score or 0.0)
K = 10


class Corpus:
    """Documents as an inverted index: per term, the documents holding it and the term's count in
    each of the three columns (body, head, context), and each document's length."""

    def __init__(self, docs: list[tuple[str, str, str]]) -> None:
        """``docs``: ``(ref, text, session_id)`` in the order they are stored."""
        self.refs = [d[0] for d in docs]
        postings: dict[str, dict[int, list[int]]] = defaultdict(dict)
        lengths = []
        previous: dict[str, str] = {}
        for i, (_, text, session) in enumerate(docs):
            body, head, turn = keyword.document_terms(text)
            context = previous.get(session, "") if turn else ""
            previous[session] = body
            length = 0
            for column, terms in enumerate((body, head, context)):
                for term in terms.split():
                    postings[term].setdefault(i, [0, 0, 0])[column] += 1
                    length += 1
            lengths.append(length)
        self.n = len(docs)
        self.length = np.array(lengths, dtype=float)
        self.avg = float(self.length.mean()) if self.n else 1.0
        self.post = {
            t: (np.fromiter(d.keys(), dtype=np.int64), np.array(list(d.values()), dtype=float))
            for t, d in postings.items()
        }

    def df(self, term: str) -> int:
        found = self.post.get(term)
        return 0 if found is None else len(found[0])

    def scores(self, counts: Counter[str], weights: tuple[float, float, float], k1: float) -> np.ndarray:
        """bm25 of every document (FTS5's formula: idf floored at 1e-6, length over all columns)."""
        out = np.zeros(self.n)
        norm = k1 * (1 - keyword.BM25_B + keyword.BM25_B * self.length / self.avg)
        w = np.array(weights)
        for term, times in counts.items():
            if term not in self.post:
                continue
            ids, tf = self.post[term]
            freq = tf @ w
            idf = max(math.log((self.n - len(ids) + 0.5) / (len(ids) + 0.5)), 1e-6)
            out[ids] += min(times, keyword.MAX_TERM_REPEAT) * idf * freq * (k1 + 1) / (freq + norm[ids])
        return out

    def pruned(self, counts: Counter[str]) -> Counter[str]:
        """The kept terms: the rule of ``SqliteKeywordIndex._prune``."""
        kept: Counter[str] = Counter()
        postings = 0
        for term in sorted(counts, key=self.df):
            freq = self.df(term)
            if kept and (freq > self.n // 2 or postings + freq > keyword.PRUNE_POSTINGS):
                break
            kept[term] = counts[term]
            postings += freq
        return kept


def best(scores: np.ndarray, k: int, cut: float = RELATIVE) -> list[int]:
    """The ``k`` best documents with a score, best first, above ``cut`` times the best."""
    k = min(k, len(scores))
    if k <= 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k]
    ranked = [int(i) for i in top[np.argsort(-scores[top], kind="stable")] if scores[i] > 0]
    return [i for i in ranked if scores[i] >= cut * scores[ranked[0]]] if ranked else []


def shipped(c: Corpus, counts: Counter[str], weights: tuple[float, float, float], k1: float) -> list[int]:
    """The search as shipped: FTS5 alone on small memories; on large ones bm25 with ``k1`` (FTS5
    with scaled column weights), and when terms were pruned the kept terms find
    ``RESCORE_CANDIDATES`` candidates that every term ranks again."""
    if c.n < keyword.PRUNE_MIN_DOCUMENTS:
        return best(c.scores(counts, weights, keyword.BM25_K1), K)
    kept = c.pruned(counts)
    first = c.scores(kept, weights, k1)
    if len(kept) == len(counts):
        return best(first, K)
    candidates = best(first, max(K, keyword.RESCORE_CANDIDATES), cut=0.0)
    again = c.scores(counts, weights, k1)
    order = sorted(candidates, key=lambda i: (-again[i], -first[i]))[:K]
    order = [i for i in order if again[i] > 0]
    return [i for i in order if again[i] >= RELATIVE * again[order[0]]] if order else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="documents in the large memory, at most")
    parser.add_argument("--head-weight", type=float, default=KeywordSettings.head_weight)
    parser.add_argument("--context-weight", type=float, default=KeywordSettings.context_weight)
    parser.add_argument("--k1", type=float, default=keyword.RESCORE_K1, help="the second ranking's k1")
    args = parser.parse_args(argv)
    if not (DATA / "locomo" / "locomo_dev.json").exists() or not (DATA / "longmemeval").is_dir():
        print(f"SKIPPED: the benchmark data ({DATA}) is absent.")
        return 0
    start = time.perf_counter()
    units: list[Unit] = list(locomo_units())
    others = sum(len(u.documents) for u in units) - min(len(u.documents) for u in units)
    docs = [(f"x{i}", text, session) for i, (text, session) in enumerate(longmemeval_documents(args.size - others))]
    owner: list[str] = ["lme"] * len(docs)
    for u in units:
        docs += [(f"{u.name}:{ref}", text, f"{u.name}-{session}") for ref, text, session in u.documents]
        owner += [u.name] * len(u.documents)
    large = Corpus(docs)
    alone = {u.name: Corpus([(f"{u.name}:{r}", t, s) for r, t, s in u.documents]) for u in units}
    print(f"{large.n:,} documents indexed in RAM in {time.perf_counter() - start:.0f} s")
    weights = (1.0, args.head_weight, args.context_weight)
    settings = KeywordSettings()
    who = np.array(owner)
    rows: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for u in units:
        own = who == u.name
        for q in u.questions:
            counts = keyword.query_counts(q.query, settings)
            relevant = {f"{u.name}:{r}" for r in q.relevant}

            def recall(c: Corpus, found: list[int], relevant: set[str] = relevant) -> float:
                return len(relevant & {c.refs[i] for i in found}) / len(relevant)

            for k1 in (keyword.BM25_K1, args.k1):
                if not counts:
                    for label in ("alone", "own", "all", "shipped"):
                        rows[label][k1].append(0.0)
                    continue
                a = alone[u.name]
                rows["alone"][k1].append(recall(a, shipped(a, counts, weights, k1)))
                scores = large.scores(counts, weights, k1)
                rows["own"][k1].append(recall(large, best(np.where(own, scores, 0.0), K)))
                rows["all"][k1].append(recall(large, best(scores, K)))
                rows["shipped"][k1].append(recall(large, shipped(large, counts, weights, k1)))
    labels = {
        "alone": "the conversation alone (FTS5 ranks)",
        "own": "large memory, its own turns only",
        "all": "large memory, every document, unpruned",
        "shipped": "large memory, pruned and ranked again",
    }
    print(f"\nR@10 of {len(rows['alone'][args.k1])} LoCoMo dev questions (replica; k1 of the ranking at scale)")
    print(f"{'':<44}{'k1 ' + str(keyword.BM25_K1):>10}{'k1 ' + str(args.k1):>10}")
    for key, label in labels.items():
        cells = "".join(f"{100 * statistics.mean(rows[key][k1]):>10.1f}" for k1 in (keyword.BM25_K1, args.k1))
        print(f"{label:<44}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
