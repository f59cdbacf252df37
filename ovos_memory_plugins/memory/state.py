"""What the parts of :class:`~ovos_memory_plugins.base.BaseRetrievalMemory` share, declared
once: annotations only (no values, no behaviour), so each part type-checks alone and the class
that composes them (``base.py``) sets and implements everything declared here."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ovos_plugin_manager.templates.agents import AgentMessage

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.config import MemoryConfig
from ovos_memory_plugins.dates import Clock, Window
from ovos_memory_plugins.storage.records import Document, KeywordSettings, StoredDocument
from ovos_memory_plugins.storage.seam import Index, Storage
from ovos_memory_plugins.summary import RollingSummary


class MemoryState:
    """The attributes and methods one part of the memory uses and another part (or
    ``base.py``) provides. See :class:`~ovos_memory_plugins.base.BaseRetrievalMemory` for each."""

    archives_exchanges: ClassVar[bool]
    options_class: ClassVar[type[Any] | None]
    persistent: ClassVar[bool]
    default_min_relative_score: ClassVar[float | None]
    default_prompt_min_relative: ClassVar[float | None]
    database_file: ClassVar[str]
    kept_files: ClassVar[tuple[str, ...]]
    stores_in_storage: ClassVar[bool]
    shares_storage: ClassVar[bool]
    keyword_settings: KeywordSettings | None

    clock: Clock
    settings: MemoryConfig
    options: Any
    root: Path
    storage: Storage
    indexes: list[Index]
    _lock: threading.RLock
    _summary: RollingSummary | None
    _exchange_listeners: list[Callable[[StoredDocument], None]]
    _terms_cache: dict[str, frozenset[str]]

    if TYPE_CHECKING:  # provided by base.py (the hooks) or by another part

        @property
        def system_prompt(self) -> str: ...
        @property
        def tracks_sessions(self) -> bool: ...
        def _can(self, hook: str) -> bool: ...
        def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None: ...
        def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]: ...
        def _query_session(self, query: str, top_k: int, session_id: str) -> list[MemoryHit]: ...
        def _delete_documents(self, doc_ids: Sequence[str]) -> int: ...
        def _delete_all(self) -> int: ...
        def word_terms(self, text: str, *, query: bool = False) -> frozenset[str] | None: ...
        def hit_terms(self, hits: Sequence[MemoryHit]) -> list[frozenset[str]] | None: ...
        def excerpt_terms(self, query: str) -> frozenset[str]: ...

        # documents
        @staticmethod
        def exchange_id(session_id: str, user: str, assistant: str) -> str: ...
        def now(self) -> float: ...
        @property
        def memory_lang(self) -> str | None: ...
        @property
        def filters_time(self) -> bool: ...
        def _prepare_documents(self, docs: Sequence[Document]) -> list[Any]: ...
        def _put_prepared(self, docs: Sequence[Document], prepared: Sequence[Any]) -> list[StoredDocument]: ...
        def _tell_exchanges(self, stored: Sequence[StoredDocument]) -> None: ...
        def search(
            self, query: str, session_id: str | None = None, top_k: int | None = None, *, window: Window | None = None
        ) -> list[MemoryHit]: ...

        # conversation
        def get_history(self, session_id: str) -> list[AgentMessage]: ...
        def session_summary(self, session_id: str) -> str: ...
        def _window_and_summary(self, session_id: str) -> tuple[list[AgentMessage], str]: ...
