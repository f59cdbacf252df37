"""Config parsing: strict validation names key, value and what is accepted; lenient parsing falls back."""

from __future__ import annotations

import pytest

from ovos_memory_plugins import ConfigError, validate_config
from ovos_memory_plugins.config import MemoryConfig, describe, parse_config, resolve_root
from ovos_memory_plugins.testing import InMemoryMemory


def test_defaults() -> None:
    parsed = validate_config({})
    m = parsed.memory
    assert (m.max_history, m.inject_mode, m.scope, m.namespace) == (10, "system", "global", "default")
    assert m.retrieval.max_num_results == 5 and m.retrieval.query_history_turns == 3


def test_every_problem_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        validate_config(
            {
                "inject_mode": "telepathy",
                "max_history": -1,
                "retreival": {},
                "retrieval": {"max_num_results": "5", "query_mode": "both", "wat": 1},
                "namespace": "../etc",
                "user_template": "{nope}",
            }
        )
    text = str(info.value)
    problems = info.value.problems
    assert isinstance(info.value, ValueError)
    assert "key 'inject_mode': 'telepathy' is not accepted; expected 'system' | 'developer'" in text
    assert any("'max_history': -1" in p and ">= 0" in p for p in problems)
    assert any("unknown key 'retreival' (did you mean 'retrieval'?)" in p for p in problems)
    assert any("retrieval.max_num_results" in p and "integer" in p for p in problems)
    assert any("retrieval.query_mode" in p and "'utterance' | 'history'" in p for p in problems)
    assert any("unknown key 'retrieval.wat'" in p for p in problems)
    assert any("'namespace'" in p for p in problems)
    assert any("'user_template'" in p and "{utterance}" in p for p in problems)
    assert len(problems) == 8


def test_lenient_parse_falls_back_per_key() -> None:
    parsed = parse_config({"inject_mode": "nope", "max_history": 4, "retrieval": {"max_num_results": True}})
    assert parsed.memory.inject_mode == "system"
    assert parsed.memory.max_history == 4
    assert parsed.memory.retrieval.max_num_results == 5
    assert len(parsed.problems) == 2
    assert parse_config(["not", "a", "dict"]).problems  # type: ignore[arg-type]


def test_constructor_logs_and_never_raises(caplog: pytest.LogCaptureFixture, tmp_path) -> None:
    mem = InMemoryMemory({"inject_mode": 3, "root": str(tmp_path)})
    assert mem.settings.inject_mode == "system"
    assert "inject_mode" in caplog.text
    mem.close()


def test_root_expansion(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME")
    assert resolve_root(MemoryConfig(root="~/mem")) == tmp_path / "mem"
    assert resolve_root(MemoryConfig(namespace="ada")) == tmp_path / ".local/share/ovos/memory/ada"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_root(MemoryConfig()) == tmp_path / "xdg/ovos/memory/default"


def test_validate_with_plugin_class_accepts_its_keys() -> None:
    from dataclasses import dataclass

    from ovos_memory_plugins.config import option

    @dataclass
    class Opts:
        colour: str = option("red", doc="A colour.")

    class Coloured(InMemoryMemory):
        options_class = Opts

    assert validate_config({"colour": "blue"}, plugin=Coloured).options.colour == "blue"
    with pytest.raises(ConfigError, match="colour"):
        validate_config({"colour": 1}, plugin=Coloured)
    with pytest.raises(ConfigError, match="colour"):
        validate_config({"colour": "blue"})


def test_describe_lists_nested_keys() -> None:
    keys = {k.key: k for k in describe(MemoryConfig)}
    assert "retrieval.max_num_results" in keys and "context.tool_name" in keys
    assert keys["max_history"].default == 10 and keys["max_history"].type == "integer"
