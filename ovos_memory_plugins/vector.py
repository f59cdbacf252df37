"""``VectorMemory`` (``ovos-memory-plugin-vector``): recall by meaning, or by meaning and keywords.

Documents, vectors and history live in one SQLite file (``<root>/vector.db``). Each document's
text is kept, so vectors can always be rebuilt: vectors are keyed by the embedder's id, and
after a change of embedder the old memories are re-embedded from their text in a background
thread (resumable: what is pending is read from the tables). An embedder that fails at store
time leaves the document stored and its vector pending (retried with back-off); at query time
it gives no vector hits, never an error in the turn.

The memory is its documents table plus a vector index; with ``"hybrid": true`` also a keyword
index over the SAME file (two indexes, one database, one copy of each text), fused per query by
a :class:`~ovos_memory_plugins.index.HybridIndex`. A file of an earlier release (whose hybrid
kept a second memory in ``<root>/keyword/``) is migrated on open: its rows move into
``vector.db`` and the old folder is deleted.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from ovos_memory_plugins.common import MemoryHit
from ovos_memory_plugins.config import ParsedConfig, option
from ovos_memory_plugins.dates import Clock, Window
from ovos_memory_plugins.embedders import (
    EMBEDDER_NAMES,
    CachedEmbedder,
    Embedder,
    check_embedder,
    make_embedder,
    spec_problems,
)
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.index import FUSIONS, HybridIndex, VectorIndex
from ovos_memory_plugins.lexical import DatabaseFileMemory, LexicalOptions, db_path_option, keyword_settings
from ovos_memory_plugins.storage.embedding_cache import EmbeddingCache
from ovos_memory_plugins.storage.seam import Index, Storage

LOG = logging.getLogger(__name__)

__all__ = ["VectorMemory", "VectorOptions"]


def _check_embedder(value: Any) -> str | None:
    if isinstance(value, str) and value in EMBEDDER_NAMES:
        return None
    if isinstance(value, dict) and value.get("type") in ("hash", "openai", "opm", "local"):
        return None
    return f"one of {', '.join(EMBEDDER_NAMES)}, or an object with type hash, openai, opm or local"


def _check_fusion(value: Any) -> str | None:
    return None if value is None or value in FUSIONS else "one of " + ", ".join(FUSIONS)


@dataclass
class VectorOptions:
    """The vector backend's own keys."""

    embedder: str | dict[str, Any] = option(
        "local",
        doc="The embedding model: `local` (the default offline model, needs the `[local]` extra), "
        "`local-minilm`, `local-multilingual`, `local-e5`, `hash` (tests only), or an object: "
        '`{"type": "openai", "model": ..., "base_url": ..., "api_key": ..., "dimensions": ..., '
        '"batch_size": ..., "timeout": ...}`, `{"type": "opm", "module": ..., "config": {...}}`, '
        '`{"type": "local", "model": "minilm" | "use-multilingual" | "e5-small", "threads": ...}`, '
        '`{"type": "hash", "dimension": ...}`.',
        check=_check_embedder,
    )
    hybrid: bool = option(False, doc="Also keep a keyword index and fuse both per query (recommended).")
    vector_search: Literal["auto", "numpy", "sqlite-vec"] = option(
        "auto",
        doc="Exact search path: `numpy` (in-RAM matrix, the fastest here; `auto` picks it) or "
        "`sqlite-vec` (SQL over the stored vectors, no RAM copy; needs the extension to load).",
    )
    db_path: str | None = db_path_option("documents, vectors, keyword index, history", "vector.db")
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
    fusion: str | None = option(
        None,
        doc="How the hybrid fuses: `calibrated` (as `weighted`, each arm's weight times how far its best "
        "hit stands out from its list for this query), `weighted` (min-max normalised scores, weighted, summed), "
        "`score` (half rank, half score relative to the list's best), `rrf` (reciprocal rank fusion), or "
        "`merge`, `priority`, `interleave` (as a composite's: one vocabulary, `ovos_memory_plugins.fusion`). "
        "Default: `calibrated`, `weighted` with `local-e5` (measured best for each).",
        check=_check_fusion,
    )
    keyword: dict[str, Any] = option(
        default_factory=dict,
        doc="Keys for the hybrid's keyword index (the keyword backend's own keys: `lang`, "
        "`extra_stopwords`, `head_weight`, `context_weight`, `last_line_weight`, `max_query_terms`, "
        "`keyword_postings`).",
    )
    batch_size: int = option(64, doc="Texts per embedding call when (re-)embedding.", minimum=1)
    background_reembed: bool = option(
        True, doc="Embed pending documents (after an outage or an embedder change) in a background thread."
    )


