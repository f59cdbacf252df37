"""Dead, hung and trickling services cost one deadline once, then milliseconds.

Real HTTP servers on 127.0.0.1 (:class:`~ovos_memory_plugins.fakes.ScriptedOpenAIServer`): one
that never answers (``Delay``) and one that sends its headers and then one byte every 0.2 s
(``Trickle``, alive but never done: a per-read timeout never fires). The memories are configured
as a persona configures them (config blocks only, the real openai client inside), and each turn
is timed as the host runs it: ``build_conversation_context`` then ``update_history``.

Held when: the first turn ends within the configured deadline (plus scheduling slack on a busy
2-core machine), every later turn within a few tens of milliseconds, the turn still answers
with what the healthy parts know, and ``close()`` returns within a second.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from trust_helpers import wait_for

from ovos_memory_plugins.composite import CompositeMemory
from ovos_memory_plugins.fakes import Delay, ScriptedOpenAIServer, Trickle
from ovos_memory_plugins.notes import NotesMemory
from ovos_memory_plugins.testing import exchange
from ovos_memory_plugins.vector import VectorMemory

DEADLINE_S = 1.0
#: scheduling slack on a shared 2-core machine (threads, the client's own setup)
SLACK_S = 0.9
#: a later turn, while the service is backed off
LATER_S = 0.15

FAULTS: dict[str, Callable[[], Any]] = {"hung": lambda: Delay(60.0), "trickling": lambda: Trickle(None, 0.2)}
CHAT_FAULTS: dict[str, Callable[[], Any]] = {
    "hung": lambda: Delay(60.0, "late"),
    "trickling": lambda: Trickle("slow words " * 50, 0.2),
}


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def timed_turn(mem: Any, utterance: str, session_id: str) -> tuple[float, float, list[Any]]:
    """One host turn: (seconds for the context, seconds for the record, the messages)."""
    start = time.monotonic()
    messages = mem.build_conversation_context(utterance, session_id)
    built = time.monotonic() - start
    start = time.monotonic()
    mem.update_history(exchange(utterance, "I see."), session_id)
    return built, time.monotonic() - start, messages


def timed_close(mem: Any) -> float:
    start = time.monotonic()
    mem.close()
    return time.monotonic() - start


@pytest.mark.parametrize("fault", list(FAULTS))
def test_an_embedding_server_that_hangs_or_trickles(tmp_path: Path, server: ScriptedOpenAIServer, fault: str) -> None:
    embedder = {"type": "openai", "model": "m", "base_url": server.base_url, "timeout": DEADLINE_S, "backoff_s": 60}
    mem = VectorMemory({"root": str(tmp_path), "embedder": embedder, "hybrid": True, "background_reembed": False})
    try:
        mem.store("the spare key is under the blue flower pot", "s1")  # the server answers this one
        server.queue_embeddings(*(FAULTS[fault]() for _ in range(10)))
        turns = [timed_turn(mem, "where is the spare key", "s2") for _ in range(5)]
        first, later = turns[0], turns[1:]
        assert first[0] + first[1] < DEADLINE_S + SLACK_S, turns
        assert all(b < LATER_S and r < LATER_S for b, r, _ in later), turns
        assert all("blue flower pot" in "\n".join(m.content for m in msgs) for _, _, msgs in turns)
        assert len(server.embedding_requests) == 2, "one request for the store, one for the first turn"
    finally:
        assert timed_close(mem) < 1.0


@pytest.mark.parametrize("fault", list(CHAT_FAULTS))
def test_a_language_model_that_hangs_or_trickles_in_the_composite(
    tmp_path: Path, server: ScriptedOpenAIServer, fault: str
) -> None:
    llm = {"base_url": server.base_url, "model": "m", "timeout": DEADLINE_S, "backoff_s": 60}
    config = {
        "root": str(tmp_path),
        "members": [{"module": "ovos-memory-plugin-lexical"}],
        "expand_query": True,
        "summarize_recall": True,
        "llm": llm,
    }
    mem = CompositeMemory(config)
    try:
        mem.update_history(exchange("my passport is in the blue drawer", "noted"), "s")
        server.queue_chat(*(CHAT_FAULTS[fault]() for _ in range(10)))
        turns = [timed_turn(mem, "where is my passport", "s") for _ in range(5)]
        first, later = turns[0], turns[1:]
        assert first[0] + first[1] < DEADLINE_S + SLACK_S, turns
        assert all(b < LATER_S and r < LATER_S for b, r, _ in later), turns
        assert all("blue drawer" in "\n".join(m.content for m in msgs) for _, _, msgs in turns)
        assert len(server.chat_requests) == 1, "one call, then the back-off"
    finally:
        assert timed_close(mem) < 1.0


@pytest.mark.parametrize("fault", list(CHAT_FAULTS))
def test_notes_digest_against_a_hung_model_never_delays_a_turn(
    tmp_path: Path, server: ScriptedOpenAIServer, fault: str
) -> None:
    llm = {"base_url": server.base_url, "model": "m", "timeout": DEADLINE_S, "backoff_s": 60}
    server.queue_chat(*(CHAT_FAULTS[fault]() for _ in range(10)))
    mem = NotesMemory({"root": str(tmp_path), "llm": llm, "curate_every_turns": 1})
    try:
        mem.remember("my passport is in the blue drawer")
        turns = [timed_turn(mem, f"where is my passport {i}", "s") for i in range(5)]
        assert all(b < LATER_S + 0.2 and r < LATER_S + 0.2 for b, r, _ in turns), turns  # digests run aside
        assert all("blue drawer" in msgs[0].content for _, _, msgs in turns)
        assert wait_for(lambda: len(server.chat_requests) >= 1), "a digest did call the model"
    finally:
        assert timed_close(mem) < 1.0 + 0.2


def test_a_composite_with_a_hung_member(tmp_path: Path, server: ScriptedOpenAIServer) -> None:
    """A vector member whose embedding server hangs with a 30 s client deadline: the composite
    bounds it (member and write deadlines), later turns skip it at once, close() within 1 s."""
    embedder = {"type": "openai", "model": "m", "base_url": server.base_url, "timeout": 30}
    config = {
        "root": str(tmp_path),
        "members": [
            {"module": "ovos-memory-plugin-lexical"},
            {"module": "ovos-memory-plugin-vector", "config": {"embedder": embedder, "hybrid": False}},
        ],
        "member_timeout_ms": 500,
        "write_timeout_ms": 500,
    }
    server.queue_embeddings(*(Delay(60.0) for _ in range(20)))
    mem = CompositeMemory(config)
    try:
        mem.members["lexical"].store("the passport is in the blue drawer", "s")
        turns = [timed_turn(mem, "where is the passport", "s") for _ in range(4)]
        first, later = turns[0], turns[1:]
        assert first[0] < 0.5 + SLACK_S and first[1] < 0.5 + SLACK_S, turns
        assert all(b < LATER_S and r < LATER_S for b, r, _ in later), turns
        assert all("blue drawer" in "\n".join(m.content for m in msgs) for _, _, msgs in turns)
        assert server.embedding_requests, "the vector member did call its hung server"
    finally:
        assert timed_close(mem) < 1.0
