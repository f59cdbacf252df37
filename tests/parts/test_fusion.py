"""Fusion functions against hand-computed values; inputs are never mutated; one vocabulary of
fusion names for a composite's members and a hybrid index's arms."""

from __future__ import annotations

import copy

import pytest

from ovos_memory_plugins.common import MemoryHit, dedup_hits, normalize_content
from ovos_memory_plugins.fusion import (
    FUSIONS,
    fuse,
    fuse_calibrated,
    fuse_interleave,
    fuse_merge,
    fuse_priority,
    fuse_rrf,
    fuse_scores,
    fuse_weighted,
    list_confidence,
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


def test_one_vocabulary_runs_every_fusion_by_name() -> None:
    weights = [1.0, 0.5]
    expected = {
        "rrf": fuse_rrf([A, B], k=60, weights=weights),
        "weighted": fuse_weighted([A, B], weights=weights),
        "calibrated": fuse_weighted([A, B], weights=[1.0 * list_confidence(A), 0.5 * list_confidence(B)]),
        "score": fuse_scores([A, B], weights, rrf_k=60),
        "merge": fuse_merge([A, B]),
        "priority": fuse_priority([A, B]),
        "interleave": fuse_interleave([A, B]),
    }
    assert set(FUSIONS) == set(expected)
    for method, want in expected.items():
        got = fuse(method, [A, B], weights=weights if method not in ("merge", "priority", "interleave") else None)
        assert [(h.content, h.score) for h in got] == [(h.content, h.score) for h in want], method
    assert fuse_calibrated([A, B], weights=weights) == expected["calibrated"]
    assert fuse("score", [A, B]) == fuse_scores([A, B], [1.0, 1.0])  # weights default to 1.0 each


def test_a_composite_accepts_every_name_of_the_vocabulary() -> None:
    from ovos_memory_plugins.composite import CompositeMemory
    from ovos_memory_plugins.config import validate_config
    from ovos_memory_plugins.errors import ConfigError

    for method in FUSIONS:
        assert validate_config({"fusion": method}, CompositeMemory).options.fusion == method
    with pytest.raises(ConfigError, match="'best' is not accepted"):
        validate_config({"fusion": "best"}, CompositeMemory)


def test_the_old_names_still_import_from_common() -> None:
    import ovos_memory_plugins
    from ovos_memory_plugins import common, fusion

    assert common.FUSION_METHODS == FUSIONS == ovos_memory_plugins.FUSIONS
    for name in ("fuse", "fuse_rrf", "fuse_weighted", "fuse_merge", "fuse_priority", "fuse_interleave", "fuse_points"):
        assert getattr(common, name) is getattr(fusion, name)
    with pytest.raises(AttributeError):
        _ = common.fuse_nothing
