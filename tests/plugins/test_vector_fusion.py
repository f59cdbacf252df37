"""The hybrid's default fusion: min-max weighted, each arm calibrated by how far its best hit stands out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.embedders import HashingEmbedder
from ovos_memory_plugins.index import FUSIONS, HybridIndex, IndexBase, list_confidence
from ovos_memory_plugins.storage.engine import Document, StoredDocument
from ovos_memory_plugins.vector import VectorMemory


def _hits(*scored: tuple[str, float]) -> list[MemoryHit]:
    return [MemoryHit(text, text, score) for text, score in scored]


class ListIndex(IndexBase):
    """An arm that answers every query with the same scored list (what a real arm returns)."""

    def __init__(self, name: str, hits: list[MemoryHit]) -> None:
        self.name = name
        self.hits = hits

    def prepare(self, docs: Sequence[Document]) -> None:
        return None

    def add(self, docs: Sequence[StoredDocument], prepared: Any = None) -> None:
        return None

    def remove(self, docs: Sequence[StoredDocument]) -> int:
        return 0

    def remove_all(self) -> int:
        return 0

    def search(self, query: str, k: int, session_id: str | None = None) -> list[MemoryHit]:
        return self.hits[:k]

    def stats(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        return None


def test_confidence_is_the_best_hits_lead_over_the_third_as_a_share_of_the_range() -> None:
    clear = _hits(("a", 0.9), ("b", 0.3), ("c", 0.3), ("d", 0.1))
    assert list_confidence(clear) == pytest.approx(0.25 + 0.75 * ((0.9 - 0.3) / (0.9 - 0.1)) ** 0.5)
    flat = _hits(("a", 5.0), ("b", 4.98), ("c", 4.96), ("d", 1.0))
    assert list_confidence(flat) == pytest.approx(0.25 + 0.75 * (0.04 / 4.0) ** 0.5)
    assert list_confidence(flat, rank=2, power=1.0, floor=0.0) == pytest.approx(0.02 / 4.0)
    # an arm of ties keeps a quarter of its weight; one whose third hit is its last, all of it
    assert list_confidence(_hits(("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 0.0))) == pytest.approx(0.25)
    assert list_confidence(_hits(("a", 1.0), ("b", 0.5), ("c", 0.0))) == 1.0
    # nothing to tell: one hit, equal scores, or an empty list
    assert list_confidence(_hits(("a", 3.0))) == 1.0
    assert list_confidence(_hits(("a", 2.0), ("b", 2.0), ("c", 2.0))) == 1.0
    assert list_confidence([]) == 1.0
    # a list shorter than the rank compares with its last hit
    assert list_confidence(_hits(("a", 1.0), ("b", 0.5))) == 1.0
    # scale-free: keyword scores and cosine similarities are calibrated alike
    scaled = _hits(*[(h.content, 10 * h.score) for h in clear])
    assert list_confidence(scaled) == pytest.approx(list_confidence(clear))


def test_an_arm_with_a_clear_winner_outweighs_an_arm_of_near_ties() -> None:
    # the keyword arm found nothing in particular: its top hits are near ties, "x" first by a hair;
    # the vector arm has a clear winner, "y", and ranks "x" low
    keyword = ListIndex("keyword", _hits(("x", 5.0), ("z", 4.95), ("w", 4.9), ("y", 2.0), ("v", 1.0)))
    vector = ListIndex("vector", _hits(("y", 0.82), ("v", 0.41), ("z", 0.40), ("x", 0.39), ("w", 0.2)))
    weighted = HybridIndex([keyword, vector], weights=[1.0, 0.5], fusion="weighted")
    calibrated = HybridIndex([keyword, vector], weights=[1.0, 0.5])
    assert calibrated.fusion == "calibrated" and "calibrated" in FUSIONS
    # min-max stretches the near ties onto [0, 1]: "x" keeps its hair's lead and wins
    assert weighted.search("q", 1)[0].content == "x"
    # calibrated, the keyword arm counts for its 2.5 % lead: the vector arm's winner comes first
    assert calibrated.search("q", 1)[0].content == "y"
    # with both arms confident the two fusions agree
    sure = ListIndex("keyword", _hits(("x", 9.0), ("z", 2.0), ("w", 1.5), ("v", 1.0)))
    for fusion in ("weighted", "calibrated"):
        assert HybridIndex([sure, vector], weights=[1.0, 0.5], fusion=fusion).search("q", 1)[0].content == "x"


def test_vector_memory_fuses_calibrated_by_default_and_keeps_the_other_fusions(tmp_path: Path) -> None:
    facts = ["the spare key is under the frog statue", "my sister Ingrid lives in Tromsø", "the wifi is on"]
    for fusion in (None, "weighted", "rrf"):
        config: dict[str, Any] = {"root": str(tmp_path / str(fusion)), "hybrid": True, "background_reembed": False}
        if fusion:
            config["fusion"] = fusion
        mem = VectorMemory(config, embedder=HashingEmbedder(64))
        try:
            assert isinstance(mem.index, HybridIndex)
            assert mem.index.fusion == (fusion or "calibrated")
            for fact in facts:
                mem.store(fact, "s1")
            assert mem.search("where does Ingrid live", top_k=1)[0].content == facts[1]
        finally:
            mem.close()


class _E5Ids(HashingEmbedder):
    """A hashing embedder that carries the e5 model's id (the default fusion follows the id)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.id = "local:multilingual-e5-small-q4:64"


def test_e5_keeps_the_weighted_fusion_by_default(tmp_path: Path) -> None:
    config: dict[str, Any] = {"root": str(tmp_path / "e5"), "hybrid": True, "background_reembed": False}
    with VectorMemory(config, embedder=_E5Ids()) as mem:
        assert isinstance(mem.index, HybridIndex) and mem.index.fusion == "weighted"
    config = {**config, "root": str(tmp_path / "e5c"), "fusion": "calibrated"}
    with VectorMemory(config, embedder=_E5Ids()) as mem:
        assert isinstance(mem.index, HybridIndex) and mem.index.fusion == "calibrated"


def test_a_hybrid_takes_every_fusion_a_composite_takes() -> None:
    keyword = ListIndex("keyword", _hits(("x", 5.0), ("z", 4.0)))
    vector = ListIndex("vector", _hits(("y", 0.8), ("x", 0.4)))
    for fusion in FUSIONS:  # one vocabulary: ovos_memory_plugins.fusion
        found = HybridIndex([keyword, vector], fusion=fusion).search("q", 3)
        assert sorted(h.content for h in found) == ["x", "y", "z"], fusion
    assert [h.content for h in HybridIndex([keyword, vector], fusion="priority").search("q", 3)] == ["x", "z", "y"]
    with pytest.raises(ValueError, match="fusion must be one of"):
        HybridIndex([keyword], fusion="best")
