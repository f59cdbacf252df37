"""The shared language-model clients, driven through the real ``openai`` client and a local server."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from ovos_memory_plugins.fakes import CloseConnection, Delay, Garbled, HTTPFailure, ScriptedOpenAIServer
from ovos_memory_plugins.llm import (
    ChatLLM,
    OpenAIChatLLM,
    OPMChatLLM,
    check_llm_config,
    close_llm,
    make_llm,
    parse_json_reply,
)

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hi"}]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def dead_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def test_ok_call_counts_tokens_and_sends_temperature_zero() -> None:
    with ScriptedOpenAIServer(chat=["hello to you"]) as server:
        llm = OpenAIChatLLM({"base_url": server.base_url, "model": "tiny", "timeout": 5})
        try:
            assert isinstance(llm, ChatLLM)
            assert llm.complete(MSGS, json_mode=True) == "hello to you"
        finally:
            llm.close()
        body = server.chat_requests[0]
        assert body["temperature"] == 0 and body["model"] == "tiny"
        assert body["response_format"] == {"type": "json_object"}
        assert body["messages"] == MSGS
        stats = llm.stats()
        assert stats["calls"] == 1 and stats["failures"] == 0
        assert stats["prompt_tokens"] == 4 and stats["completion_tokens"] == 3


def test_json_mode_can_be_turned_off() -> None:
    with ScriptedOpenAIServer(chat=["{}"]) as server:
        llm = OpenAIChatLLM({"base_url": server.base_url, "json_mode": False})
        try:
            assert llm.complete(MSGS, json_mode=True) == "{}"
        finally:
            llm.close()
        assert "response_format" not in server.chat_requests[0]


@pytest.mark.parametrize("failure", [HTTPFailure(500), Garbled(), CloseConnection(), Delay(3.0, "late")])
def test_failures_fail_open(failure: Any) -> None:
    with ScriptedOpenAIServer(chat=[failure]) as server:
        llm = OpenAIChatLLM({"base_url": server.base_url, "timeout": 0.3, "backoff_s": 0.01})
        try:
            start = time.monotonic()
            assert llm.complete(MSGS) is None
            assert time.monotonic() - start < 2.5
        finally:
            llm.close()
        assert len(server.chat_requests) == 1  # max_retries=0: one request per call
        assert llm.stats()["failures"] == 1


def test_dead_endpoint_backs_off_exponentially_and_recovers() -> None:
    clock = FakeClock()
    llm = OpenAIChatLLM(
        {"base_url": f"http://127.0.0.1:{dead_port()}/v1", "timeout": 2, "backoff_s": 10, "backoff_max_s": 25},
        clock=clock,
    )
    try:
        assert llm.complete(MSGS) is None
        assert llm.backing_off
        for _ in range(5):
            assert llm.complete(MSGS) is None  # skipped, no connection attempt
        assert llm.stats()["calls"] == 1 and llm.stats()["skipped"] == 5
        clock.now += 10
        assert llm.complete(MSGS) is None  # second failure: 20 s pause
        clock.now += 15
        assert llm.complete(MSGS) is None and llm.stats()["calls"] == 2
        clock.now += 5
        assert llm.complete(MSGS) is None  # third failure: capped at 25 s
        clock.now += 24
        assert llm.complete(MSGS) is None and llm.stats()["calls"] == 3
        assert llm.stats()["failures"] == 3
    finally:
        llm.close()


def test_back_off_then_success_resets() -> None:
    clock = FakeClock()
    with ScriptedOpenAIServer(chat=[HTTPFailure(502), "ok", HTTPFailure(500), "again"]) as server:
        llm = OpenAIChatLLM({"base_url": server.base_url, "backoff_s": 5}, clock=clock)
        try:
            assert llm.complete(MSGS) is None
            assert llm.complete(MSGS) is None  # backing off: the server is not asked
            assert len(server.chat_requests) == 1
            clock.now += 5
            assert llm.complete(MSGS) == "ok"
            assert llm.complete(MSGS) is None  # a fresh failure pauses 5 s again, not 10
            clock.now += 5
            assert llm.complete(MSGS) == "again"
        finally:
            llm.close()
        assert len(server.chat_requests) == 4


def test_environment_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedOpenAIServer(chat=["from env", "from openai env"]) as server:
        monkeypatch.setenv("OVOS_MEMORY_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("OVOS_MEMORY_LLM_API_KEY", "sk-ovos")
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
        llm = make_llm({"model": "m"})
        assert llm is not None
        assert llm.complete(MSGS) == "from env"
        close_llm(llm)
        assert server.requests[0].headers["authorization"] == "Bearer sk-ovos"
        monkeypatch.delenv("OVOS_MEMORY_LLM_BASE_URL")
        monkeypatch.delenv("OVOS_MEMORY_LLM_API_KEY")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        llm = make_llm({})
        assert llm is not None
        assert llm.complete(MSGS) == "from openai env"
        close_llm(llm)
        assert server.requests[1].headers["authorization"] == "Bearer sk-openai"


def test_make_llm_rejects_bad_blocks_without_raising() -> None:
    assert make_llm(None) is None
    assert make_llm({}) is None  # nowhere to send calls: no base_url, no key, nothing in the environment
    assert make_llm({"base_url": 5}) is None
    assert make_llm({"timeout": -1}) is None
    assert make_llm({"modle": "x"}) is None
    assert make_llm({"module": "no-such-chat-plugin-xyz"}) is None
    assert check_llm_config({"base_url": "http://127.0.0.1/v1", "model": "m", "timeout": 3}) == []
    assert any("llm.modle" in p for p in check_llm_config({"modle": "x"}))
    assert check_llm_config("yes")


class SlowEngine:
    def __init__(self, delay: float = 0.0, reply: str = "engine says hi", fail: bool = False) -> None:
        self.delay, self.reply, self.fail = delay, reply, fail
        self.seen: list[Any] = []

    def continue_chat(self, messages: list[Any], session_id: str = "default", **_: Any) -> Any:
        from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

        self.seen.append(messages)
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("engine broke")
        return AgentMessage(role=MessageRole.ASSISTANT, content=self.reply)


def test_opm_engine_adapter() -> None:
    from ovos_plugin_manager.templates.agents import MessageRole

    engine = SlowEngine()
    llm = OPMChatLLM({"module": "x"}, engine=engine)
    assert llm.complete(MSGS) == "engine says hi"
    assert [m.role for m in engine.seen[0]] == [MessageRole.SYSTEM, MessageRole.USER]
    assert OPMChatLLM({"module": "x"}, engine=SlowEngine(fail=True)).complete(MSGS) is None
    slow = OPMChatLLM({"module": "x", "timeout": 0.1}, engine=SlowEngine(delay=0.5))
    start = time.monotonic()
    assert slow.complete(MSGS) is None
    assert time.monotonic() - start < 0.4
    assert slow.stats()["failures"] == 1


def test_opm_engine_by_name_against_the_fake_server() -> None:
    """ovos-openai-plugin, loaded by name through OPM, talking to the local fake server."""
    from ovos_plugin_manager.agents import find_chat_plugins

    names = [n for n in find_chat_plugins() if "openai" in n.lower()]
    if not names:
        pytest.skip("no OpenAI chat-engine plugin installed")
    with ScriptedOpenAIServer(default_chat_reply="plugin reply") as server:
        llm = make_llm(
            {
                "module": names[0],
                "config": {"api_url": server.base_url, "key": "k", "model": "m", "allow_system_prompts": True},
                "timeout": 5,
            }
        )
        assert llm is not None
        reply = llm.complete(MSGS)
        if reply is None and not server.chat_requests:
            pytest.skip(f"{names[0]} does not take this config shape")
        assert reply == "plugin reply"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ("Sure! Here it is:\n```\n[1, 2]\n```\nanything else?", [1, 2]),
        ('<think>hmm {"no": 1</think>{"ok": true}', {"ok": True}),
        ('The answer is {"s": "brace } inside", "n": null} as asked.', {"s": "brace } inside", "n": None}),
        ('prefix {"broken": [1, 2} then {"good": 2}', {"good": 2}),
        ('{"cut": "off', None),
        ("no json here", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_json_reply(text: str | None, expected: Any) -> None:
    assert parse_json_reply(text) == expected


# -- total deadline against hung, trickling and dead servers ---------------------------------


@pytest.mark.parametrize("fault", ["hung", "trickling", "dead"])
def test_openai_chat_total_deadline_then_milliseconds(fault: str) -> None:
    from ovos_memory_plugins.fakes import Trickle

    with ScriptedOpenAIServer() as server:
        server.queue_chat({"hung": Delay(60.0, "late"), "trickling": Trickle("slow words", 0.2), "dead": "x"}[fault])
        url = f"http://127.0.0.1:{dead_port()}/v1" if fault == "dead" else server.base_url
        llm = OpenAIChatLLM({"base_url": url, "timeout": 1, "backoff_s": 30})
        try:
            start = time.monotonic()
            assert llm.complete(MSGS) is None
            assert time.monotonic() - start < 1.6  # a byte every 0.2 s would take ~80 s to finish
            for _ in range(5):
                start = time.monotonic()
                assert llm.complete(MSGS) is None
                assert time.monotonic() - start < 0.05
            stats = llm.stats()
            assert stats["calls"] == 1 and stats["skipped"] == 5 and stats["backing_off"]
            assert stats["timeouts"] == (0 if fault == "dead" else 1)
        finally:
            llm.close()
        assert len(server.chat_requests) == (0 if fault == "dead" else 1)


def test_opm_chat_plugin_against_a_trickling_server_is_cut_at_the_deadline() -> None:
    """ovos-openai-plugin, loaded by name, whose own HTTP timeout is per read: ours is total."""
    from ovos_plugin_manager.agents import find_chat_plugins

    from ovos_memory_plugins.fakes import Trickle

    names = [n for n in find_chat_plugins() if "openai" in n.lower()]
    if not names:
        pytest.skip("no OpenAI chat-engine plugin installed")
    with ScriptedOpenAIServer(chat=[Trickle("slow", 0.2)]) as server:
        llm = make_llm(
            {
                "module": names[0],
                "config": {"api_url": server.base_url, "key": "k", "model": "m", "allow_system_prompts": True},
                "timeout": 1,
                "backoff_s": 30,
            }
        )
        assert llm is not None
        start = time.monotonic()
        assert llm.complete(MSGS) is None
        assert time.monotonic() - start < 1.6
        start = time.monotonic()
        assert llm.complete(MSGS) is None
        assert time.monotonic() - start < 0.05
        assert len(server.chat_requests) == 1


# -- the llm block: aliases and key-by-key problems ----------------------------------------


def test_api_url_and_key_are_aliases(caplog: pytest.LogCaptureFixture) -> None:
    with ScriptedOpenAIServer(chat=["aliased"]) as server:
        llm = make_llm({"api_url": server.base_url, "key": "sk-alias", "model": "m"})
        assert llm is not None
        try:
            assert llm.complete(MSGS) == "aliased"
        finally:
            close_llm(llm)
        assert server.requests[0].headers["authorization"] == "Bearer sk-alias"
    assert check_llm_config({"api_url": "http://127.0.0.1/v1", "key": "k"}) == []
    assert any("disagree" in p for p in check_llm_config({"api_url": "http://a/v1", "base_url": "http://b/v1"}))


def test_an_unknown_key_drops_only_itself_with_a_hint(caplog: pytest.LogCaptureFixture) -> None:
    from ovos_memory_plugins.llm import read_llm_config

    with ScriptedOpenAIServer(chat=["still on"]) as server:
        with caplog.at_level("WARNING", logger="ovos_memory_plugins.llm"):
            llm = make_llm({"base_url": server.base_url, "modle": "m", "timeout": "soon"})
        assert llm is not None  # the model is not silently off
        try:
            assert llm.complete(MSGS) == "still on"
        finally:
            close_llm(llm)
    text = caplog.text
    assert "unknown key 'llm.modle' (ignored); did you mean 'model'?" in text
    assert "llm.timeout" in text and "ignored" in text
    clean, problems = read_llm_config({"module": "some-plugin", "api_url": "x", "timout": 3})
    assert clean == {"module": "some-plugin"}
    assert any("did you mean 'timeout'" in p for p in problems)
    assert read_llm_config({"module": ""})[0] is None
