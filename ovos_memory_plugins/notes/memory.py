"""The curated-notes memory itself: :class:`NotesMemory` opens its notes store, archive and
model, keeps the notes cache, selects and renders the notes for the prompt, offers the verbs
over the :class:`~ovos_memory_plugins.notebook.Notebook`, forgets (every tier), and reports and
closes. It is composed of the parts in this package: ``body`` (the notes as text, the rewrite
history), ``digest`` and ``dreaming`` (with the background worker), over ``state``.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.concurrency import DaemonPool
from ovos_memory_plugins.config import ParsedConfig
from ovos_memory_plugins.dates import Clock, month_label
from ovos_memory_plugins.errors import CorruptFileError, StorageError
from ovos_memory_plugins.index import IndexedMemory
from ovos_memory_plugins.llm import ChatLLM, close_llm, llm_stats, make_llm
from ovos_memory_plugins.notebook import Notebook, select_for_prompt
from ovos_memory_plugins.notes.body import BodyMixin
from ovos_memory_plugins.notes.digest import DigestMixin
from ovos_memory_plugins.notes.dreaming import DreamingMixin
from ovos_memory_plugins.notes.options import CLOSE_WAIT_S, NotesOptions
from ovos_memory_plugins.notes.results import _Pending, normalize_fact
from ovos_memory_plugins.protocols import Note, NoteChange, words_key
from ovos_memory_plugins.ranking import BM25Ranker
from ovos_memory_plugins.storage.notes_store import (
    DatabaseNotesStore,
    FileNotesStore,
    NotesShelf,
    NotesStore,
    Rewrites,
    adopt_notes_folder,
    atomic_write,
    prompt_line,
    render_notes,
)
from ovos_memory_plugins.storage.records import ForgetReport
from ovos_memory_plugins.storage.seam import Index, Storage
from ovos_memory_plugins.text import tokenize

LOG = logging.getLogger("ovos_memory_plugins.notes")  # the name its records always had


def _as_seconds(clock: Callable[[], float] | Clock) -> Callable[[], float]:
    """``clock`` as seconds since the epoch (it may return a float or an aware ``datetime``)."""

    def now() -> float:
        value: Any = clock()
        return value.timestamp() if isinstance(value, datetime) else float(value)

    return now


class NotesMemory(BodyMixin, DigestMixin, DreamingMixin, IndexedMemory):
    """Durable notes in every prompt, curated by code, by a digest and by dreaming.

    Args:
        config: the plugin's block of the persona JSON (shared keys plus :class:`NotesOptions`).
        llm: a :class:`~ovos_memory_plugins.llm.ChatLLM` to use instead of the ``llm`` key.
        clock: wall-clock time source (dates on notes, idle detection, the prompt's dates); a
            test seam: seconds since the epoch, or an aware ``datetime`` like every memory's
            ``clock`` (:data:`~ovos_memory_plugins.dates.Clock`).
        storage: a composite's one storage to be a part of (see
            :class:`~ovos_memory_plugins.base.BaseRetrievalMemory`): the archive is its keyword
            index, the turns its history, and the notes are its table (``"store": "sqlite"``,
            PostgreSQL) or ``MEMORY.md`` in its :attr:`~ovos_memory_plugins.storage.seam.Storage.folder`
            (the composite's root, beside ``composite.db``: still the operator's file to edit),
            where the undo history goes too (``root`` is that folder). A composite passes it
            unless the block sets ``"archive": null``.

    It is a :class:`~ovos_memory_plugins.protocols.NotesKeeper`: every verb returns a
    :class:`~ovos_memory_plugins.protocols.NoteChange` and listings return
    :class:`~ovos_memory_plugins.protocols.Note` objects (ids ``n-…``, derived from the words).
    """

    options_class: ClassVar[type[Any] | None] = NotesOptions
    persistent: ClassVar[bool] = True
    #: ``MEMORY.md`` and ``RETIRED.md`` (the file store), ``notes.db`` (an earlier release's).
    kept_files: ClassVar[tuple[str, ...]] = ("MEMORY.md", "RETIRED.md", "notes.db")
    contributes_context: ClassVar[bool] = True
    #: A part of a composite's one storage (``storage=``): its archive indexes the composite's
    #: documents, its notes are the storage's table or ``MEMORY.md`` in the storage's folder
    #: (:attr:`~ovos_memory_plugins.storage.seam.Storage.folder`), and it records the exchanges
    #: (:attr:`hears_exchanges`). Not with ``"archive": null`` (:meth:`can_be_part`).
    shares_storage: ClassVar[bool] = True
    #: The digest marks each exchange it records pending and hears it: a composite's recorder.
    hears_exchanges: ClassVar[bool] = True
    #: One ``MEMORY.md`` and one undo history per folder: one notes part per storage.
    single_part: ClassVar[bool] = True
    options: NotesOptions

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        *,
        llm: ChatLLM | None = None,
        clock: Callable[[], float] | Clock = time.time,
        storage: Storage | None = None,
    ) -> None:
        seconds = _as_seconds(clock)
        super().__init__(config, clock=lambda: datetime.fromtimestamp(seconds()).astimezone(), storage=storage)
        if storage is not None and storage.folder is not None:
            self.root = storage.folder  # a part keeps its files beside the one storage
        self._clock = seconds
        self._mutex = threading.RLock()
        self._cache_lock = threading.Lock()
        self._cache: list[Note] = []
        self._cache_version: Any = object()
        self._ranker: BM25Ranker | None = None
        self._chars: int | None = None
        self._token_cache: dict[str, list[str]] = {}
        self._retired_cache: tuple[Any, list[Note], BM25Ranker | None] | None = None
        self._reported_version: Any = None
        #: Why the notes are kept in RAM (the store could not be opened), else None; reported by
        #: ``stats()`` and an ERROR every turn, never silent.
        self.store_problem: str | None = None
        self._notes_store: NotesStore = self._open_store()
        #: The verbs (remember, forget, update, retire, restore), shared with sticky notes.
        self.notebook: Notebook = self._open_notebook()
        self._rewrites: Rewrites = self.storage.rewrites(self.root)
        self._llm: ChatLLM | None = llm if llm is not None else make_llm(self.options.llm)
        curate = self.options.auto_curate
        self.auto_curate = (self._llm is not None) if curate is None else bool(curate and self._llm is not None)
        if curate and self._llm is None:
            LOG.error("NotesMemory: auto_curate is on but no usable 'llm' is configured; no digest will run")
        self._pending: dict[str, _Pending] = {}
        self._cond = threading.Condition()
        self._jobs: deque[tuple[str, str]] = deque()
        self._busy = 0
        self._worker = DaemonPool("ovos-memory-notes", 1)  # the one background thread, on demand
        self._worker_started = False
        self._stopping = False
        self._next_dream_try = 0.0
        self._counts = {"digests": 0, "facts_added": 0, "facts_retired": 0, "episodes": 0, "dreams": 0}
        self._refresh()
        self._adopting = False
        self.add_exchange_listener(self._exchange_recorded)  # the digest reacts to recorded exchanges
        self._adopt_old_archive()
        self._recover_pending()

    # -- set-up ------------------------------------------------------------------------------

    def _database_path(self) -> tuple[Path, Path | None] | None:
        """The memory's own database (documents, the archive's keyword index, history), in RAM
        when ``archive`` is null (privacy: nothing of the conversation on disk)."""
        if self.options.archive is None:
            return None
        return super()._database_path()

    def _open_indexes(self) -> Index | None:
        """The archive: a keyword index over the memory's documents table (None without one)."""
        spec = self.options.archive
        if spec is None:
            return None
        from ovos_memory_plugins.config import parse_config
        from ovos_memory_plugins.lexical import LexicalMemory, LexicalOptions, keyword_settings

        allowed = {f.name for f in fields(LexicalOptions)} - {"db_path"}
        raw = {k: v for k, v in dict(spec.get("config") or {}).items() if k in allowed}
        parsed = parse_config(raw, LexicalOptions)
        for problem in parsed.problems:
            LOG.error("NotesMemory: archive config: %s (using the default for that key)", problem)
        self.keyword_settings = keyword_settings(parsed.options, LexicalMemory.use_fts5)
        return self.storage.keyword_index(self.keyword_settings)

    def _open_store(self) -> NotesStore:
        """The configured store, from the memory's storage (``Storage.notes_store``: it moves in
        the notes of the other store type and of an earlier release's ``notes.db``, and keeps
        them in the database whatever ``store`` says on PostgreSQL); never raises (RAM, and
        says so)."""
        # the memory's file, even with ``archive`` null (RAM); a part has only the storage given
        where = super()._database_path() if self.owns_storage else None
        try:
            return self.storage.notes_store(
                self.options.store, self.root, database_file=where[0] if where is not None else None
            )
        except Exception as exc:
            self.store_problem = f"cannot open the notes store in {self.root} ({exc}); notes are kept in RAM only"
            LOG.error("NotesMemory: %s", self.store_problem)
            return DatabaseNotesStore()

    @classmethod
    def can_be_part(cls, config: dict[str, Any]) -> bool:
        """A part of a composite's one storage unless the block sets ``"archive": null`` (then
        nothing of the conversation is kept on disk: it stays a whole member, in RAM)."""
        return super().can_be_part(config) and not ("archive" in config and config["archive"] is None)

    def adopt_folder(self, folder: Path) -> int:
        """As a composite's part: take in the folder this member kept on its own in earlier
        releases (:func:`~ovos_memory_plugins.storage.notes_adopt.adopt_notes_folder`: its
        ``MEMORY.md``, ``RETIRED.md``, ``notes.db`` and undo history, renamed ``*.moved``; the
        rows the composite merged from its database into a ``MEMORY.md`` store), its old
        ``archive/`` folder, and the exchanges that still wait for the digest. Returns how many
        notes came; never raises (logged, the files left as they were)."""
        try:
            with self._mutex:
                moved = adopt_notes_folder(self.storage, self._notes_store, self._rewrites, folder)
            if moved:
                self._refresh()
        except Exception as exc:
            LOG.error("NotesMemory: cannot take in the notes of %s (%s); they are left as they were", folder, exc)
            moved = 0
        self._adopt_old_archive(folder)
        self._recover_pending()
        return moved

    def _adopt_old_archive(self, folder: Path | None = None) -> None:
        """Copy an archive an earlier release kept in ``<root>/archive/`` (a separate keyword
        plugin; ``folder``: under that folder instead) into this memory's own database, ids
        kept, once; the folder is then renamed ``archive.moved``. Never raises (a failure is
        logged and the folder left as it was)."""
        old = (self.root if folder is None else folder) / "archive"
        if self.options.archive is None or not (old / "lexical.db").exists():
            return
        try:
            from ovos_memory_plugins.lexical import LexicalMemory

            with LexicalMemory({"root": str(old)}) as previous:
                docs = [(d["id"], d["text"], d["session_id"], d["metadata"]) for d in previous.iter_documents()]
            self._adopting = True  # old exchanges are not digested again
            try:
                n = self.put_documents(docs) if docs else 0
            finally:
                self._adopting = False
            old.rename(old.with_name("archive.moved"))
            LOG.info("NotesMemory: moved %d archived documents from %s into %s", n, old, self.storage.db.location)
        except Exception as exc:
            LOG.error("NotesMemory: cannot move the archive of %s (%s); it is left as it was", old, exc)

    @classmethod
    def validate_options(cls, parsed: ParsedConfig) -> list[str]:
        """Extra checks for ``validate_config``: the archive's ``config`` keys."""
        problems: list[str] = []
        archive = parsed.options.archive if parsed.options is not None else None
        if archive is not None:
            from ovos_memory_plugins.config import parse_config
            from ovos_memory_plugins.lexical import LexicalOptions

            allowed = {f.name for f in fields(LexicalOptions)} - {"db_path"}
            raw = dict(archive.get("config") or {})
            for key in sorted(set(raw) - allowed, key=str):
                problems.append(f"unknown key 'archive.config.{key}'; accepted keys: {', '.join(sorted(allowed))}")
            parsed_archive = parse_config({k: v for k, v in raw.items() if k in allowed}, LexicalOptions)
            problems.extend(f"archive.config: {p}" for p in parsed_archive.problems)
        return problems

    # -- the notes cache -----------------------------------------------------------------------

    def _refresh(self) -> list[Note]:
        """The active notes, reloaded when the store changed (a hand edit, another process)."""
        try:
            version = self._notes_store.version()
        except Exception as exc:
            LOG.error("NotesMemory: cannot check the notes store (%s)", exc)
            return self._cache
        with self._cache_lock:
            if version == self._cache_version:
                return self._cache
        try:
            notes = self._notes_store.load()
        except (CorruptFileError, StorageError) as exc:
            if version != self._reported_version:
                self._reported_version = version
                LOG.error("NotesMemory: %s; using the notes last read, and not writing until it is fixed", exc)
            return self._cache
        with self._cache_lock:
            self._cache, self._cache_version, self._ranker, self._chars = notes, version, None, None
        return notes

    def _saved(self, notes: list[Note]) -> None:
        with self._cache_lock:
            self._cache, self._cache_version = list(notes), self._notes_store.version()
            self._ranker, self._chars = None, None

    def _month(self) -> str:
        return time.strftime("%Y-%m", time.localtime(self._clock()))

    def _day(self) -> str:
        return time.strftime("%Y-%m-%d", time.localtime(self._clock()))

    # -- the prompt ----------------------------------------------------------------------------

    def _ranked(self, notes: list[Note], query: str, top_k: int) -> list[tuple[int, float]]:
        with self._cache_lock:
            ranker = self._ranker if notes is self._cache else None
        if ranker is None:
            ranker = BM25Ranker([n.text for n in notes], tokenized=[self._tokens_of(n.text) for n in notes])
            with self._cache_lock:
                if notes is self._cache:
                    self._ranker = ranker
        return ranker.rank(query, top_k)

    def _tokens_of(self, text: str) -> list[str]:
        """A note's index terms, cached by text so a changed list re-tokenizes only new notes."""
        terms = self._token_cache.get(text)
        if terms is None:
            if len(self._token_cache) > 4 * max(len(self._cache), 1000):
                self._token_cache.clear()
            terms = self._token_cache[text] = tokenize(text)
        return terms

    def select_notes(self, utterance: str, notes: list[Note] | None = None) -> list[Note]:
        """The notes that travel with ``utterance`` (:func:`~ovos_memory_plugins.notebook.select_for_prompt`):
        all of them up to ``max_notes_in_context``, else the relevant ones and the newest, cut to
        ``max_context_chars`` characters, in list order."""
        o = self.options
        notes = self._refresh() if notes is None else notes
        return select_for_prompt(
            notes,
            utterance if utterance.strip() else "",
            max_notes=o.max_notes_in_context,
            newest=o.newest_in_context,
            max_chars=o.max_context_chars,
            line=self._dated_line,
            rank=lambda query, k: [i for i, _ in self._ranked(notes, query, k)],
        )

    def context_blocks(self, utterance: str, session_id: str) -> list[str]:
        """The notes block for this turn (none when there are no notes)."""
        if self.store_problem:
            LOG.error("NotesMemory: %s", self.store_problem)
        notes = self._refresh()
        if not notes:
            return []
        chosen = self.select_notes(utterance, notes)
        total = self._total_chars(notes)
        shown = f"; showing {len(chosen)} of {len(notes)} notes" if len(chosen) < len(notes) else ""
        meter = f"[notes: {total:,} of {self.options.max_context_chars:,} characters used{shown}]"
        lines = "\n".join(self._dated_line(n) for n in chosen)
        header = self.options.header
        return [f"{header}\n{meter}\n{lines}" if header else f"{meter}\n{lines}"]

    def _dated_line(self, note: Note) -> str:
        """A note as the prompt shows it: ``- [2026-09, 3 months ago] fact``, its month dated like
        every recalled memory (``context.dates``, the memory's language); ``- [2026-09] fact``
        (its ``MEMORY.md`` line) with ``absolute`` or ``off``."""
        mode = self.settings.context.dates
        if not note.date or mode in ("off", "absolute"):
            return prompt_line(note)
        return f"- [{month_label(note.date, self.clock(), self.memory_lang, mode)}] {note.text}"

    @property
    def storage_problem(self) -> str | None:
        """Why nothing this memory learns outlives the process: its database, or the notes
        store, fell back to RAM (see the base class); None when both keep what they get."""
        own = f"nothing is being kept: {self.store_problem}" if self.store_problem else None
        return super().storage_problem or own

    def _total_chars(self, notes: list[Note]) -> int:
        with self._cache_lock:
            if notes is self._cache and self._chars is not None:
                return self._chars
        total = sum(len(prompt_line(n)) + 1 for n in notes)
        with self._cache_lock:
            if notes is self._cache:
                self._chars = total
        return total

    def notes_chars(self) -> int:
        """Characters the whole notes list takes in the prompt."""
        return self._total_chars(self._refresh())

    # -- verbs (the NotesKeeper protocol) -------------------------------------------------------

    def _open_notebook(self) -> Notebook:
        """The verbs over this memory's notes store (:class:`~ovos_memory_plugins.notebook.Notebook`)."""
        return Notebook(
            NotesShelf(self._notes_store, month=self._month, cached=self._refresh),
            self.options,
            lock=self._mutex,
            today=self._day,
            tidy=normalize_fact,
            after_forget=self._forgotten,
            changed=self._notes_changed,
            name="NotesMemory",
        )

    def _notes_changed(self, grew: bool) -> None:
        """After a verb: the cached list is read again; a list that grew may be dreamed over."""
        with self._cache_lock:
            self._cache_version = object()
        if grew:
            self._after_growth()

    def _forgotten(self, gone: list[Note]) -> None:
        """After a forget: the journal's copies and the backups' and undo history's lines go too."""
        self._notes_store.checkpoint()
        self._scrub({words_key(n.text) for n in gone})

    def list_notes(self, *, include_retired: bool = False, session_id: str | None = None) -> list[Note]:
        """The active notes in order, then (``include_retired``) the retired ones; only those
        learned in ``session_id`` when it is given."""
        return self.notebook.list_notes(include_retired=include_retired, session_id=session_id)

    def remember(self, fact: str, *, session_id: str = "default", date: str | None = None) -> NoteChange:
        """Add a fact (dated this month unless it starts with ``[YYYY-MM]`` or ``date`` is given),
        learned in ``session_id`` (``forget_session`` removes it).

        A fact already noted (same words, ignoring case and spacing) is not added twice
        (``duplicate``). Non-text, empty or over-long (``max_note_chars``) input changes nothing
        (``refused``). Raises CorruptFileError when ``MEMORY.md`` cannot be parsed (it is never
        overwritten).
        """
        return self.notebook.remember(fact, session_id=session_id, date=date)

    def forget(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """Delete the note ``description`` names (its exact id, or words naming it; retired
        notes included), for real: every copy with its words, active or retired, and its lines
        in ``MEMORY.md.bak`` and the undo history. Close calls change nothing (``ambiguous``).
        With ``session_id`` only the notes learned in that session are candidates, and only
        its copies go."""
        return self.notebook.forget(description, session_id=session_id)

    def add_forget_listener(self, listener: Callable[[Note], None]) -> None:
        """Call ``listener(note)`` after every note this memory forgets, whatever asked (a verb,
        a delete by id, the digest's ``forget`` list): a composite removes the other members'
        copies of the fact. A listener that raises is logged; the forget stands."""
        self.notebook.add_forget_listener(listener)

    def update(self, description: str, new_fact: str, *, session_id: str | None = None) -> NoteChange:
        """Replace the active note ``description`` names with ``new_fact`` (dated this month).

        The old note is retired (kept with its dates, out of the prompt), the new one takes its
        place. Ambiguous descriptions change nothing and return the candidates. With
        ``session_id`` only the notes learned in that session are candidates.
        """
        return self.notebook.update(description, new_fact, session_id=session_id)

    def retire(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """Mark the active note ``description`` names as no longer true (kept in the retired
        notes, out of the prompt; recall can still show it, marked). With ``session_id`` only
        the notes learned in that session are candidates."""
        return self.notebook.retire(description, session_id=session_id)

    def restore(self, description: str, *, session_id: str | None = None) -> NoteChange:
        """Make the retired note ``description`` names active again (with ``session_id``: only
        one learned in that session)."""
        return self.notebook.restore(description, session_id=session_id)

    def notes(self) -> list[Note]:
        """The active notes, in order (``list_notes()``)."""
        return list(self._refresh())

    def retired_notes(self) -> list[Note]:
        """Notes that stopped being true, with the day they were retired."""
        return self._notes_store.retired()

    def search_notes(self, query: str, top_k: int = 5, *, include_retired: bool = True) -> list[Note]:
        """Notes (and, by default, retired notes) matching ``query``, best first."""
        return self._notes_store.search(tokenize(query), top_k, include_retired=include_retired)

    def file_notes(self) -> list[Note]:
        """The notes kept in files under ``root`` (``"store": "file"``: ``MEMORY.md`` in order,
        then ``RETIRED.md``); empty when they live in the database. ``ovos-memory migrate``
        carries them (:class:`~ovos_memory_plugins.storage.migrate.NotesInFiles`)."""
        if not isinstance(self._notes_store, FileNotesStore):
            return []
        with self._mutex, self._notes_store.transaction():
            return self._notes_store.load() + self._notes_store.retired()

    # -- the archive and forgetting --------------------------------------------------------------

    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        return self._query_session(query, top_k, None)

    def _query_session(self, query: str, top_k: int, session_id: str | None) -> list[MemoryHit]:
        hits = self._search(query, top_k, session_id)
        if self.options.recall_retired:
            floor = min((h.score for h in hits), default=1.0)
            for note in self._retired_matches(query, 2):
                since = f" since {note.retired_on}" if note.retired_on else ""
                content = f"(no longer true{since}) {prompt_line(note)[2:]}"
                hits.append(MemoryHit(content=content, source="retired-note", score=floor, metadata={"kind": "note"}))
        return hits

    def _retired_matches(self, query: str, top_k: int) -> list[Note]:
        """Retired notes matching ``query`` (BM25 over a cache renewed when the store changes)."""
        version = self._notes_store.version()
        cached = self._retired_cache
        if cached is None or cached[0] != version:
            retired = self._notes_store.retired()
            cached = (version, retired, BM25Ranker([n.text for n in retired]) if retired else None)
            self._retired_cache = cached
        _, retired, ranker = cached
        if ranker is None:
            return []
        return [retired[i] for i, _ in ranker.rank(query, top_k)]

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete by exact id: archived documents (every tier) and notes (an ``n-…`` id of an
        active or retired note, as ``forget`` does); return how many went (a ``ForgetReport``
        whose ``tiers`` include ``notes``)."""
        ids = list(dict.fromkeys(doc_ids))
        known = {n.id for n in self.list_notes(include_retired=True)}
        notes = sum(1 for i in ids if i in known and self.forget(i))
        rest = [i for i in ids if i not in known]
        report = super().delete(rest) if rest else ForgetReport(0, {})
        with self._cond:  # a deleted exchange is not digested either
            for p in self._pending.values():
                for doc_id in rest:
                    p.exchanges.pop(doc_id, None)
        return ForgetReport(int(report) + notes, {**getattr(report, "tiers", {}), "notes": notes})

    def forget_session(self, session_id: str) -> int:
        """Delete a session's archived documents, pending transcript, history and the notes
        learned in it (active and retired, and their lines in the backups and undo history);
        return how many documents and notes went."""
        with self._cond:
            self._pending.pop(session_id, None)
        with self._mutex, self._notes_store.transaction():
            gone = self._notes_store.remove(lambda n: n.session_id == session_id)
            self._saved(self._notes_store.load())
        self._notes_store.checkpoint()
        self._scrub({words_key(n.text) for n in gone})
        report = super().forget_session(session_id)
        notes = len({g.id for g in gone})
        return ForgetReport(int(report) + notes, {**getattr(report, "tiers", {}), "notes": notes})

    def forget_all(self) -> int:
        """Delete everything: every note (active and retired), the backups and undo history, the
        files of a switched-away store, every archived document, all history and the pending
        transcripts; return how many documents and notes went."""
        with self._cond:
            self._pending.clear()
            self._jobs.clear()
        with self._mutex, self._notes_store.transaction():
            gone = self._notes_store.remove(lambda n: True)
            if isinstance(self._notes_store, FileNotesStore):
                atomic_write(self._notes_store.path, render_notes([]))
            self._saved([])
            self._rewrites.clear()
            for path in self.root.glob("*.moved"):  # the files of a switched-away store
                if path.is_file():
                    with contextlib.suppress(OSError):
                        path.unlink()
        self._notes_store.checkpoint()
        moved = self.root / "archive.moved"
        if moved.is_dir():  # an earlier release's archive, copied in already
            shutil.rmtree(moved, ignore_errors=True)
        report = super().forget_all()
        notes = len({g.id for g in gone})
        return ForgetReport(int(report) + notes, {**getattr(report, "tiers", {}), "notes": notes})

    # -- figures and life cycle ----------------------------------------------------------------------

    def _backend_stats(self) -> dict[str, Any]:
        notes = self._refresh()
        out: dict[str, Any] = {
            "store": type(self._notes_store).__name__,
            "notes": len(notes),
            "retired_notes": len(self._notes_store.retired()),
            "notes_chars": self._total_chars(notes),
            "max_context_chars": self.options.max_context_chars,
            "auto_curate": self.auto_curate,
            "pending_exchanges": self.pending_exchanges(),
            **({"notes_store_problem": self.store_problem} if self.store_problem else {}),
            **self._counts,
        }
        if self._llm is not None:
            out["llm"] = llm_stats(self._llm)
        if self.index is not None:
            out["archive"] = super()._backend_stats()
        return out

    def _close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        # a digest or dream waiting on the model is left behind after a second (close never hangs)
        if not self._worker.shutdown(cancel_pending=True, join_timeout=CLOSE_WAIT_S):
            LOG.warning("NotesMemory: a background digest or dream is still running; closing anyway")
        close_llm(self._llm)
        self._notes_store.close()
