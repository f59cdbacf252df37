"""The Index protocol, `|` composition, fusion, and arms that fail."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.embedders import HashingEmbedder
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.index import HybridIndex, Index, IndexBase, IndexDocument, VectorIndex, fuse_scores
from ovos_memory_plugins.storage.vector_store import VectorStore, open_vector_database


class DictIndex(IndexBase):
    """A bring-your-own arm: substring matching over a dict."""

    def __init__(self, name: str, fail_reads: bool = False, fail_writes: bool = False) -> None:
        self.name = name
        self.docs: dict[str, IndexDocument] = {}
        self.fail_reads = fail_reads
        self.fail_writes = fail_writes

    def add(self, docs: Sequence[IndexDocument]) -> None:
        if self.fail_writes:
            raise RuntimeError(f"{self.name} is down")
        for doc in docs:
            self.docs[doc.doc_id] = doc

    def remove(self, ids: Sequence[str]) -> None:
        if self.fail_writes:
            raise RuntimeError(f"{self.name} is down")
        for i in ids:
            self.docs.pop(i, None)

    def search(self, query: str, k: int, session_id: str | None = None) -> list[MemoryHit]:
        if self.fail_reads:
            raise RuntimeError(f"{self.name} is down")
        words = set(query.lower().split())
        hits = []
        for doc in self.docs.values():
            if session_id is not None and doc.session_id != session_id:
                continue
            score = float(len(words & set(doc.text.lower().split())))
            if score:
                hits.append(MemoryHit(doc.text, doc.doc_id, score))
        hits.sort(key=lambda h: (-h.score, h.source))
        return hits[:k]


DOCS = [
    IndexDocument("a", "the red bicycle is in the garage", "s1"),
    IndexDocument("b", "the blue car is parked outside", "s1"),
    IndexDocument("c", "my red scarf is in the drawer", "s2"),
]


def test_pipe_builds_a_flat_hybrid() -> None:
    x, y, z = DictIndex("x"), DictIndex("y"), DictIndex("z")
    both = x | y
    assert isinstance(both, HybridIndex) and isinstance(both, Index)
    three = both | z
    assert three.arms == [x, y, z] and three.name == "x | y | z"


def test_writes_reach_every_arm_and_upsert_by_id() -> None:
    x, y = DictIndex("x"), DictIndex("y")
    hybrid = x | y
    hybrid.add(DOCS)
    hybrid.add([IndexDocument("a", "the red bicycle is in the shed", "s1")])
    assert set(x.docs) == set(y.docs) == {"a", "b", "c"}
    assert x.docs["a"].text.endswith("shed") and y.docs["a"].text.endswith("shed")
    hybrid.remove(["b"])
    assert set(x.docs) == set(y.docs) == {"a", "c"}


def test_a_failing_arm_still_lets_the_others_write_then_raises() -> None:
    good, bad = DictIndex("good"), DictIndex("bad", fail_writes=True)
    hybrid = bad | good
    with pytest.raises(BackendError, match="bad"):
        hybrid.add(DOCS)
    assert set(good.docs) == {"a", "b", "c"}


def test_reads_skip_a_failing_arm() -> None:
    good, bad = DictIndex("good"), DictIndex("bad")
    hybrid = good | bad
    hybrid.add(DOCS)
    bad.fail_reads = True
    hits = hybrid.search("red bicycle", 2)
    assert [h.source for h in hits] == ["a", "c"]
    good.fail_reads = True
    assert hybrid.search("red bicycle", 2) == []


def test_session_filter_reaches_the_arms() -> None:
    hybrid = DictIndex("x") | DictIndex("y")
    hybrid.add(DOCS)
    assert [h.source for h in hybrid.search("red", 5, session_id="s2")] == ["c"]


def test_non_index_arm_is_rejected_with_its_name() -> None:
    with pytest.raises(BackendError, match="object"):
        HybridIndex([DictIndex("x"), object()])


def test_fuse_scores_by_hand() -> None:
    a = [MemoryHit("one", "1", 4.0), MemoryHit("two", "2", 2.0)]
    b = [MemoryHit("two", "2", 0.9)]
    fused = fuse_scores([a, b], [1.0, 0.5], rrf_k=60)
    # one: 1 * (0.5 * 61/61 + 0.5 * 4/4) = 1.0
    # two: 1 * (0.5 * 61/62 + 0.5 * 2/4) + 0.5 * (0.5 * 61/61 + 0.5 * 0.9/0.9) = 0.7419... + 0.5
    assert [h.content for h in fused] == ["two", "one"]
    assert fused[0].score == pytest.approx(0.5 * 61 / 62 + 0.25 + 0.5)
    assert fused[1].score == pytest.approx(1.0)
    assert a[0].score == 4.0  # inputs untouched


def test_rrf_fusion_and_per_query_weight() -> None:
    x, y = DictIndex("x"), DictIndex("y")
    y.weight = lambda query: 0.0  # type: ignore[attr-defined]  # this arm is blind to every query
    hybrid = HybridIndex([x, y], fusion="rrf")
    hybrid.add(DOCS)
    assert [h.source for h in hybrid.search("red", 5)] == ["a", "c"]


def test_vector_arm_composes_with_a_keyword_arm(tmp_path: Path) -> None:
    db, _ = open_vector_database(tmp_path / "v.db", False)
    try:
        vectors = VectorIndex(VectorStore(db), HashingEmbedder(128), min_similarity=0.1)
        words = DictIndex("keyword")
        hybrid = words | vectors
        hybrid.add(DOCS)
        assert vectors.pending() == 0
        hits = hybrid.search("bicycles in garages", 3)
        assert hits[0].source == "a"
        vectors.stop()
    finally:
        db.close()
