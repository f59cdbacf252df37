"""Dreaming and the background worker: one model call rewrites the whole list (merge, split,
resolve contradictions, drop expired one-offs), a rewrite that invents a word, drops a rule or
cannot be parsed is rejected; the cadence (``dream_every_days``, the budget) and the one
background thread that runs digests and dreams (:meth:`drain`, :meth:`curate_now`). Part of
:class:`~ovos_memory_plugins.notes.NotesMemory`.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

from ovos_memory_plugins.llm import parse_json_reply
from ovos_memory_plugins.notes.options import DREAM_RETRY_S
from ovos_memory_plugins.notes.results import DreamResult, normalize_fact
from ovos_memory_plugins.notes.state import NotesState
from ovos_memory_plugins.protocols import Note, words_key
from ovos_memory_plugins.storage.notes_store import make_note, prompt_line
from ovos_memory_plugins.text import query_terms, tokenize

LOG = logging.getLogger("ovos_memory_plugins.notes")  # the name its records always had

_RULE = re.compile(
    r"\b(always|never|prefer|prefers|preferred|please|don't|do not|doesn't|call me|likes?|loves?|"
    r"dislikes?|hates?|allergic|wants?)\b",
    re.IGNORECASE,
)

DREAM_PROMPT = """You tidy a list of durable facts about a user. Rewrite the whole list:
- merge near-duplicates into one line; split a line that holds two facts into two lines;
- when two facts contradict each other, keep only the one with the newer [YYYY-MM] date;
- drop one-off entries whose date has passed and that no longer matter;
- never drop an explicit rule or preference; never add a fact or a detail that is not in the \
list; reuse the original words.
Keep each fact's [YYYY-MM] date (for a merged line, the newest of its dates).

