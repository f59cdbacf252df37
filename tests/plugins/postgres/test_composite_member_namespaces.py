"""A composite on one PostgreSQL database (against a real throwaway server): parts of one memory
keep one namespace's rows (each exchange once); whole members (placed with a ``database`` of
their own) each get their own store key (``<namespace>.<member name>``), so they never share,
double or wipe each other's rows, as on SQLite where each has its own folder."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_plugin_manager.agents import find_memory_plugins

from ovos_memory_plugins.composite import CompositeMemory, member_namespace

LEXICAL, VECTOR = "ovos-memory-plugin-lexical", "ovos-memory-plugin-vector"
pytestmark = pytest.mark.skipif(
    not {LEXICAL, VECTOR} <= set(find_memory_plugins()), reason="needs the lexical and vector backends"
)
_ns = itertools.count()


def composite(url: str, namespace: str, root: Path, **extra: Any) -> CompositeMemory:
    members = [
        {"module": LEXICAL, "name": "words"},
        {"module": VECTOR, "name": "meaning", "config": {"embedder": "hash"}},
    ]
    return CompositeMemory({"database": url, "namespace": namespace, "root": str(root), "members": members, **extra})


def exchange(user: str, assistant: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def rows(url: str, table: str, namespace: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table} WHERE namespace = %s", (namespace,)).fetchone()
    return int(row[0]) if row else 0


def test_parts_keep_one_namespace_and_every_document_comes_once(postgres_url: str, tmp_path: Path) -> None:
    ns = f"comp-{next(_ns)}"
    words, meaning = member_namespace(ns, "words"), member_namespace(ns, "meaning")
    assert words == f"{ns}.words" and words != meaning
    facts = [
        ("My bike is a red Gazelle.", "A red Gazelle, noted."),
        ("The spare key is under the blue flower pot.", "Under the blue pot, got it."),
        ("My sister Ana lives in Porto.", "Ana in Porto, noted."),
    ]
    with composite(postgres_url, ns, tmp_path / "m") as mem:
        assert set(mem.members) == {"words", "meaning"} and not mem.skipped
        for user, assistant in facts:
            mem.update_history(exchange(user, assistant), "s")
        hits = mem.search("where is the spare key", top_k=10)
        sources = [h.source for h in hits]
        assert sources and len(sources) == len(set(sources))  # each document once
        assert "spare key" in hits[0].content
        assert len(mem.messages("s")) == 6  # the primary's history, not doubled
    # the parts wrote each exchange once, under the composite's namespace, and nothing per member
    assert rows(postgres_url, "memory_documents", ns) == 3 and rows(postgres_url, "memory_history", ns) == 6
    assert rows(postgres_url, "memory_keywords", ns) == 3 and rows(postgres_url, "memory_vectors", ns) == 3
    for key in (words, meaning):
        assert rows(postgres_url, "memory_documents", key) == rows(postgres_url, "memory_history", key) == 0
    assert not any((tmp_path / "m").rglob("*")) if (tmp_path / "m").exists() else True  # nothing under root

    with composite(postgres_url, ns, tmp_path / "m") as mem:  # a restart: no part wiped the other's index
        assert rows(postgres_url, "memory_keywords", ns) == 3 and rows(postgres_url, "memory_vectors", ns) == 3
        sources = [h.source for h in mem.search("red bike", top_k=10)]
        assert sources and len(sources) == len(set(sources))
        assert mem.forget_all() == 3
    for table in ("memory_documents", "memory_keywords", "memory_keyword_df", "memory_vectors", "memory_history"):
        assert rows(postgres_url, table, ns) == 0, table  # forgotten from every tier, in one transaction


def test_whole_members_each_keep_their_own_rows(postgres_url: str, tmp_path: Path) -> None:
    """Members placed with a ``database`` of their own are whole memories: each its own key."""
    ns = f"comp-{next(_ns)}"
    words, meaning = member_namespace(ns, "words"), member_namespace(ns, "meaning")
    members = [
        {"module": LEXICAL, "name": "words", "config": {"database": postgres_url}},
        {"module": VECTOR, "name": "meaning", "config": {"embedder": "hash", "database": postgres_url}},
    ]
    config = {"database": postgres_url, "namespace": ns, "root": str(tmp_path), "members": members}
    with CompositeMemory(config) as mem:
        assert mem.storage is None
        mem.update_history(exchange("My bike is a red Gazelle.", "A red Gazelle, noted."), "s")
        assert len(mem.messages("s")) == 2
    assert rows(postgres_url, "memory_documents", ns) == 0
    assert rows(postgres_url, "memory_documents", words) == rows(postgres_url, "memory_documents", meaning) == 1
    assert rows(postgres_url, "memory_keywords", words) == 1 and rows(postgres_url, "memory_vectors", meaning) == 1
    with CompositeMemory(config) as mem:
        assert mem.forget_all() == 1
    for key in (words, meaning):
        assert rows(postgres_url, "memory_documents", key) == 0


def test_a_member_block_may_name_its_own_namespace_and_sharing_one_is_refused(
    postgres_url: str, tmp_path: Path
) -> None:
    ns = f"comp-{next(_ns)}"
    members = [  # placed with a database of their own: whole members, which must not share a namespace
        {"module": LEXICAL, "name": "a", "config": {"namespace": f"{ns}-mine", "database": postgres_url}},
        {"module": LEXICAL, "name": "b", "config": {"namespace": f"{ns}-mine", "database": postgres_url}},
    ]
    with CompositeMemory({"database": postgres_url, "namespace": ns, "root": str(tmp_path), "members": members}) as mem:
        assert list(mem.members) == ["a"]
        assert "would share" in mem.skipped["b"] and f"{ns}-mine" in mem.skipped["b"]
        mem.update_history(exchange("The boiler was serviced in May.", "Noted."), "s")
        assert rows(postgres_url, "memory_documents", f"{ns}-mine") == 1
        mem.forget_all()


def test_long_namespaces_still_get_a_valid_distinct_key() -> None:
    ns = "n" * 128
    a, b = member_namespace(ns, "words"), member_namespace(ns, "meaning")
    assert a != b and len(a) <= 128 and len(b) <= 128
    assert member_namespace(ns, "words") == a  # stable across restarts
