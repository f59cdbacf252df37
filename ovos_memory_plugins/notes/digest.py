"""The digest: an exchange listener marks each archived exchange pending and adds it to its
session's pending transcript (recovered from storage after a restart); when a session goes quiet
or every ``curate_every_turns`` exchanges, one model call over that transcript admits the few
durable facts, retires or forgets the notes the conversation disproved, and archives an episode
summary. Part of :class:`~ovos_memory_plugins.notes.NotesMemory`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ovos_memory_plugins.llm import parse_json_reply
from ovos_memory_plugins.notes.options import MAX_NEW_PER_DIGEST, MAX_PENDING_EXCHANGES
from ovos_memory_plugins.notes.results import DIGEST_KEY, DigestResult, _Pending, normalize_fact
from ovos_memory_plugins.notes.state import NotesState
from ovos_memory_plugins.protocols import Note, words_key
from ovos_memory_plugins.storage.notes_store import make_note, prompt_line
from ovos_memory_plugins.storage.records import Document, StoredDocument

LOG = logging.getLogger("ovos_memory_plugins.notes")  # the name its records always had

DIGEST_PROMPT = """You maintain a short list of durable facts about the user of a voice assistant. \
Read the conversation and decide what, if anything, changes in the list.

Admit a fact only if it will still be true and useful months from now: the user's name, people \
and pets, home, work, health needs, lasting preferences, explicit rules ("always ...", "never \
...") and plans with dates. Never admit one-off tasks, questions the user asked, the \
assistant's answers, small talk, or anything that can be looked up again (weather, news, \
timers, prices). Most conversations add nothing: then return empty lists.
Write each fact as one short self-contained sentence about the user, in the user's language.
If the conversation shows that a listed fact is no longer true, REPLACE it: give its number and \
the new fact. If the new fact could be true alongside the old one, it is NEW: add it and keep \
the old one. RETIRE a number without a replacement only when the user said it stopped being true. \
FORGET a number when the user asked you to forget it or delete it (it is removed for good).
Also write "episode": a self-contained summary of the conversation in one to three sentences \
(names, places and dates spelled out), or "" when nothing worth recalling later was said.