Reply with JSON only: {"notes": ["[YYYY-MM] fact", ...]}"""


class DreamingMixin(NotesState):
    """Dreaming, its cadence and the background worker (:class:`~ovos_memory_plugins.notes.NotesMemory`'s part)."""

    # -- dreaming --------------------------------------------------------------------------------

    @property
    def dream_marker(self) -> Path:
        """The file whose modification time says when the notes were last dreamed over (on the
        SQLite engine; the database keeps it on PostgreSQL)."""
        return self.root / ".dreamed"

    def _touch_marker(self) -> None:
        self._rewrites.mark_dreamed(self._clock())

    def _check_cadence(self) -> None:
        """Schedule a dream when the cadence says so (the first check only starts the clock)."""
        if not self.auto_curate or self.options.dream_every_days <= 0:
            return
        last = self._rewrites.dreamed()
        if last is None:
            self._touch_marker()
            return
        now = self._clock()
        if now - last >= self.options.dream_every_days * 86400 and now >= self._next_dream_try:
            self._schedule("dream", "cadence")

    def _after_growth(self) -> None:
        """Dream when the notes overflow the budget (automatic curation only)."""
        if (
            self.auto_curate
            and self.notes_chars() > self.options.max_context_chars
            and self._clock() >= self._next_dream_try
        ):
            self._schedule("dream", "budget")

    @property
    def can_dream(self) -> bool:
        """Whether :meth:`dream` can work: a language model is configured (declared, for front-ends)."""
        return self._llm is not None

    def dream(self) -> DreamResult:
        """Rewrite the whole list with one model call, now, in this thread.

        The rewrite is rejected (notes untouched) when the reply cannot be parsed, comes back
        empty, contains a word found in none of the input notes, or loses an explicit rule or
        preference. An accepted rewrite keeps the previous body for :meth:`undo`.
        """
        if self._llm is None:
            return DreamResult("skipped", reason="no language model is configured")
        notes = self._refresh()
        if not notes:
            return DreamResult("skipped", reason="no notes")
        listing = "\n".join(prompt_line(n) for n in notes)
        messages = [
            {"role": "system", "content": DREAM_PROMPT},
            {"role": "user", "content": f"Today is {self._day()}.\n\nNotes:\n{listing}"},
        ]
        reply = self._llm.complete(messages, json_mode=True)
        if reply is None:
            self._next_dream_try = self._clock() + DREAM_RETRY_S
            return DreamResult("failed", before=len(notes), reason="the language model did not answer")
        self._next_dream_try = 0.0
        self._touch_marker()
        rewritten, reason = self._check_rewrite(notes, parse_json_reply(reply))
        if rewritten is None:
            LOG.warning("NotesMemory: dream rejected (%s); the notes stay as they were", reason)
            return DreamResult("rejected", before=len(notes), reason=reason)
        if rewritten == notes:
            return DreamResult("unchanged", before=len(notes), after=len(notes))
        with self._mutex, self._notes_store.transaction():
            current = self._notes_store.load()
            if current != notes:
                return DreamResult("rejected", before=len(notes), reason="the notes changed during the dream")
            self._snapshot(self._body(), "dream")
            self._notes_store.save(rewritten)
            self._saved(rewritten)
        self._notes_store.checkpoint()
        self._counts["dreams"] += 1
        return DreamResult("rewritten", before=len(notes), after=len(rewritten))

    def _check_rewrite(self, notes: list[Note], data: Any) -> tuple[list[Note] | None, str]:
        items = data.get("notes") if isinstance(data, dict) else data
        if not isinstance(items, list):
            return None, "the reply holds no list of notes"
        known_terms: set[str] = set()
        sessions = {words_key(n.text): n.session_id for n in notes}
        for n in notes:
            known_terms.update(tokenize(n.text))
        dates = {n.date for n in notes}
        out: list[Note] = []
        seen: set[str] = set()
        for item in items:
            if isinstance(item, dict):
                raw = str(item.get("fact") or item.get("text") or "")
                text, date = normalize_fact(raw)
                date = str(item.get("date") or date)[:7]
            elif isinstance(item, str):
                text, date = normalize_fact(item)
            else:
                return None, f"an entry is not text: {item!r}"
            if not text:
                continue
            novel = [t for t in query_terms(text) if t not in known_terms]
            if novel:
                return None, f"the line {text!r} adds words not in the notes: {', '.join(novel[:5])}"
            terms = set(tokenize(text))
            best = max(notes, key=lambda n: (len(terms.intersection(tokenize(n.text))), n.date))
            if date not in dates:
                date = best.date
            key = words_key(text)
            if key in seen or len(text) > self.options.max_note_chars:
                continue
            seen.add(key)
            out.append(make_note(text, date, session_id=sessions.get(key, best.session_id)))
        if not out:
            return None, "the rewrite is empty"
        kept_terms: set[str] = set()
        for n in out:
            kept_terms.update(tokenize(n.text))
        for n in notes:
            if _RULE.search(n.text):
                terms = set(query_terms(n.text))
                if terms and len(terms & kept_terms) < 0.6 * len(terms):
                    return None, f"the rule or preference {n.text!r} was dropped"
        return out, ""

    # -- background work ---------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if not self.options.curate_in_background:
            return
        with self._cond:
            if not self._worker_started and not self._stopping:
                self._worker.submit(self._work)
                self._worker_started = True

    def _schedule(self, kind: str, arg: str) -> None:
        if not self.options.curate_in_background:
            self._run_job(kind, arg)
            return
        self._ensure_worker()
        with self._cond:
            if (kind, arg) not in self._jobs:
                self._jobs.append((kind, arg))
            self._cond.notify_all()

    def _run_job(self, kind: str, arg: str) -> None:
        try:
            if kind == "digest":
                self.digest(arg)
                self._check_cadence()
            else:
                self.dream()
        except Exception:
            LOG.exception("NotesMemory: background %s failed", kind)

    def _idle_sessions(self, now: float) -> tuple[list[str], float | None]:
        """Sessions quiet long enough to digest, and seconds until the next one is."""
        idle, wait = [], None
        for sid, p in self._pending.items():
            if not p.exchanges:
                continue
            due = p.last_activity + self.options.curate_after_idle_s - now
            if due <= 0:
                idle.append(sid)
            else:
                wait = due if wait is None else min(wait, due)
        return idle, wait

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._stopping:
                    idle, wait = self._idle_sessions(self._clock())
                    for sid in idle:
                        if ("digest", sid) not in self._jobs:
                            self._jobs.append(("digest", sid))
                    if self._jobs:
                        break
                    self._cond.wait(None if wait is None else min(max(wait, 0.05), 60.0))
                if self._stopping:
                    return
                kind, arg = self._jobs.popleft()
                self._busy += 1
            try:
                self._run_job(kind, arg)
            finally:
                with self._cond:
                    self._busy -= 1
                    if kind == "digest":
                        p = self._pending.get(arg)
                        if p is not None:  # failed digest: try again after the next quiet spell
                            p.last_activity = self._clock()
                    self._cond.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no digest or dream is queued or running; True when settled in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._jobs or self._busy:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def curate_now(self, timeout: float | None = None) -> bool:
        """Queue a digest of every session with new exchanges and wait (``drain``) for them."""
        with self._cond:
            sessions = [sid for sid, p in self._pending.items() if p.exchanges]
        for sid in sessions:
            self._schedule("digest", sid)
        return self.drain(timeout)
