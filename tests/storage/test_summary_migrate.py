"""``ovos-memory migrate`` says in words what moved (notes, sticky notes, rolling summaries, as
its ``--json`` does), and the rolling summaries move with a memory between engines."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from trust_helpers import prime_summary

from ovos_memory_plugins.cli import main as cli
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.sticky import StickyMemory
from ovos_memory_plugins.testing import exchange

_ns = itertools.count()


def talk(mem: Any, session: str, n: int) -> None:
    for i in range(n):
        mem.update_history(exchange(f"Fact number {i}: my locker code is {1000 + i}.", f"Noted {i}."), session)


def migrate_text(capsys: pytest.CaptureFixture[str], module: str, config: dict[str, Any], to: str) -> str:
    """The text ``ovos-memory migrate`` prints (no ``--json``)."""
    capsys.readouterr()
    assert cli(["migrate", "--module", module, "--config", json.dumps(config), "--to", to, "--quiet"]) == 0
    return capsys.readouterr().out


def test_the_text_output_names_the_notes_and_summaries_that_moved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = {"root": str(tmp_path / "a"), "store": "sqlite", "max_history": 2}
    with NotesMemory(first) as mem:
        mem.remember("User lives in Lisbon")
        mem.remember("User's cat is called Bartholomew")
        for session in ("kitchen", "porch"):
            prime_summary(mem, session)  # stored summaries (the lazy fold writes on trims)
            talk(mem, session, 3)
        summaries = {s: mem.session_summary(s) for s in ("kitchen", "porch")}
        assert all(summaries.values())
    text = migrate_text(capsys, "ovos-memory-plugin-notes", first, str(tmp_path / "b"))
    assert "2 note(s)" in text and "0 sticky note(s)" in text and "2 rolling summaries" in text
    assert "history message(s)" in text and str(tmp_path / "b") in text
    with NotesMemory({**first, "root": str(tmp_path / "b")}) as mem:
        assert {s: mem.session_summary(s) for s in summaries} == summaries
        assert [n.text for n in mem.list_notes()] == ["User lives in Lisbon", "User's cat is called Bartholomew"]


def test_the_text_output_names_the_sticky_notes_that_moved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = {"root": str(tmp_path / "a")}
    with StickyMemory(first) as mem:
        mem.remember("the gate code is 4471", "porch")
    text = migrate_text(capsys, "ovos-memory-plugin-sticky", first, str(tmp_path / "b"))
    assert "1 sticky note(s)" in text and "0 note(s)" in text and "0 rolling summaries" in text


def test_rolling_summaries_go_to_postgres_and_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], postgres_url: str
) -> None:
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    namespace = f"summary-migrate-{next(_ns)}"
    first = {"root": str(tmp_path / "a"), "namespace": namespace, "max_history": 2}
    with LexicalMemory(first) as mem:
        prime_summary(mem, "s")  # stored summaries (the lazy fold writes on trims)
        prime_summary(mem, "t")
        talk(mem, "s", 4)
        talk(mem, "t", 3)
        before = {s: mem.session_summary(s) for s in ("s", "t")}
    assert "2 rolling summaries" in migrate_text(capsys, "ovos-memory-plugin-lexical", first, postgres_url)
    on_pg = {"database": postgres_url, "namespace": namespace, "max_history": 2}
    with LexicalMemory(on_pg) as mem:
        assert {s: mem.session_summary(s) for s in before} == before
    capsys.readouterr()
    back = ["migrate", "--module", "ovos-memory-plugin-lexical", "--config", json.dumps(on_pg)]
    assert cli([*back, "--to", str(tmp_path / "b"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["summaries"] == 2
    with LexicalMemory({**first, "root": str(tmp_path / "b")}) as mem:
        assert {s: mem.session_summary(s) for s in before} == before
        talk(mem, "s", 1)  # the fold goes on from the copied summary
        assert "locker code is 1000" in mem.session_summary("s")
    with LexicalMemory(on_pg) as mem:
        mem.forget_all()
