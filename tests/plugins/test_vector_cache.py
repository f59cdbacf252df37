"""The vector memory's content-hash embedding cache, and the bulk paths that embed in batches."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ovos_memory_plugins.embedders import HashingEmbedder
from ovos_memory_plugins.fakes import ScriptedOpenAIServer
from ovos_memory_plugins.storage.embedding_cache import text_digest
from ovos_memory_plugins.transfer import import_jsonl, ingest_paths
from ovos_memory_plugins.vector import VectorMemory

TEXT = "the boat is called Sea Biscuit and moors at pier nine"


def _hash_handler(body: dict[str, Any]) -> list[list[float]]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    return [list(map(float, v)) for v in HashingEmbedder(64).embed([str(t) for t in texts])]


def _embedded_texts(server: ScriptedOpenAIServer) -> list[str]:
    out: list[str] = []
    for body in server.embedding_requests:
        given = body["input"]
        out.extend(given if isinstance(given, list) else [given])
    return out


class CountingEmbedder:
    """A hashing embedder that counts its calls and the texts it was given."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(64)
        self.id = self.inner.id
        self.calls = 0
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.calls += 1
        self.texts.extend(texts)
        return self.inner.embed(texts)


def _openai_config(tmp_path: Path, server: ScriptedOpenAIServer) -> dict[str, Any]:
    return {
        "root": str(tmp_path / "m"),
        "embedder": {"type": "openai", "model": "m", "base_url": server.base_url, "timeout": 5},
        "background_reembed": False,
    }


def test_identical_text_is_embedded_once_across_restarts_and_forgotten_with_everything(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(embeddings_handler=_hash_handler) as server:
        config = _openai_config(tmp_path, server)
        with VectorMemory(config) as mem:
            mem.store(TEXT, "s1")
            assert mem.embedding_cache is not None and mem.embedding_cache.count() == 1
        with VectorMemory(config) as mem:
            mem.store(TEXT, "s2")  # another session: another document, the same text
            assert mem.stats()["documents"] == 2 and mem.vectors.pending() == 0
            assert _embedded_texts(server).count(TEXT) == 1
            cache = mem.embedding_cache
            assert cache is not None
            cached = cache.get_many(mem.embedder.id, [text_digest(TEXT)])[text_digest(TEXT)]
            report = mem.forget_all()
            assert report.tiers["embedding_cache"] == 1
            assert cache.count() == 0
            assert mem.vectors.pending() == 0 and mem.stats()["documents"] == 0
        needles = [cached.astype("float32").tobytes(), text_digest(TEXT).encode()]
        for path in (tmp_path / "m").rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert not any(n in data for n in needles), path


def test_delete_and_forget_session_drop_the_cached_vectors_of_their_texts(tmp_path: Path) -> None:
    counting = CountingEmbedder()
    with VectorMemory({"root": str(tmp_path / "m"), "background_reembed": False}, embedder=counting) as mem:
        cache = mem.embedding_cache
        assert cache is not None
        one = mem.store("my locker is number 88", "s1")
        mem.store("the wifi password is on the fridge", "s2")
        assert cache.count() == 2
        report = mem.delete([one])
        assert report.tiers["embedding_cache"] == 1 and cache.count() == 1
        assert mem.forget_session("s2").tiers["embedding_cache"] == 1
        assert cache.count() == 0
        mem.store("my locker is number 88", "s3")  # forgotten: embedded again
        assert counting.texts.count("my locker is number 88") == 2


def test_ingest_embeds_a_file_in_batches(tmp_path: Path) -> None:
    n, batch = 150, 64
    notes = tmp_path / "notes.txt"
    notes.write_text("\n\n".join(f"paragraph number {i} about topic {i * 7}" for i in range(n)), encoding="utf-8")
    counting = CountingEmbedder()
    config = {"root": str(tmp_path / "m"), "batch_size": batch, "background_reembed": False}
    with VectorMemory(config, embedder=counting) as mem:
        first = ingest_paths(mem, [notes])
        assert first.documents == n and first.new == n
        assert counting.calls == math.ceil(n / batch)
        again = ingest_paths(mem, [notes])  # idempotent ids, and nothing embedded again
        assert again.new == 0 and mem.stats()["documents"] == n
        assert counting.calls == math.ceil(n / batch)
        hit = mem.search("paragraph number 42 about topic 294", top_k=1)[0]
        assert hit.metadata["kind"] == "ingest" and hit.metadata["chunk"] == 42


def test_ingest_of_a_fresh_transcript_embeds_in_batches_and_keeps_its_dates(tmp_path: Path) -> None:
    n, batch = 40, 16
    lines = []
    for i in range(n):
        when = 1_700_000_000 + i * 60
        lines.append(json.dumps({"role": "user", "content": f"question {i} about the garden", "time": when}))
        lines.append(json.dumps({"role": "assistant", "content": f"answer {i} about roses", "time": when}))
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(lines), encoding="utf-8")
    counting = CountingEmbedder()
    config = {"root": str(tmp_path / "m"), "batch_size": batch, "background_reembed": False}
    with VectorMemory(config, embedder=counting) as mem:
        report = ingest_paths(mem, [chat])
        assert report.exchanges == n and report.new == n
        assert counting.calls == math.ceil(n / batch)
        assert mem.messages("chat")[-1].content == f"answer {n - 1} about roses"  # the live path saw them
        times = sorted(d["metadata"]["time"] for d in mem.iter_documents())
        assert times == [1_700_000_000 + i * 60 for i in range(n)]


def test_import_embeds_in_batches(tmp_path: Path) -> None:
    n, batch = 100, 32
    counting = CountingEmbedder()
    lines = [json.dumps({"id": f"d-{i}", "text": f"imported fact {i}", "session_id": "s"}) for i in range(n)]
    config = {"root": str(tmp_path / "m"), "batch_size": batch, "background_reembed": False}
    with VectorMemory(config, embedder=counting) as mem:
        assert import_jsonl(mem, lines).imported == n
        assert counting.calls == math.ceil(n / batch)
        assert mem.vectors.pending() == 0
