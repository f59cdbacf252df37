"""The base checks a backend class when it is defined: a hook combination that cannot forget is
refused by name (``__init_subclass__``), and every combination it accepts really forgets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.base import BaseRetrievalMemory, forget_problems
from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.testing import InMemoryMemory, exchange


class _Docs(BaseRetrievalMemory):
    """Documents in RAM with their session; only the two required hooks."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.docs: dict[str, tuple[str, str]] = {}

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        self.docs[doc_id] = (text, session_id)

    def _hits(self, query: str, top_k: int, session_id: str | None) -> list[MemoryHit]:
        words = set(query.lower().split())
        found = [
            MemoryHit(text, d, float(len(words & set(text.lower().split()))), {"session_id": sid})
            for d, (text, sid) in self.docs.items()
            if session_id is None or sid == session_id
        ]
        return sorted((h for h in found if h.score > 0), key=lambda h: -h.score)[:top_k]

    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        return self._hits(query, top_k, None)


# The hooks, written once and combined per class below.


def _session_hits(self: _Docs, query: str, top_k: int, session_id: str) -> list[MemoryHit]:
    return self._hits(query, top_k, session_id)


def _delete_by_id(self: _Docs, doc_ids: Sequence[str]) -> int:
    return sum(self.docs.pop(d, None) is not None for d in doc_ids)


def _session_ids(self: _Docs, session_id: str) -> list[str]:
    return [d for d, (_, sid) in self.docs.items() if sid == session_id]


def _delete_everything(self: _Docs) -> int:
    n = len(self.docs)
    self.docs.clear()
    return n


def test_the_privacy_hole_is_refused_by_name() -> None:
    # the combination docs/writing-a-backend.md used to suggest: forget_* returned 0, documents stayed
    with pytest.raises(TypeError) as caught:

        class SessionsAndDelete(_Docs):
            _query_session = _session_hits
            _delete_documents = _delete_by_id

    message = str(caught.value)
    assert "test_hook_rules" in message and "SessionsAndDelete" in message
    assert "_session_document_ids" in message and "_delete_all" in message


def test_one_missing_hook_is_named_alone() -> None:
    with pytest.raises(TypeError, match="_delete_all") as caught:

        class NoDeleteAll(_Docs):
            _query_session = _session_hits
            _delete_documents = _delete_by_id
            _session_document_ids = _session_ids

    assert "NoDeleteAll" in str(caught.value) and "_session_document_ids(" not in str(caught.value)


class Complete(_Docs):
    _query_session = _session_hits
    _delete_documents = _delete_by_id
    _session_document_ids = _session_ids
    _delete_all = _delete_everything


class CatalogueOnly(_Docs):
    """No session hook: the base's catalogue knows every document."""

    _delete_documents = _delete_by_id


class SessionsNoDelete(_Docs):
    """Keeps sessions, cannot delete: forgetting raises, loudly."""

    _query_session = _session_hits


def test_accepted_combinations_have_no_problems() -> None:
    for cls in (Complete, CatalogueOnly, SessionsNoDelete, InMemoryMemory, _Docs):
        assert forget_problems(cls) == [], cls


def test_a_subclass_inherits_the_hooks_it_needs() -> None:
    class Narrower(InMemoryMemory):
        def _query_session(self, query: str, top_k: int, session_id: str) -> list[MemoryHit]:
            return super()._query_session(query, top_k, session_id)[:1]

    assert forget_problems(Narrower) == []


def test_own_forget_methods_satisfy_the_rule() -> None:
    class OwnForget(_Docs):
        _query_session = _session_hits
        _delete_documents = _delete_by_id

        def forget_session(self, session_id: str) -> int:
            return self.delete([d for d, (_, sid) in self.docs.items() if sid == session_id])

        def forget_all(self) -> int:
            return self.delete(list(self.docs))

    assert forget_problems(OwnForget) == []


@pytest.mark.parametrize("cls", [Complete, CatalogueOnly])
def test_every_accepted_combination_really_forgets(tmp_path: Path, cls: type[_Docs]) -> None:
    with cls({"root": str(tmp_path / "m")}) as mem:
        mem.update_history(exchange("the canary word is quince", "quince, noted"), "a")
        mem.store("another quince for session b", "b")
        assert mem.forget_session("a") == 1
        assert [h.content for h in mem.search("quince", top_k=5)] == ["another quince for session b"]
        assert mem.get_history("a") == []
        assert mem.forget_all() == 1
        assert mem.search("quince", top_k=5) == [] and mem.docs == {}


def test_sessions_without_delete_refuse_to_forget_loudly(tmp_path: Path) -> None:
    with SessionsNoDelete({"root": str(tmp_path / "m")}) as mem:
        mem.store("a quince", "a")
        with pytest.raises(BackendError, match="cannot delete"):
            mem.forget_session("a")
        with pytest.raises(BackendError, match="cannot delete"):
            mem.forget_all()


def test_delete_all_without_delete_by_id_is_refused() -> None:
    with pytest.raises(TypeError, match=r"OnlyDeleteAll: .*_delete_documents"):

        class OnlyDeleteAll(_Docs):
            _delete_all = _delete_everything
