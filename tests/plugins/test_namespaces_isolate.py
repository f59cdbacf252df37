"""Namespaces always isolate: two personas under ONE ``root``, through every backend and through
the real ovos-persona service.

Ava's secret goes in the way a persona puts it there (the turn, then the record, "remember
that …"), through ``store`` and through ``remember``; then Bob, configured with the same ``root``
and his own ``namespace``, must not find it by search, in any prompt, or in any byte of the files
his memory opened. Ava still recalls it.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trust_helpers import ALL_BACKENDS, Backend, backend_params, files_holding, prompt_text

from ovos_memory_plugins.testing import exchange

SECRET = "Wombat8842Plum"
ASK = f"remember that my bank PIN is {SECRET}"
QUESTION = "what is my bank PIN"


def tell_ava(backend: Backend, ava: Any) -> None:
    ava.build_conversation_context(ASK, "default")
    ava.update_history(exchange(ASK, f"I will keep {SECRET} to myself"), "default")
    ava.store(f"ava's safe word is {SECRET}", "default")
    if backend.notes:
        assert ava.remember(f"the locker code is {SECRET}", session_id="default")


@pytest.mark.parametrize("backend", backend_params())
def test_two_namespaces_under_one_root_never_leak(tmp_path: Path, backend: Backend) -> None:
    root = tmp_path / "shared-root"
    with backend.open(root, "ava") as ava:
        tell_ava(backend, ava)
        assert SECRET in prompt_text(ava, QUESTION, "default")
        with backend.open(root, "bob") as bob:
            assert SECRET not in prompt_text(bob, QUESTION, "default")
            assert SECRET not in prompt_text(bob, f"tell me about {SECRET}", "default")
            assert not any(SECRET in h.content for h in bob.search(SECRET, top_k=20))
            assert not any(SECRET in h.content for h in bob.search("bank PIN safe word locker code", top_k=20))
            if backend.notes:
                assert not any(SECRET in n.text for n in bob.list_notes(include_retired=True))
            bob.update_history(exchange("my bike is red", "red, noted"), "default")
    # every file of Bob's is apart from Ava's, and none holds her secret
    holding = files_holding(root, SECRET)
    assert holding, "Ava's files hold it"
    # <root>/ava/... for a memory, <root>/<member>/ava/... for a composite's members
    assert all("ava" in Path(f).parts and "bob" not in Path(f).parts for f in holding), holding
    with backend.open(root, "ava") as ava:  # after a restart, Ava still has it
        assert SECRET in prompt_text(ava, QUESTION, "default")


@pytest.mark.parametrize("backend", backend_params([b for b in ALL_BACKENDS if b.name in ("lexical", "notes-sqlite")]))
def test_forgetting_in_one_namespace_leaves_the_other_alone(tmp_path: Path, backend: Backend) -> None:
    with backend.open(tmp_path, "ava") as ava, backend.open(tmp_path, "bob") as bob:
        tell_ava(backend, ava)
        bob.store(f"bob's note mentions {SECRET}", "default")
        assert bob.forget_all() >= 1
        assert SECRET in prompt_text(ava, QUESTION, "default")
        assert files_holding(tmp_path / "bob", SECRET) == []


# -- through the real ovos-persona ---------------------------------------------------------------

ovos_persona = pytest.importorskip("ovos_persona", reason="the real-host tests need ovos-persona (test extra)")

CHAT = "ovos-memory-trust-scripted-chat"
ENGINE = '''
"""Records what it is sent; answers "Noted."."""
import json

from ovos_plugin_manager.templates.agents import AgentMessage, ChatEngine, MessageRole


class TrustChatEngine(ChatEngine):
    def continue_chat(self, messages, session_id="default", lang=None, units=None, tools=None):
        sent = [{"role": getattr(m.role, "value", m.role), "content": m.content} for m in messages]
        with open(self.config["record_to"], "a", encoding="utf-8") as f:
            f.write(json.dumps(sent) + "\\n")
        return AgentMessage(role=MessageRole.ASSISTANT, content="Noted.")
'''


@pytest.fixture
def persona_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Config/cache homes apart, the recording chat engine registered as an installed plugin."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    site = tmp_path / "site"
    (site / "trust_chat_engine").mkdir(parents=True)
    (site / "trust_chat_engine" / "__init__.py").write_text(textwrap.dedent(ENGINE))
    info = site / "trust_chat_engine-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trust-chat-engine\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(f"[opm.agents.chat]\n{CHAT} = trust_chat_engine:TrustChatEngine\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(ovos_persona.PersonaService, "load_intent_files", lambda self: None)
    yield tmp_path


def _service(folder: Path, backend: Backend, root: Path) -> Any:
    from ovos_utils.fakebus import FakeBus

    personas = folder / "personas"
    personas.mkdir(exist_ok=True)
    for name in ("ava", "bob"):
        persona = {
            "name": name,
            "handlers": [CHAT],
            CHAT: {"record_to": str(folder / f"{name}.jsonl")},
            "memory_module": backend.module,
            backend.module: backend.block(root, name),
        }
        (personas / f"{name}.json").write_text(json.dumps(persona))
    config = {"personas_path": str(personas), "ignore_plugin_personas": True}
    return ovos_persona.PersonaService(FakeBus(), config=config)


def _say(service: Any, folder: Path, persona: str, utterance: str) -> str:
    """One turn through the real handler; the text of every message the engine got before the utterance."""
    from ovos_bus_client.message import Message

    record = folder / f"{persona}.jsonl"
    before = len(record.read_text().splitlines()) if record.exists() else 0
    service.handle_persona_query(
        Message(
            "persona:query",
            {"utterance": utterance, "persona": persona, "lang": "en-US"},
            {"session": {"session_id": "default"}},
        )
    )
    lines = record.read_text().splitlines()
    assert len(lines) == before + 1, "the chat engine was not called"
    sent = json.loads(lines[-1])
    assert sent[-1]["content"] == utterance
    return "\n".join(m["content"] for m in sent[:-1])


def _stop(service: Any) -> None:
    for persona in service.personas.values():
        close = getattr(persona.memory, "close", None)
        if callable(close):
            close()
    service.shutdown()


@pytest.mark.parametrize("backend", backend_params())
def test_persona_bob_never_sees_avas_secret_under_one_root(persona_folder: Path, backend: Backend) -> None:
    root = persona_folder / "one-root"
    service = _service(persona_folder, backend, root)
    try:
        assert {"ava", "bob"} <= set(service.personas)
        _say(service, persona_folder, "ava", ASK)
        _say(service, persona_folder, "ava", "the wifi password is platypus-42")
    finally:
        _stop(service)
    service = _service(persona_folder, backend, root)  # a restart: new memories from the same files
    try:
        assert SECRET not in _say(service, persona_folder, "bob", QUESTION)
        assert "platypus-42" not in _say(service, persona_folder, "bob", "what is the wifi password")
        assert SECRET in _say(service, persona_folder, "ava", QUESTION), "Ava still remembers"
    finally:
        _stop(service)
    holding = files_holding(root, SECRET)
    assert holding and all("bob" not in Path(f).parts for f in holding), holding


def _variants(tmp: Path) -> list[tuple[str, Any]]:
    """Other ways two personas end up configured over one place: ``db_path``, a composite member
    with its own ``root``, ``scope: session``."""
    from ovos_memory_plugins.composite import CompositeMemory
    from ovos_memory_plugins.lexical import LexicalMemory
    from ovos_memory_plugins.vector import VectorMemory

    shared_member = {"module": "ovos-memory-plugin-lexical", "config": {"root": str(tmp / "member-root")}}
    return [
        ("lexical db_path", lambda ns: LexicalMemory({"db_path": str(tmp / "one.db"), "namespace": ns})),
        (
            "vector db_path",
            lambda ns: VectorMemory({"db_path": str(tmp / "one-vec.db"), "namespace": ns, "embedder": "hash"}),
        ),
        (
            "composite member root",
            lambda ns: CompositeMemory({"root": str(tmp / "c"), "namespace": ns, "members": [shared_member]}),
        ),
        ("scope session", lambda ns: LexicalMemory({"root": str(tmp / "s"), "namespace": ns, "scope": "session"})),
    ]


@pytest.mark.parametrize(
    "variant", range(4), ids=["lexical-db_path", "vector-db_path", "composite-member-root", "scope-session"]
)
def test_namespaces_isolate_whatever_else_is_configured(tmp_path: Path, variant: int) -> None:
    name, make = _variants(tmp_path)[variant]
    with make("ava") as ava:
        ava.update_history(exchange(ASK, f"I will keep {SECRET} to myself"), "default")
        ava.store(f"ava's safe word is {SECRET}", "default")
        assert SECRET in prompt_text(ava, QUESTION, "default"), name
        with make("bob") as bob:
            assert SECRET not in prompt_text(bob, QUESTION, "default"), name
            assert not any(SECRET in h.content for h in bob.search(SECRET, top_k=20)), name
    holding = files_holding(tmp_path, SECRET)
    assert holding and all("bob" not in Path(f).parts for f in holding), (name, holding)
