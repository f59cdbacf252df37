"""Storage is one door: plugins reach the database through the seam, and old import paths stay.

The package's source is parsed (not imported): no module imports ``storage.engine`` (kept only
for code written against earlier releases), no plugin imports an engine module or compares
an engine's name (they take their tables from the ``Storage``: ``storage.notes_store(...)``,
``storage.sticky_store(...)``, ``storage.summaries()``, ``storage.embedding_cache()``), and no
front-end (the command, the editor, the toolbox) imports an engine module either: it asks the
registry (``storage.registry.check_server``, ``folder_problem``). Only ``storage/`` names an engine.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from ovos_memory_plugins.storage import engine, records, seam
from ovos_memory_plugins.storage.registry import is_url, open_storage

PACKAGE = Path(__file__).resolve().parents[2] / "ovos_memory_plugins"

#: The folders of the engines (SQL of SQLite or PostgreSQL, their connections and schemas).
ENGINE_PACKAGES = ("ovos_memory_plugins.storage.sqlite", "ovos_memory_plugins.storage.postgres")
#: The old paths of engine modules, kept for a release: old module -> its new home.
OLD_ENGINE_PATHS = {
    "ovos_memory_plugins.storage.sqlite_engine": "ovos_memory_plugins.storage.sqlite.engine",
    "ovos_memory_plugins.storage.history": "ovos_memory_plugins.storage.sqlite.history",
    "ovos_memory_plugins.storage.vector_store": "ovos_memory_plugins.storage.sqlite.vector",
    "ovos_memory_plugins.storage.postgres_notes": "ovos_memory_plugins.storage.postgres.notes",
    "ovos_memory_plugins.storage.sqlite": "ovos_memory_plugins.storage.sqlite.database",
    "ovos_memory_plugins.storage.postgres": "ovos_memory_plugins.storage.postgres.database",
}
#: The plugins and the core they build on.
PLUGINS = [
    *["base.py", "index.py", "lexical.py", "vector.py", "sticky.py", "notebook.py", "summary.py"],
    *["composite/__init__.py", "composite/memory.py", "composite/options.py"],
    *["notes/__init__.py", "notes/body.py", "notes/digest.py", "notes/dreaming.py", "notes/memory.py"],
    *["notes/options.py", "notes/results.py", "notes/state.py"],
]
#: The front-ends: the command, the editor and the tool box (a folder each).
FRONT_ENDS = sorted(
    p.relative_to(PACKAGE).as_posix()
    for folder in ("cli", "editor", "toolbox")
    for p in (PACKAGE / folder).rglob("*.py")
)


def _is_engine(module: str) -> bool:
    return module in OLD_ENGINE_PATHS or module.startswith(tuple(f"{p}." for p in ENGINE_PACKAGES))


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # from storage import postgres
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_module_of_the_package_imports_the_old_engine_module() -> None:
    users = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.name != "engine.py" and "ovos_memory_plugins.storage.engine" in _imports(p)
    ]
    assert users == []


@pytest.mark.parametrize("name", PLUGINS)
def test_a_plugin_imports_no_engine_and_checks_no_engine_name(name: str) -> None:
    path = PACKAGE / name
    assert sorted(filter(_is_engine, _imports(path))) == []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            names = {p.attr for p in parts if isinstance(p, ast.Attribute)}
            values = {p.value for p in parts if isinstance(p, ast.Constant)}
            assert not ("engine" in names and values & {"sqlite", "postgresql"}), f"{name}:{node.lineno}"


def test_the_rule_sees_every_engine_module() -> None:
    engines = {
        ".".join(("ovos_memory_plugins", *p.relative_to(PACKAGE).with_suffix("").parts))
        for folder in ("sqlite", "postgres")
        for p in (PACKAGE / "storage" / folder).glob("*.py")
        if p.name != "__init__.py"
    }
    assert engines and all(map(_is_engine, engines))
    assert not _is_engine("ovos_memory_plugins.storage.seam") and not _is_engine("ovos_memory_plugins.storage.registry")


@pytest.mark.parametrize("name", FRONT_ENDS)
def test_a_front_end_imports_no_engine(name: str) -> None:
    assert sorted(filter(_is_engine, _imports(PACKAGE / name))) == []


#: What ``storage.engine`` held before it became the old home of the seam and the records.
OLD_ENGINE_NAMES = [
    *["MAX_ID_CHARS", "Compacted", "Document", "ForgetReport", "KeywordSettings", "StoredDocument"],
    *["StoredMessage", "check_id", "document_time", "dump_metadata", "CompactingDatabase", "Database"],
    *["DocumentStore", "HistoryStore", "Index", "Storage", "VectorStore", "compact_database"],
]


def test_the_old_import_paths_name_the_same_objects() -> None:
    for name in OLD_ENGINE_NAMES:
        home = records if hasattr(records, name) else seam
        assert getattr(engine, name) is getattr(home, name), name
    sqlite = importlib.import_module("ovos_memory_plugins.storage.sqlite")
    assert sqlite.Migration is records.Migration
    protocols = importlib.import_module("ovos_memory_plugins.protocols")
    assert protocols.Note is records.Note


@pytest.mark.parametrize("old", sorted(OLD_ENGINE_PATHS))
def test_an_old_engine_path_names_the_objects_of_its_new_home(old: str) -> None:
    if "postgres" in old:
        pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    shim, home = importlib.import_module(old), importlib.import_module(OLD_ENGINE_PATHS[old])
    assert shim.__all__ and set(shim.__all__) >= set(home.__all__)
    for name in shim.__all__:
        assert getattr(shim, name) is getattr(home, name), f"{old}.{name}"


def test_the_postgres_module_keeps_its_names() -> None:
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    pg = importlib.import_module("ovos_memory_plugins.storage.postgres")
    assert pg.PgMigration is records.Migration
    assert pg.tsquery_literal(["x", "it's"]) == "'x' | 'it''s'"


def test_a_url_is_shown_without_its_secrets() -> None:
    from ovos_memory_plugins.storage.registry import redact_url

    assert redact_url("postgresql://u:secret@h:5/db?sslpassword=x") == "postgresql://***@h:5/db"
    assert redact_url("postgresql://[::1/db") == "postgresql://***"


def test_is_url_tells_a_server_from_a_file() -> None:
    assert is_url("postgresql://u@h/db") and is_url("demo://x")
    assert not is_url("/var/lib/memory/history.db") and not is_url(":memory:") and not is_url(Path("a/b.db"))


def test_a_sqlite_file_says_which_tables_it_holds_without_creating_them(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "history.db")
    try:
        assert storage.local and storage.table_stores
        assert not storage.holds("notes") and not storage.holds("sticky") and not storage.holds("summaries")
        storage.sticky()
        assert storage.holds("sticky") and not storage.holds("notes")
        assert storage.embedding_cache() is not None
    finally:
        storage.close()


def test_an_engine_without_table_stores_refuses_them_by_name() -> None:
    from ovos_memory_plugins.errors import StorageError

    base = open_storage(":memory:")
    try:
        bare = seam.Storage(base.db, base.documents, base.history, base.keyword_factory, base.vector_factory)
        with pytest.raises(StorageError, match="keeps no notes tables"):
            bare.notes()
        with pytest.raises(StorageError, match="keeps no sticky-note tables"):
            bare.sticky()
        assert bare.embedding_cache() is None and bare.holds("notes")
    finally:
        base.close()
