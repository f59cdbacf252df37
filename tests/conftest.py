"""Shared fixtures: every test gets its own XDG data home, so nothing touches the real one.

``engine`` is the storage engine as a fixture parameter (ids ``sqlite`` and ``postgresql``): a test
of behaviour every engine shares asks for it and runs once per engine; ``-k sqlite`` or
``-k postgresql`` picks one. The PostgreSQL run uses the suite's throwaway server
(``tests/pg_server.py``) and skips with the server's reason where none can start, as every
PostgreSQL test does.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

import pytest
from pg_server import crashed_reason, postgres_server, postgres_url, record_crash, watch_for_crash  # noqa: F401  # the throwaway PostgreSQL fixtures


@pytest.fixture(autouse=True)
def _isolated_data_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    for var in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "OVOS_MEMORY_LLM_BASE_URL",
        "OVOS_MEMORY_LLM_API_KEY",
        "OVOS_MEMORY_EMBEDDING_BASE_URL",
        "OVOS_MEMORY_EMBEDDING_API_KEY",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


def our_memory_plugins() -> list[str]:
    """The ``opm.agents.memory`` entry points of this distribution, sorted. Each is loaded, so a
    backend that fails to import fails the test module that asks, instead of being skipped."""
    names = []
    for ep in distribution("ovos-memory-plugins").entry_points:
        if ep.group == "opm.agents.memory":
            ep.load()
            names.append(ep.name)
    return sorted(names)


# -- the storage engine as a fixture parameter -------------------------------------------------

ENGINES = ["sqlite", "postgresql"]
_namespaces = itertools.count()


@dataclass(frozen=True)
class Engine:
    """Where one test keeps its state on one engine.

    Attributes:
        name: ``"sqlite"`` or ``"postgresql"`` (the test id).
        folder: a fresh folder of the test's own: a memory's ``root`` (SQLite keeps its files there;
            on PostgreSQL nothing should land there).
        url: the database URL on PostgreSQL (``"database"`` in a memory's block), None on SQLite.
        namespace: a namespace no other test uses (on SQLite the folder already keeps tests apart).
    """

    name: str
    folder: Path
    url: str | None
    namespace: str

    @property
    def on_server(self) -> bool:
        """Whether the state lives in a database server rather than under :attr:`folder`."""
        return self.url is not None

    def open_storage(self, label: str = "memory", **options: Any) -> Any:
        """A fresh :class:`~ovos_memory_plugins.storage.seam.Storage` on this engine; ``label``
        names one of several in a test (a file of its own, or a namespace of its own)."""
        from ovos_memory_plugins.storage.registry import open_storage

        if self.url is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            return open_storage(self.folder / f"{label}.db", **options)
        return open_storage(self.url, namespace=f"{self.namespace}-{label}", **options)

    def memory_config(self, config: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """A memory's block on this engine: ``config`` and ``extra`` with ``root`` (this folder
        unless given) and, on PostgreSQL, ``database`` and a namespace. The namespace comes from
        the root, so a restart on the same root finds the same memory and two roots never meet."""
        block = {"root": str(self.folder), **(config or {}), **extra}
        if self.url is None:
            return block
        key = hashlib.sha256(str(block["root"]).encode()).hexdigest()[:12]
        namespace = f"{self.namespace}-{key}" if "namespace" not in block else f"{block['namespace']}-{key}"
        return {**block, "database": self.url, "namespace": namespace}


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """The storage engine under test (see :class:`Engine`); the PostgreSQL run skips with the
    reason where the suite's server cannot start, as every PostgreSQL test does."""
    namespace = f"e{next(_namespaces)}"
    if request.param == "sqlite":
        yield Engine("sqlite", tmp_path / "memory", None, namespace)
        return
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    if reason := crashed_reason():
        pytest.skip(f"{reason}; later PostgreSQL tests are skipped")
    url: str = request.getfixturevalue("postgres_url")
    yield Engine("postgresql", tmp_path / "memory", url, namespace)
    if report := record_crash(request.node.nodeid):
        pytest.fail(report, pytrace=False)


@pytest.fixture
def composite_where(engine: Engine, tmp_path: Path) -> dict[str, Any]:
    """A composite's placement on the engine under test (see :func:`engine`): a folder of its own
    (SQLite), or that and a namespace of its own on the suite's PostgreSQL; with a long history
    and a long write wait, as the composite tests of one storage want."""
    return engine.memory_config(root=str(tmp_path / "ada"), max_history=1000, write_timeout_ms=60000)


class OnEveryEngine:
    """Mixin for a kit class (``MemoryContract``, ``EngineContract``): each of its tests runs on
    every engine; ``make_memory`` builds its block with ``self.engine.memory_config(config)``."""

    engine: Engine

    @pytest.fixture(autouse=True)
    def _on_engine(self, engine: Engine) -> None:
        self.engine = engine
