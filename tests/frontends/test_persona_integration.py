"""Real-host tests: the real ovos-persona service loads each of our memory plugins from a persona
JSON file, talks through a scripted chat-engine plugin, restarts, and remembers.

The chat engine is registered the way any plugin is: a ``*.dist-info`` folder with an
``entry_points.txt`` (group ``opm.agents.chat``) next to its module, in a folder put on
``sys.path`` for the test. OPM finds it with ``importlib.metadata``, exactly as it finds an
installed package. The engine records every message list it receives into a JSON Lines file
named in its own config block, and answers from a script in that block.

Nothing here touches the network: the service runs on a ``FakeBus``; config, data and cache
homes are temporary folders.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import our_memory_plugins

ovos_persona = pytest.importorskip("ovos_persona", reason="the real-host tests need ovos-persona (test extra)")

from ovos_bus_client.message import Message  # noqa: E402
from ovos_utils.fakebus import FakeBus  # noqa: E402

CHAT = "ovos-memory-test-scripted-chat"

ENGINE_SOURCE = '''
"""A scripted chat engine for tests: records what it is sent, answers from its config."""
import json

from ovos_plugin_manager.templates.agents import AgentMessage, ChatEngine, MessageRole


class ScriptedChatEngine(ChatEngine):
    def continue_chat(self, messages, session_id="default", lang=None, units=None, tools=None):
        sent = [{"role": getattr(m.role, "value", m.role), "content": m.content} for m in messages]
        with open(self.config["record_to"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"session_id": session_id, "messages": sent}) + "\\n")
        reply = self.config.get("replies", {}).get(messages[-1].content, "I see.")
        return AgentMessage(role=MessageRole.ASSISTANT, content=reply)
'''


PLUGINS = our_memory_plugins()

#: Extra config some backends need to run offline in a test (merged under the plugin's block).
OFFLINE_CONFIG: dict[str, dict[str, Any]] = {
    "ovos-memory-plugin-vector": {"embedder": "hash"},
    "ovos-memory-plugin-composite": {
        "members": [{"module": "ovos-memory-plugin-lexical"}, {"module": "ovos-memory-plugin-sticky"}],
    },
}

#: Facts are told as explicit asks ("remember that …") so every backend keeps them, the
#: sticky-note one (which stores only explicit asks) included.
TELL = "remember that my cat Bartholomew is orange and sleeps in the laundry basket"
REPLIES = {
    TELL: "Bartholomew sounds lovely.",
    "where does my cat sleep?": "In the laundry basket, I believe.",
    "remember that my bank PIN is 7731": "I will keep that to myself.",
    "the wifi password is platypus-42": "Noted.",
}


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolate the host (config/cache homes) and register the scripted chat engine."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    site = tmp_path / "site"
    (site / "scripted_chat_engine_for_tests").mkdir(parents=True)
    (site / "scripted_chat_engine_for_tests" / "__init__.py").write_text(textwrap.dedent(ENGINE_SOURCE))
    info = site / "scripted_chat_engine_for_tests-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: scripted-chat-engine-for-tests\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(
        f"[opm.agents.chat]\n{CHAT} = scripted_chat_engine_for_tests:ScriptedChatEngine\n"
    )
    monkeypatch.syspath_prepend(str(site))
    # Training the service's own summon/list intents takes ~1 s per start and plays no part in
    # memory; every path a turn takes (persona files, Persona, memory, handlers) stays real.
    monkeypatch.setattr(ovos_persona.PersonaService, "load_intent_files", lambda self: None)
    return tmp_path


class Host:
    """The persona service over a folder of persona JSON files; ``restart`` builds a new one."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.personas = folder / "personas"
        self.personas.mkdir(exist_ok=True)
        self.record = folder / "chat.jsonl"
        self.service: Any = None

    def add_persona(self, name: str, module: str, memory: dict[str, Any] | None = None) -> None:
        block = {**OFFLINE_CONFIG.get(module, {}), **(memory or {})}
        persona = {
            "name": name,
            "handlers": [CHAT],
            CHAT: {"record_to": str(self.record), "replies": REPLIES},
            "memory_module": module,
            module: block,
        }
        (self.personas / f"{name}.json").write_text(json.dumps(persona))

    def start(self) -> None:
        self.stop()
        config = {"personas_path": str(self.personas), "ignore_plugin_personas": True}
        self.service = ovos_persona.PersonaService(FakeBus(), config=config)

    def stop(self) -> None:
        if self.service is None:
            return
        for persona in self.service.personas.values():
            close = getattr(persona.memory, "close", None)
            if close is not None:
                close()
        self.service.shutdown()
        self.service = None

    def say(self, persona: str, utterance: str, session_id: str = "default") -> list[dict[str, str]]:
        """One turn through the real handler; returns the messages the chat engine was sent."""
        before = self._calls()
        message = Message(
            "persona:query",
            {"utterance": utterance, "persona": persona, "lang": "en-US"},
            {"session": {"session_id": session_id}},
        )
        self.service.handle_persona_query(message)
        calls = self._calls()
        assert len(calls) == len(before) + 1, "the chat engine was not called for this turn"
        assert calls[-1]["session_id"] == session_id
        return calls[-1]["messages"]  # type: ignore[no-any-return]

    def _calls(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture
def persona_host(host: Path) -> Iterator[Host]:
    h = Host(host)
    yield h
    h.stop()


def _earlier(messages: list[dict[str, str]]) -> str:
    """The text of every message but the last (the utterance itself)."""
    return "\n".join(m["content"] for m in messages[:-1])


needs_plugins = pytest.mark.skipif(not PLUGINS, reason="no memory backend of this package imports yet")


@needs_plugins
@pytest.mark.parametrize("module", PLUGINS)
def test_remembers_across_a_restart(persona_host: Host, module: str) -> None:
    persona_host.add_persona("ada", module, {"namespace": "ada", "system_prompt": "You are Ada."})
    persona_host.start()
    assert "ada" in persona_host.service.personas
    assert type(persona_host.service.personas["ada"].memory).__module__.startswith("ovos_memory_plugins")
    first = persona_host.say("ada", TELL, "kitchen")
    assert first[0]["role"] == "system" and first[0]["content"].startswith("You are Ada.")
    assert first[-1] == {"role": "user", "content": TELL}
    persona_host.say("ada", "the wifi password is platypus-42", "kitchen")

    persona_host.start()  # a restart: a new service, new persona, new memory instance
    same_session = persona_host.say("ada", "where does my cat sleep?", "kitchen")
    assert same_session[-1] == {"role": "user", "content": "where does my cat sleep?"}
    assert "laundry basket" in _earlier(same_session)
    assert "Bartholomew sounds lovely." in _earlier(same_session)

    other_session = persona_host.say("ada", "what colour is my cat?", "hallway")
    assert "Bartholomew" in _earlier(other_session), "global scope recalls other sessions' exchanges"


@needs_plugins
@pytest.mark.parametrize("module", PLUGINS)
def test_namespaces_keep_personas_apart(persona_host: Host, module: str) -> None:
    persona_host.add_persona("ada", module, {"namespace": "ada"})
    persona_host.add_persona("bob", module, {"namespace": "bob"})
    persona_host.start()
    persona_host.say("ada", "remember that my bank PIN is 7731")
    persona_host.say("ada", TELL)
    persona_host.start()
    to_bob = persona_host.say("bob", "what is my bank PIN?")
    assert "7731" not in _earlier(to_bob)
    to_ada = persona_host.say("ada", "what is my bank PIN?", "another-session")
    assert "7731" in _earlier(to_ada)


@needs_plugins
@pytest.mark.parametrize("module", PLUGINS)
def test_session_scope_keeps_sessions_apart(persona_host: Host, module: str) -> None:
    persona_host.add_persona("ada", module, {"namespace": "ada", "scope": "session"})
    persona_host.start()
    persona_host.say("ada", "remember that my bank PIN is 7731", "alice")
    persona_host.say("ada", TELL, "alice")
    persona_host.start()
    assert "7731" not in _earlier(persona_host.say("ada", "what is my bank PIN?", "bob"))
    assert "7731" in _earlier(persona_host.say("ada", "what is my bank PIN?", "alice"))


@needs_plugins
@pytest.mark.parametrize("module", PLUGINS)
def test_broken_memory_config_still_loads_the_persona(
    persona_host: Host, module: str, caplog: pytest.LogCaptureFixture
) -> None:
    persona_host.add_persona(
        "ada", module, {"namespace": "ada", "inject_mode": "telepathy", "max_histroy": 4, "retrieval": "lots"}
    )
    with caplog.at_level(logging.ERROR, logger="ovos_memory_plugins"):
        persona_host.start()
    assert "ada" in persona_host.service.personas
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("ovos_memory_plugins"))
    assert "inject_mode" in logged and "telepathy" in logged
    assert "max_histroy" in logged and "max_history" in logged
    persona_host.say("ada", TELL)
    messages = persona_host.say("ada", "where does my cat sleep?")
    assert "laundry basket" in _earlier(messages)


