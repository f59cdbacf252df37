"""``MemoryHit``, the common currency of every backend, and what every backend does with hits
(their key, copies without repeats, the text of an exchange).

The rank-fusion functions live in :mod:`ovos_memory_plugins.fusion`; their old names here
(``fuse``, ``fuse_rrf``, ``FUSION_METHODS``, ...) still import, from there.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, TypeVar

__all__ = [
    "Closing",
    "MemoryHit",
    "copy_hit",
    "dedup_hits",
    "exchange_parts",
    "exchange_text",
    "normalize_content",
]

#: Names that moved to :mod:`ovos_memory_plugins.fusion` (``FUSION_METHODS`` is its ``FUSIONS``).
_MOVED_TO_FUSION = frozenset(
    {"fuse", "fuse_interleave", "fuse_merge", "fuse_points", "fuse_priority", "fuse_rrf", "fuse_weighted"}
)


def __getattr__(name: str) -> Any:
    """The fusion names of earlier releases, from :mod:`ovos_memory_plugins.fusion` (imported on
    first use: that module imports this one)."""
    if name in _MOVED_TO_FUSION or name == "FUSION_METHODS":
        from ovos_memory_plugins import fusion

        return fusion.FUSIONS if name == "FUSION_METHODS" else getattr(fusion, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_Closing = TypeVar("_Closing", bound="Closing")


class Closing:
    """``with thing:`` closes ``thing`` at the end of the block (memories, servers, clients).

    A subclass implements :meth:`close`; one that must start first (a server) overrides
    ``__enter__`` to start and return itself.
    """

    def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    def __enter__(self: _Closing) -> _Closing:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass
class MemoryHit:
    """One recalled memory.

    Attributes:
        content: the stored text.
        source: where it came from; for stored documents, the document id.
        score: the backend's relevance score, higher is better. Only comparable within one
            backend's result list; fusion functions turn lists into fused scores.
        metadata: what was stored with the document (``store(..., metadata=...)``), plus
            ``session_id`` where the backend knows it.
    """

    content: str
    source: str = ""
    score: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)


def exchange_text(user: str, assistant: str) -> str:
    """The document one completed exchange becomes."""
    return f"Q: {user}\nA: {assistant}"


def exchange_parts(text: str) -> tuple[str, str] | None:
    """``(user, assistant)`` of an exchange document's text (the inverse of :func:`exchange_text`),
    else None."""
    if not text.startswith("Q: "):
        return None
    user, sep, assistant = text[3:].partition("\nA: ")
    return (user, assistant) if sep else None


@functools.lru_cache(maxsize=256)
def normalize_content(text: str) -> str:
    """The key two hits are considered the same by: NFKC, case-folded, whitespace collapsed.
    A turn asks it for the same texts again (the search's dedup, then the prompt's selection):
    the last 256 are remembered."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def copy_hit(hit: MemoryHit, score: float) -> MemoryHit:
    """A copy of ``hit`` with ``score`` (and a metadata dict of its own)."""
    return replace(hit, score=score, metadata=dict(hit.metadata))


def dedup_hits(hits: Sequence[MemoryHit]) -> list[MemoryHit]:
    """Copies of ``hits`` in order, without later hits whose normalised content repeats one."""
    seen: set[str] = set()
    out: list[MemoryHit] = []
    for hit in hits:
        key = normalize_content(hit.content)
        if key in seen:
            continue
        seen.add(key)
        out.append(copy_hit(hit, hit.score))
    return out
