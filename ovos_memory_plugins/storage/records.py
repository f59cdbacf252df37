"""Records the storage hands out and takes in, shared by the engines, the stores and the layers above.

Plain data and the checks on it, importing nothing of ``storage/``: the documents
(:class:`Document` to write, :class:`StoredDocument` as stored), history messages
(:class:`StoredMessage`), the keyword index's :class:`KeywordSettings`, what a forget removed
(:class:`ForgetReport`) and a compaction did (:class:`Compacted`), the id rules
(:func:`check_id`), and the notes (:class:`Note`, curated or sticky, with its content-derived
id). The engine contract (:mod:`ovos_memory_plugins.storage.seam`) and every engine use them, so
none of them imports another for a record. The old homes stay importable:
``ovos_memory_plugins.storage.engine.Document`` (and the others) and
``ovos_memory_plugins.protocols.Note``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ovos_memory_plugins.common import normalize_content

__all__ = [
    "MAX_ID_CHARS",
    "Compacted",
    "Document",
    "ForgetReport",
    "KeywordSettings",
    "Migration",
    "NewNote",
    "Note",
    "StoredDocument",
    "StoredMessage",
    "check_id",
    "document_time",
    "dump_metadata",
    "note_id",
    "stored_document",
    "words_key",
]

#: Longest accepted ``doc_id`` / ``session_id`` (characters). Longer ids get a ValueError: a
#: 10 MB id would be copied into every index and make later deletes crawl.
MAX_ID_CHARS = 1024


def check_id(value: Any, what: str) -> str:
    """Return ``value`` if it is an acceptable id, else raise ValueError naming ``what``.

    A lone surrogate (from a broken client) is replaced by U+FFFD, so the id can be stored
    (the database drivers reject such strings) instead of the session's turns being dropped.
    """
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > MAX_ID_CHARS:
        raise ValueError(f"{what} is {len(value):,} characters long; at most {MAX_ID_CHARS:,} are accepted")
    if "\x00" in value:
        raise ValueError(f"{what} cannot contain a NUL character")
    text: str = value
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


_memory_time: Callable[[Mapping[str, Any]], float | None] | None = None


def document_time(metadata: dict[str, Any], now: float) -> float:
    """The ``created`` a new document is stored with: when it was made (its ``metadata["time"]``,
    set by the memory's clock, a transcript or an export), else ``now``."""
    global _memory_time
    if _memory_time is None:
        from ovos_memory_plugins.dates import memory_time  # pure; no import cycle at module load

        _memory_time = memory_time
    made = _memory_time(metadata)
    return now if made is None else made


#: :func:`dump_metadata`'s encoder, made once (``json.dumps`` with options makes one per call).
_METADATA_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


def dump_metadata(metadata: dict[str, Any]) -> str:
    """Metadata as stored: JSON, non-ASCII kept, anything else as its ``str``."""
    return _METADATA_JSON.encode(metadata)


@dataclass(frozen=True)
class Document:
    """A document to write."""

    doc_id: str
    text: str
    session_id: str = "default"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredDocument:
    """A document as stored.

    ``key`` is the engine's integer row id (ordered by age; indexes may reference it).
    ``changed`` is set by :meth:`DocumentStore.put`: True when the row is new or its text or
    session changed (indexes re-index it), False for a pure metadata update or a replay;
    ``new`` is True when :meth:`DocumentStore.put` inserted the row (no index knows it yet).
    """

    key: int
    doc_id: str
    session_id: str
    text: str
    metadata: dict[str, Any]
    created: float
    changed: bool = True
    new: bool = False


def stored_document(
    doc: Document, key: int, created: float, changed: bool, new: bool, prior: StoredDocument | None
) -> StoredDocument:
    """``doc`` as :meth:`DocumentStore.put` stored it, under ``key``, made at ``created``: ``changed``
    and ``new`` by this write, or by an earlier write of the same id in the same call (``prior``)."""
    return StoredDocument(
        key,
        doc.doc_id,
        doc.session_id,
        doc.text,
        dict(doc.metadata),
        created,
        changed or (prior is not None and prior.changed),
        new or (prior is not None and prior.new),
    )


@dataclass(frozen=True)
class Migration:
    """One schema step of an engine (``apply`` gets its connection: a ``sqlite3.Connection``, a
    ``psycopg.Connection``). ``name`` is recorded once applied; never rename or reorder applied
    steps. Both engines' migrations are this record (``storage.sqlite.Migration``,
    ``storage.postgres.PgMigration``)."""

    name: str
    apply: Callable[[Any], None]


class StoredMessage(NamedTuple):
    """A message read back from the history store (a named tuple: every turn reads a few dozen),
    with when it was recorded (``created``, seconds since the epoch; None from a store that does
    not say)."""

    role: str
    content: str
    created: float | None = None


@dataclass(frozen=True)
class KeywordSettings:
    """How the keyword index tokenizes and ranks (the keyword backend's options)."""

    lang: str | None = None
    extra_stopwords: tuple[str, ...] = ()
    head_weight: float = 1.0
    context_weight: float = 0.4
    last_line_weight: int = 2
    max_query_terms: int = 256
    use_fts5: bool = True
    #: PostgreSQL: keep the namespace's keyword postings (``memory_keyword_postings``) that a
    #: search scores from; False: writes leave them alone and searches take the GIN path (the
    #: ``keyword_postings`` key; the SQLite index has none and ignores it).
    keyword_postings: bool = True

    @property
    def column_weights(self) -> tuple[float, float, float]:
        """BM25 weights of the index's three columns, in its column order: body, head, context
        (every engine ranks with these)."""
        return (1.0, float(self.head_weight), float(self.context_weight))


class ForgetReport(int):
    """How many documents a forget verb removed (an ``int``, as before), with ``tiers``: what
    went from each tier (``documents``, ``keyword_rows``, ``vectors``, ``history_messages``,
    ``backend``, ...), for ``ovos-memory forget`` and the editor to show."""

    tiers: dict[str, int]

    def __new__(cls, documents: int, tiers: dict[str, int] | None = None) -> ForgetReport:
        obj = super().__new__(cls, documents)
        obj.tiers = dict(tiers or {})
        return obj


class Compacted(list[str]):
    """The locations a compaction made deleted rows unrecoverable in (file paths, or a database
    URL without its password), a ``list`` of them; ``skipped`` maps each location it could not
    do now (a busy file) to the reason. A later compaction retries a skipped one."""

    skipped: dict[str, str]

    def __init__(self, done: Iterable[str] = (), skipped: dict[str, str] | None = None) -> None:
        super().__init__(done)
        self.skipped = dict(skipped or {})

    def merge(self, other: Iterable[str]) -> Compacted:
        """Add another compaction's locations (each once) and its skipped ones; return self."""
        self.extend(x for x in list(other) if x not in self)
        if isinstance(other, Compacted):
            self.skipped.update(other.skipped)
        return self


@dataclass(frozen=True)
class Note:
    """One note, curated or sticky: a durable fact shown to the model.

    Attributes:
        id: exact and stable (derived from the content); verbs accept it in place of a description.
        text: the fact, one line.
        date: when it was learned, ``YYYY-MM`` or ``YYYY-MM-DD`` (``""`` when unknown).
        session_id: the session it was learned in (``""`` when unknown); ``forget_session`` removes it.
        retired_on: the day it stopped being true (``YYYY-MM-DD``); None while it is active.
        metadata: what was stored with it.
    """

    id: str
    text: str
    date: str = ""
    session_id: str = ""
    retired_on: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def active(self) -> bool:
        """Whether the note is still true (not retired)."""
        return self.retired_on is None


@dataclass(frozen=True)
class NewNote:
    """A note to add, before a store gives it its id and date.

    Attributes:
        text: the fact, one line.
        session_id: the session it is learned in.
        date: when it was learned (``""``: the store dates it, today).
        lang: the language it was said in (None: not known; kept by sticky notes).
        metadata: what to store with it (kept by sticky notes).
    """

    text: str
    session_id: str
    date: str = ""
    lang: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


_TRAILING = " \t\r\n.。!！?？;；,，…"


def words_key(text: str) -> str:
    """What makes two notes "the same words": NFKC, case-folded, spacing collapsed, end
    punctuation dropped ("My bike is red." is "my bike is red")."""
    return normalize_content(text).rstrip(_TRAILING)


def note_id(text: str) -> str:
    """The id of a curated note: ``n-`` and a digest of its words (:func:`words_key`), so it
    stays the same across processes, restarts and stores."""
    digest = hashlib.sha256(words_key(text).encode("utf-8", "surrogatepass")).hexdigest()
    return "n-" + digest[:16]
