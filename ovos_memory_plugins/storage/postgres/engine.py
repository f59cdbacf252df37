"""The PostgreSQL engine's storage bundle: :func:`open_storage` opens one memory (one
``namespace``) of a database as a :class:`PgStorage`, which implements
:mod:`ovos_memory_plugins.storage.seam` (the same seam as the SQLite engine). Its documents are
:class:`~ovos_memory_plugins.storage.postgres.documents.PgDocuments` (still importable from
here), the memory's one documents table (``memory_documents``); its history,
keyword index and vector store are those of :mod:`~ovos_memory_plugins.storage.postgres.history`,
:mod:`~ovos_memory_plugins.storage.postgres.keyword` and
:mod:`~ovos_memory_plugins.storage.postgres.vector`, its schema
:mod:`~ovos_memory_plugins.storage.postgres.schema`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from ovos_memory_plugins.storage.postgres.database import PgDatabase
from ovos_memory_plugins.storage.postgres.documents import PgDocuments
from ovos_memory_plugins.storage.postgres.history import PgHistory
from ovos_memory_plugins.storage.postgres.keyword import DF_DELETE_NAMESPACE, PgKeywordIndex
from ovos_memory_plugins.storage.postgres.schema import MIGRATIONS
from ovos_memory_plugins.storage.postgres.vector import PgVectorStore
from ovos_memory_plugins.storage.records import KeywordSettings
from ovos_memory_plugins.storage.seam import Storage

if TYPE_CHECKING:
    from pathlib import Path

    from ovos_memory_plugins.storage.postgres.notes import PgRewrites

__all__ = ["DEFAULT_NAMESPACE", "PgDocuments", "PgStorage", "open_storage"]

#: The default namespace when none is given.
DEFAULT_NAMESPACE = "default"


# -- the storage bundle -----------------------------------------------------------------------


class PgStorage(Storage):
    """:class:`~ovos_memory_plugins.storage.seam.Storage` for one namespace of a PostgreSQL database."""

    db: PgDatabase
    #: A database several servers share: notes, undo history and markers live in it, not under ``root``.
    local: ClassVar[bool] = False
    #: Notes, sticky notes and summaries are tables of the database (``storage.tables``).
    table_stores: ClassVar[bool] = True

    def __init__(self, db: PgDatabase, namespace: str) -> None:
        db.migrate("memory", MIGRATIONS)
        super().__init__(
            db=db,
            documents=PgDocuments(db, namespace),
            history=PgHistory(db, namespace),
            keyword_factory=self._keyword,
            vector_factory=self._vectors,
        )
        self.namespace = namespace

    def _keyword(self, settings: KeywordSettings) -> PgKeywordIndex:
        return PgKeywordIndex(self.db, self.namespace, settings)

    def _vectors(self, search: str = "auto") -> PgVectorStore:
        return PgVectorStore(self.db, self.namespace)

    def rewrites(self, root: Path) -> PgRewrites:
        """The notes' previous bodies and last dream of the namespace, in the database (``root`` unused)."""
        from ovos_memory_plugins.storage.postgres.notes import PgRewrites

        return PgRewrites(self.db, self.namespace)

    def retire_indexes(self, active: Iterable[str]) -> None:
        """Drop the namespace's rows of indexes this memory no longer maintains (``"keyword"``,
        ``"vector"``), so no copy of a text stays in an index nobody updates on delete."""
        keep = set(active)
        with self.db.transaction() as conn:
            if "keyword" not in keep:
                conn.execute("DELETE FROM memory_keywords WHERE namespace = %s", (self.namespace,))
                conn.execute("DELETE FROM memory_keyword_postings WHERE namespace = %s", (self.namespace,))
                conn.execute(DF_DELETE_NAMESPACE, (self.namespace, self.namespace))
            if "vector" not in keep:
                conn.execute("DELETE FROM memory_vectors WHERE namespace = %s", (self.namespace,))
                conn.execute("DELETE FROM memory_vector_spaces WHERE namespace = %s", (self.namespace,))


def open_storage(location: str, *, namespace: str = DEFAULT_NAMESPACE, **options: Any) -> PgStorage:
    """Open one memory (``namespace``) of the PostgreSQL database at ``location`` (a URL).

    ``options``: ``connect_timeout``, ``statement_timeout``, ``pool_timeout``,
    ``max_connections`` (see :class:`PgDatabase`); SQLite-only options (``vector_extension``,
    ``legacy``) are ignored. Raises :class:`StorageError` when the database cannot be used.
    """
    known = {"connect_timeout", "statement_timeout", "pool_timeout", "max_connections"}
    db = PgDatabase(location, **{k: v for k, v in options.items() if k in known})
    try:
        return PgStorage(db, namespace)
    except Exception:
        db.close()
        raise
