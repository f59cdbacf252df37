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

import contextlib
import hashlib
import logging
import threading
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

from ovos_plugin_manager.templates.agents import AgentContextManager, AgentMessage, MessageRole

from ovos_memory_plugins import prompt
from ovos_memory_plugins.admission import is_low_signal
from ovos_memory_plugins.common import Closing, MemoryHit, dedup_hits, exchange_parts, exchange_text
from ovos_memory_plugins.config import MemoryConfig, parse_config, resolve_file, resolve_root
from ovos_memory_plugins.dates import (
    CONVERSATION_GAP_S,
    Clock,
    Window,
    clock_of,
    memory_time,
    parser_available,
    time_window,
    warm_parser,
)
from ovos_memory_plugins.errors import BackendError, StorageError
from ovos_memory_plugins.select import (
    alternatives,
    alternatives_first,
    clip_context,
    excerpt_terms,
    needs_context,
    prompt_memories,
    recall_query,
    select_hits,
    shown_in_window,
    window_first,
    window_places,
    without_order_words,
)
from ovos_memory_plugins.storage.records import (
    Compacted,
    Document,
    ForgetReport,
    KeywordSettings,
    StoredDocument,
    StoredMessage,
    check_id,
)
from ovos_memory_plugins.storage.registry import open_storage
from ovos_memory_plugins.storage.seam import Database, Index, Storage, compact_database
from ovos_memory_plugins.storage.summary_store import open_summary_store
from ovos_memory_plugins.summary import RollingSummary
from ovos_memory_plugins.text import clean_text, clip_query, query_terms

LOG = logging.getLogger(__name__)

__all__ = ["PREVIOUS_EXCHANGE", "BaseRetrievalMemory", "exchange_text", "forget_problems", "search_request"]

USER = MessageRole.USER.value
ASSISTANT = MessageRole.ASSISTANT.value
#: The metadata key of an archived exchange naming the exchange recorded before it in its session.
PREVIOUS_EXCHANGE = "previous_exchange"
#: With the lazy summary, the history is trimmed once a session holds this many messages more
#: than it keeps (a trim and a fold every few exchanges, not every one).
TRIM_BATCH = 8


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
    return needs_context(len(set(query_terms(user, None, unigrams=True))), user, previous)


def _index_tiers(index: Index, removed: int) -> dict[str, int]:
    """What an index's ``remove``/``remove_all`` removed, per tier (a ForgetReport names them)."""
    if isinstance(removed, ForgetReport) and removed.tiers:
        return removed.tiers
    return {f"{index.name}_rows": int(removed)}


