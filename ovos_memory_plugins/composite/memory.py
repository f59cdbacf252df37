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

import logging
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

from ovos_plugin_manager.templates.agents import AgentContextManager, AgentMessage

from ovos_memory_plugins.common import Closing
from ovos_memory_plugins.composite.calls import FORGET_TIMEOUT_S, MAX_PENDING_WRITES, CallsMixin
from ovos_memory_plugins.composite.documents import DocumentsMixin
from ovos_memory_plugins.composite.members import Member, MembersMixin, is_part, member_namespace
from ovos_memory_plugins.composite.members import load_member_class as _load_member_class
from ovos_memory_plugins.composite.notes import NOTES_EXTRAS, NOTES_VERBS, NotesMixin
from ovos_memory_plugins.composite.options import ASSIST_TIMEOUT, PARTS_FILE, CompositeOptions, parse_members
from ovos_memory_plugins.composite.recall import EXPAND_PROMPT, SUMMARY_PROMPT, Answer, RecallMixin
from ovos_memory_plugins.concurrency import DaemonPool, wait_until
from ovos_memory_plugins.config import MemoryConfig, parse_config, resolve_root
from ovos_memory_plugins.dates import Clock, clock_of
from ovos_memory_plugins.llm import ChatLLM, close_llm, close_quietly, llm_stats, make_llm
from ovos_memory_plugins.prompt import render_messages
from ovos_memory_plugins.protocols import StorageStatus
from ovos_memory_plugins.storage.seam import Storage
from ovos_memory_plugins.text import clip_query
from ovos_memory_plugins.time_words import wait_warm

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


class CompositeMemory(
    MembersMixin,
    CallsMixin,
    NotesMixin,
    RecallMixin,
    DocumentsMixin,
    AgentContextManager,  # type: ignore[misc]  # OPM ships no type information
    Closing,
):
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
    #: The file under its folder that holds the one storage of its parts (:attr:`storage`), as
    #: a memory of the base declares its own: where ``migrate`` copies it into a folder.
    database_file: ClassVar[str] = PARTS_FILE

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
        search: list[tuple[Member, Future[Answer]]] = []
        made_then: list[tuple[Member, Future[Answer]]] = []
        either: list[tuple[frozenset[str] | None, list[tuple[Member, Future[Answer]]]]] = []
        query = ""
        r = s.retrieval
        early = r.max_num_results > 0 and (r.query_mode == "utterance" or r.query_history_turns <= 0)
        if early:
            query = clip_query(utterance)
            if query.strip():
                depth = self._recall_depth(s.max_history // 2)  # the largest window possible
                query = self._expanded(self._without_order_words(query))
                search = self._start_recall(query, self._session_for(session_id), depth)
                made_then = self._start_window(utterance, query, self._session_for(session_id), depth)
                either = self._start_alternatives(utterance, self._session_for(session_id), depth)
        history = self.get_history(session_id)
        if early:
            hits = []
            if search or made_then:
                gathered = self._gathered(search, made_then, either, deadline)
                hits = self._finish_recall(utterance, query, history, gathered)
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

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait, at most ``timeout`` seconds, for the members' start-up work beside the host (the
        time-word parser's load); whether it has ended (:meth:`BaseRetrievalMemory.wait_ready`)."""
        return wait_warm(timeout)

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
_Member = Member
