"""``VectorMemory`` (``ovos-memory-plugin-vector``): recall by meaning, or by meaning and keywords.

Documents, vectors and history live in one SQLite file (``<root>/vector.db``). Each document's
text is kept, so vectors can always be rebuilt: vectors are keyed by the embedder's id, and
after a change of embedder the old memories are re-embedded from their text in a background
thread (resumable: what is pending is read from the tables). An embedder that fails at store
time leaves the document stored and its vector pending (retried with back-off); at query time
it gives no vector hits, never an error in the turn.

With ``"hybrid": true`` a keyword arm (:class:`~ovos_memory_plugins.lexical.LexicalMemory`, in
``<root>/keyword/``) runs next to the vectors; both are :class:`~ovos_memory_plugins.index.Index`
arms of a :class:`~ovos_memory_plugins.index.HybridIndex`, fused per query.

Persona config::

    {
      "memory_module": "ovos-memory-plugin-vector",
      "ovos-memory-plugin-vector": {
        "namespace": "ada",
        "embedder": "local",
        "hybrid": true
      }
    }

See ``docs/vector.md`` for every key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.config import ParsedConfig, option
from ovos_memory_plugins.embedders import EMBEDDER_NAMES, Embedder, check_embedder, make_embedder, spec_problems
from ovos_memory_plugins.errors import BackendError, StorageError
from ovos_memory_plugins.index import FUSIONS, HybridIndex, IndexDocument, MemoryIndex, VectorIndex
from ovos_memory_plugins.storage.sqlite import Database
from ovos_memory_plugins.storage.vector_store import VectorStore, open_vector_database

LOG = logging.getLogger(__name__)

__all__ = ["VectorMemory", "VectorOptions"]


def _check_embedder(value: Any) -> str | None:
    if isinstance(value, str) and value in EMBEDDER_NAMES:
        return None
    if isinstance(value, dict) and value.get("type") in ("hash", "openai", "opm", "local"):
        return None
    return f"one of {', '.join(EMBEDDER_NAMES)}, or an object with type hash, openai, opm or local"


def _check_fusion(value: Any) -> str | None:
    return None if value in FUSIONS else "one of " + ", ".join(FUSIONS)


@dataclass
class VectorOptions:
    """The vector backend's own keys."""

    embedder: str | dict[str, Any] = option(
        "local",
        doc="The embedding model: `local` (the default offline model, needs the `[local]` extra), "
        "`local-minilm`, `local-e5`, `hash` (tests only), or an object: "
        '`{"type": "openai", "model": ..., "base_url": ..., "api_key": ..., "dimensions": ..., '
        '"batch_size": ..., "timeout": ...}`, `{"type": "opm", "module": ..., "config": {...}}`, '
        '`{"type": "local", "model": "minilm" | "e5-small", "threads": ...}`, `{"type": "hash", "dimension": ...}`.',
        check=_check_embedder,
    )
    hybrid: bool = option(False, doc="Also keep a keyword index and fuse both per query (recommended).")
    vector_search: Literal["auto", "numpy", "sqlite-vec"] = option(
        "auto",
        doc="Exact search path: `numpy` (in-RAM matrix, the fastest here; `auto` picks it) or "
        "`sqlite-vec` (SQL over the stored vectors, no RAM copy; needs the extension to load).",
    )
    db_path: str | None = option(
        None, doc="The SQLite file (documents, vectors, history); `~` is expanded. Default: `<root>/vector.db`."
    )
    min_similarity: float | None = option(
        None,
        doc="Drop vector hits below this cosine similarity. null: the embedder's own default "
        "(0.15 hash, 0.2 MiniLM, 0.75 e5, 0 otherwise).",
    )
    keyword_weight: float = option(1.0, doc="Weight of the keyword arm in the hybrid fusion.", minimum=0)
    vector_weight: float = option(
        0.5,
        doc="Weight of the vector arm in the hybrid fusion (times the embedder's coverage of the query).",
        minimum=0,
    )
    fusion: str = option(
        "weighted",
        doc="How the hybrid fuses: `weighted` (min-max normalised scores, weighted, summed), "
        "`score` (half rank, half score relative to the list's best) or `rrf` (reciprocal rank fusion).",
        check=_check_fusion,
    )
    keyword: dict[str, Any] = option(
        default_factory=dict,
        doc="Keys for the hybrid's keyword arm (the keyword backend's own keys, e.g. `lang`).",
    )
    batch_size: int = option(64, doc="Texts per embedding call when (re-)embedding.", minimum=1)
    background_reembed: bool = option(
        True, doc="Embed pending documents (after an outage or an embedder change) in a background thread."
    )


