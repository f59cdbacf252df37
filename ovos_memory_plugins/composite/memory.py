"""``ovos-memory-plugin-composite``: several memories as one, their recall fused (RRF by default).

A persona names one ``memory_module``; the composite holds any number of members, each an OPM
memory plugin loaded by its entry-point name, so third-party backends join the same way::

    "memory_module": "ovos-memory-plugin-composite",
    "ovos-memory-plugin-composite": {
        "system_prompt": "You are Ada, a helpful assistant.",
        "namespace": "ada",
        "members": [
            {"module": "ovos-memory-plugin-lexical"},
            {"module": "ovos-memory-plugin-vector", "config": {"embedder": "local"}},
            {"module": "ovos-memory-plugin-sticky"}
        ],
        "fusion": "rrf"
    }

Each turn:

* the members that contribute context (notes, sticky notes) are asked for their system blocks,
  which go after the persona's system prompt;
* the ``primary`` member supplies the history window;
* every retriever member is searched (each with its own ``scope``) and the hit lists are fused
  into one ranked, deduplicated list, rendered by the inject mode like any single backend;
* afterwards every member records the new exchange (``update_history``).

Members are called side by side on the daemon pool of :mod:`ovos_memory_plugins.concurrency`. A
member that raises or takes longer than ``member_timeout_ms`` is skipped for that turn (one
warning) and, until its late call returns, for the next turns too, so a hung member costs one
deadline once and holds at most one thread. Each member records turns on its own ordered
writer: ``update_history`` waits up to ``write_timeout_ms`` for them, and not at all for a member
still busy with an earlier write, so a hung member costs one write deadline once, then nothing.
``close()`` returns within a second: writes still queued get what is left of it, and a member
still busy after that is left open (nothing depends on ``close`` for durability). A member that
fails to load, or a ``members`` entry that is not an object, is skipped with one error line
naming it; the rest carry on.

Shape: the composite is an OPM ``AgentContextManager`` of its own, an orchestrator, not a
storage backend. When every member is a memory of this package that declares ``shares_storage``
(keyword, vector, sticky notes; :func:`is_part`), it opens ONE storage (``<root>/composite.db``,
or its ``namespace`` of its ``database``) and builds the members over it as parts of one memory
(``storage=``): one database and one history; a turn is recorded once, by one member (the
recorder), into every part's index; a forget is one transaction over every part, whose failure
rolls it back and raises; the per-member folders (or namespaces) of earlier releases are merged
in once. Otherwise (a third-party member, a member placed elsewhere) each member is a whole
memory, fused at the hit level. It parses its config like every memory
of this package (problems logged, defaults used), renders the prompt with the package's one
renderer, and never raises from ``build_conversation_context`` or ``update_history``.

Capabilities are declared by the members, never guessed from module names:

* a member's hits are fused unless the member block says ``"recall": false`` or the member's
  class declares ``composite_recall = False`` (sticky notes: their search only finds what their
  block shows every turn);
* a member is semantic when the block says ``"semantic": true`` or the member declares a boolean
  ``semantic`` attribute that is true (the vector memory, with a real embedder);
* the composite is a :class:`~ovos_memory_plugins.protocols.NotesKeeper` when a member is:
  ``list_notes`` lists every notes member's notes (one fact once, ``metadata`` naming the
  members holding it); ``forget``, ``update``, ``retire`` and ``restore`` reach the member that
  finds the note and every other member's copy of the fact; ``remember`` and the notes extras
  (``notes_body``, ``notes_version``, ``replace_notes``, ``notes``, ``dream``, ...) are those of
  the first member, in config order, that has them; it lists documents
  (:class:`~ovos_memory_plugins.protocols.DocumentLister`) over its recalling members; and
  ``search``, ``store``, ``delete``, ``forget_session``, ``forget_all``, ``stats``, ``sessions``
  and ``messages`` fan out to (or come from) its members. So every ``ovos-memory`` command and the
  editor work on a composite persona as on the member that has the capability.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

from ovos_plugin_manager.templates.agents import AgentContextManager, AgentMessage

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import Closing, MemoryHit
from ovos_memory_plugins.composite.calls import FORGET_TIMEOUT_S, MAX_PENDING_WRITES, CallsMixin
from ovos_memory_plugins.composite.members import Member, MembersMixin, is_part, member_namespace
from ovos_memory_plugins.composite.members import load_member_class as _load_member_class
from ovos_memory_plugins.composite.notes import NOTES_EXTRAS, NOTES_VERBS, NotesMixin
from ovos_memory_plugins.composite.options import (
    ASSIST_TIMEOUT,
    CompositeOptions,
    parse_members,
)
from ovos_memory_plugins.composite.recall import EXPAND_PROMPT, SUMMARY_PROMPT, RecallMixin
from ovos_memory_plugins.concurrency import DaemonPool, wait_until
from ovos_memory_plugins.config import MemoryConfig, parse_config, resolve_root
from ovos_memory_plugins.dates import Clock, clock_of
from ovos_memory_plugins.errors import BackendError, IncompleteForgetError
from ovos_memory_plugins.llm import ChatLLM, close_llm, close_quietly, llm_stats, make_llm
from ovos_memory_plugins.prompt import render_messages
from ovos_memory_plugins.protocols import (
    Compactable,
    DocumentLister,
    LocatedCompactable,
    StorageStatus,
)
from ovos_memory_plugins.storage.records import Compacted, ForgetReport
from ovos_memory_plugins.storage.seam import Storage, compact_database
from ovos_memory_plugins.text import clean_text, clip_query

LOG = logging.getLogger("ovos_memory_plugins.composite")  # the name it had before the split

__all__ = [
    "CLOSE_WAIT_S",
    "EXPAND_PROMPT",
    "FORGET_TIMEOUT_S",
    "MAX_PENDING_WRITES",
    "NOTES_EXTRAS",
    "NOTES_VERBS",
    "SUMMARY_PROMPT",
    "CompositeMemory",
    "Member",
    "is_part",
    "member_namespace",
]

#: Seconds ``close()`` waits in all for the members' queued writes before closing them.
CLOSE_WAIT_S = 0.9


class CompositeMemory(MembersMixin, CallsMixin, NotesMixin, RecallMixin, AgentContextManager, Closing):  # type: ignore[misc]  # OPM ships no type information
    """Several OPM memory plugins as one memory (see the module docstring).

    Args:
        config: the plugin's block of the persona JSON: the shared keys plus
            :class:`CompositeOptions`. Problems are logged; a bad member is skipped.
        llm: a :class:`~ovos_memory_plugins.llm.ChatLLM` for the assists instead of the one the
            ``llm`` key describes (a test seam).
        clock: the time source (an aware ``datetime`` each call; default the local time), passed
            to every member of this package, so they record and date with the same time.

    Attributes:
        settings: the parsed shared config; ``options``: the :class:`CompositeOptions`.
        root: the folder members of this package keep their files under (``<root>/<name>``).
        config_problems: what was wrong with the config (empty when nothing was).
        members: the loaded members by name (their plugin instances), in config order.
        skipped: the members that did not load, by name, with the reason.
        primary: the name of the member whose history the prompt uses (None: none keeps one).
    """

    options_class: ClassVar[type[Any] | None] = CompositeOptions
    contributes_context: ClassVar[bool] = True

    def __init__(
        self, config: dict[str, Any] | None = None, *, llm: ChatLLM | None = None, clock: Clock | None = None
    ) -> None:
        super().__init__(config)
        #: The time source (``clock=``), shared with the members of this package.
        self.clock: Clock = clock_of(clock)
        parsed = parse_config(self.config, CompositeOptions)
        self.config_problems: list[str] = parsed.problems
        for problem in parsed.problems:
            LOG.error("CompositeMemory: %s (using the default for that key)", problem)
        self.settings: MemoryConfig = parsed.memory
        self.options: CompositeOptions = parsed.options
        self.root: Path = resolve_root(self.settings)
        self._closed = False
        self._close_lock = threading.Lock()
        opts = self.options
        self.skipped: dict[str, str] = {}
        self._members: list[Member] = []
        specs, problems = parse_members(opts.members)
        for problem in problems:
            LOG.error("CompositeMemory: %s (that member or key is skipped)", problem)
            self.config_problems.append(problem)
        if not specs:
            LOG.warning("CompositeMemory: no members are configured; nothing will be recalled")
        #: The one storage the members share as parts of one memory, when every member can be a
        #: part (:func:`is_part`); None: each member is a whole memory of its own.
        self.storage: Storage | None = self._open_parts(specs)
        for spec in specs:
            member = self._load(spec)
            if member is not None:
                self._members.append(member)
        self.members: dict[str, Any] = {m.name: m.instance for m in self._members}
        if self.storage is not None:
            self._adopt_members()
        self._pool = DaemonPool("composite-query", min(64, max(4, 4 * len(self._members))))
        self._primary = self._choose_primary(opts.primary)
        self.primary = self._primary.name if self._primary else None
        #: Over one storage, the one member that records each exchange (once, in every part's
        #: index); None when the members are whole memories (each records its own copy).
        self._recorder = self._choose_recorder()
        if self._llm_wanted(opts) and llm is None:
            llm = make_llm({"timeout": ASSIST_TIMEOUT, **opts.llm}) if opts.llm else None
            if llm is None:
                LOG.warning("CompositeMemory: expand_query/summarize_recall need a usable 'llm' block; they are off")
        self._llm = llm
        semantic = any(m.semantic for m in self._members if m.recalls)
        self._expand = opts.expand_query is True or (opts.expand_query == "auto" and not semantic)

    @property
    def system_prompt(self) -> str:
        """The persona's system prompt (config key ``system_prompt``)."""
        return self.settings.system_prompt

    @staticmethod
    def _member_class(module: str) -> type[Any] | None:
        """The member plugin class ``module`` names (:func:`.members.load_member_class`), read
        through this module's ``_load_member_class``: the seam tests patch."""
        return _load_member_class(module)

    # -- loading -----------------------------------------------------------------------------

    @staticmethod
    def _llm_wanted(opts: CompositeOptions) -> bool:
        return bool(opts.summarize_recall or opts.expand_query is True or (opts.expand_query == "auto" and opts.llm))

    # -- the conversation ----------------------------------------------------------------------

    def build_conversation_context(self, utterance: str, session_id: str) -> list[AgentMessage]:
        """The messages for the next answer, in the configured inject mode. Never raises.

        The context members, the history and (when the query is the utterance alone) the
        searches run side by side, each bounded by ``member_timeout_ms``. Whatever fails, the
        result degrades to ``[SYSTEM prompt]?, USER utterance``.
        """
        if not isinstance(utterance, str):
            utterance = "" if utterance is None else str(utterance)
        try:
            return self._turn(utterance, session_id)
        except Exception:
            LOG.exception("CompositeMemory: could not build the context; answering without memory")
            return render_messages(
                utterance, self.settings, system_prompt=self.system_prompt, session_id=str(session_id)
            )

    def _turn(self, utterance: str, session_id: str) -> list[AgentMessage]:
        s = self.settings
        contributors = [m for m in self._members if m.caps.contributor]
        blocks_started = self._start(
            contributors, lambda inst: list(inst.context_blocks(utterance, session_id)), "context"
        )
        deadline = self._deadline()
        search = None
        made_then: list[tuple[Member, Future[list[MemoryHit]]]] = []
        either: list[list[tuple[Member, Future[list[MemoryHit]]]]] = []
        query = ""
        r = s.retrieval
        early = r.max_num_results > 0 and (r.query_mode == "utterance" or r.query_history_turns <= 0)
        if early:
            query = clip_query(utterance)
            if query.strip():
                depth = self._recall_depth(s.max_history // 2)  # the largest window possible
                query = self._expanded(self._without_order_words(query))
                search = self._start_search(query, self._session_for(session_id), depth)
                made_then = self._start_window(utterance, query, self._session_for(session_id), depth)
                either = self._start_alternatives(utterance, self._session_for(session_id), depth)
        history = self.get_history(session_id)
        if early:
            hits = []
            if search or made_then:
                fused = self._fuse_answers(search, deadline) if search else []
                dated = self._fuse_answers(made_then, deadline) if made_then else []
                picks = self._alternative_picks(either, deadline)
                hits = self._finish_recall(utterance, query, fused, history, dated, picks)
        else:
            hits = self.recall(utterance, session_id, history)
        blocks: list[str] = []
        for _m, answer in self._collect(blocks_started, deadline, "context"):
            blocks.extend(b for b in answer if isinstance(b, str) and b.strip())
        return render_messages(
            utterance,
            s,
            system_prompt=self.system_prompt,
            blocks=blocks,
            hits=hits,
            history=history,
            tool_query=self.recall_query(utterance, history),
            session_id=session_id,
            now=self.clock(),
            lang=self._lang(),
        )

    def context_blocks(self, utterance: str, session_id: str) -> list[str]:
        """Every context member's blocks, in member order (a member that fails adds none)."""
        contributors = [m for m in self._members if m.caps.contributor]
        started = self._start(contributors, lambda inst: list(inst.context_blocks(utterance, session_id)), "context")
        blocks: list[str] = []
        for _m, answer in self._collect(started, self._deadline(), "context"):
            blocks.extend(b for b in answer if isinstance(b, str) and b.strip())
        return blocks

    def get_history(self, session_id: str) -> list[AgentMessage]:
        """The primary member's history window (empty when it fails or times out)."""
        primary = self._primary
        if primary is None or self.settings.max_history <= 0:
            return []
        started = self._start([primary], lambda inst: list(inst.get_history(session_id)), "history")
        for _m, window in self._collect(started, self._deadline(), "history"):
            return window
        return []

    def sessions(self) -> list[str]:
        """The primary member's sessions (it keeps the history the prompt uses)."""
        primary = self._primary
        fn = getattr(primary.instance, "sessions", None) if primary is not None else None
        return [str(s) for s in fn()] if callable(fn) else []

    def messages(self, session_id: str) -> list[AgentMessage]:
        """The primary member's recorded messages of a session, oldest first."""
        primary = self._primary
        fn = getattr(primary.instance, "messages", None) if primary is not None else None
        return list(fn(session_id)) if callable(fn) else self.get_history(session_id)

    def dated_messages(self, session_id: str) -> list[tuple[AgentMessage, float | None]]:
        """The primary member's recorded messages of a session with when each was recorded,
        oldest first (None for a member that does not say)."""
        primary = self._primary
        fn = getattr(primary.instance, "dated_messages", None) if primary is not None else None
        if callable(fn):
            return [(m, t) for m, t in fn(session_id)]
        return [(m, None) for m in self.messages(session_id)]

    def update_history(self, new_messages: list[AgentMessage], session_id: str) -> None:
        """Hand the new messages to every member that records history (over one storage: to the
        one recorder, whose write reaches every part's index and the one history), each on its
        own ordered writer, and wait up to ``write_timeout_ms`` for them. A member still busy with an earlier
        late write is not waited for (its write queues behind, in order). Never raises."""
        try:
            messages = list(new_messages or [])
            waited: list[tuple[Member, Future[Any]]] = []
            for m in self._members:
                if not m.caps.history:
                    continue
                if self._recorder is not None and m is not self._recorder:
                    continue  # parts of one storage: the recorder writes the exchange once, for all
                with m.lock:
                    behind = m.write_late
                future = self._write(m, lambda inst: inst.update_history(list(messages), session_id))
                if future is not None and not behind:
                    waited.append((m, future))
            wait_until((f for _, f in waited), time.monotonic() + self.options.write_timeout_ms / 1000.0)
            for m, future in waited:
                if not future.done():
                    with m.lock:
                        m.write_late = m.pending_writes > 0
                    LOG.warning(
                        "CompositeMemory: member %r is still recording after %d ms; it carries on in the "
                        "background and is not waited for until it caught up",
                        m.name,
                        self.options.write_timeout_ms,
                    )
                elif future.exception() is not None:
                    exc = future.exception()
                    LOG.warning("CompositeMemory: member %r failed to record the turn: %r", m.name, exc)
        except Exception:
            LOG.exception("CompositeMemory: could not record messages for session %r", session_id)

    # -- documents -----------------------------------------------------------------------------

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
        (every part's index gets it)."""
        if not isinstance(doc_id, str) or not doc_id:
            raise ValueError("doc_id must be a non-empty string")
        if not isinstance(text, str) or not clean_text(text).strip():
            raise ValueError("cannot store empty text")
        targets = [m for m in self._members if m.recalls and callable(getattr(m.instance, "store", None))]
        if not targets:
            raise BackendError("CompositeMemory: no member can store documents")
        if self.storage is not None:
            targets = targets[:1]  # one storage: one write reaches every part's index
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

    @property
    def storage_problem(self) -> str | None:
        """Why something a member learns does not outlive the process (:class:`~ovos_memory_plugins.
        protocols.StorageStatus`): each member's problem, named; None when every member keeps
        what it learns."""
        problems = []
        for m in self._members:
            problem = m.instance.storage_problem if isinstance(m.instance, StorageStatus) else None
            if problem:
                problems.append(f"member {m.name!r}: {problem}")
        return "; ".join(problems) or None

    def stats(self) -> dict[str, Any]:
        """The composite's settings and each member's own ``stats()``."""
        members: dict[str, Any] = {}
        for m in self._members:
            fn = getattr(m.instance, "stats", None)
            try:
                members[m.name] = dict(fn()) if callable(fn) else {}
            except Exception as exc:
                members[m.name] = {"error": str(exc)}
        out: dict[str, Any] = {
            "backend": type(self).__name__,
            "root": str(self.root),
            "fusion": self.options.fusion,
            "primary": self.primary,
            "members": members,
            "skipped": dict(self.skipped),
        }
        if self.storage is not None:
            db = self.storage.db
            out["storage"] = {
                "location": db.location,
                "parts": [m.name for m in self._members],
                "recorder": self._recorder.name if self._recorder else None,
                "in_ram": db.in_ram,
                "problem": db.fallback_reason,
            }
        if self._llm is not None:
            out["llm"] = llm_stats(self._llm)
        return out

    # -- life cycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the members; returns within about a second whatever the members do.

        Queued writes get what is left of :data:`CLOSE_WAIT_S` to finish, in order; a member
        still busy after that (hung on a write) is left open, with an error line.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._pool.shutdown(cancel_pending=True)
        end = time.monotonic() + CLOSE_WAIT_S
        left_open = False
        for m in self._members:
            if not m.writer.shutdown(cancel_pending=False, join_timeout=max(0.0, end - time.monotonic())):
                LOG.error("CompositeMemory: member %r is still recording; it is left open", m.name)
                left_open = True
                continue
            with m.lock:
                busy = m.late > 0
            if busy:  # a read still running in the query pool: closing under it would break it
                LOG.error("CompositeMemory: member %r is still answering a late call; it is left open", m.name)
                left_open = True
                continue
            close_quietly(m.instance, "CompositeMemory: a member")
        if self.storage is not None and not left_open:
            close_quietly(self.storage, "CompositeMemory: the parts' storage")
        close_llm(self._llm)


#: The member record's name before the split (an alias).
Member = Member


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
