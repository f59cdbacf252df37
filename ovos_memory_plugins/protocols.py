"""Named capabilities a composite member (or any plugin) can have, and the checks that name culprits.

A composite member is any OPM memory plugin. What the composite does with it depends on what it
can do:

* :class:`Retriever`: ``search(query, session_id=None, top_k=None) -> list[MemoryHit]``; its hits
  are fused with the other retrievers' hits.
* :class:`ContextContributor`: ``context_blocks(utterance, session_id) -> list[str]``; system text
  it always contributes (durable notes, sticky notes), folded after the persona's system prompt.
* :class:`HistoryKeeper`: ``get_history(session_id)`` and ``update_history(messages,
  session_id)``, the two OPM ``AgentContextManager`` methods; every member that has them gets
  every new turn, and one of them (the composite's ``primary``) supplies the prompt's history.

:func:`capabilities` checks a loaded member against all three and raises
:class:`~ovos_memory_plugins.errors.BackendError` naming the member, its class and what is wrong
when a method exists with an unusable signature, or when the member has none of the three.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.errors import BackendError

__all__ = [
    "Capabilities",
    "ContextContributor",
    "HistoryKeeper",
    "Retriever",
    "capabilities",
    "check_context_contributor",
    "check_history_keeper",
    "check_retriever",
]


@runtime_checkable
class Retriever(Protocol):
    """Something that recalls memories for a query, best first."""

    def search(self, query: str, session_id: str | None = None, top_k: int | None = None) -> list[MemoryHit]:
        """The memories best matching ``query`` (only ``session_id``'s when given), best first."""
        ...


@runtime_checkable
class ContextContributor(Protocol):
    """Something that contributes system text to every turn (notes, sticky notes)."""

    def context_blocks(self, utterance: str, session_id: str) -> list[str]:
        """Text blocks for the system part of the prompt (an empty list for none)."""
        ...


@runtime_checkable
class HistoryKeeper(Protocol):
    """The history half of an OPM ``AgentContextManager``."""

    def get_history(self, session_id: str) -> list[Any]:
        """The session's recent messages (``AgentMessage``), oldest first."""
        ...

    def update_history(self, new_messages: list[Any], session_id: str) -> None:
        """Record new messages of the session."""
        ...


def _culprit(member: Any, name: str | None) -> str:
    label = f"member {name!r} " if name else ""
    return f"{label}({type(member).__module__}.{type(member).__qualname__})"


def _check_call(member: Any, name: str | None, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise BackendError unless ``member.method(*args, **kwargs)`` would bind."""
    fn: Callable[..., Any] | None = getattr(member, method, None)
    if not callable(fn):
        raise BackendError(f"{_culprit(member, name)}: {method} is not callable")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C callable without a readable signature: trust it
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        call = ", ".join([*(repr(a) for a in args), *(f"{k}=..." for k in kwargs)])
        raise BackendError(
            f"{_culprit(member, name)}: {method}{signature} cannot be called as {method}({call}): {exc}"
        ) from exc


def check_retriever(member: Any, name: str | None = None) -> None:
    """Raise BackendError unless ``member.search(query, session_id=..., top_k=...)`` is callable."""
    _check_call(member, name, "search", ("query",), {"session_id": None, "top_k": 1})


def check_context_contributor(member: Any, name: str | None = None) -> None:
    """Raise BackendError unless ``member.context_blocks(utterance, session_id)`` is callable."""
    _check_call(member, name, "context_blocks", ("utterance", "session"), {})


def check_history_keeper(member: Any, name: str | None = None) -> None:
    """Raise BackendError unless ``get_history(session_id)`` and ``update_history(messages,
    session_id)`` are callable."""
    _check_call(member, name, "get_history", ("session",), {})
    _check_call(member, name, "update_history", ([], "session"), {})


@dataclass(frozen=True)
class Capabilities:
    """What a member can do (see the module docstring)."""

    retriever: bool
    contributor: bool
    history: bool


def _defines(member: Any, method: str) -> bool:
    """Whether the member has ``method`` and it is more than the base class's do-nothing default."""
    if not callable(getattr(member, method, None)):
        return False
    if method == "context_blocks":
        from ovos_memory_plugins.base import BaseRetrievalMemory

        return getattr(type(member), method, None) is not BaseRetrievalMemory.context_blocks
    return True


def capabilities(member: Any, name: str | None = None) -> Capabilities:
    """Check ``member`` against the three protocols and say which it meets.

    A method that is present is checked by signature; a ``context_blocks`` inherited unchanged
    from :class:`~ovos_memory_plugins.base.BaseRetrievalMemory` (always empty) does not count.
    Raises :class:`BackendError` naming the member when a present method cannot be called as
    the protocol says, or when the member meets none of the three.
    """
    retriever = _defines(member, "search")
    contributor = _defines(member, "context_blocks")
    history = callable(getattr(member, "get_history", None)) or callable(getattr(member, "update_history", None))
    if retriever:
        check_retriever(member, name)
    if contributor:
        check_context_contributor(member, name)
    if history:
        check_history_keeper(member, name)
    if not (retriever or contributor or history):
        raise BackendError(
            f"{_culprit(member, name)}: has none of search(query, session_id, top_k), "
            "context_blocks(utterance, session_id), get_history/update_history; it cannot be a member"
        )
    return Capabilities(retriever=retriever, contributor=contributor, history=history)
