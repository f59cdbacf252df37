"""Fusion functions against hand-computed values; inputs are never mutated."""

from __future__ import annotations

import copy

import pytest

from ovos_memory_plugins.common import (
    MemoryHit,
    dedup_hits,
    fuse,
    fuse_interleave,
    fuse_merge,
    fuse_priority,
    fuse_rrf,
    fuse_weighted,
    normalize_content,
)


def hits(*pairs: tuple[str, float]) -> list[MemoryHit]:
    return [MemoryHit(content=c, source=c.lower(), score=s) for c, s in pairs]


A = hits(("alpha", 9.0), ("beta", 5.0), ("gamma", 1.0))
B = hits(("gamma", 0.9), ("delta", 0.8), ("Alpha", 0.1))


def test_rrf_matches_hand_computed_scores() -> None:
    fused = fuse_rrf([A, B], k=60)
    # alpha: 1/61 + 1/63; gamma: 1/63 + 1/61; beta: 1/62; delta: 1/62
    expected = {"alpha": 1 / 61 + 1 / 63, "gamma": 1 / 63 + 1 / 61, "beta": 1 / 62, "delta": 1 / 62}
    assert [h.content for h in fused] == ["alpha", "gamma", "beta", "delta"]
    for h in fused:
        assert h.score == pytest.approx(expected[h.content])


def test_rrf_weights_and_small_k() -> None:
    fused = fuse_rrf([A, B], k=0, weights=[1.0, 3.0])
    scores = {h.content: h.score for h in fused}
    assert scores == pytest.approx({"alpha": 1 + 3 / 3, "beta": 1 / 2, "gamma": 1 / 3 + 3 / 1, "delta": 3 / 2})
    assert [h.content for h in fused] == ["gamma", "alpha", "delta", "beta"]


def test_weighted_min_max() -> None:
    fused = fuse_weighted([A, B], weights=[1.0, 1.0])
    # A normalised: alpha 1, beta 0.5, gamma 0; B: gamma 1, delta 0.875, alpha 0
    scores = {h.content: h.score for h in fused}
    assert scores == pytest.approx({"alpha": 1.0, "beta": 0.5, "gamma": 1.0, "delta": 0.875})
    assert [h.content for h in fused] == ["alpha", "gamma", "delta", "beta"]


def test_merge_priority_interleave() -> None:
    assert [h.content for h in fuse_merge([A, B])] == ["alpha", "beta", "gamma", "delta"]
    assert [h.content for h in fuse_priority([B, A])] == ["gamma", "delta", "Alpha", "beta"]
    assert [h.content for h in fuse_interleave([A, B])] == ["alpha", "gamma", "beta", "delta"]


def test_inputs_are_not_mutated_and_outputs_are_copies() -> None:
    before = copy.deepcopy([A, B])
    for method in ("rrf", "weighted", "merge", "priority", "interleave"):
        out = fuse(method, [A, B])
        out[0].metadata["touched"] = True
        out[0].score = -1
    assert before == [A, B]


def test_dedup_and_normalisation() -> None:
    assert normalize_content("  Ｈello\tWORLD ") == "hello world"
    assert [h.content for h in dedup_hits(hits(("x y", 1), ("X  Y", 2), ("z", 3)))] == ["x y", "z"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown fusion method"):
        fuse("borda", [A])
    with pytest.raises(ValueError, match="weights"):
        fuse_rrf([A, B], weights=[1.0])
    assert fuse_rrf([]) == [] and fuse_interleave([]) == []
