"""A composite's notes: the notes verbs and extras of the first member having them (the composite
is a :class:`~ovos_memory_plugins.protocols.NotesKeeper` exactly when a member is), and the verbs
that reach every member's copy of a fact: ``list_notes`` (one fact listed once), ``forget``,
``update``, ``retire``, ``restore``, and the copies forgotten when a member tells it forgot a
note. Part of :class:`~ovos_memory_plugins.composite.memory.CompositeMemory`.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ovos_memory_plugins.composite.members import Member
from ovos_memory_plugins.composite.state import CompositeState
from ovos_memory_plugins.errors import IncompleteForgetError
from ovos_memory_plugins.protocols import Note, NoteChange, NotesKeeper, words_key

LOG = logging.getLogger("ovos_memory_plugins.composite")  # the name it had before the split

__all__ = ["NOTES_EXTRAS", "NOTES_VERBS", "NotesMixin"]

#: The NotesKeeper verbs and the notes extras a composite takes from its first member having them.
NOTES_VERBS = ("list_notes", "remember", "forget", "update", "retire", "restore")
NOTES_EXTRAS = (
    "notes",
    "retired_notes",
    "notes_body",
    "notes_version",
    "replace_notes",
    "search_notes",
    "dream",
    "undo",
    "history",
    "digest",
    "drain",
    "curate_now",
    "pending_exchanges",
    "file_notes",
)


class NotesMixin(CompositeState):
    """The notes verbs and extras, from the members that keep notes."""

    def _provider(self, name: str) -> Any | None:
        """The first member (config order) offering ``name`` (a notes verb or extra)."""
        members = self.__dict__.get("_members") or []
        for m in members:
            if name in NOTES_VERBS and not isinstance(m.instance, NotesKeeper):
                continue
            if callable(getattr(m.instance, name, None)):
                return m.instance
        return None

    def __getattr__(self, name: str) -> Any:
        """The notes verbs and extras of the first member that has them (see the module
        docstring): the composite has a capability exactly when a member has it."""
        if name in NOTES_VERBS or name in NOTES_EXTRAS:
            provider = self._provider(name)
            if provider is not None:
                own = {
                    "forget": self._forget_note,
                    "list_notes": self._list_notes,
                    "update": self._update_note,
                    "retire": self._retire_note,
                    "restore": self._restore_note,
                }
                return own.get(name) or getattr(provider, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (and no member offers it)")

    def _forget_note(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """``forget`` of a composite that keeps notes: the first notes keeper (config order)
        that finds the note ``description`` names deletes it (a close call in one stops there:
        ``ambiguous``, nothing changed); then every keeper deletes its notes with the same
        words (by their exact ids: curated and sticky notes keep one fact under different ids),
        only ``session_id``'s when it is given. A keeper that fails to delete its copy raises
        :class:`~ovos_memory_plugins.errors.IncompleteForgetError` naming it."""
        scoped: dict[str, Any] = {} if session_id is None else {"session_id": session_id}
        keepers, change, _ = self._first_keeper_answer(
            lambda inst: inst.forget(description, **scoped), lambda got: bool(got) or got.status == "ambiguous"
        )
        if change is None:
            return NoteChange("not_found", message="no member keeps notes; nothing changed")
        if not change or change.note is None:
            return change
        key = words_key(change.note.text)
        failures: dict[str, str] = {}
        for m in keepers:
            try:
                for copy in self._copy_ids(m, key, scoped):
                    self._in_order(m, functools.partial(_forget_copy, copy, scoped))
            except Exception as exc:
                LOG.warning("CompositeMemory: member %r could not forget its copy of a note: %s", m.name, exc)
                failures[f"member {m.name!r}"] = f"{type(exc).__name__}: {exc}"
        if failures:
            raise IncompleteForgetError("forget", 1, failures)
        return change

    def _list_notes(self, *, include_retired: bool = False, session_id: str | None = None) -> list[Note]:
        """``list_notes`` of a composite: every notes member's notes (config order, each member's
        oldest first), only ``session_id``'s when given. One fact is one entry: a note whose id,
        or whose words, session and state (active or retired), an earlier member already listed
        is that entry (curated and sticky notes keep one fact under different ids). Each entry's
        ``metadata`` names the member it is listed from (``member``) and every member holding
        it (``members``). A member whose listing raises is left out (one warning)."""
        scoped: dict[str, Any] = {} if session_id is None else {"session_id": session_id}
        listed: list[Note] = []
        at: dict[Any, int] = {}
        for m in self._members:
            if not isinstance(m.instance, NotesKeeper):
                continue
            try:
                notes = m.instance.list_notes(include_retired=include_retired, **scoped)
            except Exception as exc:
                LOG.warning("CompositeMemory: member %r could not list its notes: %s", m.name, exc)
                continue
            for n in notes:
                same = (words_key(n.text), n.session_id, n.active)
                i = at.get(n.id, at.get(same))
                if i is None:
                    at[n.id] = at[same] = len(listed)
                    listed.append(replace(n, metadata={**n.metadata, "member": m.name, "members": [m.name]}))
                elif m.name not in listed[i].metadata["members"]:
                    held = listed[i]
                    members = [*held.metadata["members"], m.name]
                    listed[i] = replace(held, metadata={**held.metadata, "members": members})
        return listed

    def _update_note(self, description: str, new_fact: str, *, session_id: str | None = None) -> NoteChange:
        """``update`` of a composite: see :meth:`_change_note`."""
        return self._change_note("update", description, (new_fact,), session_id)

    def _retire_note(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """``retire`` of a composite: see :meth:`_change_note`."""
        return self._change_note("retire", description, (), session_id)

    def _restore_note(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """``restore`` of a composite: see :meth:`_change_note`."""
        return self._change_note("restore", description, (), session_id)

    def _change_note(self, verb: str, description: str, extra: tuple[Any, ...], session_id: str | None) -> NoteChange:
        """``update``/``retire``/``restore`` of a composite that keeps notes: the first notes
        keeper (config order) that finds the note ``description`` names (its exact id, or words)
        answers (a close call, ``ambiguous``, or a ``duplicate``/``refused`` stops there too);
        when it changed the note, every other keeper does the same to its copies of the fact
        (the same words, active ones, retired ones for ``restore``), by their exact ids, only
        ``session_id``'s when given. A keeper that fails on its copy is logged and named in the
        change's message."""
        scoped: dict[str, Any] = {} if session_id is None else {"session_id": session_id}
        keepers, change, source = self._first_keeper_answer(
            functools.partial(_note_verb, verb, description, extra, scoped),
            lambda got: bool(got) or got.status != "not_found",
        )
        if change is None:
            return NoteChange("not_found", message="no member keeps notes; nothing changed")
        if not change or change.note is None:
            return change
        key = words_key(change.note.text)
        failures: list[str] = []
        for m in keepers:
            if m is source:
                continue
            try:
                for copy in self._copy_ids(m, key, scoped, active=verb != "restore"):
                    self._in_order(m, functools.partial(_note_verb, verb, copy, extra, scoped))
            except Exception as exc:
                LOG.warning("CompositeMemory: member %r could not %s its copy of a note: %s", m.name, verb, exc)
                failures.append(f"member {m.name!r} could not {verb} its copy ({type(exc).__name__}: {exc})")
        if failures:
            return replace(change, message=f"{change.message}; " + "; ".join(failures))
        return change

    def _first_keeper_answer(
        self, call: Callable[[Any], NoteChange], stops: Callable[[NoteChange], bool]
    ) -> tuple[list[Member], NoteChange | None, Member | None]:
        """The notes keepers (config order) and the answer of the first whose answer ``stops``
        the search, with that keeper; when none does (every answer changed nothing), the last
        keeper's answer and None (no keeper at all: None, None)."""
        keepers = [m for m in self._members if isinstance(m.instance, NotesKeeper)]
        last: NoteChange | None = None
        for m in keepers:
            last = self._in_order(m, call)
            if stops(last):
                return keepers, last, m
        return keepers, last, None

    def _copy_ids(self, member: Member, key: str, scoped: dict[str, Any], active: bool | None = None) -> list[str]:
        """The ids of ``member``'s notes whose words are ``key`` (:func:`words_key`), retired ones
        included unless ``active`` says which state; only ``scoped``'s session when it names one."""
        notes = member.instance.list_notes(include_retired=True, **scoped)
        return [n.id for n in notes if words_key(n.text) == key and (active is None or n.active == active)]

    def notes_keeper(self) -> Any | None:
        """The member whose notes verbs the composite exposes (None: no member keeps notes)."""
        return self._provider("remember")

    def _copies_forgotten(self, source: str, note: Note) -> None:
        """Member ``source`` forgot ``note`` (a verb, a delete by id, a spoken "forget …" it acted
        on in its own turn): every other notes member deletes its notes with the same words, by
        their exact ids (only the note's session's under ``scope: session``). A member that
        fails is logged as an error: a turn never raises, and the explicit ``forget`` of the
        composite tries again and raises."""
        if getattr(_PROPAGATING, "on", False):
            return  # a copy forgotten here tells us again: already handled
        _PROPAGATING.on = True
        try:
            key = words_key(note.text)
            scoped: dict[str, Any] = {}
            if self.settings.scope == "session" and note.session_id:
                scoped = {"session_id": note.session_id}
            for m in self.__dict__.get("_members") or []:
                if m.name == source or not isinstance(m.instance, NotesKeeper):
                    continue
                try:
                    for n in m.instance.list_notes(include_retired=True, **scoped):
                        if words_key(n.text) == key:
                            m.instance.forget(n.id, **scoped)
                except Exception as exc:
                    LOG.error("CompositeMemory: member %r could not forget its copy of a note: %s", m.name, exc)
        finally:
            _PROPAGATING.on = False


#: Set while a composite removes the copies of a forgotten note (their forgets tell it again).
_PROPAGATING = threading.local()


def _forget_copy(note_id: str, scoped: dict[str, Any], member: Any) -> Any:
    """``member.forget(note_id)`` (the exact id of a note's copy), scoped as the caller asked."""
    return member.forget(note_id, **scoped)


def _note_verb(verb: str, description: str, extra: tuple[Any, ...], scoped: dict[str, Any], member: Any) -> Any:
    """``member.verb(description, *extra)`` (``update``, ``retire``, ``restore``), scoped as asked."""
    return getattr(member, verb)(description, *extra, **scoped)
