"""Issue 27, item 5: curated notes are not lost at a restart.

With the README's notes block (an OpenAI-compatible model, the keyword archive), the exchanges
recorded since the last digest used to live only in RAM: a two-turn conversation and a restart
never reached the digest. Now each archived exchange is marked pending in its metadata until
it is digested, so a new instance on the same folder finds them and digests them once the
conversation has been quiet; ``ovos-memory check`` reports how many wait. A real loopback
OpenAI-compatible server is the model; the restart is a new instance on the same folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole
from trust_helpers import wait_for

from ovos_memory_plugins.fakes import ScriptedOpenAIServer
from ovos_memory_plugins.notes import NotesMemory

REPLY = json.dumps({"new": ["User's sister Ingrid lives in Tromsø"], "replace": [], "retire": [], "episode": ""})


def exchange(user: str, assistant: str) -> list[AgentMessage]:
    return [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]


def readme_block(root: Path, server: ScriptedOpenAIServer, **extra: Any) -> dict[str, Any]:
    """The README's notes block, on a loopback model and a test folder."""
    return {
        "namespace": "ada",
        "root": str(root),
        "llm": {"base_url": server.base_url, "model": "qwen2.5-7b-instruct", "timeout": 5},
        "archive": {"module": "ovos-memory-plugin-lexical"},
        **extra,
    }


def _talk(mem: NotesMemory) -> None:
    mem.update_history(exchange("my sister Ingrid moved to Tromsø last spring", "How exciting for her!"), "kitchen")
    mem.update_history(exchange("yes, she loves the northern lights there", "They must be beautiful."), "kitchen")


def test_pending_curation_survives_a_restart_and_runs_when_quiet(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default_chat_reply=REPLY) as server:
        first = NotesMemory(readme_block(tmp_path, server))  # defaults: 600 s of quiet, 20 turns
        _talk(first)
        assert first.pending_exchanges("kitchen") == 2
        first.close()  # the process ends (the host never calls close: nothing may depend on it)
        assert server.chat_requests == []

        second = NotesMemory(readme_block(tmp_path, server, curate_after_idle_s=1))
        try:
            assert second.pending_exchanges("kitchen") == 2  # derived from storage
            assert wait_for(lambda: len(server.chat_requests) >= 1, timeout=15), "the digest never ran"
            assert second.drain(10)
            asked = server.chat_requests[0]["messages"][-1]["content"]
            assert "Ingrid moved to Tromsø" in asked and "northern lights" in asked  # both turns
            assert [n.text for n in second.notes()] == ["User's sister Ingrid lives in Tromsø"]
            assert second.pending_exchanges() == 0
        finally:
            second.close()

        third = NotesMemory(readme_block(tmp_path, server, curate_after_idle_s=1))
        try:
            assert third.pending_exchanges() == 0  # digested once, never twice
        finally:
            third.close()
        assert len(server.chat_requests) == 1


def test_a_conversation_after_the_restart_joins_the_pending_transcript(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default_chat_reply=REPLY) as server:
        with NotesMemory(readme_block(tmp_path, server)) as first:
            _talk(first)
        with NotesMemory(readme_block(tmp_path, server, curate_every_turns=3)) as second:
            assert second.pending_exchanges("kitchen") == 2
            second.update_history(exchange("her cat is called Mons", "What a lovely name."), "kitchen")
            assert wait_for(lambda: len(server.chat_requests) >= 1, timeout=15)
            assert second.drain(10)
            asked = server.chat_requests[0]["messages"][-1]["content"]
            assert "Ingrid moved to Tromsø" in asked and "Mons" in asked
            assert second.pending_exchanges() == 0


def test_a_deleted_exchange_is_not_digested(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default_chat_reply=REPLY) as server:
        with NotesMemory(readme_block(tmp_path, server)) as first:
            _talk(first)
            hit = first.search("northern lights", session_id="kitchen")[0]
            first.delete([hit.source])
            assert first.pending_exchanges("kitchen") == 1
        with NotesMemory(readme_block(tmp_path, server)) as second:
            assert second.pending_exchanges("kitchen") == 1


def test_check_reports_the_exchanges_waiting_for_the_digest(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default_chat_reply=REPLY) as server:
        block = readme_block(tmp_path / "mem", server)
        with NotesMemory(block) as mem:
            _talk(mem)
        persona = tmp_path / "ada.json"
        module = "ovos-memory-plugin-notes"
        persona.write_text(json.dumps({"name": "Ada", "handlers": ["x"], "memory_module": module, module: block}))
        code = "import sys; from ovos_memory_plugins.cli import main; sys.exit(main(sys.argv[1:]))"
        done = subprocess.run(
            [sys.executable, "-c", code, "check", str(persona), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert json.loads(done.stdout)["pending_exchanges"] == 2, done.stdout + done.stderr
        text = subprocess.run(
            [sys.executable, "-c", code, "check", str(persona)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stdout
        assert "notes digest: 2 exchange(s) recorded and not digested yet" in text, text
        assert server.chat_requests == []  # checking digests nothing


def test_pending_curation_survives_a_restart_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    import uuid

    namespace = "curation-" + uuid.uuid4().hex[:8]
    with ScriptedOpenAIServer(default_chat_reply=REPLY) as server:
        block = readme_block(tmp_path, server, database=postgres_url, namespace=namespace)
        with NotesMemory(block) as first:
            _talk(first)
        with NotesMemory({**block, "curate_after_idle_s": 1}) as second:
            assert second.pending_exchanges("kitchen") == 2
            assert wait_for(lambda: len(server.chat_requests) >= 1, timeout=15), "the digest never ran"
            assert second.drain(10)
            assert [n.text for n in second.notes()] == ["User's sister Ingrid lives in Tromsø"]
        with NotesMemory(block) as third:
            assert third.pending_exchanges() == 0


def test_an_exchange_stored_again_with_its_turn_after_is_pending_once(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(default_chat_reply=REPLY) as server, NotesMemory(readme_block(tmp_path, server)) as mem:
        mem.update_history(
            exchange("should I book the dentist for Tuesday", "Shall I book it on Tuesday at nine?"), "s"
        )
        mem.update_history(exchange("yes please, the morning one", "Booked."), "s")  # stores the first again
        assert mem.pending_exchanges("s") == 2
