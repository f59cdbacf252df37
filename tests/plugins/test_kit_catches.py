"""The conformance kit fails backends that break the contract (its tests can fail): a backend
that cannot forget, one whose search finds nothing, one that lists what it deleted, one that
pretends to delete."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_hook_rules import Complete, _Docs

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.testing import InMemoryMemory, MemoryContract


def kit_for(cls: type[Any], **attributes: Any) -> MemoryContract:
    contract = type("Kit", (MemoryContract,), {"make_memory": lambda self, config: cls(config), **attributes})
    return contract()  # type: ignore[no-any-return]


class Leaky(_Docs):
    """The privacy hole of issue 12, built behind the class check's back: the backend keeps
    sessions itself and a copy of each document under an id the base never sees, and has no
    ``_session_document_ids`` to name it (the base's catalogue knows only the ids it wrote)."""

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        super()._store_document(doc_id, text, session_id, metadata)
        self.docs[doc_id + "-copy"] = (text, session_id)


Leaky._query_session = Complete._query_session  # type: ignore[method-assign]
Leaky._delete_documents = Complete._delete_documents  # type: ignore[method-assign]


FORGET_TESTS = ["test_forget_session_forgets_that_session_only", "test_forget_all_forgets_everything"]


@pytest.mark.parametrize("test", FORGET_TESTS)
def test_a_backend_that_cannot_forget_fails(tmp_path: Path, test: str) -> None:
    with pytest.raises(AssertionError):
        getattr(kit_for(Leaky, survives_restart=False), test)(tmp_path)


def test_the_same_backend_with_its_hooks_passes(tmp_path: Path) -> None:
    kit = kit_for(Complete, survives_restart=False)
    kit.test_forget_session_forgets_that_session_only(tmp_path / "a")
    kit.test_forget_all_forgets_everything(tmp_path / "b")


class FindsNothing(InMemoryMemory):
    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        return []

    def _query_session(self, query: str, top_k: int, session_id: str) -> list[MemoryHit]:
        return []


def test_a_search_that_finds_nothing_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError):
        kit_for(FindsNothing).test_search_finds_and_limits(tmp_path)


class ListsTheDeleted(InMemoryMemory):
    """Deletes, but keeps listing what it deleted."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        self.ever: dict[str, tuple[str, str, dict[str, Any]]] = {}

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        super()._store_document(doc_id, text, session_id, metadata)
        self.ever[doc_id] = (text, session_id, dict(metadata))

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        for doc_id, (text, sid, meta) in self.ever.items():
            yield {"id": doc_id, "text": text, "session_id": sid, "metadata": meta}


def test_a_listing_that_keeps_deleted_documents_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="iter_documents still lists"):
        kit_for(ListsTheDeleted, survives_restart=False).test_delete_forgets_the_document(tmp_path)


class Pretends(InMemoryMemory):
    """Says it deleted, deletes nothing."""

    def _delete_documents(self, doc_ids: Sequence[str]) -> int:
        return len(doc_ids)


def test_a_backend_that_pretends_to_delete_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError):
        kit_for(Pretends).test_delete_forgets_the_document(tmp_path)


def test_can_forget_false_wants_a_loud_refusal(tmp_path: Path) -> None:
    kit_for(_Docs, can_forget=False).test_delete_forgets_the_document(tmp_path / "a")  # raises BackendError: ok
    with pytest.raises(AssertionError, match="neither forgot nor raised"):
        kit_for(InMemoryMemory, can_forget=False).test_delete_forgets_the_document(tmp_path / "b")
