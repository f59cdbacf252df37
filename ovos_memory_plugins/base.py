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
* ``_session_document_ids(session_id)``: a session's ids, when it stores documents the base
  never saw (the base's catalogue already knows every document that went through it);
* ``_backend_stats() -> dict``: figures for ``stats()``;
* ``_close()``: release files and connections.

Every document also goes into the memory's one documents table (its catalogue: id, session,
text, metadata; :mod:`ovos_memory_plugins.storage.seam`), in the same transaction as the
hook, so ``forget_session``/``forget_all`` can always enumerate what to delete. Memories made of
indexes over that table (:class:`ovos_memory_plugins.index.IndexedMemory`: the keyword and vector
backends) need no hooks at all.

On top the base builds ``store``/``search``, content-derived document ids, the persisted
short-term history, the five inject modes, locking (one instance serves many threads) and the
never-raise guarantee of the two methods ovos-persona calls every turn. A recorded turn's
messages and its exchange documents are written in one transaction (one durable commit); should
the documents fail, the messages are committed alone.

The messages of a turn come from the one pure renderer,
:func:`ovos_memory_plugins.prompt.render_messages` (the five inject modes); a backend
contributes ``context_blocks`` (system text every turn, e.g. notes) and
``session_summary`` (older turns of the session) and never renders itself.

