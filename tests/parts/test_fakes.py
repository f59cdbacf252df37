"""The scripted OpenAI-compatible server, driven by the real ``openai`` client."""

from __future__ import annotations

import math

import openai
import pytest

from ovos_memory_plugins.fakes import (
    CloseConnection,
    Delay,
    Garbled,
    HTTPFailure,
    ScriptedLLM,
    ScriptedOpenAIServer,
    hash_vector,
)


def client(server: ScriptedOpenAIServer, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", timeout=timeout, max_retries=0)


def test_chat_queue_then_handler_then_default() -> None:
    with ScriptedOpenAIServer(chat=["first"], default_chat_reply="fallback") as server:
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        with client(server) as c:
            msgs = [{"role": "user", "content": "hello there friend"}]
            r = c.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            assert r.choices[0].message.content == "first"
            assert r.usage is not None and r.usage.prompt_tokens == 3 and r.usage.completion_tokens == 1
            r = c.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            assert r.choices[0].message.content == "fallback"
            server.chat_handler = lambda body: "echo " + body["messages"][-1]["content"]
            r = c.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            assert r.choices[0].message.content == "echo hello there friend"
        assert len(server.chat_requests) == 3
        assert server.chat_requests[0]["model"] == "m"
        assert server.requests[0].headers["authorization"] == "Bearer test"


def test_failure_modes() -> None:
    with ScriptedOpenAIServer(
        chat=[HTTPFailure(500), Garbled(), CloseConnection(), Delay(2.0, "late"), Delay(0.05, "soon")]
    ) as server:
        with client(server, timeout=0.5) as c:
            msgs = [{"role": "user", "content": "x"}]
            with pytest.raises(openai.InternalServerError):
                c.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            with pytest.raises(
                (openai.APIResponseValidationError, ValueError)
            ):  # the client raises a bare JSONDecodeError
                c.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            with pytest.raises(openai.APIConnectionError):
                c.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            with pytest.raises(openai.APITimeoutError):
                c.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            r = c.chat.completions.create(model="m", messages=msgs)  # type: ignore[arg-type]
            assert r.choices[0].message.content == "soon"
        assert len(server.chat_requests) == 5


def test_embeddings_default_hash_vectors_float_and_base64() -> None:
    with ScriptedOpenAIServer(dimensions=8) as server, client(server) as c:
        r = c.embeddings.create(model="e", input=["alpha", "beta"], encoding_format="float")
        assert [len(d.embedding) for d in r.data] == [8, 8]
        assert r.data[0].embedding == pytest.approx(hash_vector("alpha", 8))
        r = c.embeddings.create(model="e", input="alpha")  # the client asks for base64 by default
        assert r.data[0].embedding == pytest.approx(hash_vector("alpha", 8), abs=1e-6)
        assert math.isclose(sum(v * v for v in r.data[0].embedding), 1.0, rel_tol=1e-5)
        assert r.usage.prompt_tokens == 1
        server.queue_embeddings([[1.0, 0.0]], HTTPFailure(503))
        r = c.embeddings.create(model="e", input="x", encoding_format="float")
        assert r.data[0].embedding == [1.0, 0.0]
        with pytest.raises(openai.APIStatusError):
            c.embeddings.create(model="e", input="x")
        assert len(server.embedding_requests) == 4


def test_hash_vector_is_deterministic() -> None:
    assert hash_vector("x", 32) == hash_vector("x", 32)
    assert hash_vector("x", 32) != hash_vector("y", 32)
    assert len(hash_vector("x", 50)) == 50


def test_close_wakes_a_delayed_handler_quickly() -> None:
    import threading
    import time

    server = ScriptedOpenAIServer(chat=[Delay(30.0, "never")]).start()
    c = client(server, timeout=60)
    errors: list[Exception] = []

    def call() -> None:
        try:
            c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        except Exception as exc:
            errors.append(exc)

    t = threading.Thread(target=call)
    t.start()
    while not server.chat_requests:
        time.sleep(0.01)
    start = time.monotonic()
    server.close()
    t.join(10)
    c.close()
    assert time.monotonic() - start < 5
    assert errors and isinstance(errors[0], openai.APIConnectionError)


def test_scripted_llm() -> None:
    llm = ScriptedLLM(["a", None], default="d")
    msgs = [{"role": "user", "content": "q"}]
    assert llm.complete(msgs) == "a"
    assert llm.complete(msgs) is None
    assert llm.complete(msgs, json_mode=True) == "d"
    assert llm.stats()["calls"] == 3 and llm.calls[0] == msgs
