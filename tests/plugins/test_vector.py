"""VectorMemory: both search paths, embedder switches, outages at store and query time, hybrid."""

from __future__ import annotations

import importlib.util
import logging
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ovos_memory_plugins.config import validate_config
from ovos_memory_plugins.embedders import HashingEmbedder
from ovos_memory_plugins.errors import ConfigError
from ovos_memory_plugins.fakes import HTTPFailure, ScriptedOpenAIServer
from ovos_memory_plugins.storage.engine import Document
from ovos_memory_plugins.storage.sqlite.engine import open_database, open_sqlite
from ovos_memory_plugins.testing import exchange
from ovos_memory_plugins.vector import VectorMemory

FACTS = [
    "the spare key is under the frog statue",
    "my sister Ingrid lives in Tromsø",
    "the wifi password is on the fridge",
    "我的自行车是红色的",
]


def _sqlite_vec_loads() -> bool:
    db, ext = open_database(":memory:", True)
    db.close()
    return ext is not None


# -- storage paths -------------------------------------------------------------------------


class _Store:
    """A memory's documents table and vector store, driven as the vector index drives them."""

    def __init__(self, path: Path | str, search: str = "auto") -> None:
        self.storage = open_sqlite(path, vector_extension=search == "sqlite-vec")
        self.vectors = self.storage.vector_store(search)
        self.path = self.vectors.path

    def put_document(self, doc_id: str, session_id: str, text: str, metadata: dict[str, Any]) -> None:
        for doc in self.storage.documents.put([Document(doc_id, text, session_id, metadata)]):
            if doc.changed:
                self.vectors.remove([doc.key])

    def put_vectors(self, space: str, items: Any) -> int:
        return self.vectors.put_vectors(space, items)

    def search(self, space: str, q: Any, k: int, session_id: str | None = None) -> list[tuple[str, float]]:
        return self.vectors.search(space, q, k, session_id)

    def delete(self, ids: list[str]) -> None:
        found = self.storage.documents.get(ids)
        self.vectors.remove([d.key for d in found.values()])
        self.storage.documents.remove(ids)

    def close(self) -> None:
        self.storage.close()


