"""The docs keep up with the code: every registered plugin has its page, every config key is in
the configuration reference, and every ``ovos-memory`` command is in the CLI page."""

from __future__ import annotations

import argparse
import json
import re
from importlib.metadata import EntryPoint, distribution
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.cli import build_parser
from ovos_memory_plugins.config import MemoryConfig, describe

DOCS = Path(__file__).resolve().parents[2] / "docs"
PREFIX = "ovos-memory-plugin-"


def _entry_points() -> list[EntryPoint]:
    eps = [ep for ep in distribution("ovos-memory-plugins").entry_points if ep.group == "opm.agents.memory"]
    return sorted(eps, key=lambda ep: ep.name)


ENTRY_POINTS = _entry_points()


def _read(name: str) -> str:
    path = DOCS / name
    assert path.exists(), f"docs/{name} is missing"
    return path.read_text(encoding="utf-8")


def _documented_keys(text: str) -> set[str]:
    """Every `key` in backticks at the start of a table row of docs/configuration.md."""
    return set(re.findall(r"^\|\s*`([^`]+)`\s*\|", text, re.M))


def test_this_distribution_registers_plugins() -> None:
    assert ENTRY_POINTS, "no opm.agents.memory entry points: is the package installed (pip install -e .)?"


@pytest.mark.parametrize("ep", ENTRY_POINTS, ids=lambda ep: ep.name)
def test_every_registered_plugin_has_a_page(ep: EntryPoint) -> None:
    short = ep.name.removeprefix(PREFIX)
    page = _read(f"{short}.md")
    assert ep.name in page, f"docs/{short}.md never names the plugin {ep.name!r}"
    assert f"({short}.md)" in _read("index.md"), f"docs/index.md does not link {short}.md"
    assert ep.name in _read("choosing.md"), f"docs/choosing.md does not list {ep.name!r}"


def test_every_shared_key_is_in_the_reference() -> None:
    documented = _documented_keys(_read("configuration.md"))
    missing = [k.key for k in describe(MemoryConfig) if k.key not in documented]
    assert not missing, f"docs/configuration.md lacks shared keys {missing}: run python scripts/gen_config_docs.py"


@pytest.mark.parametrize("ep", ENTRY_POINTS, ids=lambda ep: ep.name)
def test_every_plugin_key_is_in_the_reference(ep: EntryPoint) -> None:
    cls = ep.load()  # a registered plugin that does not import is a bug too
    options = getattr(cls, "options_class", None)
    if options is None:
        return
    text = _read("configuration.md")
    section = text.split(f"## `{ep.name}`", 1)
    assert len(section) == 2, f"docs/configuration.md has no section for {ep.name}"
    documented = _documented_keys(section[1].split("\n## ", 1)[0])
    missing = [k.key for k in describe(options) if k.key not in documented]
    assert not missing, f"docs/configuration.md lacks {ep.name} keys {missing}: run python scripts/gen_config_docs.py"


def test_every_command_is_in_the_cli_page() -> None:
    page = _read("cli.md")
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [name for name in sub.choices if f"ovos-memory {name}" not in page]
    assert not missing, f"docs/cli.md does not show the commands {missing}"


def test_the_topic_pages_exist_and_are_linked() -> None:
    index = _read("index.md")
    for page in ("cli.md", "choosing.md", "migration.md", "ovos-openai.md", "configuration.md"):
        assert _read(page).strip()
        assert f"({page})" in index, f"docs/index.md does not link {page}"
    assert '"allow_system_prompts": true' in _read("ovos-openai.md")


README = DOCS.parent / "README.md"


def _persona_examples() -> list[Any]:
    """Every JSON block of README.md and docs/*.md that is a whole persona (has memory_module)."""
    out = []
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        blocks = re.findall(r"```json\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
        for n, block in enumerate(blocks, start=1):
            try:
                data = json.loads(block)
            except json.JSONDecodeError:
                continue  # a fragment, not a whole persona
            if isinstance(data, dict) and data.get("memory_module"):
                out.append(pytest.param(path.name, data, id=f"{path.name}#{n}"))
    return out


@pytest.mark.parametrize(("page", "persona"), _persona_examples())
def test_persona_examples_in_the_docs_are_valid(page: str, persona: dict[str, Any]) -> None:
    """The memory block validates, and every handler is an installed plugin (a persona naming
    one that is not is refused by ovos-persona; ovos-openai-plugin's chat engine, for one, is
    ``ovos-chat-openai-plugin``)."""
    from ovos_memory_plugins.cli import handler_warnings
    from ovos_memory_plugins.config import validate_config

    module = str(persona["memory_module"])
    validate_config(persona.get(module) or {}, plugin=module)
    if "handlers" in persona or "solvers" in persona:  # else an excerpt: only the memory part
        assert not handler_warnings(persona), f"{page}: {handler_warnings(persona)}"


def test_relative_links_resolve() -> None:
    """Every relative link of README.md and docs/*.md points at a file that exists."""
    dead = []
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (path.parent / target.split("#", 1)[0]).exists():
                dead.append(f"{path.name}: {target}")
    assert not dead, f"dead links: {dead}"


def test_the_configuration_reference_is_what_the_code_generates() -> None:
    """docs/configuration.md is written by scripts/gen_config_docs.py from the option docs in the
    code: an edit by hand (or a changed option) that the other side lacks fails here."""
    import importlib.util

    script = DOCS.parent / "scripts" / "gen_config_docs.py"
    spec = importlib.util.spec_from_file_location("gen_config_docs", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.render() == _read("configuration.md"), (
        "docs/configuration.md differs from the option docs in the code: change the option's doc= and run "
        "python scripts/gen_config_docs.py"
    )
