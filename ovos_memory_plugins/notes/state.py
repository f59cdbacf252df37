"""What the parts of :class:`~ovos_memory_plugins.notes.NotesMemory` share, declared once:
annotations only (no values, no behaviour), so each part type-checks alone and the class that
composes them (``notes/memory.py``) sets and implements everything declared here. The base's
attributes come from :class:`~ovos_memory_plugins.memory.state.MemoryState`."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ovos_memory_plugins.concurrency import DaemonPool
from ovos_memory_plugins.llm import ChatLLM
from ovos_memory_plugins.memory.state import MemoryState
from ovos_memory_plugins.notes.options import NotesOptions
from ovos_memory_plugins.notes.results import DigestResult, _Pending
from ovos_memory_plugins.protocols import Note, NoteChange
from ovos_memory_plugins.storage.notes_store import NotesStore, Rewrites
from ovos_memory_plugins.storage.records import Document, StoredDocument
from ovos_memory_plugins.storage.seam import Index


class NotesState(MemoryState):
    """The attributes and methods one part of the notes memory uses and another part (or
    ``notes/memory.py``, or the base) provides. See :class:`~ovos_memory_plugins.notes.NotesMemory`."""

    options: NotesOptions
    index: Index | None
    auto_curate: bool
    _clock: Callable[[], float]
    _mutex: threading.RLock
    _notes_store: NotesStore
    _rewrites: Rewrites
    _llm: ChatLLM | None
    _adopting: bool
    _counts: dict[str, int]
    # the digest's pending transcripts and the background worker
    _pending: dict[str, _Pending]
    _cond: threading.Condition
    _jobs: deque[tuple[str, str]]
    _busy: int
    _worker: DaemonPool
    _worker_started: bool
    _stopping: bool
    _next_dream_try: float

    if TYPE_CHECKING:  # provided by notes/memory.py, the base, or another part
        # notes/memory.py
        def _refresh(self) -> list[Note]: ...
        def _saved(self, notes: list[Note]) -> None: ...
        def _month(self) -> str: ...
        def _day(self) -> str: ...
        def select_notes(self, utterance: str, notes: list[Note] | None = None) -> list[Note]: ...
        def notes_chars(self) -> int: ...
        def list_notes(self, *, include_retired: bool = False, session_id: str | None = None) -> list[Note]: ...
        def forget(self, description: str, *, session_id: str | None = None) -> NoteChange: ...

        # the base
        def store(self, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None) -> str: ...
        def _write_documents(self, docs: Sequence[Document]) -> list[StoredDocument]: ...
        def update_history(self, new_messages: list[Any], session_id: str) -> None: ...

        # body
        def _body(self) -> str: ...
        def _snapshot(self, body: str, reason: str) -> None: ...

        # digest
        def digest(self, session_id: str = "default") -> DigestResult: ...

        # dreaming and the background worker
        def _ensure_worker(self) -> None: ...
        def _schedule(self, kind: str, arg: str) -> None: ...
        def _check_cadence(self) -> None: ...
        def _after_growth(self) -> None: ...