def _random_store(path: Path, search: str) -> tuple[_Store, np.ndarray]:
    store = _Store(path, search)
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((300, 24)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i in range(300):
        store.put_document(f"d{i:03d}", f"s{i % 3}", f"text {i}", {"i": i})
    store.put_vectors("space-a", [(f"d{i:03d}", vectors[i]) for i in range(300)])
    return store, vectors


@pytest.mark.skipif(not _sqlite_vec_loads(), reason="no sqlite3 module here can load extensions (install sqlean-py)")
def test_numpy_and_sqlite_vec_paths_give_the_same_results(tmp_path: Path) -> None:
    a, vectors = _random_store(tmp_path / "a.db", "numpy")
    b, _ = _random_store(tmp_path / "b.db", "sqlite-vec")
    try:
        assert a.path == "numpy" and b.path == "sqlite-vec"
        rng = np.random.default_rng(8)
        for _ in range(20):
            q = rng.standard_normal(24).astype(np.float32)
            q /= np.linalg.norm(q)
            for session in (None, "s1"):
                ra, rb = a.search("space-a", q, 10, session), b.search("space-a", q, 10, session)
                assert [d for d, _ in ra] == [d for d, _ in rb]
                assert np.allclose([s for _, s in ra], [s for _, s in rb], atol=1e-5)
        a.delete(["d001"])
        b.delete(["d001"])
        assert [d for d, _ in a.search("space-a", vectors[1], 3)] == [d for d, _ in b.search("space-a", vectors[1], 3)]
    finally:
        a.close()
        b.close()


def test_numpy_path_is_exact_against_brute_force(tmp_path: Path) -> None:
    store, vectors = _random_store(tmp_path / "a.db", "auto")
    try:
        q = vectors[5] + 0.1 * vectors[9]
        q /= np.linalg.norm(q)
        expected = np.argsort(-(vectors @ q), kind="stable")[:10]
        assert [d for d, _ in store.search("space-a", q, 10)] == [f"d{i:03d}" for i in expected]
        assert store.search("space-b", q, 10) == []  # another space holds nothing
    finally:
        store.close()


def test_ram_matrix_stays_exact_through_growth_updates_and_removals(tmp_path: Path) -> None:
    store = _Store(tmp_path / "g.db")
    try:
        rng = np.random.default_rng(3)
        vectors = rng.standard_normal((200, 16)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.put_document("d000", "s0", "t", {})
        store.put_vectors("sp", [("d000", vectors[0])])
        assert store.search("sp", vectors[0], 1)[0][0] == "d000"  # the RAM matrix exists from here on
        for i in range(1, 200):
            store.put_document(f"d{i:03d}", f"s{i % 4}", f"t{i}", {})
            store.put_vectors("sp", [(f"d{i:03d}", vectors[i])])
        store.delete([f"d{i:03d}" for i in range(0, 200, 7)])
        store.put_document("d001", "s3", "moved to another session", {})  # drops its vector
        alive = [i for i in range(200) if i % 7 and i != 1]
        q = vectors[10]
        for session in (None, "s2"):
            keep = [i for i in alive if session is None or i % 4 == 2]
            expected = sorted(keep, key=lambda i: -float(vectors[i] @ q))[:10]
            assert [d for d, _ in store.search("sp", q, 10, session)] == [f"d{i:03d}" for i in expected]
        assert store.search("sp", q, 10, "nobody") == []
    finally:
        store.close()


def test_sqlite_vec_request_without_extension_falls_back_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ovos_memory_plugins.storage.sqlite.vector")
    storage = open_sqlite(tmp_path / "x.db")
    try:
        store = storage.vector_store("sqlite-vec")
        assert store.path == "numpy"
        assert any("extension did not load" in r.message for r in caplog.records)
    finally:
        storage.close()


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system Python")
def test_stdlib_sqlite3_that_can_load_extensions_uses_sqlite_vec(tmp_path: Path) -> None:
    """Debian's Python can load extensions with its stdlib sqlite3; sqlite-vec's loadable file is
    shipped in the sqlite_vec package, which we point the system Python at."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:
        pytest.skip("sqlite-vec is not installed")
    site = str(Path(spec.origin).parent.parent)
    code = textwrap.dedent(
        f"""
        import sqlite3, sys
        sys.path.insert(0, {site!r})
        if not hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
            print("NOEXT"); sys.exit(0)
        import sqlite_vec
        conn = sqlite3.connect(":memory:")
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        import struct
        a = struct.pack("3f", 1, 0, 0); b = struct.pack("3f", 0.6, 0.8, 0)
        print(round(conn.execute("select 1 - vec_distance_cosine(?, ?)", (a, b)).fetchone()[0], 4))
        conn.close()
        """
    )
    python = shutil.which("python3", path="/usr/bin") or "/usr/bin/python3"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    if "NOEXT" in out.stdout:
        pytest.skip("the system Python's sqlite3 cannot load extensions either")
    if out.returncode != 0:
        pytest.skip(f"the system Python cannot import sqlite_vec from this venv: {out.stderr.strip()[-200:]}")
    assert out.stdout.strip() == "0.6"


# -- the backend ---------------------------------------------------------------------------


def _hash_handler(body: dict[str, Any]) -> list[list[float]]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    return [list(map(float, v)) for v in HashingEmbedder(64).embed([str(t) for t in texts])]


def _mem(tmp_path: Path, **config: Any) -> VectorMemory:
    config.setdefault("root", str(tmp_path / "m"))
    config.setdefault("embedder", "hash")
    return VectorMemory(config)


def test_loads_by_name_through_opm() -> None:
    from ovos_plugin_manager.agents import load_memory_plugin

    assert load_memory_plugin("ovos-memory-plugin-vector") is VectorMemory


def test_recall_and_stats(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem:
        for fact in FACTS:
            mem.store(fact, "s1")
        assert mem.search("where is the spare key", top_k=1)[0].content == FACTS[0]
        assert mem.search("自行车", top_k=1)[0].content == FACTS[3]
        stats = mem.stats()
        assert stats["documents"] == 4 and stats["pending_vectors"] == 0
        assert stats["embedder"] == HashingEmbedder().id and stats["vector_search"] == "numpy"


def test_embedder_switch_never_mixes_spaces_and_reembeds(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem:
        for fact in FACTS:
            mem.store(fact, "s1")
    switched = {"embedder": {"type": "hash", "dimension": 64}, "background_reembed": False}
    with _mem(tmp_path, **switched) as mem:
        assert mem.vectors.pending() == 4
        assert mem.search("spare key frog", top_k=3) == []  # the old space is never read
        assert mem.reembed(max_docs=2) == 2  # resumable: part now ...
    with _mem(tmp_path, **switched) as mem:
        assert mem.vectors.pending() == 2  # ... the rest after a restart
        assert mem.reembed() == 2
        assert mem.search("spare key frog", top_k=1)[0].content == FACTS[0]
        spaces = mem.stats()["vector_spaces"]
        assert spaces == {HashingEmbedder().id: 4, HashingEmbedder(64).id: 4}
        assert mem.drop_other_spaces() == 4


def test_embedder_switch_reembeds_in_the_background(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem:
        for fact in FACTS:
            mem.store(fact, "s1")
    with _mem(tmp_path, embedder={"type": "hash", "dimension": 64}) as mem:
        assert mem.vectors.wait_idle(10)
        assert mem.vectors.pending() == 0
        assert mem.search("wifi password", top_k=1)[0].content == FACTS[2]


def test_embedder_outage_at_store_time_keeps_the_document(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(embeddings_handler=_hash_handler) as server:
        config = {
            # no back-off, so the explicit reembed() right after the outage asks the server again
            "embedder": {"type": "openai", "model": "m", "base_url": server.base_url, "timeout": 2, "backoff_s": 0},
            "background_reembed": False,
        }
        with _mem(tmp_path, **config) as mem:
            server.queue_embeddings(HTTPFailure(503))
            mem.update_history(exchange("my locker is number 88", "noted, locker 88"), "s1")
            assert mem.stats()["documents"] == 1 and mem.vectors.pending() == 1
            assert "503" in mem.stats()["last_embedder_error"]
            assert mem.reembed() == 1
            assert mem.vectors.pending() == 0
            hits = mem.search("my locker is number 88", top_k=1)
            assert hits and "locker" in hits[0].content


def test_embedder_outage_at_query_time_degrades_to_no_hits(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(embeddings_handler=_hash_handler) as server:
        config = {"embedder": {"type": "openai", "model": "m", "base_url": server.base_url, "timeout": 2}}
        with _mem(tmp_path, system_prompt="You are Ada.", **config) as mem:
            mem.store("the boat is called Sea Biscuit", "s1")
            server.queue_embeddings(HTTPFailure(500), HTTPFailure(500))
            assert mem.search("the boat is called Sea Biscuit") == []
            msgs = mem.build_conversation_context("the boat is called Sea Biscuit", "s1")
            assert [m.content for m in msgs] == ["You are Ada.", "the boat is called Sea Biscuit"]


def test_hybrid_keeps_keyword_recall_when_the_embedder_is_down(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(embeddings_handler=_hash_handler) as server:
        config = {
            "embedder": {"type": "openai", "model": "m", "base_url": server.base_url, "timeout": 2},
            "hybrid": True,
            "background_reembed": False,
        }
        with _mem(tmp_path, **config) as mem:
            server.queue_embeddings(HTTPFailure(500))
            mem.store("the boat is called Sea Biscuit", "s1")
            server.queue_embeddings(HTTPFailure(500))
            hits = mem.search("what is the boat called", top_k=3)
            assert [h.content for h in hits] == ["the boat is called Sea Biscuit"]


def test_hybrid_can_be_turned_on_later(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem:
        for fact in FACTS:
            mem.store(fact, "s1")
    with _mem(tmp_path, hybrid=True) as mem:
        assert mem.stats()["keyword_rows"] == 4
        assert mem.search("Ingrid Tromsø", top_k=1)[0].content == FACTS[1]
        mem.delete([mem.search("Ingrid Tromsø", top_k=1)[0].source])
        assert mem.stats()["keyword_rows"] == 3 and mem.stats()["documents"] == 3


def test_broken_embedder_config_does_not_raise(tmp_path: Path) -> None:
    with _mem(tmp_path, embedder={"type": "opm", "module": "no-such-plugin"}) as mem:
        mem.store("still remembered", "s1")
        assert mem.stats()["documents"] == 1 and mem.vectors.pending() == 1
        assert mem.search("still remembered") == []
    with _mem(tmp_path, embedder="telepathy") as mem:
        assert any("embedder" in p for p in mem.config_problems)


def test_a_model_library_that_breaks_while_loading_does_not_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An incompatible tokenizers release raised AttributeError inside the model loader; the
    persona must still load, with the documents kept for a working embedder."""

    def broken(spec: Any) -> Any:
        raise AttributeError("module 'tokenizers' has no attribute 'models'")

    monkeypatch.setattr("ovos_memory_plugins.vector.make_embedder", broken)
    with _mem(tmp_path, embedder="local") as mem:
        mem.store("kept while the model is broken", "s1")
        assert mem.stats()["documents"] == 1 and mem.search("kept model") == []
    assert "tokenizers" in caplog.text


def test_validate_config_is_strict() -> None:
    validate_config({"embedder": "hash", "hybrid": True}, plugin=VectorMemory)
    with pytest.raises(ConfigError, match="vector_search"):
        validate_config({"vector_search": "faiss"}, plugin=VectorMemory)
    with pytest.raises(ConfigError, match="embedder"):
        validate_config({"embedder": {"type": "hash", "dimension": 2}}, plugin=VectorMemory)
    with pytest.raises(ConfigError, match="modle"):
        validate_config({"embedder": {"type": "openai", "modle": "x"}}, plugin=VectorMemory)
    with pytest.raises(ConfigError, match="module"):
        validate_config({"embedder": {"type": "opm"}}, plugin=VectorMemory)
