"""The code in docs/writing-a-backend.md runs as written, and its backend passes the kit."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ovos_memory_plugins.testing import MemoryContract

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-a-backend.md"


def _blocks() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 5  # the backend, its use, the session-keeping backend, the kit, compact()
    return blocks


def _doc_namespace() -> dict[str, Any]:
    module = types.ModuleType("writing_a_backend")  # dataclasses look their module up
    sys.modules[module.__name__] = module
    for block in _blocks()[:3]:
        exec(compile(block, str(DOC), "exec"), module.__dict__)
    return module.__dict__


def test_the_example_runs() -> None:
    ns = _doc_namespace()
    assert ns["messages"][-1].content == "where does my sister live"


class TestDocExampleContract(MemoryContract):
    survives_restart = False

    def make_memory(self, config: dict[str, Any]) -> Any:
        return _doc_namespace()["WordOverlapMemory"](config)


class TestDocSessionExampleContract(MemoryContract):
    survives_restart = False

    def make_memory(self, config: dict[str, Any]) -> Any:
        return _doc_namespace()["SessionWordOverlapMemory"](config)


@pytest.mark.parametrize("hook", ["_session_document_ids", "_delete_all"])
def test_leaving_out_a_session_hook_raises_as_the_page_says(hook: str) -> None:
    ns = _doc_namespace()
    source = _blocks()[2]
    start = source.index(f"    def {hook}(")
    end = source.find("\n    def ", start + 1)
    trimmed = source[:start] + (source[end + 1 :] if end != -1 else "")
    with pytest.raises(TypeError) as caught:
        exec(compile(trimmed, str(DOC), "exec"), dict(ns))
    message = str(caught.value)
    assert "SessionWordOverlapMemory: it keeps sessions itself (_query_session) and deletes" in message
    assert hook in message
    page = " ".join(DOC.read_text(encoding="utf-8").split())
    if hook == "_session_document_ids":
        assert " ".join(message.split(": ", 1)[1].split(":")[0].split()) in page


def test_doc_example_options_are_validated() -> None:
    from ovos_memory_plugins import ConfigError, validate_config

    cls = _doc_namespace()["WordOverlapMemory"]
    with pytest.raises(ConfigError, match="min_overlap"):
        validate_config({"min_overlap": 0}, plugin=cls)


def test_the_compact_example_leaves_no_deleted_text_in_its_own_file(tmp_path: Path) -> None:
    from ovos_memory_plugins.testing import exchange

    ns = _doc_namespace()
    exec(compile(_blocks()[4], str(DOC), "exec"), ns)
    cls = ns["FileWordOverlapMemory"]
    with cls({"root": str(tmp_path)}) as memory:
        memory._db.execute("PRAGMA secure_delete = OFF")  # SQLite's default (this build turns it on)
        memory.update_history(exchange("my locker code is zanzibar-4471", "Noted."), "s")
        memory.update_history(exchange("my sister lives in Porto", "Porto is lovely"), "s")
        memory.forget_session("s")
        assert b"zanzibar" in memory.file.read_bytes()  # deleted, yet readable in a free page
        done = memory.compact()
        assert str(memory.file) in done and not done.skipped
        assert not any(b"zanzibar" in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
        memory.update_history(exchange("my cat is called Miso", "Nice."), "s")
    with cls({"root": str(tmp_path)}) as memory:  # its documents came back from its file
        assert "Miso" in memory.search("cat")[0].content


class TestDocFileExampleContract(MemoryContract):
    def make_memory(self, config: dict[str, Any]) -> Any:
        ns = _doc_namespace()
        exec(compile(_blocks()[4], str(DOC), "exec"), ns)
        return ns["FileWordOverlapMemory"](config)
