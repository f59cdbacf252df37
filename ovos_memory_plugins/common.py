"""``MemoryHit``, the common currency of every backend, and the pure rank-fusion functions.

Every fusion function takes lists of hits (best first), never mutates them or their hits,
and returns a new list, best first, deduplicated by normalised content (the first occurrence
in fused order wins; its metadata is kept).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, TypeVar

__all__ = [
    "Closing",
    "MemoryHit",
    "dedup_hits",
    "exchange_parts",
    "exchange_text",
    "fuse",
    "fuse_interleave",
    "fuse_merge",
    "fuse_points",
    "fuse_priority",
    "fuse_rrf",
    "fuse_weighted",
    "normalize_content",
]


_Closing = TypeVar("_Closing", bound="Closing")


class Closing:
    """``with thing:`` closes ``thing`` at the end of the block (memories, servers, clients).

    A subclass implements :meth:`close`; one that must start first (a server) overrides
    ``__enter__`` to start and return itself.
    """

    def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    def __enter__(self: _Closing) -> _Closing:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass
class MemoryHit:
    """One recalled memory.

    Attributes:
        content: the stored text.
        source: where it came from; for stored documents, the document id.
        score: the backend's relevance score, higher is better. Only comparable within one
            backend's result list; fusion functions turn lists into fused scores.
        metadata: what was stored with the document (``store(..., metadata=...)``), plus
            ``session_id`` where the backend knows it.
    """

    content: str
    source: str = ""
    score: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)


def exchange_text(user: str, assistant: str) -> str:
    """The document one completed exchange becomes."""
    return f"Q: {user}\nA: {assistant}"


def exchange_parts(text: str) -> tuple[str, str] | None:
    """``(user, assistant)`` of an exchange document's text (the inverse of :func:`exchange_text`),
    else None."""
    if not text.startswith("Q: "):
        return None
    user, sep, assistant = text[3:].partition("\nA: ")
    return (user, assistant) if sep else None


def normalize_content(text: str) -> str:
    """The key two hits are considered the same by: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _copy(hit: MemoryHit, score: float) -> MemoryHit:
    return replace(hit, score=score, metadata=dict(hit.metadata))


def dedup_hits(hits: Sequence[MemoryHit]) -> list[MemoryHit]:
    """Copies of ``hits`` in order, without later hits whose normalised content repeats one."""
    seen: set[str] = set()
    out: list[MemoryHit] = []
    for hit in hits:
        key = normalize_content(hit.content)
        if key in seen:
            continue
        seen.add(key)
        out.append(_copy(hit, hit.score))
    return out


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
    return [_copy(first[key], scores[key]) for key in ranked]


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


FUSION_METHODS = ("rrf", "weighted", "merge", "priority", "interleave")


def fuse(
    method: str,
    lists: Sequence[Sequence[MemoryHit]],
    weights: Sequence[float] | None = None,
    rrf_k: float = 60,
) -> list[MemoryHit]:
    """Dispatch to the fusion function named ``method`` (one of ``FUSION_METHODS``)."""
    if method == "rrf":
        return fuse_rrf(lists, k=rrf_k, weights=weights)
    if method == "weighted":
        return fuse_weighted(lists, weights=weights)
    if method == "merge":
        return fuse_merge(lists)
    if method == "priority":
        return fuse_priority(lists)
    if method == "interleave":
        return fuse_interleave(lists)
    raise ValueError(f"unknown fusion method {method!r}; accepted: {', '.join(FUSION_METHODS)}")
