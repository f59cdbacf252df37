"""What both engines' stores do alike, written once: the bases of their history stores
(:class:`EngineHistory`, over :class:`HistoryWrite`) and vector stores (:class:`EngineVectors`).
Each implements its :mod:`~ovos_memory_plugins.storage.seam` protocol (``HistoryStore``,
``VectorStore``) but for the one method the engine writes itself (``write_messages``,
``nearest``). Imports no engine.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ovos_memory_plugins.common import exchange_parts
from ovos_memory_plugins.storage.records import StoredDocument, StoredMessage

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]

__all__ = ["EngineHistory", "EngineVectors", "HistoryWrite"]


@dataclass(frozen=True)
class HistoryWrite:
    """One :meth:`EngineHistory.append` made plain: the session's new ``(role, content)``
    messages, ``exchange_ids`` (one per message, None: none), made at ``now``; ``keep`` (at
    least 0) and ``batch`` (at least 1): trim to the newest ``keep`` once the session holds
    ``keep + batch`` messages; ``last_exchange_id``: the session's new last exchange, or None."""

    session_id: str
    messages: Sequence[tuple[str, str]]
    exchange_ids: list[str | None]
    now: float
    keep: int
    batch: int
    last_exchange_id: str | None


class EngineHistory:
    """What both engines' history stores (the seam's ``HistoryStore``) share: a store that
    ``trims_in_batches``, whose :meth:`append` makes its arguments plain (a :class:`HistoryWrite`)
    and leaves the write to the engine's :meth:`write_messages`; the exchanges of earlier
    releases' untagged messages (:meth:`untagged_parts`)."""

    #: :meth:`append` takes ``batch`` and returns the messages it trimmed (see the seam's ``HistoryStore``).
    trims_in_batches = True

    def append(
        self,
        session_id: str,
        messages: Sequence[tuple[str, str]],
        keep: int,
        last_exchange_id: str | None = None,
        exchange_ids: Sequence[str | None] | None = None,
        *,
        created: float | None = None,
        batch: int = 1,
    ) -> list[StoredMessage]:
        """Append ``(role, content)`` messages (made at ``created``, default now); once the
        session holds ``keep + batch`` messages or more, trim it to its newest ``keep``; return
        the trimmed messages, oldest first."""
        ids: list[str | None] = list(exchange_ids) if exchange_ids is not None else [None] * len(messages)
        now = time.time() if created is None else created
        return self.write_messages(
            HistoryWrite(session_id, messages, ids, now, max(keep, 0), max(batch, 1), last_exchange_id)
        )

    def write_messages(self, write: HistoryWrite) -> list[StoredMessage]:
        """The engine's insert, chain update and trim of one :meth:`append`, in one
        transaction; the trimmed messages, oldest first."""
        raise NotImplementedError

    @staticmethod
    def untagged_parts(docs: Sequence[StoredDocument]) -> list[tuple[str, str, str]]:
        """``(session_id, question, answer)`` of each exchange document among ``docs``: what
        ``remove_exchanges`` deletes of the untagged messages of earlier releases."""
        found = []
        for doc in docs:
            parts = exchange_parts(doc.text)
            if parts is not None:
                found.append((doc.session_id, parts[0], parts[1]))
        return found


class EngineVectors:
    """What both engines' vector stores (the seam's ``VectorStore``) share: a store that
    ``filters_time``, whose :meth:`search` makes the query plain (a flat float32 vector; nothing for ``k <= 0``) and
    leaves the search to the engine's :meth:`nearest`."""

    #: Its ``search`` takes ``window=``: a ``(since, until)`` range of the documents' ``created``.
    filters_time: ClassVar[bool] = True

    def search(
        self,
        space: str,
        query: Vector,
        k: int,
        session_id: str | None = None,
        *,
        window: tuple[float, float] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` documents of ``space`` most similar to the unit vector ``query``, best first,
        as ``(doc_id, cosine similarity)``; ties go to the smaller doc id. With ``window``
        (``(since, until)``, seconds since the epoch), only documents made in it (``created``)."""
        if k <= 0:
            return []
        import numpy as np

        return self.nearest(space, np.asarray(query, dtype=np.float32).reshape(-1), k, session_id, window)

    def nearest(
        self, space: str, query: Vector, k: int, session_id: str | None, window: tuple[float, float] | None
    ) -> list[tuple[str, float]]:
        """:meth:`search` of a flat query vector, ``k`` at least 1."""
        raise NotImplementedError
