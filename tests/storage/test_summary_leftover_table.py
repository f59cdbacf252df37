"""An earlier release's ``summaries`` table that must stay: read once per open, shown in ``stats()``.

Real SQLite files written as that release wrote them (helpers of tests/storage/test_summary_store.py);
the reads are counted with a trace callback on the store's real connection; the operator's view
through the real command (``ovos-memory stats``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from test_summary_store import lexical, make_old_release_file, talk

from ovos_memory_plugins.cli import main
from ovos_memory_plugins.storage.sqlite.database import Database
from ovos_memory_plugins.storage.summary_store import SummaryStore

UNEXPECTED = "ALTER TABLE summaries ADD COLUMN mood TEXT"


def reads_of_old_table(path: Path) -> tuple[list[str], SummaryStore]:
    """The statements that inspect the old table while a store opens ``path``, and the store."""
    db = Database(path)
    seen: list[str] = []
    db.conn.set_trace_callback(
        lambda sql: seen.append(sql) if "table_info(summaries)" in sql or "typeof(session_id)" in sql else None
    )
    try:
        return seen, SummaryStore(db)
    finally:
        db.conn.set_trace_callback(None)
        db.close()


def test_an_unexpected_old_table_is_read_once_on_the_first_open_and_on_later_ones(tmp_path: Path) -> None:
    path = make_old_release_file(tmp_path / "mem", alter=UNEXPECTED)
    first, store = reads_of_old_table(path)  # migration 0002 not applied yet: the plan reads it
    assert store.leftover is not None and "its columns are" in store.leftover
    assert len([s for s in first if "table_info" in s]) == 1, first
    later, store = reads_of_old_table(path)  # 0002 applied (new table only): read for the report
    assert store.leftover is not None and "its columns are" in store.leftover
    assert len([s for s in later if "table_info" in s]) == 1, later


def test_a_table_with_values_of_other_types_is_read_once(tmp_path: Path) -> None:
    path = make_old_release_file(tmp_path / "mem", extra_rows=[("odd", "- a summary", "many", 1.0)])
    seen, store = reads_of_old_table(path)
    assert store.leftover is not None and "values of other types" in store.leftover
    assert len([s for s in seen if "typeof(session_id)" in s]) == 1, seen


def test_a_table_that_moves_leaves_nothing_to_report(tmp_path: Path) -> None:
    path = make_old_release_file(tmp_path / "mem")
    seen, store = reads_of_old_table(path)
    assert store.leftover is None and len([s for s in seen if "typeof(session_id)" in s]) == 1
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'summaries'").fetchone() is None
    finally:
        conn.close()


def test_stats_show_the_leftover_and_the_command_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fresh, old = tmp_path / "fresh", tmp_path / "old"
    with lexical(fresh) as mem:
        talk(mem, "s", 3)
        assert mem.stats()["summary"] == {"sessions": 1, "leftover": None}
    make_old_release_file(old, alter=UNEXPECTED)
    with lexical(old) as mem:
        summary = mem.stats()["summary"]
    assert summary["sessions"] == 0 and "its columns are" in summary["leftover"]

    argv = ["stats", "--module", "ovos-memory-plugin-lexical", "--root", str(old), "--config", '{"max_history": 2}']
    assert main(["--json", *argv]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "its columns are" in data["summary"]["leftover"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("summary.leftover: its columns are (session_id") for line in lines), lines


def test_with_the_summary_off_stats_have_no_summary_key(tmp_path: Path) -> None:
    with lexical(tmp_path / "m", summary={"enabled": False}) as mem:
        assert "summary" not in mem.stats()
