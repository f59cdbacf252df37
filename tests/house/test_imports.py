"""Imports: the pure parts and the command's ``--help`` start without ovos-plugin-manager (about
half a second), and every third-party package the package imports is declared."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ovos_memory_plugins"
HEAVY = ("ovos_plugin_manager", "numpy")


def _loaded_after(code: str) -> set[str]:
    """Which of HEAVY a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "module",
    [
        "ovos_memory_plugins",
        "ovos_memory_plugins.common",
        "ovos_memory_plugins.config",
        "ovos_memory_plugins.errors",
        "ovos_memory_plugins.sticky_asks",
    ],
)
def test_pure_modules_import_without_the_plugin_manager(module: str) -> None:
    assert _loaded_after(f"import {module}") == set()


def test_the_command_help_imports_neither() -> None:
    code = (
        "import sys, contextlib, io\n"
        "sys.argv = ['ovos-memory', '--help']\n"
        "from ovos_memory_plugins.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main()"
    )
    assert _loaded_after(code) == set()


def test_the_base_class_is_still_importable_from_the_package() -> None:
    import ovos_memory_plugins
    from ovos_memory_plugins.base import BaseRetrievalMemory

    assert ovos_memory_plugins.BaseRetrievalMemory is BaseRetrievalMemory
    assert "BaseRetrievalMemory" in dir(ovos_memory_plugins)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = ovos_memory_plugins.no_such_name  # type: ignore[attr-defined]
    assert _loaded_after("from ovos_memory_plugins import BaseRetrievalMemory") >= {"ovos_plugin_manager"}


# -- declared dependencies ----------------------------------------------------------------------


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, set[str]]:
    """Extra ('' for the core dependencies) -> the distributions pyproject.toml declares, normalized."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"": project["dependencies"], **project.get("optional-dependencies", {})}
    return {
        extra: {_normalized(re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0]) for req in reqs}
        for extra, reqs in groups.items()
    }


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """The third-party top-level modules ``path`` imports: at module level, and inside functions."""
    top: set[str] = set()
    nested: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            root = name.split(".")[0]
            if root in sys.stdlib_module_names or root in ("ovos_memory_plugins", "__future__"):
                continue
            (top if node.col_offset == 0 else nested).add(root)
    return top, nested - top


#: Modules imported only where the kit runs (under pytest), never by a plugin.
TEST_ONLY = {"pytest"}

#: Package modules that load only with their extra (path prefix under the package -> extra).
EXTRA_MODULES = {"editor/": "editor", "storage/postgres": "postgres"}


def _distributions(module: str, owners: dict[str, list[str]]) -> set[str]:
    """The distributions providing ``module``; for one not installed here (an extra's), the
    distribution named like the module (``psycopg_pool`` -> ``psycopg-pool``)."""
    return {_normalized(d) for d in owners.get(module, [])} or {_normalized(module)}


#: Declared distributions no module imports, each with the reason it is declared anyway.
DECLARED_FOR_OTHER_REASONS = {
    "ovos-utils": "the command routes OVOS's own log lines through ovos_utils.log (also installed by OPM)",
}


def test_every_imported_package_is_declared() -> None:
    owners = packages_distributions()
    declared = _declared()
    anywhere = set().union(*declared.values())
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        top, nested = _imports(path)
        inside = path.relative_to(PACKAGE).as_posix()
        extras = [extra for prefix, extra in EXTRA_MODULES.items() if inside.startswith(prefix)]
        core = declared[""].union(*(declared.get(extra, set()) for extra in extras))
        for module in sorted(top | nested):
            if module in TEST_ONLY:
                continue
            dists = _distributions(module, owners)
            if module in top and not dists & core:
                problems.append(f"{rel}: imports {module} at module level; declare {sorted(dists)} in dependencies")
            elif not dists & anywhere:
                problems.append(f"{rel}: imports {module}; declare {sorted(dists)} in dependencies or an extra")
    assert problems == []


def test_nothing_declared_goes_unused() -> None:
    used: set[str] = set(DECLARED_FOR_OTHER_REASONS)
    owners = packages_distributions()
    for path in PACKAGE.rglob("*.py"):
        top, nested = _imports(path)
        for module in top | nested:
            used |= _distributions(module, owners)
    assert sorted(_declared()[""] - used) == []


# -- no import circles --------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_at_load(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports when it is loaded: its module-level imports (in
    ``try`` / ``if`` blocks too, not under ``TYPE_CHECKING``), each with the packages above it."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                visit(node.orelse if "TYPE_CHECKING" in ast.unparse(node.test) else node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    own = _module_name(path)
    out = set()
    for name in found:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            if module in modules and module != own and not own.startswith(module + "."):
                out.add(module)
    return out


def test_no_module_imports_itself_back_when_it_loads() -> None:
    """No circle of module-level imports (an import inside a function, or under
    ``TYPE_CHECKING``, is not one: a shim that re-exports from modules that import it does so
    on first use, as ``storage/postgres/database.py`` does)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {name: _imported_at_load(path, set(paths)) for name, path in paths.items()}
    circles = []
    done: set[str] = set()

    def walk(name: str, trail: list[str]) -> None:
        if name in trail:
            circles.append(" -> ".join([*trail[trail.index(name) :], name]))
            return
        if name in done:
            return
        for dep in sorted(graph[name]):
            walk(dep, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])
    assert circles == []
