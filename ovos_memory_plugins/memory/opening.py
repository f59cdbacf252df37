"""Opening a memory's storage: where it keeps its files (known before it is built), the one
database opened through the storage registry (RAM, and an ERROR, when it cannot be), and the
rolling summary over it. Part of :class:`~ovos_memory_plugins.base.BaseRetrievalMemory`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ovos_memory_plugins.config import MemoryConfig, resolve_file, resolve_root
from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.memory.state import MemoryState
from ovos_memory_plugins.storage.registry import open_storage
from ovos_memory_plugins.storage.seam import Database, Storage
from ovos_memory_plugins.storage.summary_store import open_summary_store
from ovos_memory_plugins.summary import RollingSummary

LOG = logging.getLogger("ovos_memory_plugins.base")  # the name its records always had


class OpeningMixin(MemoryState):
    """Storage locations and opening (:class:`~ovos_memory_plugins.base.BaseRetrievalMemory`'s part)."""

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
        if type(self)._open_state_database is not OpeningMixin._open_state_database:
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
