"""Time windows on every index and both engines (issue 26): the keyword, vector and hybrid
memories, on a real SQLite file and on real PostgreSQL (tests/pg_server.py), dated through the
``clock=`` seam, keep ``search(..., window=)`` to the documents made then, and a turn asked
"what did I tell you yesterday?" brings yesterday's exchanges first, dated."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import Engine
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

from ovos_memory_plugins.base import BaseRetrievalMemory
from ovos_memory_plugins.index import HybridIndex, VectorIndex
from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.vector import VectorMemory

UTC = timezone.utc
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)  # a Wednesday
_ns = itertools.count()


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


BACKENDS: dict[str, tuple[type[BaseRetrievalMemory], dict[str, Any]]] = {
    "keyword": (LexicalMemory, {}),
    "vector": (VectorMemory, {"embedder": "hash"}),
    "hybrid": (VectorMemory, {"embedder": "hash", "hybrid": True}),
}


@pytest.fixture
def where(engine: Engine, tmp_path: Path) -> dict[str, Any]:
    """Where a memory lives: its own SQLite file, or its own namespace on the test server."""
    return engine.memory_config(root=str(tmp_path / "m"))


def _say(mem: BaseRetrievalMemory, user: str, assistant: str) -> None:
    pair = [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]
    mem.update_history(pair, "s")


def _fill(mem: BaseRetrievalMemory, clock: Clock) -> None:
    clock.now = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    _say(mem, "I planted tulips in the garden", "Lovely, tulips.")
    clock.now = datetime(2026, 12, 1, 18, 30, tzinfo=UTC)
    _say(mem, "I booked the dentist for Friday", "Dentist on Friday, noted.")
    clock.now += timedelta(minutes=2)
    _say(mem, "and the garden needs new tulips bulbs", "Tulip bulbs, noted.")
    clock.now = NOW


def _at(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


@pytest.fixture(params=sorted(BACKENDS))
def memory(request: pytest.FixtureRequest, where: dict[str, Any]) -> Iterator[BaseRetrievalMemory]:
    cls, extra = BACKENDS[request.param]
    clock = Clock(NOW)
    with cls({**where, **extra, "max_history": 0}, clock=clock) as mem:
        _fill(mem, clock)
        yield mem


def test_every_index_on_both_engines_keeps_a_search_to_the_window(memory: BaseRetrievalMemory) -> None:
    assert memory.filters_time
    week = (_at(2026, 11, 16), _at(2026, 11, 23))
    assert [h.content.split("\n")[0] for h in memory.search("tulips garden", window=week)] == [
        "Q: I planted tulips in the garden"
    ]
    yesterday = (_at(2026, 12, 1), _at(2026, 12, 2))
    found = {h.content.split("\n")[0] for h in memory.search("tulips garden dentist", window=yesterday)}
    assert "Q: I planted tulips in the garden" not in found and "Q: and the garden needs new tulips bulbs" in found
    assert memory.search("tulips garden", window=(_at(2026, 1, 1), _at(2026, 2, 1))) == []
    everything = {h.content.split("\n")[0] for h in memory.search("tulips garden")}
    assert {"Q: I planted tulips in the garden", "Q: and the garden needs new tulips bulbs"} <= everything


def test_what_did_i_tell_you_yesterday_on_every_index_and_engine(memory: BaseRetrievalMemory) -> None:
    pytest.importorskip("dateparser", reason="the dates extra (dateparser) is not installed")
    assert memory.recall_window("what did I tell you yesterday?") is not None
    text = "\n".join(m.content for m in memory.build_conversation_context("what did I tell you yesterday?", "s"))
    lines = [line[2:] for line in text.splitlines() if line.startswith("- [")]
    assert lines and lines[0].startswith("[2026-12-01 18:30, yesterday] Q: I booked the dentist for Friday")
    assert "Today is Wednesday, 2026-12-02." in text
    garden = "\n".join(
        m.content for m in memory.build_conversation_context("what did I say about the garden yesterday?", "s")
    )
    assert garden.index("garden needs new tulips") < garden.index("planted tulips")  # yesterday's first
    assert "[2026-11-20, 12 days ago] Q: I planted tulips" in garden  # the older still shown, dated


def test_a_hybrid_filters_by_time_only_when_every_arm_does(tmp_path: Path) -> None:
    with VectorMemory({"root": str(tmp_path), "embedder": "hash", "hybrid": True}) as mem:
        hybrid = mem.index
        assert isinstance(hybrid, HybridIndex) and hybrid.filters_time
        vectors = next(arm for arm in hybrid.arms if isinstance(arm, VectorIndex))

        class NoWindows:  # a third-party store that declares no filters_time
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def __getattr__(self, name: str) -> Any:
                if name == "filters_time":
                    raise AttributeError(name)
                return getattr(self.inner, name)

        vectors.store = NoWindows(vectors.store)  # type: ignore[assignment]
        assert not vectors.filters_time and not hybrid.filters_time and not mem.filters_time
        with pytest.raises(ValueError, match="window"):
            mem.search("tulips", window=(0.0, 1.0))
        assert mem.recall_window("what did I tell you yesterday?") is None  # time words: ordinary words


def test_numpy_and_sqlite_vec_keep_the_same_window(tmp_path: Path) -> None:
    from ovos_memory_plugins.storage.sqlite.engine import open_database

    db, ext = open_database(":memory:", True)
    db.close()
    if ext is None:
        pytest.skip("no sqlite3 module here can load extensions (install sqlean-py)")
    found = []
    for search in ("numpy", "sqlite-vec"):
        clock = Clock(NOW)
        config = {"root": str(tmp_path / search), "embedder": "hash", "vector_search": search, "max_history": 0}
        with VectorMemory(config, clock=clock) as mem:
            _fill(mem, clock)
            assert mem.vector_store.path == search
            hits = mem.search("tulips garden dentist", window=(_at(2026, 12, 1), _at(2026, 12, 2)))
            found.append([(h.source, round(h.score, 5)) for h in hits])
    assert found[0] == found[1] and len(found[0]) == 2


def test_postgres_reads_a_window_through_an_index_on_created(postgres_url: str) -> None:
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    from ovos_memory_plugins.storage.registry import open_storage

    storage = open_storage(postgres_url, namespace=f"time-windows-{next(_ns)}")
    try:
        found = storage.db.scalar(  # type: ignore[attr-defined]
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_documents_created'"
        )
        assert found is not None and "(namespace, created)" in found
    finally:
        storage.close()
