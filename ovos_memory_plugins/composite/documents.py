"""A composite's documents and forgetting: ``store`` and ``put_document`` in every recalling
member (once over one storage), ``iter_documents``, ``delete``, ``forget_session`` and
``forget_all`` fanned out to every member (over one storage: one transaction of every part), and
compaction, each location once. Part of :class:`~ovos_memory_plugins.composite.memory.CompositeMemory`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.composite.members import Member
from ovos_memory_plugins.composite.state import CompositeState
from ovos_memory_plugins.errors import BackendError, IncompleteForgetError
from ovos_memory_plugins.protocols import Compactable, DocumentLister, LocatedCompactable
from ovos_memory_plugins.storage.records import Compacted, ForgetReport
from ovos_memory_plugins.storage.seam import compact_database
from ovos_memory_plugins.text import clean_text

LOG = logging.getLogger("ovos_memory_plugins.composite")  # the name it had before the split

__all__ = ["DocumentsMixin"]


class DocumentsMixin(CompositeState):
    """Documents stored in, listed from and forgotten by every member."""

    @staticmethod
    def document_id(session_id: str, text: str) -> str:
        """The id ``store`` gives a text (the same as every memory of this package gives it)."""
        return BaseRetrievalMemory.document_id(session_id, text)

    def store(self, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None) -> str:
        """Store a document in every recalling member, under one id; return the id.

        Raises ``ValueError`` for empty or non-text input and :class:`BackendError` when no
        member could store it.
        """
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, not {type(text).__name__}")
        text = clean_text(text)
        if not text.strip():
            raise ValueError("cannot store empty text")
        doc_id = self.document_id(session_id, text)
        self.put_document(doc_id, text, session_id, metadata)
        return doc_id

    def put_document(
        self, doc_id: str, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None
    ) -> None:
        """Store a document under a given id in every recalling member (``put_document`` where
        the member has it, so export/import keeps ids; else ``store``); over one storage, once
        (every part's index gets it), by the recorder when it recalls (the notes part, whose
        digest hears an imported exchange as it does alone)."""
        if not isinstance(doc_id, str) or not doc_id:
            raise ValueError("doc_id must be a non-empty string")
        if not isinstance(text, str) or not clean_text(text).strip():
            raise ValueError("cannot store empty text")
        targets = [m for m in self._members if m.recalls and callable(getattr(m.instance, "store", None))]
        if not targets:
            raise BackendError("CompositeMemory: no member can store documents")
        if self.storage is not None:  # one storage: one write reaches every part's index
            recorder = self._recorder
            targets = [recorder] if recorder in targets else targets[:1]  # the notes' digest hears it
        errors = []
        for m in targets:
            try:
                put = getattr(m.instance, "put_document", None)
                if callable(put):
                    put(doc_id, clean_text(text), session_id, dict(metadata or {}))
                else:
                    m.instance.store(clean_text(text), session_id, dict(metadata or {}))
            except Exception as exc:
                LOG.warning("CompositeMemory: member %r could not store a document: %s", m.name, exc)
                errors.append(exc)
        if len(errors) == len(targets):
            raise BackendError(f"CompositeMemory: no member could store the document ({errors[0]})")

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        """Every document of the recalling members that list theirs
        (:class:`~ovos_memory_plugins.protocols.DocumentLister`), each id once (export, the editor).

        Raises :class:`BackendError` when no such member can list its documents.
        """
        listing = [m for m in self._members if m.recalls and isinstance(m.instance, DocumentLister)]
        if not listing:
            raise BackendError("CompositeMemory: no member that recalls can list its documents")
        if self.storage is not None:
            listing = listing[:1]  # parts list the one documents table
        seen: set[str] = set()
        for m in listing:
            for doc in m.instance.iter_documents():
                doc_id = str(doc.get("id", ""))
                if doc_id in seen:
                    continue
                seen.add(doc_id)
                yield dict(doc)

    def _fan_out(
        self, method: str, *args: Any, args_for: Callable[[Member], tuple[Any, ...]] | None = None
    ) -> tuple[list[int], dict[str, str]]:
        """Call ``method`` on every member that has it (with ``args``, or ``args_for(member)``),
        each after its queued writes; the counts they returned, and the members that failed
        with why."""
        counts: list[int] = []
        failures: dict[str, str] = {}
        for m in self._members:
            if not callable(getattr(m.instance, method, None)):
                continue
            call_args = args_for(m) if args_for is not None else args
            try:
                counts.append(int(self._in_order(m, functools.partial(_call, method, call_args)) or 0))
            except Exception as exc:
                LOG.warning("CompositeMemory: member %r: %s failed: %s", m.name, method, exc)
                failures[f"member {m.name!r}"] = f"{type(exc).__name__}: {exc}"
        return counts, failures

    def _copies(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """Per member name, the ids of its documents holding the same session and text as the
        documents ``ids`` name in any member (copies an earlier release stored under other ids;
        from members of this package, which say what they hold: ``documents``, ``copies_of``)."""
        texts: set[tuple[str, str]] = set()
        for m in self._members:
            fn = getattr(m.instance, "documents", None)
            if isinstance(m.instance, BaseRetrievalMemory) and callable(fn):
                try:
                    texts.update((str(d["session_id"]), str(d["text"])) for d in fn(ids))
                except Exception as exc:  # the delete below reports this member
                    LOG.debug("CompositeMemory: member %r could not say what it holds: %s", m.name, exc)
        out: dict[str, list[str]] = {}
        for m in self._members:
            if not isinstance(m.instance, BaseRetrievalMemory):
                continue
            try:
                found = [c for session, text in sorted(texts) for c in m.instance.copies_of(session, text)]
            except Exception as exc:
                LOG.debug("CompositeMemory: member %r could not look for copies: %s", m.name, exc)
                continue
            extra = [c for c in dict.fromkeys(found) if c not in ids]
            if extra:
                out[m.name] = extra
        return out

    def _fan_out_count(self, method: str, *args: Any) -> int:
        """Call ``method`` on every member that has it; the largest count any returned. Raises
        :class:`~ovos_memory_plugins.errors.IncompleteForgetError` naming the members that
        failed (after every other member did its part)."""
        counts, failures = self._fan_out(method, *args)
        if failures:
            raise IncompleteForgetError(method, max(counts, default=0), failures)
        return max(counts, default=0)

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id from every member that can; return how many of the ids some
        member held (an id several members hold counts once; ids spread over members, such as
        an archived exchange and a sticky note, each count). Every member holding a copy of an
        exchange holds it under the one id the composite lists (ids come from the exchange's
        session and text); a copy an earlier release stored under another id (same session, same
        text) goes too. A member that fails raises
        :class:`~ovos_memory_plugins.errors.IncompleteForgetError` (the others deleted)."""
        ids = list(dict.fromkeys(doc_ids))
        if self.storage is not None:
            copies = self._copies(ids)
            extra = [c for c in dict.fromkeys(c for found in copies.values() for c in found) if c not in ids]
            return self._forget_parts("delete", (ids,), also=(extra,) if extra else None)
        found = 0
        failures: dict[str, str] = {}
        for doc_id in ids:
            copies = self._copies([doc_id])
            counts, failed = self._fan_out("delete", args_for=functools.partial(_with_copies, doc_id, copies))
            found += 1 if any(counts) else 0
            where = f" ({doc_id})" if len(ids) > 1 else ""
            failures.update({f"{who}{where}": why for who, why in failed.items()})
        if failures:
            raise IncompleteForgetError("delete", found, failures)
        return found

    def forget_session(self, session_id: str) -> int:
        """Every member forgets the session; the most documents any member deleted (raises
        :class:`~ovos_memory_plugins.errors.IncompleteForgetError` when a member failed). Over
        one storage: one transaction (:meth:`_forget_parts`)."""
        if self.storage is not None:
            return self._forget_parts("forget_session", (session_id,))
        return self._fan_out_count("forget_session", session_id)

    def forget_all(self) -> int:
        """Every member forgets everything; the most documents any member deleted (raises
        :class:`~ovos_memory_plugins.errors.IncompleteForgetError` when a member failed). Over
        one storage: one transaction (:meth:`_forget_parts`)."""
        if self.storage is not None:
            return self._forget_parts("forget_all", ())
        return self._fan_out_count("forget_all")

    def _forget_parts(self, method: str, args: tuple[Any, ...], also: tuple[Any, ...] | None = None) -> ForgetReport:
        """``method(*args)`` (``delete``, ``forget_session``, ``forget_all``) of every part that
        has it, as ONE transaction of the one storage, after the recorder's queued writes (so a
        turn recorded just before is forgotten too): every part's lock is taken first, then the
        transaction, the order each part takes them in, then the storage is compacted when
        anything went (``compact_database``: on SQLite a ``VACUUM``; a copy SQLite moved while
        balancing its pages stays in free space otherwise) (``also``: a second call's arguments in
        the same transaction, not counted: the copies of earlier releases). Returns one
        :class:`~ovos_memory_plugins.storage.records.ForgetReport`: the parts' counts summed (each
        document or note goes once, from whichever part holds it) and what went from each tier.
        A part that fails rolls the whole transaction back (nothing is forgotten) and raises
        :class:`~ovos_memory_plugins.errors.IncompleteForgetError` naming it."""
        storage = self.storage
        assert storage is not None
        parts = [m for m in self._members if callable(getattr(m.instance, method, None))]
        failed: dict[str, str] = {}

        def run(_recorder: Any) -> ForgetReport:
            total = 0
            tiers: dict[str, int] = {}
            with contextlib.ExitStack() as held:
                for m in parts:
                    held.enter_context(m.instance.exclusive())  # parts are memories of this package
                with storage.atomic():
                    for m in parts:
                        try:
                            got = getattr(m.instance, method)(*args)
                            if also is not None:
                                more = getattr(m.instance, method)(*also)
                                for tier, n in getattr(more, "tiers", {}).items():
                                    tiers[tier] = tiers.get(tier, 0) + int(n)
                        except Exception as exc:
                            failed[f"member {m.name!r}"] = (
                                f"{type(exc).__name__}: {exc} (one transaction: nothing was forgotten)"
                            )
                            raise
                        total += int(got or 0)
                        for tier, n in getattr(got, "tiers", {}).items():
                            tiers[tier] = tiers.get(tier, 0) + int(n)
            if any(tiers.values()):
                # one file under several writers: SQLite's page balancing can leave a moved copy of
                # a row in free space, which secure_delete never sees; compacting rewrites the file
                done = compact_database(storage.db)
                for place, why in done.skipped.items():
                    LOG.warning("CompositeMemory: forgotten, but %s was not compacted now (%s)", place, why)
            return ForgetReport(total, tiers)

        recorder = self._recorder or (parts[0] if parts else None)
        if recorder is None:
            return ForgetReport(0)
        try:
            return self._in_order(recorder, run)
        except Exception as exc:
            if not failed:
                failed[f"member {recorder.name!r}"] = f"{type(exc).__name__}: {exc}"
            LOG.warning("CompositeMemory: %s failed, nothing was forgotten: %s", method, failed)
            raise IncompleteForgetError(method, 0, failed) from exc

    def compact(self) -> Compacted:
        """Every member that can (:class:`~ovos_memory_plugins.protocols.Compactable`) makes its
        deleted rows unrecoverable; the locations done, each once. Each location is compacted
        once too: a member whose declared ``compaction_locations``
        (:class:`~ovos_memory_plugins.protocols.LocatedCompactable`) were all done (or tried)
        by a member before it is not asked again (members on one PostgreSQL database, or on one
        SQLite file, each ran a VACUUM of it before). A member that fails is logged and named in
        ``skipped``; a member that declares no locations is always asked."""
        done = Compacted()
        tried: set[str] = set()
        for m in self._members:
            if not isinstance(m.instance, Compactable):
                continue
            places = _compaction_locations(m.instance)
            if places is not None and places <= tried:
                continue
            try:
                result = m.instance.compact()
            except Exception as exc:
                LOG.warning("CompositeMemory: member %r could not compact: %s", m.name, exc)
                done.skipped[f"member {m.name}"] = str(exc)
                continue
            done.merge(result)
            tried.update(result)
            tried.update(getattr(result, "skipped", {}))
            tried.update(places or ())
        return done

    @property
    def compaction_locations(self) -> frozenset[str] | None:
        """Every member's compaction locations (None when a member that compacts does not
        declare them): a composite inside a composite is compacted once per location too."""
        out: set[str] = set()
        for m in self._members:
            if not isinstance(m.instance, Compactable):
                continue
            places = _compaction_locations(m.instance)
            if places is None:
                return None
            out.update(places)
        return frozenset(out)


def _with_copies(doc_id: str, copies: dict[str, list[str]], m: Member) -> tuple[Any, ...]:
    """The arguments of member ``m``'s ``delete``: the id and ``m``'s copies of that document."""
    return ([doc_id, *copies.get(m.name, [])],)


def _call(method: str, args: tuple[Any, ...], member: Any) -> Any:
    """``member.method(*args)``."""
    return getattr(member, method)(*args)


def _compaction_locations(member: Any) -> frozenset[str] | None:
    """Where a member's ``compact()`` works, as it declares it
    (:class:`~ovos_memory_plugins.protocols.LocatedCompactable`); None when it does not say."""
    return member.compaction_locations if isinstance(member, LocatedCompactable) else None