#: Default similarity floors for the embedders shipped here, by id prefix.
_DEFAULT_FLOORS = (("hash-", 0.15), ("local:all-MiniLM", 0.2), ("local:multilingual-e5", 0.75))


class _Unavailable:
    """Stands in for an embedder that could not be built: every call fails, documents pend."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.id = "unavailable"

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise BackendError(f"no embedder: {self.reason}")


class VectorMemory(BaseRetrievalMemory):
    """Vector (and hybrid) memory over SQLite (config: :class:`VectorOptions` plus the shared keys).

    Args:
        config: the plugin's block of the persona JSON.
        embedder: an :class:`~ovos_memory_plugins.embedders.Embedder` to use instead of the
            configured one (a test seam, or a model object built by the caller).
    """

    options_class: ClassVar[type[Any] | None] = VectorOptions
    persistent: ClassVar[bool] = True

    options: VectorOptions

    def __init__(self, config: dict[str, Any] | None = None, *, embedder: Embedder | None = None) -> None:
        super().__init__(config)
        opts = self.options
        if embedder is not None:
            self.embedder: Embedder = check_embedder(embedder)
        else:
            self.embedder = self._build_embedder(opts.embedder)
        floor = opts.min_similarity
        if floor is None:
            floor = next((f for prefix, f in _DEFAULT_FLOORS if self.embedder.id.startswith(prefix)), 0.0)
        self.vector_store = VectorStore(self._db, opts.vector_search, self._extension)
        self.vectors = VectorIndex(
            self.vector_store,
            self.embedder,
            min_similarity=floor,
            batch_size=opts.batch_size,
            background=opts.background_reembed,
        )
        self.keyword: Any = None
        self.index: HybridIndex | None = None
        if opts.hybrid:
            try:
                self._open_keyword_arm()
            except Exception:  # a constructor must not raise: answer with vectors alone
                LOG.exception("VectorMemory: cannot open the keyword arm; the hybrid runs on vectors alone")
                self.keyword = None
                self.index = None
        if opts.background_reembed and not isinstance(self.embedder, _Unavailable) and self.vectors.pending():
            LOG.info(
                "VectorMemory: %d document(s) have no %s vector yet; embedding them in the background",
                self.vectors.pending(),
                self.embedder.id,
            )
            self.vectors.start_background()

    @classmethod
    def validate_options(cls, parsed: ParsedConfig) -> list[str]:
        """Strict check of the ``embedder`` object's keys (used by ``validate_config``)."""
        return spec_problems(parsed.options.embedder)

    # -- opening -----------------------------------------------------------------------------

    def _open_state_database(self) -> Database:
        """One file: documents, vectors and history share ``db_path``."""
        opts: VectorOptions = self.options
        path = Path(opts.db_path).expanduser() if opts.db_path else self.root / "vector.db"
        self.db_path = path
        want = opts.vector_search == "sqlite-vec"
        try:
            db, self._extension = open_vector_database(path, want)
        except (StorageError, OSError) as exc:
            LOG.error("VectorMemory: cannot open %s (%s); memories are kept in RAM only", path, exc)
            db, self._extension = open_vector_database(":memory:", want)
        self._db = db
        return db

    def _build_embedder(self, spec: str | dict[str, Any]) -> Embedder:
        try:
            return make_embedder(spec)
        except Exception as exc:  # a constructor must not raise: a broken model library is logged too
            LOG.error(
                "VectorMemory: cannot build the embedder %r (%s); documents are kept and embedded once "
                "a working embedder is configured",
                spec,
                exc,
            )
            return _Unavailable(str(exc))

    def _open_keyword_arm(self) -> None:
        from ovos_memory_plugins.lexical import LexicalMemory

        config = {"root": str(self.root / "keyword"), "retrieval": {"min_relative_score": 0}, **self.options.keyword}
        self.keyword = LexicalMemory(config)
        for problem in self.keyword.config_problems:
            self.config_problems.append(f"keyword: {problem}")
        arm = MemoryIndex(self.keyword, name="keyword")
        self.index = HybridIndex(
            [arm, self.vectors],
            weights=[self.options.keyword_weight, self.options.vector_weight],
            fusion=self.options.fusion,
        )
        if self.keyword.stats().get("documents") != self.vector_store.count():
            docs = self.vector_store.all_documents()
            LOG.info("VectorMemory: (re)building the keyword index over %d document(s)", len(docs))
            arm.add([IndexDocument(d.doc_id, d.text, d.session_id, d.metadata) for d in docs])

    # -- hooks -------------------------------------------------------------------------------

    def _store_document(self, doc_id: str, text: str, session_id: str, metadata: dict[str, Any]) -> None:
        doc = IndexDocument(doc_id, text, session_id, metadata)
        if self.index is not None:
            self.index.add([doc])
        else:
            self.vectors.add([doc])

    def _search(self, query: str, top_k: int, session_id: str | None) -> list[MemoryHit]:
        if self.index is not None:
            return self.index.search(query, top_k, session_id)
        try:
            return self.vectors.search(query, top_k, session_id)
        except BackendError as exc:
            LOG.warning("VectorMemory: %s; answering without vector hits", exc)
            return []

    def _query_backend(self, query: str, top_k: int) -> list[MemoryHit]:
        return self._search(query, top_k, None)

    def _query_session(self, query: str, top_k: int, session_id: str) -> list[MemoryHit]:
        return self._search(query, top_k, session_id)

    def _session_document_ids(self, session_id: str) -> list[str]:
        return self.vector_store.session_documents(session_id)

    def _delete_documents(self, doc_ids: Sequence[str]) -> int:
        n = self.vector_store.delete(list(doc_ids))
        if self.keyword is not None:
            self.keyword.delete(list(doc_ids))
        return n

    def _delete_all(self) -> int:
        n = self.vector_store.delete_all()
        if self.keyword is not None:
            self.keyword.forget_all()
        return n

    def _backend_stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "documents": self.vector_store.count(),
            "embedder": self.embedder.id,
            "pending_vectors": self.vectors.pending(),
            "vector_spaces": self.vector_store.spaces(),
            "vector_search": self.vector_store.path,
            "hybrid": self.index is not None,
            "db_path": str(self.db_path),
            "db_bytes": self.vector_store.db.size_bytes(),
        }
        if self.vectors.last_error:
            out["last_embedder_error"] = self.vectors.last_error
        return out

    def _close(self) -> None:
        self.vectors.stop()
        if self.keyword is not None:
            self.keyword.close()

    # -- public extras -------------------------------------------------------------------------

    @property
    def semantic(self) -> bool:
        """Whether search matches meaning: true with a real embedder, false with the hashing one
        (it matches words) or none. A composite reads it for ``expand_query: auto``."""
        return not str(getattr(self.embedder, "id", "")).startswith(("hash", "unavailable"))

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        """Every stored document, oldest first, as ``{"id", "text", "session_id", "metadata"}``
        (``ovos-memory export``, the editor); vectors are not exported, they are re-made on import."""
        for doc in self.vector_store.all_documents():
            yield {"id": doc.doc_id, "text": doc.text, "session_id": doc.session_id, "metadata": doc.metadata}

    def reembed(self, max_docs: int | None = None) -> int:
        """Embed documents that have no vector of the active embedder now; return how many.

        Raises the embedder's error when it fails (what was embedded before stays).
        """
        with self._lock:
            return self.vectors.reembed(max_docs)

    def drop_other_spaces(self) -> int:
        """Delete the vectors of every embedder but the active one; return how many went."""
        with self._lock:
            return sum(self.vector_store.drop_space(s) for s in self.vector_store.spaces() if s != self.embedder.id)
