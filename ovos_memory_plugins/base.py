"""``BaseRetrievalMemory``: everything a memory plugin needs, over two small storage hooks.

A backend implements:

* ``_store_document(doc_id, text, session_id, metadata)``: keep (or replace) one document;
* ``_query_backend(query, top_k) -> list[MemoryHit]``: the best ``top_k`` documents, best first,
  each hit's ``source`` being the document id.

and may implement, when it can do better than the base:

* ``_query_session(query, top_k, session_id)``: the session filter pushed into the query. A
  backend that implements it also keeps sessions and metadata itself (hits carry metadata).
  Without it the base keeps a catalogue of documents and widens the query until the session's
  own matches are found, so other sessions never crowd them out.
* ``_delete_documents(doc_ids) -> int``, ``_delete_all() -> int``: removal (``delete``,
  ``forget_session``, ``forget_all``);
* ``_backend_stats() -> dict``: figures for ``stats()``;
* ``_close()``: release files and connections.

On top the base builds ``store``/``search``, content-derived document ids, the persisted
short-term history, the five inject modes, locking (one instance serves many threads) and the
never-raise guarantee of the two methods ovos-persona calls every turn.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from ovos_plugin_manager.templates.agents import AgentContextManager, AgentMessage, MessageRole, ToolCall

from ovos_memory_plugins.admission import is_low_signal
from ovos_memory_plugins.common import MemoryHit, dedup_hits, normalize_content
from ovos_memory_plugins.config import MemoryConfig, parse_config, resolve_root
from ovos_memory_plugins.errors import BackendError, StorageError
from ovos_memory_plugins.select import clip_context, needs_context, select_hits
from ovos_memory_plugins.storage.history import HistoryStore
from ovos_memory_plugins.storage.sqlite import Database
from ovos_memory_plugins.storage.summary_store import SummaryStore
from ovos_memory_plugins.summary import RollingSummary, summary_block
from ovos_memory_plugins.text import clean_text, clip_query, query_terms

LOG = logging.getLogger(__name__)

__all__ = ["BaseRetrievalMemory", "exchange_text"]

USER = MessageRole.USER.value
ASSISTANT = MessageRole.ASSISTANT.value


def exchange_text(user: str, assistant: str) -> str:
    """The document one completed exchange becomes."""
    return f"Q: {user}\nA: {assistant}"


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:24]


def _role_of(message: Any) -> str:
    role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
    if isinstance(role, MessageRole):
        return str(role.value)
    return str(role).lower() if role is not None else ""


def _content_of(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    return clean_text(content) if isinstance(content, str) else ""


class BaseRetrievalMemory(AgentContextManager):  # type: ignore[misc]  # OPM ships no type information
    """An OPM ``AgentContextManager`` with long-term recall over two storage hooks.

    Args:
        config: the plugin's block of the persona JSON (see ``docs/configuration.md``).
            Problems are logged, and each bad key falls back to its default: the constructor
            never raises because of config.

    Attributes:
        settings: the parsed shared config (:class:`~ovos_memory_plugins.config.MemoryConfig`).
        options: the parsed backend-specific config (an instance of ``options_class``) or None.
        root: the folder this memory keeps its files in.
        config_problems: what was wrong with the config (empty when nothing was).
    """

    #: The backend's own config keys: a dataclass built with ``config.option``; None for none.
    options_class: ClassVar[type[Any] | None] = None
    #: Whether history goes to ``<root>/history.db`` even when ``root`` is not configured.
    #: Backends that keep their documents on disk set this; in-RAM backends keep history in
    #: RAM unless the persona configures a ``root``.
    persistent: ClassVar[bool] = False
    #: The relative score cut-off used when ``retrieval.min_relative_score`` is null.
    default_min_relative_score: ClassVar[float | None] = None
    #: The relative cut-off of the hits a turn injects (``recall``) when
    #: ``retrieval.min_relative_score`` is null; ``search`` keeps ``default_min_relative_score``.
    default_prompt_min_relative: ClassVar[float | None] = None

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config)
        parsed = parse_config(self.config, self.options_class)
        self.config_problems = parsed.problems
        for problem in parsed.problems:
            LOG.error("%s: %s (using the default for that key)", type(self).__name__, problem)
        self.settings: MemoryConfig = parsed.memory
        self.options: Any = parsed.options
        self.root: Path = resolve_root(self.settings)
        self._lock = threading.RLock()
        self._closed = False
        self._history = HistoryStore(self._open_state_database())
        self._summary = self._open_summary()

    # -- storage locations -------------------------------------------------------------------

    def _open_state_database(self) -> Database:
        """The database holding history and the catalogue; never raises (falls back to RAM)."""
        if self.persistent or self.settings.root:
            path = self.root / "history.db"
            try:
                return Database(path)
            except (StorageError, OSError) as exc:
                LOG.error("%s: cannot open %s (%s); history is kept in RAM only", type(self).__name__, path, exc)
        return Database(":memory:")

    def _open_summary(self) -> RollingSummary | None:
        """The rolling summary over the state database; None when off or unusable (never raises)."""
        cfg = self.settings.summary
        if not cfg.enabled:
            return None
        try:
            return RollingSummary(SummaryStore(self._history.db), cfg.max_chars, cfg.llm)
        except Exception:
            LOG.exception("%s: the rolling summary is unavailable", type(self).__name__)
            return None

    @property
    def system_prompt(self) -> str:
        """The persona's system prompt (config key ``system_prompt``)."""
        return self.settings.system_prompt

    # -- hooks -------------------------------------------------------------------------------

    @abstractmethod
    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        """Keep one document; storing an id again replaces it."""

    @abstractmethod
    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        """The best ``top_k`` documents for ``query``, best first; ``source`` is the doc id."""

    def _query_session(self, query: str, top_k: int, session_id: str) -> list[MemoryHit]:
        """Optional: like ``_query_backend`` but only the documents of ``session_id``."""
        raise NotImplementedError

    def _delete_documents(self, doc_ids: Sequence[str]) -> int:
        """Optional: delete documents by id; return how many existed."""
        raise NotImplementedError

    def _delete_all(self) -> int:
        """Optional: delete every document; return how many existed."""
        raise NotImplementedError

    def _backend_stats(self) -> dict[str, Any]:
        """Optional: figures about the backend's storage for ``stats()``."""
        return {}

    def _close(self) -> None:
        """Optional: release the backend's files and connections."""

    def word_terms(self, text: str, *, query: bool = False) -> frozenset[str] | None:
        """Optional: the terms a backend that matches words sees in ``text`` (a query's, with
        ``query=True``); None for backends that do not match words (the default).
        """
        return None

    def hit_terms(self, hits: Sequence[MemoryHit]) -> list[frozenset[str]] | None:
        """Optional: each hit's own terms (not those of the turn before it), for backends that
        match words; None otherwise (the default). ``recall`` drops a hit sharing no term with
        the query (:mod:`ovos_memory_plugins.select`).
        """
        return None

    @property
    def tracks_sessions(self) -> bool:
        """Whether the backend filters by session (and keeps metadata) itself."""
        return type(self)._query_session is not BaseRetrievalMemory._query_session

    def _can(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(BaseRetrievalMemory, hook)

    # -- ids ---------------------------------------------------------------------------------

    @staticmethod
    def document_id(session_id: str, text: str) -> str:
        """The id ``store`` gives a text: derived from the session and the content only."""
        return "d-" + _digest(session_id, text)

    @staticmethod
    def exchange_id(session_id: str, previous_exchange_id: str, user: str, assistant: str) -> str:
        """The id of an exchange: its content and the id of the exchange before it."""
        return "x-" + _digest(session_id, previous_exchange_id, user, assistant)

    # -- public API: documents ---------------------------------------------------------------

    def store(self, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None) -> str:
        """Store a document and return its id (the same text in the same session upserts).

        Raises ``ValueError`` for empty or non-text input and :class:`StorageError` (or the
        backend's own error) when storage fails.
        """
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, not {type(text).__name__}")
        text = clean_text(text)
        if not text.strip():
            raise ValueError("cannot store empty text")
        doc_id = self.document_id(session_id, text)
        self._store(doc_id, text, session_id, dict(metadata or {}))
        return doc_id

    def put_document(
        self, doc_id: str, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None
    ) -> None:
        """Store a document under a given id (import, migration, a composite's members).

        Unlike ``store`` the id is the caller's: an export imported into an empty root gets
        back the same ids, so the same searches return the same results.
        """
        if not isinstance(doc_id, str) or not doc_id:
            raise ValueError("doc_id must be a non-empty string")
        if not isinstance(text, str) or not clean_text(text).strip():
            raise ValueError("cannot store empty text")
        self._store(doc_id, clean_text(text), session_id, dict(metadata or {}))

    def _store(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        with self._lock:
            self._store_document(doc_id, text, session_id, metadata)
            if not self.tracks_sessions:
                self._history.put_document(doc_id, session_id, metadata)

    def search(self, query: str, session_id: str | None = None, top_k: int | None = None) -> list[MemoryHit]:
        """The memories best matching ``query``, best first, deduplicated.

        Args:
            query: any text; it is cleaned and cut to ``text.MAX_QUERY_CHARS`` characters.
            session_id: only that session's documents (None: every session's).
            top_k: how many at most (default ``retrieval.max_num_results``).
        """
        k = self.settings.retrieval.max_num_results if top_k is None else int(top_k)
        if k <= 0 or not isinstance(query, str):
            return []
        query = clip_query(query)
        if not query.strip():
            return []
        with self._lock:
            if session_id is None:
                hits = self._query_backend(query, k)
            elif self.tracks_sessions:
                hits = self._query_session(query, k, session_id)
            else:
                hits = self._query_widening(query, k, session_id)
            if not self.tracks_sessions:
                hits = self._with_catalogue_metadata(hits)
        return self._cut(dedup_hits(hits))[:k]

    def _query_widening(self, query: str, k: int, session_id: str) -> list[MemoryHit]:
        """Session filter for backends without ``_query_session``: widen until found or exhausted."""
        total = self._history.document_count()
        fetch = k
        while True:
            hits = self._query_backend(query, fetch)
            known = self._history.documents(h.source for h in hits)
            own = [h for h in hits if h.source in known and known[h.source][0] == session_id]
            if len(own) >= k or len(hits) < fetch or fetch > total:
                return own
            fetch = min(fetch * 4, total + 1)

    def _with_catalogue_metadata(self, hits: list[MemoryHit]) -> list[MemoryHit]:
        known = self._history.documents(h.source for h in hits)
        for hit in hits:
            if not hit.metadata and hit.source in known:
                hit.metadata = dict(known[hit.source][1])
        return hits

    def _cut(self, hits: list[MemoryHit]) -> list[MemoryHit]:
        """Apply ``retrieval.min_score`` and the relative cut-off."""
        r = self.settings.retrieval
        if r.min_score is not None:
            hits = [h for h in hits if h.score >= r.min_score]
        relative = r.min_relative_score if r.min_relative_score is not None else self.default_min_relative_score
        if relative and hits:
            best = max(h.score for h in hits)
            if best > 0:
                hits = [h for h in hits if h.score >= relative * best]
        return hits

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id; return how many existed. Raises if the backend cannot delete."""
        ids = list(doc_ids)
        if not self._can("_delete_documents"):
            raise BackendError(f"{type(self).__name__} cannot delete documents (no _delete_documents hook)")
        with self._lock:
            n = self._delete_documents(ids)
            if not self.tracks_sessions:
                self._history.drop_documents(ids)
        return n

    def forget_session(self, session_id: str) -> int:
        """Delete a session's documents and history; return how many documents went."""
        with self._lock:
            n = self.delete(self._session_document_ids(session_id))
            self._history.clear_session(session_id)
            if self._summary is not None:
                self._summary.forget(session_id)
        return n

    def _session_document_ids(self, session_id: str) -> list[str]:
        """The ids of a session's documents (backends that track sessions override this)."""
        return self._history.session_documents(session_id)

    def forget_all(self) -> int:
        """Delete every document and all history; return how many documents went."""
        with self._lock:
            if self._can("_delete_all"):
                n = self._delete_all()
                self._history.drop_documents(self._history.all_documents())
            else:
                n = self.delete(self._history.all_documents())
            self._history.clear_all()
            if self._summary is not None:
                self._summary.forget()
        return n

    def sessions(self) -> list[str]:
        """Every session with recorded history, sorted (operators, the editor)."""
        with self._lock:
            return self._history.sessions()

    def messages(self, session_id: str) -> list[AgentMessage]:
        """Every message kept for a session, oldest first, unanswered ones included.

        The history keeps the newest ``max(2 * max_history + 4, 24)`` messages per session; older
        exchanges live on as documents (``search``, ``iter_documents`` where the backend lists).
        """
        with self._lock:
            stored = self._history.recent(session_id, 1_000_000)
        return [AgentMessage(role=MessageRole(m.role), content=m.content) for m in stored]

    def stats(self) -> dict[str, Any]:
        """Figures about this memory: backend storage, history messages and sessions."""
        with self._lock:
            out: dict[str, Any] = {
                "backend": type(self).__name__,
                "root": str(self.root),
                "history_messages": self._history.message_count(),
                "history_sessions": len(self._history.sessions()),
            }
            if not self.tracks_sessions:
                out["documents"] = self._history.document_count()
            out.update(self._backend_stats())
        return out

    # -- public API: the conversation --------------------------------------------------------

    def get_history(self, session_id: str) -> list[AgentMessage]:
        """The session's recent exchanges: at most ``max_history`` messages, starting on a user
        turn and alternating user/assistant (an unanswered user message is left out)."""
        limit = self.settings.max_history
        if limit <= 0:
            return []
        with self._lock:
            stored = self._history.recent(session_id, limit * 2 + 4)
        pairs: list[tuple[str, str]] = []
        for prev, cur in pairwise(stored):
            if prev.role == USER and cur.role == ASSISTANT:
                pairs.append((prev.content, cur.content))
        window: list[AgentMessage] = []
        for user, assistant in pairs[-(limit // 2) :] if limit >= 2 else []:
            window.append(AgentMessage(role=MessageRole.USER, content=user))
            window.append(AgentMessage(role=MessageRole.ASSISTANT, content=assistant))
        return window

    def update_history(self, new_messages: list[AgentMessage], session_id: str) -> None:
        """Record new messages; each completed exchange becomes a ``Q:/A:`` document.

        Accepts ``[USER, ASSISTANT]`` pairs and single messages. A replay of the session's last
        exchange is ignored. Never raises: failures are logged with their traceback.
        """
        try:
            self._update_history(new_messages, session_id)
        except Exception:
            LOG.exception("%s: could not record messages for session %r", type(self).__name__, session_id)

    def _update_history(self, new_messages: Sequence[Any], session_id: str) -> None:
        incoming = [(_role_of(m), _content_of(m)) for m in (new_messages or [])]
        incoming = [(role, content) for role, content in incoming if role in (USER, ASSISTANT)]
        if not incoming:
            return
        exchanges: list[tuple[str, str, str, str]] = []
        with self._lock:
            recent = self._history.recent(session_id, 3)
            tail = recent[-2:]
            if len(incoming) == 2 and [(m.role, m.content) for m in tail] == incoming:
                return  # the same exchange again: a replay
            previous_id = self._history.last_exchange_id(session_id)
            last_role, last_content = (tail[-1].role, tail[-1].content) if tail else ("", "")
            for role, content in incoming:
                if role == ASSISTANT and last_role == USER:
                    before_id = previous_id
                    previous_id = self.exchange_id(session_id, previous_id, last_content, content)
                    exchanges.append((previous_id, before_id, last_content, content))
                last_role, last_content = role, content
            before = [(m.role, m.content) for m in recent]
            keep = max(self.settings.max_history * 2 + 4, 24)
            self._history.append(session_id, incoming, keep, previous_id if exchanges else None)
            turns = [*before, *incoming]
            for doc_id, before_id, user, assistant in exchanges:
                if not (user.strip() or assistant.strip()):
                    continue
                if self.settings.admission and is_low_signal(user, assistant):
                    continue  # low-signal: in the history window, not archived (admission.py)
                metadata: dict[str, Any] = {"kind": "exchange", "time": time.time()}
                context = self._context_before(turns, user, assistant)
                if context:
                    metadata["context_before"] = context
                try:
                    self._store(doc_id, exchange_text(user, assistant), session_id, metadata)
                    if context:  # the exchange this reply answers gets the reply as its turn after
                        self._attach_after(session_id, before_id, turns, user, assistant)
                except Exception:
                    LOG.exception("%s: could not store exchange %s", type(self).__name__, doc_id)
            leaving = self._leaving_window(session_id, len(exchanges)) if exchanges else []
        if leaving and self._summary is not None:  # outside the lock: a model call may take seconds
            try:
                self._summary.fold(session_id, leaving)
            except Exception:
                LOG.exception("%s: could not update the summary of session %r", type(self).__name__, session_id)

    @staticmethod
    def _context_before(turns: Sequence[tuple[str, str]], user: str, assistant: str) -> str:
        """The turn before an exchange, clipped, when its user turn is a reply that needs it."""
        for i in range(len(turns) - 1, 0, -1):
            if turns[i] == (ASSISTANT, assistant) and turns[i - 1] == (USER, user):
                if i >= 2 and turns[i - 2][0] == ASSISTANT and turns[i - 2][1].strip():
                    previous = turns[i - 2][1]
                    if needs_context(len(set(query_terms(user, None, unigrams=True))), user, previous):
                        return clip_context(previous)
                return ""
        return ""

    @staticmethod
    def _exchange_before(turns: Sequence[tuple[str, str]], user: str, assistant: str) -> tuple[str, str, str] | None:
        """``(user, assistant, turn before it)`` of the exchange before ``(user, assistant)`` in
        ``turns``, when they hold it."""
        for i in range(len(turns) - 1, 2, -1):
            if turns[i] == (ASSISTANT, assistant) and turns[i - 1] == (USER, user):
                if turns[i - 2][0] == ASSISTANT and turns[i - 3][0] == USER:
                    earlier = turns[i - 4][1] if i >= 4 and turns[i - 4][0] == ASSISTANT else ""
                    return turns[i - 3][1], turns[i - 2][1], earlier
                return None
        return None

    def _attach_after(
        self, session_id: str, doc_id: str, turns: Sequence[tuple[str, str]], user: str, assistant: str
    ) -> None:
        """Store the exchange before a short reply again, with the reply as ``context_after``.

        Its other metadata is rebuilt from the history (``time`` becomes now). Nothing happens
        when that exchange was not archived (admission) or is no longer in the history read.
        """
        previous = self._exchange_before(turns, user, assistant)
        if not doc_id or previous is None:
            return
        prev_user, prev_assistant, earlier = previous
        if not (prev_user.strip() or prev_assistant.strip()):
            return
        if self.settings.admission and is_low_signal(prev_user, prev_assistant):
            return
        metadata: dict[str, Any] = {"kind": "exchange", "time": time.time(), "context_after": clip_context(user)}
        if earlier and needs_context(len(set(query_terms(prev_user, None, unigrams=True))), prev_user, earlier):
            metadata["context_before"] = clip_context(earlier)
        self._store(doc_id, exchange_text(prev_user, prev_assistant), session_id, metadata)

    def _leaving_window(self, session_id: str, new_exchanges: int) -> list[tuple[str, str]]:
        """The exchanges that the newest ``new_exchanges`` pushed out of the history window
        (none when the summary is off or there is no window)."""
        window = self.settings.max_history // 2
        if self._summary is None or window <= 0:
            return []
        stored = self._history.recent(session_id, 2 * (window + new_exchanges) + 4)
        pairs = [(p.content, c.content) for p, c in pairwise(stored) if p.role == USER and c.role == ASSISTANT]
        return pairs[: max(len(pairs) - window, 0)][-new_exchanges:]

    def session_summary(self, session_id: str) -> str:
        """The running summary of a session's turns that left the history window ('' for none)."""
        if self._summary is None:
            return ""
        with self._lock:
            return self._summary.text(session_id)

    def build_conversation_context(self, utterance: str, session_id: str) -> list[AgentMessage]:
        """The messages for the next answer, in the configured inject mode. Never raises.

        Whatever fails, the result degrades to ``[SYSTEM prompt]?, USER utterance``.
        """
        if not isinstance(utterance, str):
            utterance = "" if utterance is None else str(utterance)
        try:
            return self._build(utterance, session_id)
        except Exception:
            LOG.exception("%s: could not build the context; answering without memory", type(self).__name__)
            return self._bare(utterance)

    def _bare(self, utterance: str) -> list[AgentMessage]:
        out = []
        if self.system_prompt:
            out.append(AgentMessage(role=MessageRole.SYSTEM, content=self.system_prompt))
        out.append(AgentMessage(role=MessageRole.USER, content=utterance))
        return out

    def recall_query(self, utterance: str, history: Sequence[AgentMessage]) -> str:
        """The text recall searches with, per ``retrieval.query_mode``."""
        r = self.settings.retrieval
        if r.query_mode == "history" and r.query_history_turns > 0:
            users = [m.content for m in history if m.role == MessageRole.USER][-r.query_history_turns :]
            return "\n".join([*users, utterance])
        return utterance

    def recall(self, utterance: str, session_id: str, history: Sequence[AgentMessage]) -> list[MemoryHit]:
        """The hits a turn injects: searched per scope, minus what the history window shows."""
        query = self.recall_query(utterance, history)
        scoped = session_id if self.settings.scope == "session" else None
        k = self.settings.retrieval.max_num_results
        in_window = set()
        for prev, cur in pairwise(history):
            if prev.role == MessageRole.USER and cur.role == MessageRole.ASSISTANT:
                in_window.add(normalize_content(exchange_text(prev.content, cur.content)))
        hits = self.search(query, session_id=scoped, top_k=k + len(in_window))
        r = self.settings.retrieval
        relative = r.min_relative_score if r.min_relative_score is not None else self.default_prompt_min_relative
        terms = self.word_terms(query, query=True)
        own = self.hit_terms(hits) if terms is not None and hits else None
        return select_hits(
            hits, limit=k, min_relative=relative, exclude=frozenset(in_window), query_terms=terms, hit_terms=own
        )

    def render_context(self, hits: Sequence[MemoryHit]) -> str:
        """The recalled memories as one text block (without the header).

        A memory's own line breaks are indented, so one memory cannot pose as several.
        """
        c = self.settings.context
        chunks = []
        for hit in hits:
            text = hit.content.strip().replace("\n", "\n  ")
            before = hit.metadata.get("context_before")
            if isinstance(before, str) and before.strip():
                text = f"(context, the turn before: {' '.join(before.split())})\n  {text}"
            after = hit.metadata.get("context_after")
            if isinstance(after, str) and after.strip():
                text = f"{text}\n  (context, the turn after: {' '.join(after.split())})"
            if c.include_sources and hit.source:
                text += f" [{hit.source}]"
            chunks.append(c.chunk_prefix + text)
        return c.chunk_separator.join(chunks)

    def context_blocks(self, utterance: str, session_id: str) -> list[str]:
        """Extra system text a backend always contributes (notes, sticky notes); none here."""
        return []

    def _build(self, utterance: str, session_id: str) -> list[AgentMessage]:
        s = self.settings
        history = self.get_history(session_id)
        hits = self.recall(utterance, session_id, history) if s.retrieval.max_num_results > 0 else []
        context = self.render_context(hits) if hits else ""
        header = s.context.header
        summary = summary_block(self.session_summary(session_id)) if self._summary is not None else ""
        blocks = [b for b in [summary, *self.context_blocks(utterance, session_id)] if b.strip()]
        system = "\n\n".join([p for p in [self.system_prompt, *blocks] if p])
        sys_msgs = [AgentMessage(role=MessageRole.SYSTEM, content=system)] if system else []
        user_msg = AgentMessage(role=MessageRole.USER, content=utterance)
        mode = s.inject_mode
        if not context:
            return [*sys_msgs, *history, user_msg]
        block = f"{header}\n{context}" if header else context
        if mode == "system":
            return [*sys_msgs, AgentMessage(role=MessageRole.SYSTEM, content=block), *history, user_msg]
        if mode == "developer":
            return [*sys_msgs, AgentMessage(role=MessageRole.DEVELOPER, content=block), *history, user_msg]
        if mode == "system_prompt":
            merged = s.system_prompt_template.format(system=system, header=header, context=context).strip()
            return [AgentMessage(role=MessageRole.SYSTEM, content=merged), *history, user_msg]
        if mode == "user":
            wrapped = s.user_template.format(header=header, context=context, utterance=utterance)
            return [*sys_msgs, *history, AgentMessage(role=MessageRole.USER, content=wrapped)]
        # tool: the recall as a tool call and its result, never two assistant messages in a row
        call_id = "call_" + _digest(session_id, utterance, str(len(history)))[:16]
        query = self.recall_query(utterance, history)
        call = ToolCall(id=call_id, name=s.context.tool_name, arguments={"query": query})
        result = AgentMessage(role=MessageRole.TOOL, content=block, tool_call_id=call_id, name=s.context.tool_name)
        if history and history[-1].role == MessageRole.ASSISTANT:
            last = history[-1]
            calling = AgentMessage(role=MessageRole.ASSISTANT, content=last.content, tool_calls=[call])
            return [*sys_msgs, *history[:-1], calling, result, user_msg]
        calling = AgentMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])
        return [*sys_msgs, *history, calling, result, user_msg]

    # -- life cycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Release files and connections. Optional: nothing depends on it for durability."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._close()
            finally:
                if self._summary is not None:
                    self._summary.close()
                self._history.db.close()

    def __enter__(self) -> BaseRetrievalMemory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
