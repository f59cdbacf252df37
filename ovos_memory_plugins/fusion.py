"""Rank fusion: many lists of hits made one, best first: ONE vocabulary for every place that
fuses (a composite's members, a hybrid index's arms).

Every fusion function takes lists of hits (best first), never mutates them or their hits,
and returns a new list, best first, deduplicated by normalised content (the first occurrence
in fused order wins; its metadata is kept). :data:`FUSIONS` names them; :func:`fuse` runs one
by name.

==============  ===================================================================================
``rrf``         weighted Reciprocal Rank Fusion, ``weight / (rrf_k + rank)`` (:func:`fuse_rrf`)
``weighted``    each list's scores min-max normalised, weighted, summed (:func:`fuse_weighted`)
``calibrated``  ``weighted``, each list's weight times how far its best hit stands out
                (:func:`list_confidence`, :func:`fuse_calibrated`)
``score``       half rank, half score relative to the list's best (:func:`fuse_scores`)
``merge``       raw scores, for lists on one scale (:func:`fuse_merge`)
``priority``    earlier lists first (:func:`fuse_priority`)
``interleave``  round robin (:func:`fuse_interleave`)
==============  ===================================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Literal, get_args

from ovos_memory_plugins.common import MemoryHit, copy_hit, dedup_hits, normalize_content

__all__ = [
    "FUSIONS",
    "Fusion",
    "fuse",
    "fuse_calibrated",
    "fuse_interleave",
    "fuse_merge",
    "fuse_points",
    "fuse_priority",
    "fuse_rrf",
    "fuse_scores",
    "fuse_weighted",
    "list_confidence",
]

#: The name of a fusion method (:data:`FUSIONS`).
Fusion = Literal["rrf", "weighted", "calibrated", "score", "merge", "priority", "interleave"]

#: Every fusion method, by name: what a composite's ``fusion`` and a hybrid's ``fusion`` accept.
FUSIONS: tuple[str, ...] = get_args(Fusion)


def _check_weights(lists: Sequence[Sequence[MemoryHit]], weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * len(lists)
    if len(weights) != len(lists):
        raise ValueError(f"got {len(weights)} weights for {len(lists)} lists")
    return [float(w) for w in weights]


def fuse_points(scored: Iterable[Iterable[tuple[MemoryHit, float]]]) -> list[MemoryHit]:
    """The core of every scoring fusion: sum the points each document earns over the lists.

    ``scored`` holds one iterable per list: its hits, best first, each with the points it
    earns. A document is its normalised content; a text repeated within one list counts once
    (its first occurrence). Returns a copy of each document's first hit (in fused order its
    metadata is kept) scored with its sum, highest first; ties keep the order first seen.
    """
    scores: dict[str, float] = {}
    first: dict[str, MemoryHit] = {}
    for hits in scored:
        seen_here: set[str] = set()
        for hit, points in hits:
            key = normalize_content(hit.content)
            if key in seen_here:
                continue
            seen_here.add(key)
            if key not in first:
                first[key] = hit
                scores[key] = 0.0
            scores[key] += points
    ranked = sorted(first, key=lambda key: -scores[key])  # stable: ties keep the order first seen
    return [copy_hit(first[key], scores[key]) for key in ranked]


def fuse_rrf(
    lists: Sequence[Sequence[MemoryHit]], k: float = 60, weights: Sequence[float] | None = None
) -> list[MemoryHit]:
    """Reciprocal Rank Fusion: score(d) = sum over lists of weight / (k + rank), rank from 1.

    A document is identified by its normalised content, so the same text found by two
    backends (with different ids) is one document.
    """
    if k < 0:
        raise ValueError("rrf k must be >= 0")
    w = _check_weights(lists, weights)
    return fuse_points(
        ((hit, weight / (k + rank)) for rank, hit in enumerate(hits, start=1))
        for weight, hits in zip(w, lists, strict=True)
    )


def fuse_weighted(lists: Sequence[Sequence[MemoryHit]], weights: Sequence[float] | None = None) -> list[MemoryHit]:
    """Score fusion: each list's scores min-max normalised to [0, 1], weighted, summed.

    A list whose scores are all equal normalises every hit to 1.0.
    """
    w = _check_weights(lists, weights)
    return fuse_points(_normalised(hits, weight) for weight, hits in zip(w, lists, strict=True))


def _normalised(hits: Sequence[MemoryHit], weight: float) -> Iterator[tuple[MemoryHit, float]]:
    """Each hit with ``weight`` times its min-max normalised score (1.0 when all are equal)."""
    if not hits:
        return
    values = [h.score for h in hits]
    low, high = min(values), max(values)
    for hit in hits:
        yield hit, weight * (1.0 if high == low else (hit.score - low) / (high - low))


def fuse_merge(lists: Sequence[Sequence[MemoryHit]]) -> list[MemoryHit]:
    """All hits of all lists sorted by their raw score, highest first (ties keep input order).

    Only meaningful when every list scores on the same scale.
    """
    flat = [hit for hits in lists for hit in hits]
    indexed = sorted(enumerate(flat), key=lambda pair: (-pair[1].score, pair[0]))
    return dedup_hits([hit for _, hit in indexed])


def fuse_priority(lists: Sequence[Sequence[MemoryHit]]) -> list[MemoryHit]:
    """The first list's hits, then the second's, and so on: earlier lists always win."""
    return dedup_hits([hit for hits in lists for hit in hits])


def fuse_interleave(lists: Sequence[Sequence[MemoryHit]]) -> list[MemoryHit]:
    """Round robin: the first hit of each list, then the second of each, and so on."""
    out: list[MemoryHit] = []
    longest = max((len(hits) for hits in lists), default=0)
    for i in range(longest):
        for hits in lists:
            if i < len(hits):
                out.append(hits[i])
    return dedup_hits(out)


def fuse_scores(lists: Sequence[Sequence[MemoryHit]], weights: Sequence[float], rrf_k: float = 60) -> list[MemoryHit]:
    """Score-aware fusion: per list, a hit earns ``weight * (0.5 * rank part + 0.5 * score part)``.

    The rank part is ``(rrf_k + 1) / (rrf_k + rank)`` (1 for the top hit); the score part is the
    hit's score divided by the list's best score (so a list whose top hit barely matches and
    whose runners-up are near ties gives them little, while a confident list keeps a clear
    winner). Documents are keyed by normalised content, as in :func:`fuse_rrf`.
    """

    def points(hits: Sequence[MemoryHit], weight: float) -> Iterator[tuple[MemoryHit, float]]:
        best = max(h.score for h in hits)
        for rank, hit in enumerate(hits, start=1):
            rank_part = (rrf_k + 1) / (rrf_k + rank)
            score_part = hit.score / best if best > 0 else 0.0
            yield hit, weight * (0.5 * rank_part + 0.5 * max(score_part, 0.0))

    return fuse_points(points(hits, weight) for weight, hits in zip(weights, lists, strict=True) if hits and weight > 0)


def list_confidence(hits: Sequence[MemoryHit], rank: int = 3, power: float = 0.5, floor: float = 0.25) -> float:
    """How far a hit list's best hit stands out from the list, in ``[floor, 1]``.

    ``floor + (1 - floor) * ((s1 - s_rank) / (s1 - s_last)) ** power``: the lead of the best
    score over the ``rank``-th, as a share of the list's whole range. Min-max normalisation maps
    every list onto ``[0, 1]`` and so throws that away: a list whose top hits are near ties
    with the rest (an arm that found nothing in particular) would count as much as one with a
    clear winner. A list of one hit, or of equal scores, is 1 (nothing to tell). Scale-free,
    so it calibrates keyword scores and the cosine similarities of any embedder alike.
    """
    if len(hits) < 2:
        return 1.0
    best, last = hits[0].score, min(h.score for h in hits)
    if not best > last:
        return 1.0
    other = hits[min(rank, len(hits)) - 1].score
    lead = max(0.0, min(1.0, (best - other) / (best - last)))
    return float(floor + (1.0 - floor) * lead**power)


def fuse_calibrated(lists: Sequence[Sequence[MemoryHit]], weights: Sequence[float] | None = None) -> list[MemoryHit]:
    """:func:`fuse_weighted` with each list's weight times its :func:`list_confidence`: a list
    whose best hits are near ties with the rest (it found nothing in particular) counts less."""
    w = _check_weights(lists, weights)
    return fuse_weighted(lists, weights=[x * list_confidence(h) for x, h in zip(w, lists, strict=True)])


def fuse(
    method: str,
    lists: Sequence[Sequence[MemoryHit]],
    weights: Sequence[float] | None = None,
    rrf_k: float = 60,
) -> list[MemoryHit]:
    """The fusion named ``method`` (one of :data:`FUSIONS`) of ``lists``; ``weights`` one per
    list (1.0 each by default; ``merge``, ``priority`` and ``interleave`` take none);
    ``rrf_k``: the rank constant of ``rrf`` and ``score``."""
    if method == "rrf":
        return fuse_rrf(lists, k=rrf_k, weights=weights)
    if method == "weighted":
        return fuse_weighted(lists, weights=weights)
    if method == "calibrated":
        return fuse_calibrated(lists, weights=weights)
    if method == "score":
        return fuse_scores(lists, _check_weights(lists, weights), rrf_k=rrf_k)
    if method == "merge":
        return fuse_merge(lists)
    if method == "priority":
        return fuse_priority(lists)
    if method == "interleave":
        return fuse_interleave(lists)
    raise ValueError(f"unknown fusion method {method!r}; accepted: {', '.join(FUSIONS)}")
