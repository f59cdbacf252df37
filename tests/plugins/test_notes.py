"""The notes backend: prompt block, verbs, digest and dreaming through a local OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Engine
from ovos_plugin_manager.templates.agents import MessageRole

from ovos_memory_plugins.config import validate_config
from ovos_memory_plugins.errors import ConfigError, CorruptFileError
from ovos_memory_plugins.fakes import Delay, Garbled, HTTPFailure, ScriptedLLM, ScriptedOpenAIServer
from ovos_memory_plugins.notes import NotesMemory, normalize_fact
from ovos_memory_plugins.sticky import StickyMemory
from ovos_memory_plugins.storage.notes_store import make_note
from ovos_memory_plugins.testing import exchange


def llm_config(server: ScriptedOpenAIServer, **extra: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "api_key": "k", "model": "m", "timeout": 2, **extra}


def memory(tmp_path: Path, **config: Any) -> NotesMemory:
    config.setdefault("root", str(tmp_path / "mem"))
    return NotesMemory(config)


def system_text(mem: NotesMemory, utterance: str, session: str = "s") -> str:
    msgs = mem.build_conversation_context(utterance, session)
    assert msgs[-1].role == MessageRole.USER and msgs[-1].content == utterance
    return "\n".join(m.content for m in msgs if m.role == MessageRole.SYSTEM)


def test_loads_by_name_and_validates() -> None:
    from ovos_plugin_manager.agents import load_memory_plugin

    assert load_memory_plugin("ovos-memory-plugin-notes") is NotesMemory
    validate_config({"notes_budget": 4000, "archive": None}, plugin="ovos-memory-plugin-notes")
    with pytest.raises(ConfigError, match="archive"):
        validate_config({"archive": {"module": "no-such-plugin"}}, plugin="ovos-memory-plugin-notes")
    with pytest.raises(ConfigError, match="llm"):
        validate_config({"llm": {"timeout": "soon"}}, plugin="ovos-memory-plugin-notes")


def test_normalize_fact() -> None:
    assert normalize_fact("  - [2025-03]  likes\n green   tea ") == ("likes green tea", "2025-03")
    assert normalize_fact("plain") == ("plain", "")


def test_notes_travel_every_turn_with_a_meter(tmp_path: Path) -> None:
    with memory(tmp_path, system_prompt="You are Ada.", archive=None) as mem:
        assert system_text(mem, "hello") == "You are Ada."  # no notes, no block
        assert mem.remember("User's cat is called Bartholomew")
        assert mem.remember("user's cat is called   bartholomew").status == "duplicate"
        text = system_text(mem, "hello")
        assert text.startswith("You are Ada.\n\n")
        month = time.strftime("%Y-%m")
        assert f"- [{month}, this month] User's cat is called Bartholomew" in text
        assert "[notes: " in text and "of 8,000 characters used]" in text
        assert (tmp_path / "mem" / "MEMORY.md").read_text().count("Bartholomew") == 1


def test_past_context_facts_only_relevant_and_newest_travel(tmp_path: Path) -> None:
    with memory(tmp_path, archive=None, context_facts=10, newest_facts=2) as mem:
        mem.replace_notes("\n".join(f"- [2025-01] filler fact number {i} about gardening" for i in range(40)))
        mem.remember("[2024-05] User's sister Ingrid lives in Bergen")
        for i in range(2):
            mem.remember(f"newest note {i} about parking")
        text = system_text(mem, "where does Ingrid live?")
        assert "Ingrid lives in Bergen" in text
        assert "newest note 0" in text and "newest note 1" in text
        assert text.count("filler fact") <= 7
        assert "showing" in text and "of 43 notes" in text


def test_relevance_selection_is_cjk_aware(tmp_path: Path) -> None:
    with memory(tmp_path, archive=None, context_facts=8, newest_facts=1) as mem:
        mem.replace_notes(
            "- [2025-01] 我的猫叫咪咪\n"
            + "\n".join(f"- [2025-01] 第{i}条关于天气的记录" for i in range(30))
            + "\n- [2025-02] 最新的记录\n"
        )
        text = system_text(mem, "我的猫叫什么名字？")
        assert "我的猫叫咪咪" in text and "最新的记录" in text
        assert "showing" in text


def test_budget_cuts_the_block(tmp_path: Path) -> None:
    with memory(tmp_path, archive=None, notes_budget=300) as mem:
        for i in range(20):
            mem.remember(f"fact {i} with some words to take up space")
        block = mem.context_blocks("x", "s")[0]
        notes_part = block.split("]\n", 1)[1]
        assert len(notes_part) <= 300
        assert "fact 19 " in block  # newest kept first


def test_forget_and_update_with_loose_descriptions(tmp_path: Path) -> None:
    with memory(tmp_path, archive=None) as mem:
        mem.remember("User buys bread at the Rosa bakery")
        mem.remember("The bakery on Main Street closes at six")
        mem.remember("User's graphics card is a GTX 1080")
        before = mem.notes()
        result = mem.forget("that thing about the bakery")
        assert result.status == "ambiguous" and not result
        assert {n.text for n in result.candidates} == {
            "User buys bread at the Rosa bakery",
            "The bakery on Main Street closes at six",
        }
        assert mem.notes() == before
        assert mem.update("the bakery", "x").status == "ambiguous" and mem.notes() == before
        assert mem.forget("something about submarines").status == "not_found"
        done = mem.forget("the Rosa bakery")
        assert done.status == "forgotten" and done.note is not None and "Rosa" in done.note.text
        assert [n.text for n in mem.notes()] == [
            "The bakery on Main Street closes at six",
            "User's graphics card is a GTX 1080",
        ]
        upd = mem.update("graphics card", "User's graphics card is an RTX 4070")
        assert upd.status == "updated" and upd.replaced_by is not None
        assert [n.text for n in mem.notes()][-1] == "User's graphics card is an RTX 4070"
        assert [n.text for n in mem.retired_notes()] == ["User's graphics card is a GTX 1080"]
        # the retired fact is still answerable through recall, marked as no longer true
        text = system_text(mem, "what was my last graphics card?")
        assert "(no longer true since" in text and "GTX 1080" in text
        assert mem.restore("GTX 1080").status == "restored"
        assert "User's graphics card is a GTX 1080" in [n.text for n in mem.notes()]


def test_replace_notes_normalises_dedups_and_undo(tmp_path: Path) -> None:
    with memory(tmp_path, archive=None) as mem:
        mem.remember("first fact")
        notes = mem.replace_notes("# mine\n- [2024-02] likes tea\n-   likes   TEA\n* undated one\nprose\n")
        assert [n.text for n in notes] == ["likes tea", "undated one"]
        assert notes[0].date == "2024-02" and notes[1].date == time.strftime("%Y-%m")
        assert "first fact" in (tmp_path / "mem" / "MEMORY.md.bak").read_text()
        with pytest.raises(CorruptFileError, match="line 1"):
            mem.replace_notes("- [tomorrow] nope")
        mem.replace_notes("- [2024-02] third body")
        assert mem.undo(2)
        assert [n.text for n in mem.notes()] == ["first fact"]
        assert not mem.undo(5)


def test_malformed_memory_md_is_reported_and_left_untouched(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "mem"
    root.mkdir()
    bad = "# Memory\n- [2026-01] fine fact\n- [next week] broken\n"
    (root / "MEMORY.md").write_text(bad)
    with (
        ScriptedOpenAIServer(default_chat_reply=json.dumps({"new": ["User likes chess"]})) as server,
        memory(tmp_path, archive=None, llm=llm_config(server), curate_in_background=False) as mem,
    ):
        assert any("line 3" in r.getMessage() for r in caplog.records)
        msgs = mem.build_conversation_context("hi", "s")  # never raises
        assert msgs[-1].content == "hi"
        with pytest.raises(CorruptFileError, match="line 3"):
            mem.remember("new fact")
        mem.update_history(exchange("I like chess", "nice"), "s")
        with pytest.raises(CorruptFileError):  # a direct call raises; the transcript waits for the fix
            mem.digest("s")
        assert mem.pending_exchanges("s") == 1
        assert "[next week]" in mem.notes_body()
    assert (root / "MEMORY.md").read_text() == bad
    with memory(tmp_path, archive=None) as mem:  # an editor may replace it; the bad text is kept in history
        mem.replace_notes("- [2026-01] fine fact\n- broken, fixed\n")
        assert bad in (root / "MEMORY.md.bak").read_text()


def test_hand_edits_are_picked_up(tmp_path: Path) -> None:
    with memory(tmp_path, archive=None) as mem:
        mem.remember("alpha fact")
        path = tmp_path / "mem" / "MEMORY.md"
        path.write_text(path.read_text() + "- [2023-07] hand written fact about kayaks\n")
        os.utime(path, (time.time() + 5, time.time() + 5))
        assert "kayaks" in system_text(mem, "kayaks")


@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_concurrent_remember_from_two_threads(tmp_path: Path, store: str) -> None:
    mems = [memory(tmp_path, archive=None, store=store), memory(tmp_path, archive=None, store=store)]
    try:

        def work(t: int) -> None:
            for i in range(30):
                mems[t % 2].remember(f"thread {t} fact {i}")
                mems[t % 2].build_conversation_context("fact", "s")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(mems[0].notes()) == 120
        assert len({n.text for n in mems[1].notes()}) == 120
    finally:
        for m in mems:
            m.close()


def test_switching_store_type_loses_nothing(tmp_path: Path) -> None:
    with memory(tmp_path, archive=None) as mem:
        mem.remember("fact one")
        mem.remember("my old phone was a Nokia")
        mem.update("old phone", "my phone is a Fairphone")
    with memory(tmp_path, archive=None, store="sqlite") as mem:
        assert [n.text for n in mem.notes()] == ["fact one", "my phone is a Fairphone"]
        assert [n.text for n in mem.retired_notes()] == ["my old phone was a Nokia"]
        assert not (tmp_path / "mem" / "MEMORY.md").exists()
        mem.remember("sqlite only fact")
        assert mem.search_notes("Nokia")[0].retired_on
    with memory(tmp_path, archive=None, store="file") as mem:
        assert [n.text for n in mem.notes()] == ["fact one", "my phone is a Fairphone", "sqlite only fact"]
        assert [n.text for n in mem.retired_notes()] == ["my old phone was a Nokia"]
        assert not (tmp_path / "mem" / "notes.db").exists()


def test_archive_null_keeps_nothing_of_the_conversation_on_disk(tmp_path: Path) -> None:
    with memory(tmp_path, archive=None) as mem:
        mem.update_history(exchange("my PIN is 1234", "noted"), "s")
        mem.remember("User prefers short answers")
        assert mem.search("PIN") == []
    files = sorted(p.name for p in (tmp_path / "mem").iterdir())
    assert files == [".MEMORY.md.lock", ".MEMORY.sessions.json", "MEMORY.md"]  # sessions: ids only
    for path in (tmp_path / "mem").iterdir():
        assert b"1234" not in path.read_bytes()


# -- digest ------------------------------------------------------------------------------------------


def digest_reply(**data: Any) -> str:
    base: dict[str, Any] = {"new": [], "replace": [], "retire": [], "episode": ""}
    base.update(data)
    return "```json\n" + json.dumps(base) + "\n```"


def test_digest_admits_replaces_and_archives_in_the_background(tmp_path: Path) -> None:
    with ScriptedOpenAIServer() as server:
        mem = NotesMemory({"root": str(tmp_path / "mem"), "llm": llm_config(server), "curate_every_turns": 2})
        try:
            assert mem.auto_curate
            mem.remember("[2024-01] User lives in Porto")
            mem.remember("[2024-01] User's dog is called Rex")
            server.queue_chat(
                digest_reply(
                    new=["User is learning the cello", "what time is it?"],
                    replace=[{"number": 1, "fact": "User lives in Lisbon"}],
                    episode="On moving day the user moved from Porto to Lisbon and started cello lessons.",
                )
            )
            mem.update_history(exchange("I moved to Lisbon last week", "How exciting!"), "kitchen")
            assert server.chat_requests == []  # one exchange: not due yet
            mem.update_history(exchange("and I started cello lessons", "Lovely"), "kitchen")
            assert mem.drain(10)
            assert len(server.chat_requests) == 1
            prompt = server.chat_requests[0]["messages"][1]["content"]
            assert "1. [2024-01] User lives in Porto" in prompt
            assert "User: I moved to Lisbon last week\nAssistant: How exciting!" in prompt
            assert server.chat_requests[0]["temperature"] == 0
            texts = [n.text for n in mem.notes()]
            assert texts == ["User lives in Lisbon", "User's dog is called Rex", "User is learning the cello"]
            assert [n.text for n in mem.retired_notes()] == ["User lives in Porto"]
            assert mem.pending_exchanges() == 0
            hits = mem.search("cello lessons Lisbon")
            assert any("moved from Porto to Lisbon" in h.content for h in hits)
            stats = mem.stats()
            assert stats["digests"] == 1 and stats["facts_added"] == 2 and stats["llm"]["calls"] == 1
        finally:
            mem.close()


def test_digest_keeps_both_when_both_can_be_true(tmp_path: Path) -> None:
    llm = ScriptedLLM([digest_reply(new=["User also has a cat called Mia"])])
    with NotesMemory({"root": str(tmp_path), "archive": None, "curate_in_background": False}, llm=llm) as mem:
        mem.remember("User has a dog called Rex")
        mem.update_history(exchange("we adopted a cat, Mia", "congratulations"), "s")
        assert mem.digest("s").status == "applied"
        assert [n.text for n in mem.notes()] == ["User has a dog called Rex", "User also has a cat called Mia"]
        assert mem.digest("s").status == "nothing"


def test_digest_after_idle(tmp_path: Path) -> None:
    with (
        ScriptedOpenAIServer(default_chat_reply=digest_reply(new=["User's name is Ana"])) as server,
        memory(tmp_path, archive=None, llm=llm_config(server), curate_after_idle_s=1) as mem,
    ):
        mem.update_history(exchange("my name is Ana", "hi Ana"), "s")
        deadline = time.monotonic() + 8
        while not mem.notes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [n.text for n in mem.notes()] == ["User's name is Ana"]


def test_digest_garbled_reply_changes_nothing(tmp_path: Path) -> None:
    with (
        ScriptedOpenAIServer(chat=['I think the user likes chess {"new": [', Garbled()]) as server,
        memory(tmp_path, archive=None, llm=llm_config(server), curate_in_background=False) as mem,
    ):
        mem.remember("keep me")
        mem.update_history(exchange("I like chess", "nice"), "s")
        assert mem.digest("s").status == "garbled"
        assert mem.pending_exchanges("s") == 1  # kept for one more try
        assert mem.digest("s").status == "failed"  # a garbled HTTP body is a failed call
        assert [n.text for n in mem.notes()] == ["keep me"]


def test_digest_timeout_and_dead_endpoint_fail_open_without_delaying_turns(tmp_path: Path) -> None:
    with ScriptedOpenAIServer(chat=[Delay(5.0, digest_reply(new=["late fact"]))]) as server:
        mem = memory(tmp_path, archive=None, llm=llm_config(server, timeout=0.5), curate_every_turns=1)
        try:
            start = time.monotonic()
            mem.update_history(exchange("remember I like figs", "ok"), "s")
            msgs = mem.build_conversation_context("next question", "s")
            assert time.monotonic() - start < 0.4  # the digest runs in the background
            assert msgs[-1].content == "next question"
            assert mem.drain(5)
            assert mem.notes() == [] and mem.pending_exchanges("s") == 1
        finally:
            mem.close()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    dead = {"base_url": f"http://127.0.0.1:{port}/v1", "timeout": 1, "backoff_s": 60}
    with memory(tmp_path / "dead", archive=None, llm=dead, curate_in_background=False) as mem:
        mem.update_history(exchange("hello, I moved to Porto", "hi"), "s")
        start = time.monotonic()
        assert mem.digest("s").status == "failed"
        assert mem.digest("s").status == "failed"
        assert mem.dream().status in ("skipped", "failed")
        assert time.monotonic() - start < 3
        stats = mem.stats()["llm"]
        assert stats["calls"] == 1 and stats["skipped"] >= 1


# -- dreaming -----------------------------------------------------------------------------------------


NOTES = "- [2024-01] User's cat is called Tom\n- [2025-06] Tom is orange\n- [2024-03] User always wants metric units\n"


def dream_reply(*lines: str) -> str:
    return json.dumps({"notes": list(lines)})


def test_dream_merges_keeps_history_and_undo(tmp_path: Path) -> None:
    with ScriptedOpenAIServer() as server, memory(tmp_path, archive=None, llm=llm_config(server)) as mem:
        mem.replace_notes(NOTES)
        server.queue_chat(dream_reply("[2025-06] User's cat Tom is orange", "[2024-03] User always wants metric units"))
        result = mem.dream()
        assert result and result.status == "rewritten" and (result.before, result.after) == (3, 2)
        assert [n.text for n in mem.notes()] == ["User's cat Tom is orange", "User always wants metric units"]
        assert "Tom is orange" in (tmp_path / "mem" / "MEMORY.md.bak").read_text()
        assert (tmp_path / "mem" / ".dreamed").exists()
        server.queue_chat(dream_reply("[2025-06] User's cat Tom is orange", "[2024-03] User always wants metric"))
        assert mem.dream().status == "rewritten"
        assert mem.undo(2)
        assert [n.text for n in mem.notes()] == [
            "User's cat is called Tom",
            "Tom is orange",
            "User always wants metric units",
        ]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            dream_reply(
                "[2025-06] User's cat Tom is orange and loves tuna", "[2024-03] User always wants metric units"
            ),
            "tuna",
        ),
        (dream_reply("[2025-06] User's cat Tom is orange"), "rule or preference"),
        ("Sure! Here are the tidied notes: - Tom is orange", "no list"),
        (dream_reply(), "empty"),
        (Garbled(), "did not answer"),
        (HTTPFailure(500), "did not answer"),
    ],
)
def test_dream_rejections_leave_notes_untouched(tmp_path: Path, reply: Any, reason: str) -> None:
    with ScriptedOpenAIServer(chat=[reply]) as server, memory(tmp_path, archive=None, llm=llm_config(server)) as mem:
        mem.replace_notes(NOTES)
        body = (tmp_path / "mem" / "MEMORY.md").read_text()
        result = mem.dream()
        assert not result and reason in result.reason
        assert (tmp_path / "mem" / "MEMORY.md").read_text() == body


def test_dream_cadence_and_budget_overflow(tmp_path: Path) -> None:
    now = [1_800_000_000.0]
    llm = ScriptedLLM(default=dream_reply("[2024-01] User's cat is called Tom"))
    mem = NotesMemory(
        {"root": str(tmp_path), "archive": None, "curate_in_background": False, "curate_every_turns": 1000},
        llm=llm,
        clock=lambda: now[0],
    )
    try:
        mem.replace_notes("- [2024-01] User's cat is called Tom\n- [2024-01] User's cat is called Tom!\n")
        mem.update_history(exchange("a", "b"), "s")
        assert (tmp_path / ".dreamed").exists() and llm.calls == []  # the first check starts the clock
        now[0] += 2 * 86400
        mem.update_history(exchange("c", "d"), "s")
        assert llm.calls == []
        now[0] += 1.01 * 86400
        mem.update_history(exchange("e", "f"), "s")
        assert len(llm.calls) == 1 and [n.text for n in mem.notes()] == ["User's cat is called Tom"]
        mem.update_history(exchange("g", "h"), "s")
        assert len(llm.calls) == 1  # the clock restarted
    finally:
        mem.close()
    llm2 = ScriptedLLM(default=dream_reply("[2024-01] fact"))
    with NotesMemory(
        {"root": str(tmp_path / "b"), "archive": None, "curate_in_background": False, "notes_budget": 200}, llm=llm2
    ) as mem:
        for i in range(8):
            mem.remember(f"fact {i} number")
        assert len(llm2.calls) >= 1  # overflow asked for a dream
        assert mem.stats()["dreams"] >= 1


def test_digest_and_dream_work_with_the_sqlite_store(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            digest_reply(replace=[{"number": 1, "fact": "User works at Acme"}]),
            dream_reply("[2026-01] User works at Acme"),
        ]
    )
    with NotesMemory(
        {"root": str(tmp_path), "archive": None, "store": "sqlite", "curate_in_background": False}, llm=llm
    ) as mem:
        mem.remember("[2020-01] User works at Initech")
        mem.update_history(exchange("I joined Acme", "congrats"), "s")
        assert mem.digest("s").status == "applied"
        assert [n.text for n in mem.notes()] == ["User works at Acme"]
        retired = make_note(
            "User works at Initech", "2020-01", session_id="default", retired_on=time.strftime("%Y-%m-%d")
        )
        assert mem.retired_notes() == [retired]
        assert mem.dream().status in ("rewritten", "unchanged")


# -- on every engine: two memory objects on one store, two namespaces ---------------------------


def test_two_servers_see_each_others_notes_on_the_next_turn(engine: Engine) -> None:
    notes_cfg = engine.memory_config(root=str(engine.folder / "notes"))
    sticky_cfg = engine.memory_config(root=str(engine.folder / "sticky"))
    with NotesMemory(notes_cfg) as a, NotesMemory(notes_cfg) as b:
        assert a.build_conversation_context("hi", "s")[0].content.count("User") == 0  # caches warm
        b.build_conversation_context("hi", "s")
        a.remember("User's dog is called Rex")
        assert "Rex" in b.build_conversation_context("what is my dog called?", "s")[0].content
        b.forget("dog")
        assert "Rex" not in a.build_conversation_context("what is my dog called?", "s")[0].content
    with StickyMemory(sticky_cfg) as a, StickyMemory(sticky_cfg) as b:
        a.build_conversation_context("Remember that the spare key is under the mat", "kitchen")
        assert "spare key" in b.build_conversation_context("where is the key?", "porch")[0].content
        b.forget("spare key")
        assert a.list_notes() == []


def test_namespaces_never_see_each_others_notes(engine: Engine) -> None:
    def config(kind: str, who: str) -> dict[str, Any]:
        return engine.memory_config(root=str(engine.folder / kind), namespace=who)

    with NotesMemory(config("notes", "ada")) as ada, NotesMemory(config("notes", "bob")) as bob:
        ada.remember("User's PIN is 1234")
        assert bob.list_notes() == [] and bob.search_notes("PIN") == []
    with StickyMemory(config("sticky", "ada")) as ada, StickyMemory(config("sticky", "bob")) as bob:
        ada.remember("my PIN is 1234", "s")
        assert bob.list_notes() == [] and bob.search("PIN") == []