def test_the_scripted_engine_is_found_through_opm(host: Path) -> None:
    from ovos_plugin_manager.agents import find_chat_plugins

    assert CHAT in find_chat_plugins()


@needs_plugins
@pytest.mark.parametrize("module", PLUGINS)
def test_the_command_works_on_the_files_of_a_running_persona(
    persona_host: Host, module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ovos-memory remember``/``forget`` on the persona's own files while its service runs:
    the persona's next turn sees the change, with no restart."""
    from ovos_memory_plugins.cli import main

    persona_host.add_persona("ada", module, {"namespace": "ada"})
    persona_host.start()
    persona_host.say("ada", TELL)
    persona_file = str(persona_host.personas / "ada.json")

    assert main(["remember", "--persona", persona_file, "the garage door code is 4471"]) == 0
    assert "4471" in _earlier(persona_host.say("ada", "what is the garage door code?", "hallway"))

    if main(["forget", "--persona", persona_file, "--match", "garage door code"]) != 0:
        assert "keeps no notes" in capsys.readouterr().err
        main(["--json", "search", "--persona", persona_file, "garage door code 4471"])
        ids = [h["id"] for h in json.loads(capsys.readouterr().out) if "4471" in h["content"]]
        assert ids and main(["forget", "--persona", persona_file, *ids]) == 0
    assert "4471" not in _earlier(persona_host.say("ada", "what is the garage door code?", "porch"))


@needs_plugins
@pytest.mark.parametrize("module", PLUGINS)
def test_an_unusable_root_still_loads_the_persona(
    persona_host: Host, module: str, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = persona_host.folder / "not-a-folder"
    blocker.write_text("a file where the memory's folder should be")
    persona_host.add_persona("ada", module, {"root": str(blocker / "memory")})
    with caplog.at_level(logging.ERROR, logger="ovos_memory_plugins"):
        persona_host.start()
    assert "ada" in persona_host.service.personas
    assert any("not-a-folder" in r.getMessage() for r in caplog.records if r.name.startswith("ovos_memory_plugins"))
    persona_host.say("ada", TELL)
    messages = persona_host.say("ada", "where does my cat sleep?")
    assert messages[-1] == {"role": "user", "content": "where does my cat sleep?"}
    assert "laundry basket" in _earlier(messages), "kept in RAM for the life of the process"