#: Default similarity floors for the embedders shipped here, by id prefix.
_DEFAULT_FLOORS = (("hash-", 0.15), ("local:all-MiniLM", 0.2), ("local:multilingual-e5", 0.75))
#: Default hybrid fusions by embedder id prefix (else ``calibrated``): e5's cosines crowd into a
#: narrow band, where how far its best hit leads says little (calibrated cost it 3.1 points of
#: MADial-zh R@5 on the dev data; weighted keeps its figures).
_DEFAULT_FUSIONS = (("local:multilingual-e5", "weighted"),)


class _Unavailable:
    """Stands in for an embedder that could not be built: every call fails, documents pend."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.id = "unavailable"

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise BackendError(f"no embedder: {self.reason}")


class VectorMemory(DatabaseFileMemory):
    """Vector (and hybrid) memory over SQLite (config: :class:`VectorOptions` plus the shared keys).

    Args:
        config: the plugin's block of the persona JSON.
        embedder: an :class:`~ovos_memory_plugins.embedders.Embedder` to use instead of the
            configured one (a test seam, or a model object built by the caller).
        storage: a shared storage to be a part of (see
            :class:`~ovos_memory_plugins.base.BaseRetrievalMemory`; a composite passes it).
    """

    options_class: ClassVar[type[Any] | None] = VectorOptions
    database_file: ClassVar[str] = "vector.db"

    options: VectorOptions

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        clock: Clock | None = None,
        storage: Storage | None = None,
    ) -> None:
        self._given_embedder = embedder
        self.keyword: Index | None = None
        super().__init__(config, clock=clock, storage=storage)
        opts = self.options
        if opts.background_reembed and not isinstance(self.embedder, _Unavailable) and self.vectors.pending():
            LOG.info(
                "VectorMemory: %d document(s) have no %s vector yet; embedding them in the background",
                self.vectors.pending(),
                self.embedder.id,
            )
            self.vectors.start_background()

    @classmethod
    def validate_options(cls, parsed: ParsedConfig) -> list[str]:
        """Strict check of the ``embedder`` object's and the ``keyword`` object's keys
        (used by ``validate_config``)."""
        problems = spec_problems(parsed.options.embedder)
        problems.extend(_keyword_problems(parsed.options.keyword))
        return problems

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def storage_options(cls, options: Any) -> dict[str, Any]:
        """sqlite-vec is loaded when ``vector_search`` asks for it."""
        return {"vector_extension": isinstance(options, VectorOptions) and options.vector_search == "sqlite-vec"}

    def _legacy_files(self, path: Path) -> list[Path]:
        """Earlier releases: the hybrid's keyword arm in ``keyword/lexical.db``, and history in
        ``history.db`` next to ``vector.db``. A ``history.db`` is taken only when no other
        backend's file shares the folder (it could be that backend's history)."""
        folder = path.parent
        files = [folder / "keyword" / "lexical.db"]
        others = ("lexical.db", "sticky.db", "notes.db", "MEMORY.md")
        if path.name != "history.db" and not any((folder / name).exists() for name in others):
            files.append(folder / "history.db")
        return files

    def _open_indexes(self) -> Index:
        opts = self.options
        if not hasattr(self, "embedder"):
            given = self._given_embedder
            self.embedder: Embedder = (
                check_embedder(given) if given is not None else self._build_embedder(opts.embedder)
            )
        self.embedding_cache = self._embedding_cache()
        if self.embedding_cache is not None and not isinstance(self.embedder, _Unavailable):
            embedder = self.embedder
            if isinstance(embedder, CachedEmbedder):
                self.embedder = embedder.with_cache(self.embedding_cache)
            else:  # a caller's model: documents cached in this file, queries as the caller made them
                self.embedder = CachedEmbedder(embedder, self.embedding_cache, query_cache=None)
        floor = opts.min_similarity
        if floor is None:
            floor = next((f for prefix, f in _DEFAULT_FLOORS if self.embedder.id.startswith(prefix)), 0.0)
        self.vector_store = self.storage.vector_store(opts.vector_search)
        self.vectors = VectorIndex(
            self.vector_store,
            self.storage.documents,
            self.embedder,
            min_similarity=floor,
            batch_size=opts.batch_size,
            background=opts.background_reembed,
        )
        if not opts.hybrid:
            return self.vectors
        settings, problems = _keyword_options(opts.keyword)
        for problem in problems:
            LOG.error("VectorMemory: keyword: %s (using the default for that key)", problem)
            self.config_problems.append(f"keyword: {problem}")
        self.keyword_settings = keyword_settings(settings)
        self.keyword = self.storage.keyword_index(self.keyword_settings)
        return HybridIndex(
            [self.keyword, self.vectors],
            weights=[opts.keyword_weight, opts.vector_weight],
            fusion=opts.fusion
            or next((f for p, f in _DEFAULT_FUSIONS if self.embedder.id.startswith(p)), "calibrated"),
        )

    def _embedding_cache(self) -> EmbeddingCache | None:
        """The content-hash cache in this memory's own SQLite file (identical texts are embedded
        once, across restarts; forgetting a document forgets its row). None where the storage
        keeps none (PostgreSQL)."""
        try:
            return self.storage.embedding_cache()
        except Exception as exc:  # a constructor must not raise: embed without the cache
            LOG.warning("VectorMemory: no embedding cache in %s (%s)", self.storage.db.location, exc)
            return None

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

    # -- hooks -------------------------------------------------------------------------------

    def _search(self, query: str, top_k: int, session_id: str | None, window: Window | None = None) -> list[MemoryHit]:
        try:
            return super()._search(query, top_k, session_id, window)
        except BackendError as exc:
            LOG.warning("VectorMemory: %s; answering without vector hits", exc)
            return []

    def _backend_stats(self) -> dict[str, Any]:
        out = super()._backend_stats()
        out["hybrid"] = self.keyword is not None
        out["db_bytes"] = out["bytes"]
        return out

    # -- public extras -------------------------------------------------------------------------

    @property
    def semantic(self) -> bool:
        """Whether search matches meaning: true with a real embedder, false with the hashing one
        (it matches words) or none. A composite reads it for ``expand_query: auto``."""
        return not str(getattr(self.embedder, "id", "")).startswith(("hash", "unavailable"))

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


def _keyword_options(raw: dict[str, Any]) -> tuple[LexicalOptions, list[str]]:
    """The hybrid's ``keyword`` object parsed as the keyword backend's options (``db_path`` and
    the shared keys do not apply: the index lives in this memory's file)."""
    from ovos_memory_plugins.config import parse_config

    allowed = {k: v for k, v in raw.items() if k != "db_path"}
    parsed = parse_config({k: v for k, v in allowed.items() if k in _KEYWORD_KEYS}, LexicalOptions)
    problems = list(parsed.problems)
    for key in sorted(set(allowed) - _KEYWORD_KEYS, key=str):
        problems.append(f"unknown key '{key}'; accepted keys: {', '.join(sorted(_KEYWORD_KEYS))}")
    return parsed.options, problems


def _keyword_problems(raw: Any) -> list[str]:
    if not isinstance(raw, dict):
        return []
    return [f"keyword: {p}" for p in _keyword_options(raw)[1]]


_KEYWORD_KEYS = {
    "lang",
    "extra_stopwords",
    "head_weight",
    "context_weight",
    "last_line_weight",
    "max_query_terms",
    "keyword_postings",
}