A class is checked when it is defined (``__init_subclass__``) and refused, with a TypeError
naming it and the missing hook, when its hooks cannot forget: a backend that keeps sessions
itself (``_query_session``) and deletes (``_delete_documents``) must also list a session's
documents (``_session_document_ids``) and delete them all (``_delete_all``); ``_delete_all``
needs ``_delete_documents``. :func:`forget_problems` states the rule.
"""

from __future__ import annotations

import logging
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ovos_plugin_manager.templates.agents import AgentContextManager

from ovos_memory_plugins.common import Closing, MemoryHit, exchange_text
from ovos_memory_plugins.config import MemoryConfig, parse_config, resolve_root
from ovos_memory_plugins.dates import Clock, clock_of
from ovos_memory_plugins.memory.conversation import ASSISTANT, TRIM_BATCH, USER, ConversationMixin
from ovos_memory_plugins.memory.documents import PREVIOUS_EXCHANGE, DocumentsMixin, search_request
from ovos_memory_plugins.memory.opening import OpeningMixin
from ovos_memory_plugins.memory.recall import RecallMixin
from ovos_memory_plugins.shaping import excerpt_terms
from ovos_memory_plugins.storage.records import KeywordSettings, StoredDocument
from ovos_memory_plugins.storage.seam import Index, Storage
from ovos_memory_plugins.time_words import wait_warm, warm_parser

LOG = logging.getLogger(__name__)

__all__ = [
    "ASSISTANT",
    "PREVIOUS_EXCHANGE",
    "TRIM_BATCH",
    "USER",
    "BaseRetrievalMemory",
    "exchange_text",
    "forget_problems",
    "search_request",
]


class BaseRetrievalMemory(
    OpeningMixin,
    DocumentsMixin,
    ConversationMixin,
    RecallMixin,
    AgentContextManager,  # type: ignore[misc]  # OPM ships no type information
    Closing,
):
    """An OPM ``AgentContextManager`` with long-term recall over two storage hooks.

    Args:
        config: the plugin's block of the persona JSON (see ``docs/configuration.md``).
            Problems are logged, and each bad key falls back to its default: the constructor
            never raises because of config.
        clock: the memory's time source, a callable returning an aware ``datetime`` (default:
            the machine's local time): when exchanges are recorded and what the prompt's dates
            are relative to. A seam for tests and benchmarks (replay a conversation at its dates).
        storage: an open :class:`~ovos_memory_plugins.storage.seam.Storage` to keep everything in
            instead of opening the memory's own (only for classes that declare
            :attr:`shares_storage`): a composite builds its parts over one storage. The caller
            owns it (the memory does not close it) and passes it to every part, which then
            shares its documents, indexes and history.

    Attributes:
        settings: the parsed shared config (:class:`~ovos_memory_plugins.config.MemoryConfig`).
        options: the parsed backend-specific config (an instance of ``options_class``) or None.
        root: the folder this memory keeps its files in.
        config_problems: what was wrong with the config (empty when nothing was).
    """

    #: Whether each completed exchange becomes a searchable document. False for memories whose
    #: turns stay history only and whose documents come from elsewhere (sticky notes); the
    #: conformance kit then checks them with its context-only profile.
    archives_exchanges: ClassVar[bool] = True
    #: Whether :meth:`context_blocks` can add text of its own to the prompt's system part (notes,
    #: sticky notes, a composite of them): ``ovos-memory check`` warns when a chat engine would
    #: drop it. Declared, never guessed from which methods a class overrides.
    contributes_context: ClassVar[bool] = False
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
    #: The name of this memory's one database file under ``root``.
    database_file: ClassVar[str] = "history.db"
    #: Other files under the memory's folder that hold a memory of this class (its own files
    #: besides the database, and those of earlier releases it moves in): with the database
    #: file, what tells a read-only command that the folder holds this memory (:meth:`stored_files`).
    kept_files: ClassVar[tuple[str, ...]] = ()
    #: True when every copy of a document lives in the memory's storage (documents table and
    #: indexes), so the base deletes without a ``_delete_documents`` hook.
    stores_in_storage: ClassVar[bool] = False
    #: The settings of the memory's keyword index, where it has one (the keyword backend, a
    #: hybrid vector memory, the notes archive): its ``lang`` and ``extra_stopwords`` are the
    #: stop words a query is searched without, and :meth:`excerpt_terms` uses them too. None:
    #: no keyword index (English stop words).
    keyword_settings: KeywordSettings | None = None
    #: Whether the class can be built over a storage it is given (``storage=``) that other
    #: memories share: a composite of such members opens ONE storage and builds them as parts of
    #: one memory over it (one database, one history, each exchange archived once). Declared by
    #: the classes of this package that keep everything in their storage (keyword, vector,
    #: sticky notes); a third-party backend stays an opaque member unless it declares it.
    shares_storage: ClassVar[bool] = False
    #: Whether the memory reacts to the exchanges it records (the curated notes' digest marks
    #: each one pending and hears it): over a composite's one storage, such a part is the one
    #: that records every exchange, so its digest sees the whole conversation.
    hears_exchanges: ClassVar[bool] = False
    #: Whether a composite's one storage takes at most one part of this class (the curated
    #: notes keep ``MEMORY.md`` and their undo history in the composite's folder): with two
    #: members of it, a composite keeps whole members.
    single_part: ClassVar[bool] = False

    @classmethod
    def can_be_part(cls, config: dict[str, Any]) -> bool:
        """Whether a memory of this class built with the block ``config`` can be a part of a
        composite's one storage: it declares :attr:`shares_storage` (a subclass may also refuse
        a config: curated notes with ``"archive": null`` keep their conversation in RAM)."""
        return cls.shares_storage

    def adopt_folder(self, folder: Path) -> int:
        """Take in what an earlier release of this memory kept in files under ``folder``
        besides its database (a composite's part adopting its per-member folder, once: the
        files taken in are renamed ``*.moved``); return how many items came. None here (the
        database's rows are merged by the composite); curated notes move their ``MEMORY.md``,
        ``RETIRED.md``, ``notes.db``, undo history and old archive."""
        return 0

    def __init__(
        self, config: dict[str, Any] | None = None, *, clock: Clock | None = None, storage: Storage | None = None
    ) -> None:
        if storage is not None and not self.shares_storage:
            raise TypeError(f"{type(self).__name__} does not declare shares_storage; it cannot be given a storage=")
        super().__init__(config)
        #: The memory's time source (``clock=``): an aware ``datetime`` each call.
        self.clock: Clock = clock_of(clock)
        self._terms_cache: dict[str, frozenset[str]] = {}
        parsed = parse_config(self.config, self.options_class)
        self.config_problems = parsed.problems
        for problem in parsed.problems:
            LOG.error("%s: %s (using the default for that key)", type(self).__name__, problem)
        self.settings: MemoryConfig = parsed.memory
        self.options: Any = parsed.options
        self.root: Path = resolve_root(self.settings)
        self._lock = threading.RLock()
        self._closed = False
        self._exchange_listeners: list[Callable[[StoredDocument], None]] = []
        #: This memory's own indexes (IndexedMemory), which it closes; every index the base
        #: writes a document to and deletes it from is in ``storage.indexes`` (its own, and those
        #: of the other parts sharing its storage).
        self.indexes: list[Index] = []
        #: Whether the memory opened its storage (and closes it); False for a ``storage=`` given
        #: by its caller (a composite's shared storage), which the caller closes.
        self.owns_storage = storage is None
        self.storage: Storage = storage if storage is not None else self._open_storage()
        self._history = self.storage.history
        self._summary = self._open_summary()
        if self.settings.retrieval.time_words:  # the parser's one-time load, beside the host
            warm_parser()

    @property
    def system_prompt(self) -> str:
        """The persona's system prompt (config key ``system_prompt``)."""
        return self.settings.system_prompt

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse, when the class is defined, a hook combination that cannot forget.

        Raises TypeError naming the class and the missing hook (see :func:`forget_problems`).
        A class that writes its own ``context_blocks`` without saying whether it contributes
        text is declared a contributor here, once (``contributes_context``), so a third-party
        backend written before the declaration existed keeps its notes in the prompt.
        """
        super().__init_subclass__(**kwargs)
        if "context_blocks" in cls.__dict__ and "contributes_context" not in cls.__dict__:
            cls.contributes_context = True
        problems = forget_problems(cls)
        if problems:
            raise TypeError(f"{cls.__module__}.{cls.__qualname__}: " + "; ".join(problems))

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

    @property
    def tracks_sessions(self) -> bool:
        """Whether the backend filters by session (and keeps metadata) itself."""
        return type(self)._query_session is not BaseRetrievalMemory._query_session

    def _can(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(BaseRetrievalMemory, hook)

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

    def excerpt_terms(self, query: str) -> frozenset[str]:
        """The query's words a memory too long for the prompt is shortened around
        (:func:`~ovos_memory_plugins.shaping.excerpt`): its terms without the stop words of
        :attr:`keyword_settings` (the index's ``lang`` and ``extra_stopwords``), English ones
        where the memory has no keyword index."""
        cache = self._terms_cache  # texts recalled again (newer_first asks for each memory's) once
        found = cache.get(query)
        if found is None:
            s = self.keyword_settings
            found = excerpt_terms(query) if s is None else excerpt_terms(query, s.lang, s.extra_stopwords)
            if len(cache) >= 4096:
                cache.clear()
            cache[query] = found
        return found

    def stats(self) -> dict[str, Any]:
        """Figures about this memory: documents, history, the storage (``storage.in_ram`` and
        ``storage.problem`` say when it fell back to RAM), the rolling summary when it is on
        (``summary.sessions``; ``summary.leftover``: why an earlier release's summaries table was
        left in the file, None when nothing was) and the backend's own figures."""
        with self._lock:
            db = self.storage.db
            out: dict[str, Any] = {
                "backend": type(self).__name__,
                "root": str(self.root),
                "history_messages": self.storage.history.message_count(),
                "history_sessions": len(self.storage.history.sessions()),
                "documents": self.storage.documents.count(),
                "storage": {
                    "engine": db.engine,
                    "location": db.location,
                    "in_ram": db.in_ram,
                    "problem": db.fallback_reason,
                    "bytes": db.size_bytes(),
                },
            }
            if self._summary is not None:  # an earlier release's table left in the file: say so
                store = self._summary.store
                out["summary"] = {"sessions": store.count(), "leftover": store.leftover}
            for index in self.indexes:
                out.update(index.stats())
            out.update(self._backend_stats())
        return out

    # -- life cycle --------------------------------------------------------------------------

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait, at most ``timeout`` seconds (None: as long as it takes), for the start-up work a
        memory does beside its host (with ``retrieval.time_words`` on, the time-word parser's
        load, about a quarter of a second of one core); whether it has ended. Optional: a turn
        that comes first waits for what it needs. A benchmark calls it, so the one-time load is
        timed as start-up, not spread over the first writes."""
        return wait_warm(timeout)

    def close(self) -> None:
        """Release files and connections. Optional: nothing depends on it for durability."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # every step runs whatever the one before did (a full disk fails the keyword
            # index's last flush): a failure is logged, never left holding a file open
            steps: list[Callable[[], None]] = [index.close for index in self.indexes]
            steps.append(self._close)
            if self._summary is not None:
                steps.append(self._summary.close)
            if self.owns_storage:
                steps.append(self.storage.close)
            for step in steps:
                try:
                    step()
                except Exception:
                    LOG.exception("%s: a step of close() failed; the rest is closed", type(self).__name__)


def _overrides(cls: type[Any], name: str) -> bool:
    """Whether ``cls`` (or a base between it and BaseRetrievalMemory) defines ``name`` itself."""
    return getattr(cls, name, None) is not getattr(BaseRetrievalMemory, name, None)


def forget_problems(cls: type[Any]) -> list[str]:
    """Why a backend class could not forget what it stores (empty: it can, or it says it cannot).

    The rule: every document a backend keeps must go on every forget path.

    * A backend that keeps sessions itself (``_query_session``) and deletes
      (``_delete_documents``) must enumerate its own documents: ``_session_document_ids`` (or
      its own ``forget_session``) and ``_delete_all`` (or its own ``forget_all``). Without them
      ``forget_session()``/``forget_all()`` only reach what the base's catalogue saw, and report
      0 while the backend's documents stay findable.
    * A backend that can delete everything (``_delete_all``) must also delete by id
      (``_delete_documents``): else ``forget_all()`` works while ``delete()`` and
      ``forget_session()`` cannot forget anything.

    A backend with no delete hook at all is accepted: ``delete`` and ``forget_*`` raise
    :class:`~ovos_memory_plugins.errors.BackendError` ("cannot delete"), loudly.
    """
    problems = []
    if _overrides(cls, "_query_session") and _overrides(cls, "_delete_documents"):
        if not (_overrides(cls, "_session_document_ids") or _overrides(cls, "forget_session")):
            problems.append(
                "it keeps sessions itself (_query_session) and deletes (_delete_documents) but does not list a "
                "session's documents: forget_session() would miss them and report 0 while they stay findable; "
                "implement _session_document_ids(session_id) to return the ids of the session's documents"
            )
        if not (_overrides(cls, "_delete_all") or _overrides(cls, "forget_all")):
            problems.append(
                "it keeps sessions itself (_query_session) and deletes (_delete_documents) but cannot delete "
                "everything: forget_all() would miss its documents and report 0 while they stay findable; "
                "implement _delete_all() to delete every document and return how many there were"
            )
    if (
        _overrides(cls, "_delete_all")
        and not _overrides(cls, "_delete_documents")
        and not getattr(cls, "stores_in_storage", False)
    ):
        problems.append(
            "it implements _delete_all but not _delete_documents: forget_all() would work while delete() and "
            "forget_session() could forget nothing; implement _delete_documents(doc_ids) too"
        )
    return problems
