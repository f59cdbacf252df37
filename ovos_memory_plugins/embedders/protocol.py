"""The embedder protocol and what the host builds on it: batching, shape and finiteness checks,
L2 normalisation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ovos_memory_plugins.errors import BackendError

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """What the vector backend needs from an embedding model.

    ``id`` must be stable across restarts and must change whenever the vectors would change
    meaning (another model, another dimension, other prefixes): stored vectors are keyed by it.
    """

    @property
    def id(self) -> str:
        """E.g. ``"openai:text-embedding-3-small:1536"``."""
        ...

    def embed(self, texts: list[str]) -> Sequence[Sequence[float]] | Matrix:
        """One vector per text, in order. Raise on failure (the caller degrades)."""
        ...


def check_embedder(obj: Any, name: str = "embedder") -> Embedder:
    """``obj`` if it implements :class:`Embedder`, else a :class:`BackendError` naming it."""
    if not isinstance(obj, Embedder) or not callable(getattr(obj, "embed", None)):
        raise BackendError(f"{name} ({type(obj).__name__}) is not an Embedder: it needs an `id` and `embed(texts)`")
    if not isinstance(obj.id, str) or not obj.id:
        raise BackendError(f"{name} ({type(obj).__name__}) has no usable `id` (a non-empty string)")
    return obj


def normalize_rows(matrix: npt.ArrayLike) -> Matrix:
    """A float32 copy of ``matrix`` with every row scaled to unit length (zero rows stay zero)."""
    m = np.array(matrix, dtype=np.float32, copy=True)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    m /= norms
    return m


def _as_matrix(raw: Any, n: int, who: str) -> Matrix:
    try:
        m = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise BackendError(f"{who} returned something that is not a list of vectors: {exc}") from exc
    if m.ndim != 2 or m.shape[0] != n or m.shape[1] == 0:
        raise BackendError(f"{who} returned shape {m.shape} for {n} texts; expected ({n}, dimension)")
    if not np.isfinite(m).all():
        raise BackendError(f"{who} returned vectors with NaN or infinite values")
    return normalize_rows(m)


def _embed(embedder: Embedder, texts: Sequence[str], query: bool, batch_size: int) -> Matrix:
    items = list(texts)
    if not items:
        return np.zeros((0, 0), dtype=np.float32)
    method = getattr(embedder, "embed_queries", None) if query else None
    call = method if callable(method) else embedder.embed
    parts = []
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        parts.append(_as_matrix(call(batch), len(batch), f"embedder {embedder.id!r}"))
    dims = {p.shape[1] for p in parts}
    if len(dims) > 1:
        raise BackendError(f"embedder {embedder.id!r} returned vectors of different dimensions: {sorted(dims)}")
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def embed_documents(embedder: Embedder, texts: Sequence[str], batch_size: int = 256) -> Matrix:
    """Unit-length float32 vectors for documents, shape ``(len(texts), dim)``; raises on failure."""
    return _embed(embedder, texts, False, batch_size)


def embed_queries(embedder: Embedder, texts: Sequence[str], batch_size: int = 256) -> Matrix:
    """Like :func:`embed_documents`, through ``embed_queries`` when the embedder has one."""
    return _embed(embedder, texts, True, batch_size)
