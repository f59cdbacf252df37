"""What docs/ovos-openai.md says, checked on the real parts: ovos-persona, ovos-openai-plugin's
chat engine and a scripted OpenAI-compatible server on 127.0.0.1.

Without ``"allow_system_prompts": true`` the engine drops every SYSTEM message (the persona's
system prompt and the recalled memories with it); DEVELOPER messages pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ovos_persona = pytest.importorskip("ovos_persona", reason="needs ovos-persona (test extra)")
pytest.importorskip("ovos_openai_plugin", reason="needs ovos-openai-plugin")

from ovos_bus_client.session import Session  # noqa: E402

from ovos_memory_plugins.fakes import ScriptedOpenAIServer  # noqa: E402

ENGINE = "ovos-chat-openai-plugin"
MEMORY = "ovos-memory-plugin-lexical"
pytest.importorskip("ovos_memory_plugins.lexical", reason="the lexical backend is not written yet")


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with ScriptedOpenAIServer(default_chat_reply="Noted.") as s:
        yield s


def _persona(server: ScriptedOpenAIServer, engine: dict[str, Any], memory: dict[str, Any]) -> Any:
    config = {
        "name": "ada",
        "handlers": [ENGINE],
        ENGINE: {"api_url": server.base_url, "key": "test-key", "model": "scripted-model", **engine},
        "memory_module": MEMORY,
        MEMORY: {"system_prompt": "You are Ada.", **memory},
    }
    return ovos_persona.Persona("ada", config)


def _fresh_session_turn(server: ScriptedOpenAIServer, engine: dict[str, Any], memory: dict[str, Any]) -> list[Any]:
    """One turn told in the kitchen, then a question in a new session (no history window,
    only recall): return the messages of that question's request, as the server saw them."""
    persona = _persona(server, engine, memory)
    try:
        sess = Session("kitchen")
        utterance = "my cat Bartholomew sleeps in the laundry basket"
        answer = persona.chat(persona.get_messages(utterance, sess), sess)
        assert answer == "Noted."
        persona.remember(utterance, answer, sess)
        sess = Session("hallway")
        persona.chat(persona.get_messages("where does Bartholomew sleep?", sess), sess)
        return list(server.chat_requests[-1]["messages"])
    finally:
        persona.memory.close()
        persona.solvers.shutdown()


def test_system_messages_are_dropped_without_allow_system_prompts(server: ScriptedOpenAIServer) -> None:
    sent = _fresh_session_turn(server, {}, {})
    assert [m["role"] for m in sent] == ["user"]
    assert "laundry basket" not in str(sent), "the recalled memory went out with the SYSTEM message"


def test_allow_system_prompts_keeps_prompt_and_memories(server: ScriptedOpenAIServer) -> None:
    sent = _fresh_session_turn(server, {"allow_system_prompts": True}, {})
    assert sent[0] == {"role": "system", "content": "You are Ada."}
    assert sent[1]["role"] == "system" and "laundry basket" in sent[1]["content"]


def test_developer_messages_pass_without_the_flag(server: ScriptedOpenAIServer) -> None:
    sent = _fresh_session_turn(server, {}, {"inject_mode": "developer"})
    assert [m["role"] for m in sent] == ["developer", "user"]
    assert "laundry basket" in sent[0]["content"]


def test_user_mode_survives_and_the_engine_prompt_replaces_the_persona_one(server: ScriptedOpenAIServer) -> None:
    sent = _fresh_session_turn(server, {"system_prompt": "You are Ada."}, {"inject_mode": "user", "system_prompt": ""})
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[0]["content"] == "You are Ada."
    assert "laundry basket" in sent[1]["content"] and sent[1]["content"].endswith("where does Bartholomew sleep?")
