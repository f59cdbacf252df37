"""A bulk load after ``forget_all`` keeps its speed: stale planner statistics are refreshed.

After a memory is wiped, ``ANALYZE`` (the background VACUUM, or autovacuum) records its tables as
empty. A connection keeps a generic plan for a statement it runs often, and one made from those
statistics scans a whole table where an index finds one row: every batch of a bulk load then
cost more than the one before (measured: 1,741 down to 263 documents/s within 8,000 documents).
A batch now first checks the statistics and analyses the tables again when they are stale.
Against a real throwaway server, on a database of its own (the statistics are per table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

import psycopg

from ovos_memory_plugins.lexical import LexicalMemory


def documents(first: int, n: int) -> list[tuple[str, str, str, dict[str, Any] | None]]:
    return [
        (f"doc-{i:06d}", f"Note {i}: the locker {i % 97} holds a red scarf and {i % 13} umbrellas.", f"s{i % 20}", None)
        for i in range(first, first + n)
    ]


def planner_rows(url: str) -> dict[str, float]:
    """What the planner believes each batch table holds (``pg_class.reltuples``)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, reltuples FROM pg_class WHERE relname IN ('memory_documents', 'memory_keywords')"
        ).fetchall()
    return {str(r[0]): float(r[1]) for r in rows}


def test_a_bulk_load_after_forget_all_refreshes_the_planner_statistics(postgres_server: Any, tmp_path: Path) -> None:
    url = postgres_server.create_database("stale_statistics")
    with LexicalMemory({"database": url, "namespace": "first", "root": str(tmp_path / "a")}) as first:
        first.put_documents(documents(0, 300))
        first.forget_all()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # what the background VACUUM or autovacuum does after a wipe
    assert planner_rows(url) == {"memory_documents": 0.0, "memory_keywords": 0.0}
    with LexicalMemory({"database": url, "namespace": "second", "root": str(tmp_path / "b")}) as second:
        second.put_documents(documents(0, 800))
        assert planner_rows(url) == {"memory_documents": 0.0, "memory_keywords": 0.0}  # nothing stale yet
        second.put_documents(documents(800, 500))  # the tables grew past 8 pages: analysed first
        seen = planner_rows(url)
        assert seen["memory_documents"] >= 600 and seen["memory_keywords"] >= 600
        assert [h.content for h in second.search("locker 42 scarf", top_k=1)] != []
        second.put_documents(documents(1300, 500))  # statistics current: not analysed again
        assert planner_rows(url) == seen
