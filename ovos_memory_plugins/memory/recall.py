"""Recall and the turn's messages: what a turn injects (searched per scope, minus the history
window, time words and alternatives first, consecutive exchanges joined) and the messages
rendered from it (never raising). Part of :class:`~ovos_memory_plugins.base.BaseRetrievalMemory`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ovos_plugin_manager.templates.agents import AgentMessage

from ovos_memory_plugins import prompt
from ovos_memory_plugins.common import MemoryHit, exchange_parts
from ovos_memory_plugins.dates import CONVERSATION_GAP_S, Window, memory_time
from ovos_memory_plugins.memory.conversation import ConversationMixin
from ovos_memory_plugins.memory.documents import PREVIOUS_EXCHANGE, DocumentsMixin
from ovos_memory_plugins.memory.state import MemoryState
from ovos_memory_plugins.select import (
    Candidates,
    alternatives,
    choose_hits,
    recall_query,
    shown_in_window,
    without_order_words,
)
from ovos_memory_plugins.shaping import prompt_memories
from ovos_memory_plugins.time_words import parser_available, time_window

LOG = logging.getLogger("ovos_memory_plugins.base")  # the name its records always had


class RecallMixin(MemoryState):
    """Recall and building the turn's context (:class:`~ovos_memory_plugins.base.BaseRetrievalMemory`'s part)."""

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
        return prompt.bare_messages(self.system_prompt, utterance)

    def recall_query(self, utterance: str, history: Sequence[AgentMessage]) -> str:
        """The text recall searches with, per ``retrieval.query_mode``."""
        return recall_query(utterance, history, self.settings.retrieval)

    def recall(self, utterance: str, session_id: str, history: Sequence[AgentMessage]) -> list[MemoryHit]:
        """The hits a turn injects: searched per scope, minus what the history window shows,
        consecutive exchanges of one conversation joined into one memory, each shortened to
        ``context.memory_chars`` per exchange around the query's words (:meth:`excerpt_terms`;
        docs/recall.md). When the utterance names a time (:meth:`recall_window`), up to half of
        the places (rounded up) go first to what was made then: the query's matches in that
        window, else the window's newest memories; the ordinary hits fill the rest, so a time
        word that names the event's time rather than the conversation's does not hide them. The
        words that ask for an order ("the order of ..., from earliest to latest") are left out of
        the query; a question naming two alternatives ("..., the thermostat or the mesh
        network?", ``retrieval.alternatives``) gives each one's best match a place first."""
        query = self.recall_query(utterance, history)
        scoped = session_id if self.settings.scope == "session" else None
        k = self.settings.retrieval.max_num_results
        in_window = shown_in_window(history)
        depth = k + len(in_window)
        r = self.settings.retrieval
        query = self._without_order_words(query)
        ordinary = Candidates(self.search(query, session_id=scoped, top_k=depth))
        pair = alternatives(utterance, self.memory_lang) if r.alternatives else None
        picks = self._alternative_candidates(pair, depth, scoped) if pair is not None else []
        window = self.recall_window(utterance)
        dated = None
        if window is not None:
            found, matched = self.window_hits(query, window, depth, scoped)
            dated = Candidates(found, by_words=matched)
        chosen = choose_hits(
            ordinary,
            limit=k,
            shown=in_window,
            min_relative=r.min_relative_score if r.min_relative_score is not None else self.default_prompt_min_relative,
            query_terms=self.word_terms(query, query=True),
            hit_terms=self.hit_terms,
            alternatives=picks,
            dated=dated,
        )
        return prompt_memories(chosen, self.follows, query, self.settings.context.memory_chars, self.excerpt_terms)

    def _without_order_words(self, query: str) -> str:
        """``query`` without the words that ask for an order ("the order of ..., from earliest to
        latest": :data:`~ovos_memory_plugins.select.ORDER_WORDS`), unless no word but stop words
        would be left ("what was my order?"; :meth:`excerpt_terms`, every backend's)."""
        stripped = without_order_words(query, self.memory_lang)
        if stripped == query or not self.excerpt_terms(stripped):
            return query
        return stripped

    def _alternative_candidates(
        self, pair: tuple[str, str], depth: int, session_id: str | None
    ) -> list[tuple[Candidates, frozenset[str] | None]]:
        """Each alternative a comparison question names, searched alone, with its own terms
        (:func:`~ovos_memory_plugins.select.choose_hits` picks its best match); an alternative
        without a content word (its index's terms) is not searched."""
        found: list[tuple[Candidates, frozenset[str] | None]] = []
        for alternative in pair:
            terms = self.word_terms(alternative, query=True)
            if terms is not None and not terms:
                continue
            found.append((Candidates(self.search(alternative, session_id=session_id, top_k=depth)), terms))
        return found

    def recall_window(self, utterance: str) -> Window | None:
        """The window of time the utterance's time words name (``time_words.time_window``, in the
        memory's language, relative to its clock), or None: no time words, ``retrieval.time_words``
        off, the parser (the ``dates`` extra) missing, or a memory that cannot filter by time."""
        if not (self.settings.retrieval.time_words and self.filters_time and parser_available()):
            return None
        try:
            return time_window(utterance, self.clock(), self.memory_lang)
        except Exception:  # a parser bug must not cost the turn: ordinary recall
            LOG.warning("%s: could not read the time words of the utterance", type(self).__name__, exc_info=True)
            return None

    def window_hits(
        self, query: str, window: Window, limit: int, session_id: str | None = None
    ) -> tuple[list[MemoryHit], bool]:
        """What was made in ``window``, for time words: the query's best ``limit`` matches made
        then (``search(..., window=)``), else, when none match ("what did I tell you
        yesterday?"), the window's newest ``limit`` memories (:meth:`made_between`); and whether
        the hits matched the query. Empty when nothing was made then: whether the window
        holds a document is read first (an indexed range of ``created``), so an empty window
        costs no search. ValueError when the memory cannot filter by time (:attr:`filters_time` False).
        The composite asks its members that filter by time the same (docs/composite.md)."""
        if not self.filters_time:
            raise ValueError(f"{type(self).__name__} cannot search within a window of time")
        if not self.made_between(window, 1, session_id):
            return [], False
        dated = self.search(query, session_id=session_id, top_k=limit, window=window)
        if dated:
            return dated, True
        return self.made_between(window, limit, session_id), False

    def made_between(self, window: Window, limit: int, session_id: str | None = None) -> list[MemoryHit]:
        """The newest ``limit`` documents (of a session) made in ``window``, newest first, as hits
        (score 1), read by the storage's ``created`` range."""
        with self._lock:
            docs = self.storage.documents.made_between(window[0], window[1], limit, session_id)
        return [
            MemoryHit(content=d.text, source=d.doc_id, score=1.0, metadata={"session_id": d.session_id, **d.metadata})
            for d in docs
        ]

    @staticmethod
    def follows(earlier: MemoryHit, later: MemoryHit) -> bool:
        """Whether ``later`` is the recorded exchange right after ``earlier`` in one session: its
        metadata names ``earlier``'s id as its ``previous_exchange`` (no read needed; the
        composite asks the same of its members' hits). An exchange recorded by an earlier
        release, without that key, follows when its id is the one
        :meth:`chained_exchange_id` gives its text after ``earlier``'s id. Exchanges more than
        :data:`~ovos_memory_plugins.dates.CONVERSATION_GAP_S` apart do not follow each other:
        a joined stretch is one sitting and carries one date."""
        session = later.metadata.get("session_id")
        if not earlier.source or not isinstance(session, str) or earlier.metadata.get("session_id") != session:
            return False
        previous = later.metadata.get(PREVIOUS_EXCHANGE)
        if isinstance(previous, str) and previous:
            chained = previous == earlier.source
        else:
            parts = exchange_parts(later.content)  # recorded by an earlier release: its id says it
            chained = parts is not None and later.source == DocumentsMixin.chained_exchange_id(
                session, earlier.source, *parts
            )
        if not chained:
            return False
        first, then = memory_time(earlier.metadata), memory_time(later.metadata)
        # the next exchange, but hours later: another sitting, with its own date
        return first is None or then is None or abs(then - first) <= CONVERSATION_GAP_S

    def context_blocks(self, utterance: str, session_id: str) -> list[str]:
        """Extra system text a backend always contributes (notes, sticky notes); none here."""
        return []

    def _build(self, utterance: str, session_id: str) -> list[AgentMessage]:
        s = self.settings
        cls = type(self)
        if (
            cls.get_history is ConversationMixin.get_history
            and cls.session_summary is ConversationMixin.session_summary
        ):
            history, summary = self._window_and_summary(session_id)  # one read of the history for both
        else:  # a subclass's own window or summary
            history, summary = self.get_history(session_id), self.session_summary(session_id)
        hits = self.recall(utterance, session_id, history) if s.retrieval.max_num_results > 0 else []
        return prompt.render_messages(
            utterance,
            s,
            system_prompt=self.system_prompt,
            blocks=self.context_blocks(utterance, session_id),
            hits=hits,
            summary=summary,
            history=history,
            tool_query=self.recall_query(utterance, history) if s.inject_mode == "tool" else None,
            session_id=session_id,
            now=self.clock(),
            lang=self.memory_lang,
        )
