"""The third-party example from the contract, verbatim, and its recall."""

from typing import Dict

from ovos_plugin_manager.templates.agents import MessageRole

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.testing import MemoryContract, exchange


class SubstringMemory(BaseRetrievalMemory):
    def __init__(self, config=None):
        super().__init__(config)
        self._docs: Dict[str, str] = {}
    def _store_document(self, doc_id, text, session_id, metadata):
        self._docs[doc_id] = text
    def _query_backend(self, query, top_k):
        q = query.lower()
        hits = [MemoryHit(content=t, source=d, score=float(t.lower().count(q))) for d, t in self._docs.items()]
        hits = [h for h in hits if h.score > 0]
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:top_k]


def test_seed_example_recalls_a_past_exchange() -> None:
    mem = SubstringMemory({"system_prompt": "You are helpful."})
    mem.update_history(exchange("my favourite colour is teal", "teal, noted"), "s1")
    msgs = mem.build_conversation_context("teal", "s2")
    assert [m.role for m in msgs] == [MessageRole.SYSTEM, MessageRole.SYSTEM, MessageRole.USER]
    assert "today] Q: my favourite colour is teal\n  A: teal, noted" in msgs[1].content  # dated, by the base
    assert msgs[-1].content == "teal"
    hits = mem.search("teal")
    assert hits[0].content == "Q: my favourite colour is teal\nA: teal, noted"


def test_seed_example_metadata_comes_back_from_the_catalogue() -> None:
    mem = SubstringMemory()
    doc = mem.store("the spare key is under the frog statue", "s1", {"ref": "k1"})
    hit = mem.search("frog statue")[0]
    assert hit.source == doc and hit.metadata == {"ref": "k1", "time": hit.metadata["time"]}  # dated when stored


class WordSubstringMemory(SubstringMemory):
    """The seed example searching word by word, so the kit's multi-word queries match. It has
    no session hook: the contract checks the base's catalogue path (session widening)."""

    def _query_backend(self, query, top_k):
        scores: Dict[str, float] = {}
        for word in {w for w in query.lower().split() if len(w) > 3}:
            for hit in super()._query_backend(word, len(self._docs)):
                scores[hit.source] = scores.get(hit.source, 0.0) + 1.0
        ranked = sorted(scores.items(), key=lambda p: p[1], reverse=True)[:top_k]
        return [MemoryHit(content=self._docs[d], source=d, score=s) for d, s in ranked]


class TestSubstringContract(MemoryContract):
    survives_restart = False
    can_forget = False  # no delete hook: the kit checks that delete and forget_* refuse loudly

    def make_memory(self, config):
        return WordSubstringMemory(config)