Reply with JSON only:
{"new": ["fact", ...], "replace": [{"number": 3, "fact": "new fact"}], "retire": [5], "forget": [], \
"episode": "..."}"""


class DigestMixin(NotesState):
    """The digest and its pending transcripts (:class:`~ovos_memory_plugins.notes.NotesMemory`'s part)."""

    # -- the digest's exchange listener --------------------------------------------------------

    def _exchange_recorded(self, exchange: StoredDocument) -> None:
        """The digest's exchange listener (the base calls it once an exchange is written): one
        marked pending joins its session's pending transcript for the next digest."""
        if exchange.metadata.get(DIGEST_KEY) == "pending" and not self._adopting:
            self._note_exchange(exchange.doc_id, exchange.text, exchange.session_id)

    def _put_prepared(self, docs: Sequence[Document], prepared: Sequence[Any]) -> list[StoredDocument]:
        """Mark each new exchange ``"digest": "pending"`` in its metadata as it is written (the
        pending transcript is derived from that after a restart); an exchange stored again (the
        turn after it joined) keeps the mark it has, so a digested one is not digested twice."""
        if self.auto_curate and not self._adopting:
            docs = self._marked_pending(docs)
        return super()._put_prepared(docs, prepared)

    def _marked_pending(self, docs: Sequence[Document]) -> list[Document]:
        exchanges = [d.doc_id for d in docs if d.metadata.get("kind") == "exchange"]
        if not exchanges:
            return list(docs)
        known = self.storage.documents.get(exchanges)
        out = []
        for d in docs:
            before = known.get(d.doc_id)
            digested = before is not None and before.metadata.get(DIGEST_KEY) != "pending"
            if d.metadata.get("kind") == "exchange" and not digested and d.metadata.get(DIGEST_KEY) != "pending":
                d = Document(d.doc_id, d.text, d.session_id, {**d.metadata, DIGEST_KEY: "pending"})
            out.append(d)
        return out

    # -- digest ----------------------------------------------------------------------------------

    def _note_exchange(self, doc_id: str, text: str, session_id: str) -> None:
        """Add an exchange to the session's pending transcript (the exchange listener runs under
        the base lock: no model work here; ``update_history`` schedules it once the lock is
        released). An exchange stored again (the turn after it joined) keeps its place."""
        if not self.auto_curate:
            return
        with self._cond:
            pending = self._pending.setdefault(session_id, _Pending())
            if doc_id not in pending.exchanges:
                pending.turns += 1
            pending.exchanges[doc_id] = text
            for old in list(pending.exchanges)[:-MAX_PENDING_EXCHANGES]:
                del pending.exchanges[old]
            pending.last_activity = self._clock()

    def _recover_pending(self) -> None:
        """After a restart: the pending transcript of every session, from the archived exchanges
        still marked ``"digest": "pending"`` (the newest ones; at most
        :data:`MAX_PENDING_EXCHANGES` a session). They are digested once the session has been
        quiet ``curate_after_idle_s`` since this start (or at the next ``curate_every_turns``).
        Never raises (logged)."""
        if not self.auto_curate or self.storage.db.in_ram:
            return
        try:
            docs = self.storage.documents
            found: dict[str, list[tuple[str, str]]] = {}
            for sid in docs.sessions():
                ids = docs.ids(sid)
                pending: list[tuple[str, str]] = []
                end = len(ids)
                while end > 0 and len(pending) < MAX_PENDING_EXCHANGES:
                    chunk = ids[max(0, end - 64) : end]
                    end -= len(chunk)
                    got = docs.get(chunk)
                    stop = False
                    for doc_id in reversed(chunk):
                        d = got.get(doc_id)
                        if d is None or d.metadata.get("kind") != "exchange":
                            continue
                        if d.metadata.get(DIGEST_KEY) != "pending":
                            stop = True  # digested (or from before the marks): everything older is too
                            break
                        pending.append((d.doc_id, d.text))
                    if stop:
                        break
                if pending:
                    found[sid] = pending[:MAX_PENDING_EXCHANGES][::-1]
        except Exception:
            LOG.exception("NotesMemory: cannot read which exchanges wait for the digest")
            return
        if not found:
            return
        now = self._clock()
        with self._cond:
            for sid, pending in found.items():
                p = self._pending.setdefault(sid, _Pending())
                p.exchanges = {**dict(pending), **p.exchanges}
                p.turns = len(p.exchanges)
                p.last_activity = now
        LOG.info(
            "NotesMemory: %d exchange(s) of %d session(s) wait for the digest",
            sum(map(len, found.values())),
            len(found),
        )
        self._ensure_worker()

    def _mark_digested(self, doc_ids: Sequence[str]) -> None:
        """Take the pending mark off digested exchanges (their metadata only; one transaction)."""
        with self._lock:
            found = self.storage.documents.get(doc_ids)
            docs = [
                Document(d.doc_id, d.text, d.session_id, {k: v for k, v in d.metadata.items() if k != DIGEST_KEY})
                for d in found.values()
                if DIGEST_KEY in d.metadata
            ]
            if not docs:
                return
            self._adopting = True  # written again, not noted again
            try:
                self._write_documents(docs)
            finally:
                self._adopting = False

    def update_history(self, new_messages: list[Any], session_id: str) -> None:
        """Record the turn (see the base class), then start any digest or dream that is due.
        Never raises; the model work runs in the background thread."""
        super().update_history(new_messages, session_id)
        if not self.auto_curate:
            return
        try:
            with self._cond:
                p = self._pending.get(session_id)
                due = p is not None and p.turns >= self.options.curate_every_turns
                if due and p is not None:
                    p.turns = 0
            if due:
                self._schedule("digest", session_id)
            elif p is not None:
                self._ensure_worker()
                with self._cond:
                    self._cond.notify_all()  # the worker recomputes when the session goes quiet
            self._check_cadence()
        except Exception:
            LOG.exception("NotesMemory: could not schedule curation")

    def pending_exchanges(self, session_id: str | None = None) -> int:
        """Exchanges recorded since the last digest (of one session, or all)."""
        with self._cond:
            if session_id is not None:
                p = self._pending.get(session_id)
                return len(p.exchanges) if p else 0
            return sum(len(p.exchanges) for p in self._pending.values())

    def digest(self, session_id: str = "default") -> DigestResult:
        """Run one digest of the session's transcript since the last digest, now, in this thread."""
        with self._cond:
            pending = self._pending.get(session_id)
            taken = dict(pending.exchanges) if pending else {}
        exchanges = list(taken.values())
        if not exchanges:
            return DigestResult("nothing")
        if self._llm is None:
            return DigestResult("failed")
        notes = self._refresh()
        transcript = "\n\n".join(exchanges)
        shown = self.select_notes(transcript, notes)
        listing = "\n".join(f"{i}. {prompt_line(n)[2:]}" for i, n in enumerate(shown, start=1)) or "(none yet)"
        conversation = transcript.replace("Q: ", "User: ").replace("\nA: ", "\nAssistant: ")
        messages = [
            {"role": "system", "content": DIGEST_PROMPT},
            {
                "role": "user",
                "content": f"Today is {self._day()}.\n\nCurrent notes:\n{listing}\n\nConversation:\n{conversation}",
            },
        ]
        reply = self._llm.complete(messages, json_mode=True)
        if reply is None:
            return DigestResult("failed")
        data = parse_json_reply(reply)
        if not isinstance(data, dict):
            LOG.warning("NotesMemory: the digest reply could not be parsed; nothing changed")
            with self._cond:
                p = self._pending.get(session_id)
                if p is not None:
                    p.garbled += 1
                    if p.garbled >= 2:  # a transcript the model chokes on twice is dropped
                        self._consume(session_id, list(taken))
            return DigestResult("garbled")
        result = self._apply_digest(data, shown, session_id)
        self._consume(session_id, list(taken))
        self._counts["digests"] += 1
        self._after_growth()
        return result

    def _consume(self, session_id: str, doc_ids: list[str]) -> None:
        """The digested exchanges leave the pending transcript, and their pending mark in
        storage goes (so a restart does not digest them again)."""
        with self._cond:
            p = self._pending.get(session_id)
            if p is not None:
                for doc_id in doc_ids:
                    p.exchanges.pop(doc_id, None)
                p.turns = len(p.exchanges)
                p.garbled = 0
                if not p.exchanges:
                    self._pending.pop(session_id, None)
        try:
            self._mark_digested(doc_ids)
        except Exception:
            LOG.exception("NotesMemory: cannot mark %d exchange(s) as digested", len(doc_ids))

    @staticmethod
    def _replies(value: Any, keys: tuple[str, ...]) -> list[Any]:
        """The items of a reply's list, an object's first present ``keys`` taken for the object."""
        if not isinstance(value, list):
            return []
        return [
            next((item[k] for k in keys if item.get(k)), None) if isinstance(item, dict) else item for item in value
        ]

    @classmethod
    def _fact_list(cls, value: Any) -> list[str]:
        return [item for item in cls._replies(value, ("fact", "text")) if isinstance(item, str) and item.strip()]

    @classmethod
    def _numbers(cls, value: Any) -> list[int]:
        out = []
        for item in cls._replies(value, ("number",)):
            if isinstance(item, int) and not isinstance(item, bool):
                out.append(item)
            elif isinstance(item, str) and item.strip().isdigit():
                out.append(int(item.strip()))
        return out

    def _admit(self, fact: str) -> str | None:
        text, _ = normalize_fact(fact.splitlines()[0] if fact.strip() else "")
        if not text or len(text) > self.options.max_note_chars or text.endswith("?"):
            return None
        return text

    def _apply_digest(self, data: dict[str, Any], shown: list[Note], session_id: str) -> DigestResult:
        month, day = self._month(), self._day()
        new_facts = [t for t in (self._admit(f) for f in self._fact_list(data.get("new"))) if t]
        replaces: list[tuple[Note, str]] = []
        for item in data.get("replace") or []:
            if not isinstance(item, dict):
                continue
            numbers, facts = self._numbers([item.get("number")]), self._fact_list([item.get("fact")])
            fact = self._admit(facts[0]) if facts else None
            if numbers and fact and 1 <= numbers[0] <= len(shown):
                replaces.append((shown[numbers[0] - 1], fact))
        forgets = [shown[n - 1] for n in self._numbers(data.get("forget")) if 1 <= n <= len(shown)]
        retires = [shown[n - 1] for n in self._numbers(data.get("retire")) if 1 <= n <= len(shown)]
        retires = [n for n in retires if n not in forgets]
        added: list[Note] = []
        retired: list[Note] = []
        if new_facts or replaces or retires:
            with self._mutex, self._notes_store.transaction():
                notes: list[Note | None] = list(self._notes_store.load())
                keys = {words_key(n.text): i for i, n in enumerate(notes) if n is not None}
                to_retire: list[Note] = []
                for old, fact in replaces:
                    index = keys.get(words_key(old.text))
                    current = notes[index] if index is not None else None
                    if index is None or current is None or words_key(fact) == words_key(old.text):
                        continue
                    to_retire.append(current)
                    new = make_note(fact, month, session_id=session_id)
                    if words_key(fact) not in keys:
                        notes[index] = new
                        keys[words_key(fact)] = index
                        added.append(new)
                    else:
                        notes[index] = None
                for old in retires:
                    index = keys.get(words_key(old.text))
                    current = notes[index] if index is not None else None
                    if index is not None and current is not None:
                        to_retire.append(current)
                        notes[index] = None
                for fact in new_facts[:MAX_NEW_PER_DIGEST]:
                    if words_key(fact) in keys:
                        continue
                    new = make_note(fact, month, session_id=session_id)
                    keys[words_key(fact)] = len(notes)
                    notes.append(new)
                    added.append(new)
                kept = [n for n in notes if n is not None]
                if to_retire:
                    self._notes_store.retire(to_retire, day)
                    retired = to_retire
                self._notes_store.save(kept)
                self._saved(kept)
        forgotten = [c.note for c in (self.forget(n.id) for n in forgets) if c and c.note is not None]
        episode = data.get("episode")
        episode = " ".join(episode.split()) if isinstance(episode, str) else ""
        if forgotten:  # the summary of a conversation asking to forget may quote what it forgot
            episode = ""
        if episode and self.index is not None:
            try:
                self.store(episode, session_id, {"kind": "episode", "time": self._clock()})
                self._counts["episodes"] += 1
            except Exception:
                LOG.exception("NotesMemory: could not archive the episode summary")
        self._counts["facts_added"] += len(added)
        self._counts["facts_retired"] += len(retired)
        return DigestResult("applied", added=added, retired=retired, episode=episode, forgotten=forgotten)
