"""The Index protocol, `|` composition, fusion, and arms that fail."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.embedders import HashingEmbedder
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.index import HybridIndex, Index, IndexBase, VectorIndex, fuse_scores
from ovos_memory_plugins.storage.engine import Document, StoredDocument
from ovos_memory_plugins.storage.sqlite.engine import open_sqlite


class DictIndex(IndexBase):
    """A bring-your-own arm: word matching over a dict."""

    def __init__(self, name: str, fail_reads: bool = False, fail_writes: bool = False) -> None:
        self.name = name
        self.docs: dict[str, StoredDocument] = {}
        self.fail_reads = fail_reads
        self.fail_writes = fail_writes

    def prepare(self, docs: Sequence[Document]) -> None:
        return None

    def add(self, docs: Sequence[StoredDocument], prepared: Any = None) -> None:
        if self.fail_writes:
            raise RuntimeError(f"{self.name} is down")
        for doc in docs:
            self.docs[doc.doc_id] = doc

    def remove(self, docs: Sequence[StoredDocument]) -> int:
        if self.fail_writes:
            raise RuntimeError(f"{self.name} is down")
        return sum(self.docs.pop(d.doc_id, None) is not None for d in docs)

    def remove_all(self) -> int:
        n = len(self.docs)
        self.docs.clear()
        return n

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

    def stats(self) -> dict[str, Any]:
        return {f"{self.name}_docs": len(self.docs)}

    def close(self) -> None:
        pass


def _doc(key: int, doc_id: str, text: str, session_id: str) -> StoredDocument:
    return StoredDocument(key, doc_id, session_id, text, {}, 0.0)


DOCS = [
    _doc(1, "a", "the red bicycle is in the garage", "s1"),
    _doc(2, "b", "the blue car is parked outside", "s1"),
    _doc(3, "c", "my red scarf is in the drawer", "s2"),
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
    hybrid.add([_doc(1, "a", "the red bicycle is in the shed", "s1")])
    assert set(x.docs) == set(y.docs) == {"a", "b", "c"}
    assert x.docs["a"].text.endswith("shed") and y.docs["a"].text.endswith("shed")
    removed = hybrid.remove([DOCS[1]])
    assert set(x.docs) == set(y.docs) == {"a", "c"}
    assert removed == 2 and removed.tiers == {"x_rows": 1, "y_rows": 1}  # type: ignore[attr-defined]
    assert hybrid.stats() == {"x_docs": 2, "y_docs": 2}


def test_a_failing_arm_fails_the_write() -> None:
    """Arms write inside the memory's one transaction: a failing arm rolls the whole write back."""
    good, bad = DictIndex("good"), DictIndex("bad", fail_writes=True)
    hybrid = good | bad
    with pytest.raises(RuntimeError, match="bad"):
        hybrid.add(DOCS)


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
    storage = open_sqlite(tmp_path / "v.db")
    try:
        vectors = VectorIndex(storage.vector_store(), storage.documents, HashingEmbedder(128), min_similarity=0.1)
        words = DictIndex("keyword")
        hybrid = words | vectors
        docs = [Document(d.doc_id, d.text, d.session_id) for d in DOCS]
        prepared = hybrid.prepare(docs)
        with storage.atomic():
            hybrid.add(storage.documents.put(docs), prepared)
        assert vectors.pending() == 0
        hits = hybrid.search("bicycles in garages", 3)
        assert hits[0].source == "a"
        vectors.stop()
    finally:
        storage.close()
