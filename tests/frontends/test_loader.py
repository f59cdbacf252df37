"""The one loader of plugins and persona files (``ovos_memory_plugins.loader``), and the
capabilities the front-ends read as declarations instead of guessing them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import our_memory_plugins

from ovos_memory_plugins import loader
from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.errors import BackendError

PACKAGE = Path(__file__).resolve().parents[2] / "ovos_memory_plugins"


def test_short_and_full_names_resolve_and_an_unknown_one_lists_what_is_installed() -> None:
    assert loader.resolve_plugin_name("lexical") == "ovos-memory-plugin-lexical"
    assert loader.resolve_plugin_name("ovos-memory-plugin-sticky") == "ovos-memory-plugin-sticky"
    with pytest.raises(loader.PluginNotFound) as caught:
        loader.resolve_plugin_name("lexicall")
    assert "'lexicall'" in str(caught.value) and "ovos-memory-plugin-lexical" in str(caught.value)
    assert isinstance(caught.value, BackendError) and isinstance(caught.value, LookupError)
    with pytest.raises(loader.PluginNotFound):
        loader.plugin_class("lexical")  # the class loader takes exact names only, as ovos-persona does


def test_only_the_named_plugin_is_imported() -> None:
    code = (
        "import sys; from ovos_memory_plugins import loader; loader.plugin_class('ovos-memory-plugin-sticky');"
        "print(sorted(m for m in ('ovos_memory_plugins.vector', 'ovos_memory_plugins.notes',"
        " 'ovos_memory_plugins.composite') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_persona_files_are_read_with_the_problem_named(tmp_path: Path) -> None:
    good = tmp_path / "ada.json"
    good.write_text(json.dumps({"memory_module": "ovos-memory-plugin-lexical", "ovos-memory-plugin-lexical": {"a": 1}}))
    assert loader.persona_memory(loader.read_persona(good), str(good)) == ("ovos-memory-plugin-lexical", {"a": 1})
    cases = {
        '{"memory_module": ': "is not valid JSON",
        "[1]": "must hold a JSON object",
        "{}": "names no memory_module",
        '{"memory_module": null}': "disables memory",
        '{"memory_module": 3}': "must be a string",
        '{"memory_module": "x", "x": [1]}': "must be a JSON object",
    }
    for text, expected in cases.items():
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(loader.PersonaFileError) as caught:
            loader.persona_memory(loader.read_persona(bad), str(bad))
        assert expected in str(caught.value) and str(bad) in str(caught.value)
    with pytest.raises(loader.PersonaFileError, match="cannot read"):
        loader.read_persona(tmp_path / "missing.json")


def test_no_other_module_finds_memory_plugins_itself() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "loader.py":
            continue
        text = path.read_text(encoding="utf-8")
        if "load_memory_plugin" in text or re.search(
            r"entry_points\(group=(GROUP|MEMORY_GROUP|\"opm\.agents\.memory\")", text
        ):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []


@pytest.mark.parametrize("name", our_memory_plugins())
def test_contributes_context_is_declared_where_context_blocks_adds_text(name: str) -> None:
    cls = loader.plugin_class(name)
    overrides = cls.context_blocks is not BaseRetrievalMemory.context_blocks
    assert cls.contributes_context is overrides, f"{name}: declare contributes_context = {overrides}"


def test_dreaming_is_declared_by_the_notes_memory(tmp_path: Path) -> None:
    from ovos_memory_plugins.editor.parts import find_parts
    from ovos_memory_plugins.notes import NotesMemory

    with NotesMemory({"root": str(tmp_path / "a")}) as plain:
        assert plain.can_dream is False
        assert find_parts(plain).capabilities()["dream"] is False
    llm = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}  # never called here
    with NotesMemory({"root": str(tmp_path / "b"), "llm": llm, "auto_curate": False}) as curated:
        assert curated.can_dream is True
        assert find_parts(curated).capabilities()["dream"] is True
