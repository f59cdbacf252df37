"""Which engine opens a storage location: engines registered by URL scheme.

``open_storage(location)`` looks at the location: ``scheme://...`` opens with the engine
registered for that scheme (``postgresql`` and ``postgres``: :mod:`~ovos_memory_plugins.storage.postgres.database`),
anything else is a SQLite file path (or ``":memory:"``) and an open SQLite
:class:`~ovos_memory_plugins.storage.sqlite.Database` is wrapped as it is. An engine module is
imported only when a location of its scheme is opened, so SQLite users never import psycopg.

A second engine registers itself with :func:`register_engine` (its module must define
``open_storage(location, *, namespace="default", **options) -> Storage``, see
:mod:`~ovos_memory_plugins.storage.seam`, and ``check_server(url) -> list[str]``, the problems of
a server found without writing); nothing above ``storage/`` names an engine: front-ends ask
:func:`check_server` and :func:`folder_problem` here.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

from ovos_memory_plugins.errors import StorageError

if TYPE_CHECKING:  # the contract's types only: the contract never imports back at run time
    from ovos_memory_plugins.storage.seam import Database, Storage

__all__ = [
    *["ENGINES", "check_server", "engine_for", "folder_problem", "is_url", "open_storage", "redact_url"],
    "register_engine",
]

#: URL scheme -> the module of the engine that opens it (imported on first use).
ENGINES: dict[str, str] = {
    "postgresql": "ovos_memory_plugins.storage.postgres.database",
    "postgres": "ovos_memory_plugins.storage.postgres.database",
}
#: The engine of every location that is not a URL: a SQLite file.
SQLITE_ENGINE = "ovos_memory_plugins.storage.sqlite.engine"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def register_engine(scheme: str, module: str) -> None:
    """Open ``scheme://...`` locations with the ``open_storage`` of ``module`` (a dotted name)."""
    ENGINES[scheme.lower()] = module


def is_url(location: str | Path) -> bool:
    """Whether ``location`` is a ``scheme://`` URL (a database server), not a file path."""
    return _SCHEME.match(str(location).strip()) is not None


def redact_url(url: str) -> str:
    """A database URL as logs, errors and ``stats()`` may show it: its user and password
    replaced by ``***`` and without its query (which may carry a password too)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not even a URL: keep the scheme, mask the rest
        return url.split("://", 1)[0] + "://***" if "://" in url else "***"
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"***@{host}" if "@" in parts.netloc else host
    return urlunsplit(parts._replace(netloc=netloc, query="", fragment=""))


def engine_for(location: str) -> str:
    """The module of the engine that opens ``location``; :class:`StorageError` for an unknown scheme."""
    found = _SCHEME.match(location.strip())
    if found is None:
        return SQLITE_ENGINE
    scheme = found.group(1).lower()
    if scheme not in ENGINES:
        known = ", ".join(f"{s}://" for s in sorted(ENGINES))
        raise StorageError(f"no storage engine for {scheme}:// locations (known: {known}, or a SQLite file path)")
    return ENGINES[scheme]


def open_storage(location: str | Path | Database, **options: Any) -> Storage:
    """Open a memory's storage at ``location`` with the engine its scheme names.

    ``options`` go to the engine (SQLite: ``vector_extension`` = load sqlite-vec, ``adopt`` = the
    shared file of earlier releases to copy in first, ``legacy`` = files whose rows move in; see
    :func:`ovos_memory_plugins.storage.sqlite.engine.open_sqlite`; PostgreSQL: ``namespace`` and
    the deadlines). Raises :class:`~ovos_memory_plugins.errors.StorageError` when it cannot; the
    caller decides whether to fall back to RAM (and must say so).
    """
    if not isinstance(location, (str, Path)):
        from ovos_memory_plugins.storage.sqlite.engine import storage_for

        return storage_for(location)
    text = str(location)
    module = importlib.import_module(engine_for(text))
    if module.__name__ == SQLITE_ENGINE:
        return cast("Storage", module.open_sqlite(text, **options))
    return cast("Storage", module.open_storage(text, **options))


def check_server(url: str) -> list[str]:
    """The problems of the database server at ``url`` (``[]``: it works), found by the
    ``check_server`` of the engine its scheme names (it connects, runs one query and writes
    nothing); an unknown scheme is the one problem."""
    try:
        module = importlib.import_module(engine_for(url))
    except StorageError as exc:
        return [str(exc)]
    return list(module.check_server(url))


def folder_problem(folder: Path) -> str | None:
    """Why a memory could not keep its files in ``folder`` (None: it could), found by the SQLite
    engine without writing anything (see :func:`ovos_memory_plugins.storage.sqlite.engine.folder_problem`)."""
    return cast("str | None", importlib.import_module(SQLITE_ENGINE).folder_problem(folder))
