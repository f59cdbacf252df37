"""The code in docs/writing-a-backend.md runs as written, and its backend passes the kit."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.testing import MemoryContract

DOC = Path(__file__).resolve().parent.parent / "docs" / "writing-a-backend.md"


def _doc_namespace() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 3
    module = types.ModuleType("writing_a_backend")  # dataclasses look their module up
    sys.modules[module.__name__] = module
    for block in blocks[:2]:
        exec(compile(block, str(DOC), "exec"), module.__dict__)
    return module.__dict__


def test_the_example_runs() -> None:
    ns = _doc_namespace()
    assert ns["messages"][-1].content == "where does my sister live"


class TestDocExampleContract(MemoryContract):
    survives_restart = False

    def make_memory(self, config: dict[str, Any]) -> Any:
        return _doc_namespace()["WordOverlapMemory"](config)


def test_doc_example_options_are_validated() -> None:
    from ovos_memory_plugins import ConfigError, validate_config

    cls = _doc_namespace()["WordOverlapMemory"]
    with pytest.raises(ConfigError, match="min_overlap"):
        validate_config({"min_overlap": 0}, plugin=cls)
