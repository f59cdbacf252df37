"""What only PostgreSQL does: with `"database": "postgresql://..."` a backend writes nothing under
its root and keeps no embedding cache. (The conformance kits run on PostgreSQL through the
``engine`` fixture, in each backend's own test file.)"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")

from ovos_memory_plugins.lexical import LexicalMemory
from ovos_memory_plugins.vector import VectorMemory


def on_postgres(config: dict[str, Any], url: str) -> dict[str, Any]:
    """The kit's config with the database URL and a namespace of the test's own (from its root),
    so a restart in one test finds its memory and no two tests share one."""
    root = str(config.get("root", "x"))
    return {**config, "database": url, "namespace": "t-" + hashlib.sha256(root.encode()).hexdigest()[:16]}


@pytest.mark.parametrize("make", [LexicalMemory, lambda c: VectorMemory({"embedder": "hash", "hybrid": True, **c})])
def test_nothing_is_written_under_root(tmp_path: Path, postgres_url: str, make: Any) -> None:
    root = tmp_path / "memory"
    mem = make(on_postgres({"root": str(root)}, postgres_url))
    assert mem.storage.db.engine == "postgresql" and not mem.storage.db.in_ram
    mem.update_history([{"role": "user", "content": "my bike is red"}, {"role": "assistant", "content": "noted"}], "s")
    assert [h.source for h in mem.search("bike")]
    mem.close()
    assert not root.exists() or not any(root.rglob("*"))


def test_vector_memory_on_postgres_has_no_embedding_cache_and_still_forgets(tmp_path: Path, postgres_url: str) -> None:
    with VectorMemory({"embedder": "hash", **on_postgres({"root": str(tmp_path / "m")}, postgres_url)}) as mem:
        assert mem.storage.db.engine == "postgresql" and mem.embedding_cache is None
        mem.store("the kettle is in the left cupboard", "s")
        assert mem.vectors.pending() == 0
        report = mem.forget_all()
        assert report == 1 and "embedding_cache" not in report.tiers
