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

Front-ends (the command, the editor, export, the tool box) ask for what they need through the
protocols below, never through a class's private attributes or method names they guess:

* :class:`DocumentLister`: ``iter_documents()``, every stored document (export, the editor).
* :class:`NotesKeeper`: the one notes protocol that curated notes and sticky notes implement;
  every verb returns a :class:`NoteChange` and every listing :class:`Note` objects;
  :class:`ForgetNotifier`: a notes keeper that tells when it forgot a note (a composite then
  removes the other members' copies).
* :class:`Compactable`: ``compact()``, make deleted rows unrecoverable in everything the memory
  stores in (the editor after every delete); :class:`LocatedCompactable` also names those
  locations beforehand (``compaction_locations``), so a composite whose members share one
  database compacts it once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.storage.records import Note, note_id, words_key  # their old home

__all__ = [
    "Capabilities",
    "Compactable",
    "ContextContributor",
    "CurationStatus",
    "DocumentLister",
    "ForgetNotifier",
    "HistoryKeeper",
    "LocatedCompactable",
    "Note",
    "NoteChange",
    "NoteStatus",
    "NotesKeeper",
    "Retriever",
    "StorageStatus",
    "capabilities",
    "check_context_contributor",
    "check_history_keeper",
    "check_retriever",
    "note_id",
    "words_key",
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


@runtime_checkable
class DocumentLister(Protocol):
    """Something that can list every document it stores (export, the editor, migration)."""

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        """Every stored document, oldest first, as ``{"id", "text", "session_id", "metadata"}``."""
        ...


@runtime_checkable
class Compactable(Protocol):
    """Something whose deleted rows can be made unrecoverable on demand (every memory built on
    the base, and a composite through its members)."""

    def compact(self) -> list[str]:
        """Make deleted rows unrecoverable in everything this memory stores in; return the
        locations done (file paths, or a database URL without its password). A location that
        could not be done now (a busy file) is left out and logged; where the result is a
        :class:`~ovos_memory_plugins.storage.records.Compacted`, its ``skipped`` names it."""
        ...


@runtime_checkable
class LocatedCompactable(Compactable, Protocol):
    """A :class:`Compactable` that says beforehand where :meth:`compact` works (every memory
    built on the base). A composite compacts a location once, however many of its members
    store in it (members on one PostgreSQL database, or on one SQLite file)."""

    @property
    def compaction_locations(self) -> frozenset[str] | None:
        """The locations :meth:`compact` works on, named as it reports them (a file path, a
        database URL without its password); empty when it has nothing to compact (a memory in
        RAM); None when not known (a composite then always calls :meth:`compact`)."""
        ...


@runtime_checkable
class StorageStatus(Protocol):
    """Something that says whether what it learns is kept (every memory built on the base, and a
    composite through its members). A memory whose folder or database could not be opened keeps
    on answering from RAM (a constructor never raises: the host would drop the persona); this is
    how a front-end learns that nothing is being kept: the command fails, ``check`` reports it."""

    @property
    def storage_problem(self) -> str | None:
        """Why nothing this memory learns outlives the process (it fell back to RAM), naming
        the folder or database and the reason; None when it keeps what it learns (or keeps it
        in RAM by configuration)."""
        ...


@runtime_checkable
class CurationStatus(Protocol):
    """Something that curates the conversation later (the notes' digest) and says how much waits
    (``ovos-memory check``; a composite with a notes member)."""

    def pending_exchanges(self, session_id: str | None = None) -> int:
        """Exchanges recorded and not digested yet (of one session, or all); they survive a restart."""
        ...


#: What a notes verb did. ``duplicate`` (already noted), ``ambiguous`` (too close to call),
#: ``not_found`` and ``refused`` (invalid input, read-only) change nothing.
NoteStatus = Literal[
    "added", "duplicate", "forgotten", "updated", "retired", "restored", "ambiguous", "not_found", "refused"
]


@dataclass
class NoteChange:
    """The result of every :class:`NotesKeeper` verb; truthy when the notes changed.

    Attributes:
        status: see :data:`NoteStatus`.
        note: the note added, forgotten, retired or restored (the old one for ``updated``).
        replaced_by: the new note of an ``updated``.
        candidates: the close notes of an ``ambiguous`` (nothing changed: ask which one).
        message: one human-readable line saying what happened (shown to users and to models).
    """

    status: NoteStatus
    note: Note | None = None
    replaced_by: Note | None = None
    candidates: list[Note] = field(default_factory=list)
    message: str = ""

    def __bool__(self) -> bool:
        return self.status in ("added", "forgotten", "updated", "retired", "restored")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)


@runtime_checkable
class NotesKeeper(Protocol):
    """The one notes protocol (curated notes, sticky notes, and a composite that has either).

    A ``description`` is a note's exact id or words that name it; a verb picks the one note the
    description names (retired notes included where that makes sense) and changes nothing when
    two are too close to call (``ambiguous``, with ``candidates``). With ``session_id`` a verb
    picks only among the notes learned in that session (those ``list_notes(session_id=...)``
    lists): a caller scoped to one session (the tool box with ``scope: session``) never
    changes, forgets or quotes another session's note.

    ``forget`` removes the text for good, from every tier (no retired copy kept); ``retire`` is
    for a fact that stopped being true (shown as such, restorable).
    """

    def list_notes(self, *, include_retired: bool = False, session_id: str | None = None) -> list[Note]:
        """The notes, oldest first (only ``session_id``'s when given)."""
        ...

    def remember(self, fact: str, *, session_id: str = "default", date: str | None = None) -> NoteChange:
        """Add a note (``duplicate`` when already noted)."""
        ...

    def forget(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """Delete the note the description names, from every tier (no retired copy kept)."""
        ...

    def update(self, description: str, new_fact: str, *, session_id: str | None = None) -> NoteChange:
        """Replace the note the description names with ``new_fact``."""
        ...

    def retire(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """Mark the note no longer true (kept, shown as such where the memory does that)."""
        ...

    def restore(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """Make a retired note active again."""
        ...


@runtime_checkable
class ForgetNotifier(Protocol):
    """A notes keeper that tells when it forgot a note, whatever asked (a verb, a delete by id,
    a spoken "forget …" it acted on itself): a composite then removes the other members' copies
    of the fact (curated notes and sticky notes)."""

    def add_forget_listener(self, listener: Callable[[Note], None]) -> None:
        """Call ``listener(note)`` after every note forgotten (a listener that raises is logged)."""
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
        # a memory built on the base declares it (the base's own context_blocks is always empty)
        declared = getattr(type(member), "contributes_context", None)
        return True if declared is None else bool(declared)
    return True


def capabilities(member: Any, name: str | None = None) -> Capabilities:
    """Check ``member`` against the three protocols and say which it meets.

    A method that is present is checked by signature; a ``context_blocks`` of a class that
    declares ``contributes_context = False`` (every memory built on
    :class:`~ovos_memory_plugins.base.BaseRetrievalMemory` that does not write its own) does not
    count.
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