class BaseRetrievalMemory(AgentContextManager, Closing):  # type: ignore[misc]  # OPM ships no type information
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

    # -- storage locations -------------------------------------------------------------------

    @classmethod
    def configured_db_path(cls, options: Any) -> str | None:
        """The backend's own ``db_path`` option (``options``: its parsed ``options_class``), for
        backends that have one; None (the default): ``<root>/<database_file>``."""
        return None

    @classmethod
    def database_path(cls, memory: MemoryConfig, options: Any) -> tuple[Path, Path | None] | None:
        """Where a memory of this class with these settings keeps its SQLite file, known before it
        is built (a composite refuses two members on one file), and the shared file of earlier
        releases it may adopt (:func:`~ovos_memory_plugins.config.resolve_file`); None: RAM."""
        if cls.persistent or memory.root:
            return resolve_file(memory, cls.configured_db_path(options), cls.database_file)
        return None

    @classmethod
    def stored_files(cls, memory: MemoryConfig, options: Any) -> list[Path]:
        """The files any of which holds a memory of this class with these settings, known
        before it is built: its database file (and the shared file of earlier releases it
        would copy), then :attr:`kept_files` under its folder. Empty when it keeps nothing in
        files (RAM, or a database server). A read-only command builds nothing when none exists."""
        if memory.database:
            return []
        where = cls.database_path(memory, options)
        if where is None:
            return []
        files = [where[0], *([where[1]] if where[1] is not None else [])]
        root = resolve_root(memory)
        return files + [root / name for name in cls.kept_files]

    def _database_path(self) -> tuple[Path, Path | None] | None:
        """This memory's database file and the shared file of earlier releases it may adopt
        (:meth:`database_path`); None keeps everything in RAM."""
        return self.database_path(self.settings, self.options)

    @classmethod
    def storage_options(cls, options: Any) -> dict[str, Any]:
        """Engine options a memory of this class with these parsed ``options`` opens its storage
        with (the vector backend asks for sqlite-vec): a composite opening one storage for its
        parts passes its members' options too."""
        return {}

    def _database_options(self) -> dict[str, Any]:
        """Engine options for opening the database (:meth:`storage_options`)."""
        return self.storage_options(self.options)

    def _legacy_files(self, path: Path) -> list[Path]:
        """Separate files of earlier releases whose rows move into ``path`` on first open."""
        return []

    def _open_state_database(self) -> Database:
        """The database at :meth:`_database_path` (RAM when None), opened through the storage
        registry. A subclass that overrides this hook chooses the database itself (it may call
        this one); raises :class:`StorageError` when the file cannot be opened."""
        where = self._database_path()
        return open_storage(where[0] if where is not None else ":memory:").db

    def _open_storage(self) -> Storage:
        """The memory's one database, migrated; never raises (falls back to RAM, and says so:
        ``stats()["storage"]``, an ERROR logged every turn)."""
        if type(self)._open_state_database is not BaseRetrievalMemory._open_state_database:
            try:
                return open_storage(self._open_state_database())
            except (StorageError, OSError) as exc:
                return self._ram_storage(f"cannot use the state database ({exc})")
        if self.settings.database:
            try:
                return open_storage(
                    self.settings.database, namespace=self.settings.namespace, **self._database_options()
                )
            except Exception as exc:  # a constructor must not raise: any driver error is reported
                return self._ram_storage(f"cannot use the database {self.settings.database.split('@')[-1]} ({exc})")
        where = self._database_path()
        if where is None:
            return open_storage(":memory:")
        path, shared = where
        try:
            return open_storage(path, adopt=shared, legacy=self._legacy_files(path), **self._database_options())
        except (StorageError, OSError) as exc:
            return self._ram_storage(f"cannot open {path} ({exc})")

    def _ram_storage(self, reason: str) -> Storage:
        LOG.error("%s: %s; memories are kept in RAM only and lost when the process ends", type(self).__name__, reason)
        storage = open_storage(":memory:", **self._database_options())
        storage.db.fallback_reason = reason
        return storage

    def _open_summary(self) -> RollingSummary | None:
        """The rolling summary over the memory's database; None when off or unusable (never raises)."""
        cfg = self.settings.summary
        if not cfg.enabled:
            return None
        try:
            return RollingSummary(open_summary_store(self.storage), cfg.max_chars, cfg.llm)
        except Exception:
            LOG.exception("%s: the rolling summary is unavailable", type(self).__name__)
            return None

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
        (:func:`~ovos_memory_plugins.select.excerpt`): its terms without the stop words of
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

    def session_summary(self, session_id: str) -> str:
        """The running summary of a session's turns that left the history window, rendered as
        one block after the system prompt ('' for none; ``summary.enabled`` turns it off)."""
        if self._summary is None:
            return ""
        if self._lazy_summary():
            return self._window_and_summary(session_id)[1]
        with self._lock:
            return self._summary.text(check_id(session_id, "session_id"))

    # -- ids ---------------------------------------------------------------------------------

    @staticmethod
    def document_id(session_id: str, text: str) -> str:
        """The id ``store`` gives a text: derived from the session and the content only."""
        return "d-" + _digest(session_id, text)

    @staticmethod
    def exchange_id(session_id: str, user: str, assistant: str) -> str:
        """The id of an exchange: derived from its session and its two turns only.

        Every copy of one exchange gets the same id wherever it is recorded (each member of a
        composite, several processes writing one session in any order, a transcript imported
        again), so a delete by that id reaches every copy, and the same exchange said again
        later in the session is one document (its ``time`` the latest). Which exchange came
        before it is kept in its metadata (``previous_exchange``, see :meth:`follows`).
        """
        return "x-" + _digest(session_id, user, assistant)

    @staticmethod
    def chained_exchange_id(session_id: str, previous_exchange_id: str, user: str, assistant: str) -> str:
        """The id earlier releases gave an exchange: its content and the id of the exchange
        before it in the memory's own history (so copies recorded in another order got other
        ids). Only :meth:`follows` still computes it, to join exchanges recorded back then."""
        return "x-" + _digest(session_id, previous_exchange_id, user, assistant)

    # -- public API: documents ---------------------------------------------------------------

    def store(self, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None) -> str:
        """Store a document and return its id (the same text in the same session upserts).

        Raises ``ValueError`` for empty or non-text input or an unacceptable session id, and
        :class:`StorageError` (or the backend's own error) when storage fails.
        """
        return self.store_many([text], session_id, metadata)[0]

    def store_many(
        self, texts: Iterable[str], session_id: str = "default", metadata: dict[str, Any] | None = None
    ) -> list[str]:
        """Store several documents in one transaction (the vector index embeds them in batches);
        return their ids, in order. Raises like :meth:`store`, before anything is written."""
        session_id = check_id(session_id, "session_id")
        docs = []
        for text in texts:
            if not isinstance(text, str):
                raise ValueError(f"text must be a string, not {type(text).__name__}")
            text = clean_text(text)
            if not text.strip():
                raise ValueError("cannot store empty text")
            docs.append(Document(self.document_id(session_id, text), text, session_id, dict(metadata or {})))
        self._write_documents(docs)
        return [d.doc_id for d in docs]

    def put_document(
        self, doc_id: str, text: str, session_id: str = "default", metadata: dict[str, Any] | None = None
    ) -> None:
        """Store a document under a given id (import, migration, a composite's members).

        Unlike ``store`` the id is the caller's: an export imported into an empty root gets
        back the same ids, so the same searches return the same results.
        """
        self.put_documents([(doc_id, text, session_id, metadata)])

    def put_documents(self, docs: Iterable[tuple[str, str, str, dict[str, Any] | None]]) -> int:
        """Store ``(doc_id, text, session_id, metadata)`` documents under their ids in one
        transaction (import, ingest, benchmarks); return how many. Raises ``ValueError`` for a
        bad id or empty text before anything is written."""
        batch = []
        for doc_id, text, session_id, metadata in docs:
            if not isinstance(doc_id, str) or not doc_id:
                raise ValueError("doc_id must be a non-empty string")
            doc_id = check_id(doc_id, "doc_id")
            if not isinstance(text, str) or not clean_text(text).strip():
                raise ValueError("cannot store empty text")
            batch.append(Document(doc_id, clean_text(text), check_id(session_id, "session_id"), dict(metadata or {})))
        self._write_documents(batch)
        return len(batch)

    def now(self) -> float:
        """The memory's time now (:attr:`clock`), in seconds since the epoch."""
        return self.clock().timestamp()

    @property
    def memory_lang(self) -> str | None:
        """The memory's language (its keyword index's ``lang``; None: English): the words the
        prompt's dates are said in."""
        return self.keyword_settings.lang if self.keyword_settings is not None else None

    def _write_documents(self, docs: Sequence[Document]) -> list[StoredDocument]:
        """The one write path: documents table, every index and the backend's hook, in one
        transaction. A document without ``metadata["time"]`` is dated now (the clock)."""
        if not docs:
            return []
        if any("time" not in d.metadata for d in docs):
            stamp = self.now()
            docs = [d if "time" in d.metadata else replace(d, metadata={**d.metadata, "time": stamp}) for d in docs]
        with self._lock:
            prepared = self._prepare_documents(docs)
            with self.storage.atomic():
                stored = self._put_prepared(docs, prepared)
            self._tell_exchanges(stored)
            return stored

    def add_exchange_listener(self, listener: Callable[[StoredDocument], None]) -> None:
        """Call ``listener(exchange)`` for every exchange document this memory writes (a turn
        recorded by ``update_history``, an exchange imported or copied in), once the write's
        transaction is done, in write order, under the memory's lock: a listener keeps it short
        (the notes' digest only queues the exchange). A listener that raises is logged; the
        write stands."""
        self._exchange_listeners.append(listener)

    def _tell_exchanges(self, stored: Sequence[StoredDocument]) -> None:
        for doc in stored:
            if doc.metadata.get("kind") != "exchange":
                continue
            for listener in list(self._exchange_listeners):
                try:
                    listener(doc)
                except Exception:
                    LOG.exception("%s: an exchange listener failed for %s", type(self).__name__, doc.doc_id)

    def _prepare_documents(self, docs: Sequence[Document]) -> list[Any]:
        """Every index's work for ``docs`` done before the transaction (it may embed: slow, network)."""
        return [index.prepare(docs) for index in self.storage.indexes] if docs else []

    def _put_prepared(self, docs: Sequence[Document], prepared: Sequence[Any]) -> list[StoredDocument]:
        """Write prepared documents to the documents table, every index and the backend's hook
        (inside the caller's transaction)."""
        if not docs:
            return []
        stored = self.storage.documents.put(docs)
        for index, work in zip(self.storage.indexes, prepared, strict=True):
            index.add(stored, work)
        for doc in docs:
            self._store_document(doc.doc_id, doc.text, doc.session_id, dict(doc.metadata))
        return stored

    @property
    def filters_time(self) -> bool:
        """Whether :meth:`search` can keep to a window of time (``window=``): the memory's index
        filters on the documents' ``created`` in its query (the keyword, vector and hybrid indexes
        of either engine: :class:`~ovos_memory_plugins.index.IndexedMemory`)."""
        return False

    def _query_window(self, query: str, top_k: int, session_id: str | None, window: Window) -> list[MemoryHit]:
        """The best hits made in ``window`` (only called when :attr:`filters_time`)."""
        return []

    def search(
        self, query: str, session_id: str | None = None, top_k: int | None = None, *, window: Window | None = None
    ) -> list[MemoryHit]:
        """The memories best matching ``query``, best first, deduplicated.

        Args:
            query: any text; it is cleaned and cut to ``text.MAX_QUERY_CHARS`` characters.
            session_id: only that session's documents (None: every session's).
            top_k: how many at most (default ``retrieval.max_num_results``).
            window: only documents made in ``(since, until)`` (seconds since the epoch, ``until``
                excluded), filtered by the storage's query; ValueError when the memory cannot
                (:attr:`filters_time` False).
        """
        asked = search_request(query, top_k, self.settings.retrieval.max_num_results)
        if asked is None:
            return []
        query, k = asked
        if session_id is not None:
            session_id = check_id(session_id, "session_id")
        if window is not None and not self.filters_time:
            raise ValueError(f"{type(self).__name__} cannot search within a window of time")
        with self._lock:
            if window is not None:
                hits = self._query_window(query, k, session_id, window)
            elif session_id is None:
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
        total = self.storage.documents.count()
        fetch = k
        while True:
            hits = self._query_backend(query, fetch)
            known = self.storage.documents.get(h.source for h in hits)
            own = [h for h in hits if h.source in known and known[h.source].session_id == session_id]
            if len(own) >= k or len(hits) < fetch or fetch > total:
                return own
            fetch = min(fetch * 4, total + 1)

    def _with_catalogue_metadata(self, hits: list[MemoryHit]) -> list[MemoryHit]:
        known = self.storage.documents.get(h.source for h in hits)
        for hit in hits:
            if not hit.metadata and hit.source in known:
                hit.metadata = dict(known[hit.source].metadata)
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

    # -- forgetting --------------------------------------------------------------------------

    def _can_delete(self) -> bool:
        return self.stores_in_storage or self._can("_delete_documents")

    @property
    def can_delete(self) -> bool:
        """Whether ``delete``/``forget_*`` can remove documents (front-ends: show a delete button)."""
        return self._can_delete()

    def _forget_documents(self, ids: Sequence[str]) -> Counter[str]:
        """Delete documents from every tier (inside the caller's transaction); what went, per tier."""
        tiers: Counter[str] = Counter()
        found = list(self.storage.documents.get(ids).values())
        for index in self.storage.indexes:
            for name, n in _index_tiers(index, index.remove(found)).items():
                tiers[name] += n
        if self._can("_delete_documents") and ids:
            tiers["backend"] += int(self._delete_documents(list(ids)) or 0)
        tiers["documents"] += self.storage.documents.remove(ids)
        tiers["history_messages"] += self.storage.history.remove_exchanges(found)
        if self._summary is not None:
            # the running summary of a session may quote any of its exchanges that left the
            # window (in a model's words too): it goes with them, and is rebuilt from later turns
            for session in sorted({d.session_id for d in found if exchange_parts(d.text) is not None}):
                tiers["summaries"] += self._summary.forget(session)
        return tiers

    def _report(self, tiers: Counter[str]) -> ForgetReport:
        self.storage.db.purge()
        return ForgetReport(max(tiers["documents"], tiers["backend"]), dict(tiers))

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id from every tier (documents, indexes, the exchange's history
        messages, the running summary of an exchange's session, the backend's own store);
        return how many existed, as a
        :class:`~ovos_memory_plugins.storage.records.ForgetReport` (an int with ``.tiers``).
        Raises if the backend cannot delete."""
        ids = [check_id(d, "doc_id") for d in dict.fromkeys(doc_ids)]
        if not self._can_delete():
            raise BackendError(f"{type(self).__name__} cannot delete documents (no _delete_documents hook)")
        with self._lock:
            with self.storage.atomic():
                tiers = self._forget_documents(ids)
            return self._report(tiers)

    def documents(self, doc_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The stored documents among ``doc_ids``, as ``{"id", "text", "session_id",
        "metadata"}`` (ids not stored are left out): what a composite deletes copies of."""
        ids = [check_id(d, "doc_id") for d in dict.fromkeys(doc_ids)]
        with self._lock:
            found = self.storage.documents.get(ids)
        return [
            {"id": d.doc_id, "text": d.text, "session_id": d.session_id, "metadata": dict(d.metadata)}
            for d in (found[i] for i in ids if i in found)
        ]

    def copies_of(self, session_id: str, text: str) -> list[str]:
        """The ids of ``session_id``'s documents whose text is exactly ``text``: one exchange
        recorded by earlier releases under another id in each member of a composite (their ids
        were chained on each member's own history), so a delete by the id one member lists can
        reach the others' copies."""
        session_id = check_id(session_id, "session_id")
        with self._lock:
            return self.storage.documents.ids_with_text(session_id, text)

    def forget_session(self, session_id: str) -> int:
        """Delete a session's documents (every tier) and history; return how many documents
        went (a :class:`~ovos_memory_plugins.storage.records.ForgetReport`)."""
        session_id = check_id(session_id, "session_id")
        with self._lock:
            catalogued = self.storage.documents.ids(session_id)
            ids = list(dict.fromkeys([*catalogued, *self._session_document_ids(session_id)]))
            if ids and not self._can_delete():
                raise BackendError(f"{type(self).__name__} cannot delete documents (no _delete_documents hook)")
            with self.storage.atomic():
                tiers = self._forget_documents(ids) if ids else Counter()
                tiers["history_messages"] += self.storage.history.clear_session(session_id)
                if self._summary is not None:
                    tiers["summaries"] += self._summary.forget(session_id)
            return self._report(tiers)

    def _session_document_ids(self, session_id: str) -> list[str]:
        """The ids of a session's documents: the catalogue's, plus what a backend that keeps
        sessions itself reports (override to add documents the base never saw)."""
        return self.storage.documents.ids(session_id)

    def forget_all(self) -> int:
        """Delete every document (every tier) and all history; return how many documents went
        (a :class:`~ovos_memory_plugins.storage.records.ForgetReport`)."""
        with self._lock:
            if not self._can_delete() and not self._can("_delete_all") and self.storage.documents.count():
                raise BackendError(f"{type(self).__name__} cannot delete documents (no _delete_documents hook)")
            tiers: Counter[str] = Counter()
            with self.storage.atomic():
                for index in self.storage.indexes:
                    for name, n in _index_tiers(index, index.remove_all()).items():
                        tiers[name] += n
                if self._can("_delete_all"):
                    tiers["backend"] += int(self._delete_all() or 0)
                elif self._can("_delete_documents"):
                    ids = self.storage.documents.ids()
                    if ids:
                        tiers["backend"] += int(self._delete_documents(ids) or 0)
                tiers["documents"] += self.storage.documents.remove_all()
                tiers["history_messages"] += self.storage.history.clear_all()
                if self._summary is not None:
                    tiers["summaries"] += self._summary.forget()
            return self._report(tiers)

    def exclusive(self) -> contextlib.AbstractContextManager[Any]:
        """The memory's lock, as a ``with`` block: nothing else runs on this memory inside it. A
        caller that runs several calls of several memories as one (a composite's forget over
        parts sharing one storage, in one transaction) takes every part's lock first, then the
        transaction, the order each memory takes them in."""
        return self._lock

    def compact(self) -> Compacted:
        """Make deleted rows unrecoverable in the memory's database now (the
        :class:`~ovos_memory_plugins.protocols.Compactable` protocol; the editor calls it after
        every delete): SQLite ``VACUUM`` and a WAL truncation, PostgreSQL ``VACUUM`` of the
        memory's tables. Returns the locations done; a busy file is logged, left out and named in
        ``skipped`` (every forget already purges; this also rewrites the file without free pages).

        Not under the memory's lock: the database serialises what it must (SQLite holds its
        connection's lock), and turns go on while a PostgreSQL VACUUM runs or waits."""
        return compact_database(self.storage.db)

    @property
    def compaction_locations(self) -> frozenset[str] | None:
        """Where :meth:`compact` works (:class:`~ovos_memory_plugins.protocols.LocatedCompactable`):
        the location of the memory's one database (none in RAM), so a composite compacts a
        database its members share once. A subclass that overrides :meth:`compact` (data of
        its own elsewhere) names its locations here too; one that does not gets None (not
        known: a composite always calls its :meth:`compact`)."""
        cls = type(self)
        if cls.compact is not BaseRetrievalMemory.compact and (
            cls.compaction_locations is BaseRetrievalMemory.compaction_locations
        ):
            return None
        db = self.storage.db
        return frozenset() if db.in_ram else frozenset({db.location})

    def sessions(self) -> list[str]:
        """Every session with recorded history, sorted (operators, the editor)."""
        with self._lock:
            return self.storage.history.sessions()

    def messages(self, session_id: str) -> list[AgentMessage]:
        """Every message kept for a session, oldest first, unanswered ones included.

        The history keeps the newest ``max(2 * max_history + 4, 24)`` messages per session; older
        exchanges live on as documents (``search``, ``iter_documents`` where the backend lists).
        """
        return [message for message, _ in self.dated_messages(session_id)]

    def dated_messages(self, session_id: str) -> list[tuple[AgentMessage, float | None]]:
        """:meth:`messages`, each with when it was recorded (seconds since the epoch, the
        memory's clock; None when the store does not say): the editor's conversation view."""
        with self._lock:
            stored = self.storage.history.recent(check_id(session_id, "session_id"), 1_000_000)
        return [(AgentMessage(role=MessageRole(m.role), content=m.content), m.created) for m in stored]

    @property
    def storage_problem(self) -> str | None:
        """Why nothing this memory learns outlives the process (:class:`~ovos_memory_plugins.
        protocols.StorageStatus`): its database could not be opened and it fell back to RAM
        (logged as an ERROR when it happened and on every recorded turn); None when it keeps
        what it learns, or keeps it in RAM by configuration."""
        reason = self.storage.db.fallback_reason
        return f"nothing is being kept: {reason}" if reason else None

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

    # -- public API: the conversation --------------------------------------------------------

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
        history = self.storage.history
        exchanges: list[tuple[str, str, str, str]] = []
        window = self.settings.max_history // 2
        lazy = self._lazy_summary()
        # enough history for the replay check and the turns around an exchange (4 before the
        # incoming ones), and, with an eager summary, for what leaves the window
        need = 2 * (window + len(incoming)) + 4 if self._summary is not None and window > 0 and not lazy else 4
        with self._lock:
            recent = history.recent(session_id, need)
            tail = recent[-2:]
            if len(incoming) == 2 and [(m.role, m.content) for m in tail] == incoming:
                return  # the same exchange again: a replay
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
            now = self.now()
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
                prepared = self._prepare_documents(docs)
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
                trimmed = list(
                    history.append(session_id, incoming, keep, last, tags, created=now, batch=TRIM_BATCH) or []
                )
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
                    record_history()
                    stored = self._put_prepared(docs, prepared)
                    if fold_now:
                        fold()
                written = stored
            except Exception:
                if not docs:
                    raise
                LOG.exception("%s: could not store exchange(s) %s", type(self).__name__, [d.doc_id for d in docs])
                with self.storage.atomic():
                    record_history()
                    if fold_now:
                        fold()
            self._tell_exchanges(written)  # the exchange listeners, once the turn is committed
        if leaving and not fold_now:
            fold()

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
        r = self.settings.retrieval
        relative = r.min_relative_score if r.min_relative_score is not None else self.default_prompt_min_relative
        query = self._without_order_words(query)
        terms = self.word_terms(query, query=True)

        def choose(
            hits: list[MemoryHit], limit: int, by_words: bool = True, terms: frozenset[str] | None = terms
        ) -> list[MemoryHit]:
            own = self.hit_terms(hits) if by_words and terms is not None and hits else None
            return select_hits(
                hits,
                limit=limit,
                min_relative=relative,
                exclude=frozenset(in_window),
                query_terms=terms if by_words else None,
                hit_terms=own,
            )

        chosen = choose(self.search(query, session_id=scoped, top_k=k + len(in_window)), k)
        pair = alternatives(utterance, self.memory_lang) if r.alternatives else None
        if pair is not None:  # "the thermostat or the mesh network?": a place for each (docs/recall.md)
            chosen = alternatives_first(self._alternative_picks(pair, k + len(in_window), scoped, choose), chosen, k)
        window = self.recall_window(utterance)
        if window is not None:  # time words: what was made then comes first (docs/recall.md)
            dated, matched = self.window_hits(query, window, k + len(in_window), scoped)
            first = choose(dated, window_places(k), by_words=matched) if dated else []
            chosen = window_first(first, chosen, k)
        return prompt_memories(chosen, self.follows, query, self.settings.context.memory_chars, self.excerpt_terms)

    def _without_order_words(self, query: str) -> str:
        """``query`` without the words that ask for an order ("the order of ..., from earliest to
        latest": :data:`~ovos_memory_plugins.select.ORDER_WORDS`), unless no word but stop words
        would be left ("what was my order?"; :meth:`excerpt_terms`, every backend's)."""
        stripped = without_order_words(query, self.memory_lang)
        if stripped == query or not self.excerpt_terms(stripped):
            return query
        return stripped

    def _alternative_picks(
        self,
        pair: tuple[str, str],
        depth: int,
        session_id: str | None,
        choose: Callable[..., list[MemoryHit]],
    ) -> list[MemoryHit]:
        """The best match of each alternative a comparison question names, searched alone (its
        own words: ``choose`` with them); an alternative without a content word (its index's
        terms) is not searched."""
        picks: list[MemoryHit] = []
        for alternative in pair:
            terms = self.word_terms(alternative, query=True)
            if terms is not None and not terms:
                continue
            taken = {h.source for h in picks}
            found = [h for h in self.search(alternative, session_id=session_id, top_k=depth) if h.source not in taken]
            picks.extend(choose(found, 1, terms=terms))
        return picks

    def recall_window(self, utterance: str) -> Window | None:
        """The window of time the utterance's time words name (``dates.time_window``, in the
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
            chained = parts is not None and later.source == BaseRetrievalMemory.chained_exchange_id(
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
            cls.get_history is BaseRetrievalMemory.get_history
            and cls.session_summary is BaseRetrievalMemory.session_summary
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

    # -- life cycle --------------------------------------------------------------------------

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


def search_request(query: Any, top_k: int | None, default_k: int) -> tuple[str, int] | None:
    """A search's query, cleaned and cut, and how many hits it asks for (``default_k`` when
    ``top_k`` is None); None when there is nothing to search (no text, or ``k`` <= 0). The base
    and the composite check a search the same way."""
    k = default_k if top_k is None else int(top_k)
    if k <= 0 or not isinstance(query, str):
        return None
    query = clip_query(query)
    return (query, k) if query.strip() else None


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
