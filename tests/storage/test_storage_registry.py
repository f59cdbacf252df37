"""``storage.registry.open_storage``: the engine chosen by the location's URL scheme."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ovos_memory_plugins.errors import StorageError
from ovos_memory_plugins.storage import engine, registry
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.storage.sqlite.engine import SqliteStorage


def test_a_path_opens_a_sqlite_file_and_an_open_database_is_wrapped(tmp_path: Path) -> None:
    storage = registry.open_storage(tmp_path / "memory.db")
    try:
        assert isinstance(storage, SqliteStorage) and (tmp_path / "memory.db").exists()
    finally:
        storage.close()
    db = Database(":memory:")
    wrapped = registry.open_storage(db)
    try:
        assert isinstance(wrapped, SqliteStorage) and wrapped.db is db
    finally:
        wrapped.close()


def test_schemes_pick_their_engine_and_an_unknown_one_is_named() -> None:
    assert registry.engine_for("postgresql://u@h/db") == "ovos_memory_plugins.storage.postgres.database"
    assert registry.engine_for("POSTGRES://u@h/db") == "ovos_memory_plugins.storage.postgres.database"
    assert registry.engine_for("/var/lib/memory/history.db") == registry.SQLITE_ENGINE
    assert registry.engine_for(":memory:") == registry.SQLITE_ENGINE
    with pytest.raises(StorageError, match=r"no storage engine for mysql:// locations \(known: postgres://"):
        registry.open_storage("mysql://u@h/db")


def test_a_registered_engine_opens_its_scheme(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    module = type(sys)("third_party_engine")
    opened: list[tuple[str, dict[str, object]]] = []

    def open_storage(location: str, **options: object) -> str:
        opened.append((location, options))
        return "storage"

    module.open_storage = open_storage  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "third_party_engine", module)
    monkeypatch.setitem(registry.ENGINES, "demo", "third_party_engine")
    assert registry.open_storage("demo://x", namespace="ada") == "storage"
    assert opened == [("demo://x", {"namespace": "ada"})]


def test_the_old_import_path_still_works() -> None:
    with pytest.warns(DeprecationWarning, match="moved to ovos_memory_plugins.storage.registry"):
        from ovos_memory_plugins.storage.engine import open_storage

    assert open_storage is registry.open_storage
    with pytest.raises(AttributeError):
        engine.no_such_name  # noqa: B018
