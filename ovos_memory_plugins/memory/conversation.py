"""The conversation: the persisted short-term history (its window), recording turns (each
completed exchange archived as a document, in the turn's one transaction) and the rolling
summary of what left the window (folded lazily where it can be). Part of
:class:`~ovos_memory_plugins.base.BaseRetrievalMemory`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.admission import is_low_signal
from ovos_memory_plugins.common import exchange_text
from ovos_memory_plugins.memory.documents import PREVIOUS_EXCHANGE
from ovos_memory_plugins.memory.state import MemoryState
from ovos_memory_plugins.select import CONTEXT_MAX_TERMS, clip_context, needs_context
from ovos_memory_plugins.storage.records import Document, StoredDocument, StoredMessage, check_id
from ovos_memory_plugins.text import clean_text, more_query_terms_than

LOG = logging.getLogger("ovos_memory_plugins.base")  # the name its records always had

USER = MessageRole.USER.value
ASSISTANT = MessageRole.ASSISTANT.value
#: With the lazy summary, the history is trimmed once a session holds this many messages more
#: than it keeps (a trim and a fold every few exchanges, not every one).
TRIM_BATCH = 8


class _StaleRead(Exception):
    """The history a recorded exchange read from RAM was behind the file (another connection
    committed since): nothing is written, and the exchange is planned again."""


def _nothing() -> None:
    return None


def _role_of(message: Any) -> str:
    role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
    if isinstance(role, MessageRole):
        return str(role.value)
    return str(role).lower() if role is not None else ""


def _content_of(message: Any, limit: int | None = None) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    if not isinstance(content, str):
        return ""
    return clean_text(content if limit is None else content[:limit])  # cut first: cleaning 10 MB takes seconds


def _length_of(message: Any) -> int:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    return len(content) if isinstance(content, str) else 0


def _needs_context(user: str, previous: str) -> bool:
    """:func:`~ovos_memory_plugins.select.needs_context` of a user turn after ``previous``; its
    terms are counted only when the rest of the rule holds (most turns follow no question)."""
    if not needs_context(0, user, previous):
        return False
    return not more_query_terms_than(user, CONTEXT_MAX_TERMS, unigrams=True)  # read only as far as it takes


def _pairs(stored: Sequence[StoredMessage]) -> list[tuple[str, str]]:
    """The ``(user, assistant)`` exchanges of stored messages: each user message right before an
    assistant one, oldest first."""
    return [(p.content, c.content) for p, c in pairwise(stored) if p.role == USER and c.role == ASSISTANT]


def _window(stored: Sequence[StoredMessage], limit: int) -> list[AgentMessage]:
    """The history window of ``stored`` (oldest first): its newest ``limit // 2`` exchanges."""
    window: list[AgentMessage] = []
    for user, assistant in _pairs(stored)[-(limit // 2) :] if limit >= 2 else []:
        window.append(AgentMessage(role=MessageRole.USER, content=user))
        window.append(AgentMessage(role=MessageRole.ASSISTANT, content=assistant))
    return window


class ConversationMixin(MemoryState):
    """History, recording turns and the summary (:class:`~ovos_memory_plugins.base.BaseRetrievalMemory`'s part)."""

    # -- public API: the conversation --------------------------------------------------------

    def session_summary(self, session_id: str) -> str:
        """The running summary of a session's turns that left the history window, rendered as
        one block after the system prompt ('' for none; ``summary.enabled`` turns it off)."""
        if self._summary is None:
            return ""
        if self._lazy_summary():
            return self._window_and_summary(session_id)[1]
        with self._lock:
            return self._summary.text(check_id(session_id, "session_id"))

    def get_history(self, session_id: str) -> list[AgentMessage]:
        """The session's recent exchanges: at most ``max_history`` messages, starting on a user
        turn and alternating user/assistant (an unanswered user message is left out)."""
        limit = self.settings.max_history
        if limit <= 0:
            return []
        with self._lock:
            stored = self.storage.history.recent(check_id(session_id, "session_id"), limit * 2 + 4)
        return _window(stored, limit)

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
        db = self.storage.db
        if db.fallback_reason:
            LOG.error(
                "%s: memories are kept in RAM only and lost when the process ends (%s)",
                type(self).__name__,
                db.fallback_reason,
            )
        session_id = check_id(session_id, "session_id")
        limit = self.settings.max_message_chars
        incoming: list[tuple[str, str]] = []
        cut: dict[str, int] = {}  # a message as stored -> its length before it was cut
        for m in new_messages or []:
            role = _role_of(m)
            if role in (USER, ASSISTANT):
                incoming.append((role, _content_of(m, limit)))
                if _length_of(m) > limit:
                    cut[incoming[-1][1]] = _length_of(m)
                    LOG.warning(
                        "%s: a %s message of %d characters is stored cut to %d",
                        type(self).__name__,
                        role,
                        _length_of(m),
                        limit,
                    )
        if not incoming:
            return
        with self._lock:
            now = self.now()
            # With a history store that has ``tail`` (SQLite's), the reads may come from RAM
            # unchecked and be confirmed by the write transaction's one look at the file; should
            # another connection have committed since, nothing is written and the exchange is
            # planned again from a checked read (the same documents keep their prepared work).
            memo: list[Any] = []
            after = self._record_exchanges(session_id, incoming, cut, now, memo, trusted=True)
            if after is None:
                after = self._record_exchanges(session_id, incoming, cut, now, memo, trusted=False)
        if after is not None:
            after()

    def _record_exchanges(
        self,
        session_id: str,
        incoming: list[tuple[str, str]],
        cut: dict[str, int],
        now: float,
        memo: list[Any],
        *,
        trusted: bool,
    ) -> Callable[[], None] | None:
        """Record ``incoming`` (the memory's lock held): the history, the exchange documents and
        the summary, in one transaction. Returns what to run once the lock is released (a model's
        fold), or None when the history read from RAM (``trusted``) proved behind the file and
        nothing was written."""
        history = self.storage.history
        exchanges: list[tuple[str, str, str, str]] = []
        window = self.settings.max_history // 2
        lazy = self._lazy_summary()
        # enough history for the replay check and the turns around an exchange (4 before the
        # incoming ones), and, with an eager summary, for what leaves the window
        need = 2 * (window + len(incoming)) + 4 if self._summary is not None and window > 0 and not lazy else 4
        token: Any = None  # the file's version the reads from RAM assume (None: they looked)
        both = getattr(history, "tail", None)  # the newest messages and the last id, one look
        confirm = getattr(history, "confirm", None)  # whether RAM was as the file (with a token)
        if both is not None:
            recent, previous_id, token = both(session_id, need, trusted=trusted)
        else:
            recent, previous_id = history.recent(session_id, need), None
        tail = recent[-2:]
        if len(incoming) == 2 and [(m.role, m.content) for m in tail] == incoming:
            if token is not None and confirm is not None and not confirm(token):
                return None  # RAM was behind the file: read it again
            return _nothing  # the same exchange again: a replay
        if previous_id is None:
            previous_id = history.last_exchange_id(session_id)
        last_role, last_content = (tail[-1].role, tail[-1].content) if tail else ("", "")
        tags: list[str | None] = [None] * len(incoming)
        tag_tail: str | None = None
        for i, (role, content) in enumerate(incoming):
            if role == ASSISTANT and last_role == USER:
                before_id = previous_id
                previous_id = self.exchange_id(session_id, last_content, content)
                exchanges.append((previous_id, before_id, last_content, content))
                tags[i] = previous_id
                if i > 0:
                    tags[i - 1] = previous_id
                else:
                    tag_tail = previous_id  # its question was recorded by an earlier call
            last_role, last_content = role, content
        before = [(m.role, m.content) for m in recent]
        keep = max(self.settings.max_history * 2 + 4, 24)
        read = keep + TRIM_BATCH  # all a session's history holds between two trims
        turns = [*before, *incoming]
        docs: list[Document] = []
        for doc_id, before_id, user, assistant in exchanges if self.archives_exchanges else []:
            if not (user.strip() or assistant.strip()):
                continue
            if self.settings.admission and is_low_signal(user, assistant):
                continue  # low-signal: in the history window, not archived (admission.py)
            metadata: dict[str, Any] = {"kind": "exchange", "time": now}
            if before_id and before_id != doc_id:
                metadata[PREVIOUS_EXCHANGE] = before_id
            if user in cut or assistant in cut:  # what was not stored, said where it shows
                metadata["cut"] = {k: cut[v] for k, v in (("user", user), ("assistant", assistant)) if v in cut}
            context = self._context_before(turns, user, assistant)
            if context:
                metadata["context_before"] = context
                # the exchange this reply answers gets the reply as its turn after
                docs.extend(self._with_turn_after(session_id, turns, user, assistant))
            docs.append(Document(doc_id, exchange_text(user, assistant), session_id, metadata))
        try:
            if memo and memo[0] == docs:  # planned again: the same documents, their work done
                prepared = memo[1]
            else:
                prepared = self._prepare_documents(docs)
                memo[:] = [docs, prepared]
        except Exception:
            LOG.exception("%s: could not prepare exchange(s) %s", type(self).__name__, [d.doc_id for d in docs])
            docs, prepared = [], []

        summary = self._summary

        def record_history() -> None:
            if tag_tail is not None:
                history.tag_exchange(session_id, tag_tail)
            last = previous_id if exchanges else None
            if not lazy or summary is None:
                history.append(session_id, incoming, keep, last, tags, created=now)
                return
            # the lazy fold: what the history trims (a batch at a time) goes into the summary
            # in this transaction; the rest is folded by the turns that read the history
            try:
                summary.adopt(session_id, lambda: len(self._outside_window(history.recent(session_id, read))))
            except Exception:
                LOG.exception("%s: could not update the summary of session %r", type(self).__name__, session_id)
            trimmed = list(history.append(session_id, incoming, keep, last, tags, created=now, batch=TRIM_BATCH) or [])
            if trimmed and trimmed[-1].role == USER:  # its answer was kept: the pair left whole
                trimmed.extend(history.recent(session_id, keep)[:1])
            try:
                summary.fold_trimmed(session_id, _pairs(trimmed))
            except Exception:
                LOG.exception("%s: could not update the summary of session %r", type(self).__name__, session_id)

        leaving = self._leaving_window(turns, len(exchanges)) if exchanges and not lazy else []
        # an extractive fold is a read and a write: it joins the turn's transaction (no second
        # commit); a model's fold runs after it, outside the lock (a call may take seconds)
        fold_now = bool(leaving) and summary is not None and not summary.calls_model

        def fold() -> None:
            if summary is not None:
                try:
                    summary.fold(session_id, leaving)
                except Exception:
                    LOG.exception("%s: could not update the summary of session %r", type(self).__name__, session_id)

        # One transaction (one durable commit) for the messages, the exchange documents and an
        # extractive fold; should the documents fail, the messages are recorded alone.
        written: list[StoredDocument] = []
        try:
            with self.storage.atomic():
                if token is not None and confirm is not None and not confirm(token):
                    raise _StaleRead  # the transaction's first statement: nothing to undo
                record_history()
                stored = self._put_prepared(docs, prepared)
                if fold_now:
                    fold()
            written = stored
        except _StaleRead:
            return None
        except Exception:
            if not docs:
                raise
            LOG.exception("%s: could not store exchange(s) %s", type(self).__name__, [d.doc_id for d in docs])
            with self.storage.atomic():
                record_history()
                if fold_now:
                    fold()
        self._tell_exchanges(written)  # the exchange listeners, once the turn is committed
        return fold if leaving and not fold_now else _nothing

    @staticmethod
    def _context_before(turns: Sequence[tuple[str, str]], user: str, assistant: str) -> str:
        """The turn before an exchange, clipped, when its user turn is a reply that needs it."""
        for i in range(len(turns) - 1, 0, -1):
            if turns[i] == (ASSISTANT, assistant) and turns[i - 1] == (USER, user):
                if i >= 2 and turns[i - 2][0] == ASSISTANT and turns[i - 2][1].strip():
                    previous = turns[i - 2][1]
                    if _needs_context(user, previous):
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

    def _with_turn_after(
        self, session_id: str, turns: Sequence[tuple[str, str]], user: str, assistant: str
    ) -> list[Document]:
        """The exchange before a short reply, to store again with the reply as ``context_after``.

        Its other metadata is rebuilt from the history (``time`` is kept; the exchange
        before it, ``previous_exchange``, is kept from the stored copy). None when that exchange
        was not archived (admission) or is no longer in the history read.
        """
        previous = self._exchange_before(turns, user, assistant)
        if previous is None:
            return []
        prev_user, prev_assistant, earlier = previous
        if not (prev_user.strip() or prev_assistant.strip()):
            return []
        if self.settings.admission and is_low_signal(prev_user, prev_assistant):
            return []
        doc_id = self.exchange_id(session_id, prev_user, prev_assistant)
        stored = self.storage.documents.get([doc_id]).get(doc_id)
        made = stored.metadata.get("time") if stored is not None else None
        stamp = made if isinstance(made, (int, float)) else self.now()  # it keeps its own time
        metadata: dict[str, Any] = {"kind": "exchange", "time": stamp, "context_after": clip_context(user)}
        before = stored.metadata.get(PREVIOUS_EXCHANGE) if stored is not None else None
        if isinstance(before, str) and before:
            metadata[PREVIOUS_EXCHANGE] = before
        if earlier and _needs_context(prev_user, earlier):
            metadata["context_before"] = clip_context(earlier)
        return [Document(doc_id, exchange_text(prev_user, prev_assistant), session_id, metadata)]

    def _lazy_summary(self) -> bool:
        """Whether the rolling summary is folded lazily: extractive, a history window, and a
        history store that trims in batches (the seam's ``trims_in_batches``)."""
        summary = self._summary
        return (
            summary is not None
            and summary.lazy
            and self.settings.max_history // 2 > 0
            and bool(getattr(self.storage.history, "trims_in_batches", False))
        )

    def _outside_window(self, stored: Sequence[StoredMessage]) -> list[tuple[str, str]]:
        """The ``(user, assistant)`` exchanges of ``stored`` (a session's history, oldest first)
        before the window's newest ``max_history // 2``: those the summary holds."""
        pairs = _pairs(stored)
        return pairs[: max(len(pairs) - self.settings.max_history // 2, 0)]

    def _window_and_summary(self, session_id: str) -> tuple[list[AgentMessage], str]:
        """The session's history window (:meth:`get_history`) and its rolling summary
        (:meth:`session_summary`), from one read of the history: with the lazy fold, the
        exchanges the history holds outside the window are folded into the stored summary
        here."""
        if not self._lazy_summary():
            return self.get_history(session_id), self.session_summary(session_id)
        session_id = check_id(session_id, "session_id")
        limit = self.settings.max_history
        keep = max(limit * 2 + 4, 24)
        with self._lock:
            stored = self.storage.history.recent(session_id, keep + TRIM_BATCH)
            summary = self._summary
            text = summary.text_with(session_id, self._outside_window(stored)) if summary is not None else ""
        return _window(stored[-(limit * 2 + 4) :], limit), text

    def _leaving_window(self, turns: Sequence[tuple[str, str]], new_exchanges: int) -> list[tuple[str, str]]:
        """The exchanges that the newest ``new_exchanges`` pushed out of the history window, from
        the session's ``(role, content)`` turns as just recorded (none when the summary is off
        or there is no window)."""
        window = self.settings.max_history // 2
        if self._summary is None or window <= 0:
            return []
        stored = turns[-(2 * (window + new_exchanges) + 4) :]
        pairs = [(p[1], c[1]) for p, c in pairwise(stored) if p[0] == USER and c[0] == ASSISTANT]
        return pairs[: max(len(pairs) - window, 0)][-new_exchanges:]
