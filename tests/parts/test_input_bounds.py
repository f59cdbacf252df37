"""Issue 27, item 6: bounds on what comes in.

A language model or an embedding server that answers fast with a huge (or endless) body is cut
off at the client's limit (``CHAT_LIMIT``, ``EMBEDDING_LIMIT``): the call
fails like any failed call, the connection is closed, and the process's memory grows by about
the limit, not by the body. A huge utterance or answer is stored cut to ``max_message_chars``
(marked as cut in the exchange's metadata), fast. Real loopback servers, the real openai
client, real SQLite files.
"""

from __future__ import annotations

import threading
import time
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole
from trust_helpers import ALL_BACKENDS, Backend, backend_params

from ovos_memory_plugins.embedders import OpenAIEmbedder
from ovos_memory_plugins.errors import BackendError
from ovos_memory_plugins.llm import OpenAIChatLLM

MB = 1024 * 1024
#: The limits (``CHAT_LIMIT``, ``EMBEDDING_LIMIT``), as documented.
CHAT_LIMIT = 4 * MB
EMBEDDING_LIMIT = 32 * MB


class _Flood(ThreadingHTTPServer):
    daemon_threads = True
    #: bytes of body to send at most, whether to announce them in Content-Length
    body_bytes = 0
    announce = False
    sent = 0
    done = threading.Event()


class _FloodHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Flood

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's name
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.server.announce:
            self.send_header("Content-Length", str(self.server.body_bytes))
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = b"a" * 65536
        try:
            self.wfile.write(b'{"id": "')
            while self.server.sent < self.server.body_bytes:
                self.wfile.write(chunk)
                self.server.sent += len(chunk)
        except OSError:
            pass  # the client closed the connection: what this test wants
        finally:
            self.server.done.set()


@pytest.fixture
def flood() -> Iterator[_Flood]:
    server = _Flood(("127.0.0.1", 0), _FloodHandler)
    server.done = threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _url(server: _Flood) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def _peak(call: Any) -> tuple[Any, int, float]:
    """``call()``'s result, the peak of Python allocations during it, and its seconds."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        result = call()
    finally:
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return result, peak, elapsed


@pytest.mark.parametrize("announce", [False, True], ids=["endless", "announced"])
def test_a_huge_chat_reply_is_cut_off_at_the_limit(flood: _Flood, announce: bool) -> None:
    flood.body_bytes, flood.announce = 48 * MB, announce  # 12 times the limit
    chat = OpenAIChatLLM({"base_url": _url(flood), "model": "m", "timeout": 20})
    try:
        reply, peak, elapsed = _peak(lambda: chat.complete([{"role": "user", "content": "hi"}]))
        assert reply is None  # a failed call, like any other
        assert chat.stats()["failures"] == 1
        assert flood.done.wait(10)
        assert peak < CHAT_LIMIT * 4, f"{peak / MB:.1f} MB allocated for one reply"
        assert flood.sent < 32 * MB, f"{flood.sent / MB:.1f} MB read before the client stopped"
        assert elapsed < 10
    finally:
        chat.close()


def test_a_huge_embedding_reply_is_cut_off_at_the_limit(flood: _Flood) -> None:
    flood.body_bytes = 3 * EMBEDDING_LIMIT
    embedder = OpenAIEmbedder(model="m", base_url=_url(flood), timeout=20)

    def attempt() -> BackendError | None:
        try:
            embedder.embed(["hello"])
        except BackendError as exc:
            return exc
        return None

    failed, peak, elapsed = _peak(attempt)
    assert isinstance(failed, BackendError)
    assert flood.done.wait(10)
    assert peak < EMBEDDING_LIMIT * 3, f"{peak / MB:.1f} MB allocated for one reply"
    assert flood.sent < EMBEDDING_LIMIT + 32 * MB, f"{flood.sent / MB:.1f} MB sent"
    assert elapsed < 15


def test_the_documented_limits_are_the_ones_used() -> None:
    from ovos_memory_plugins import embedders, llm

    assert (llm.MAX_REPLY_BYTES, embedders.MAX_REPLY_BYTES) == (CHAT_LIMIT, EMBEDDING_LIMIT)


def test_an_ordinary_reply_still_comes_through() -> None:
    from ovos_memory_plugins.fakes import ScriptedOpenAIServer

    with ScriptedOpenAIServer() as server:
        server.queue_chat("x" * 200_000)
        chat = OpenAIChatLLM({"base_url": server.base_url, "model": "m", "timeout": 10})
        try:
            assert chat.complete([{"role": "user", "content": "hi"}]) == "x" * 200_000
        finally:
            chat.close()
        vectors = OpenAIEmbedder(model="m", base_url=server.base_url, timeout=10).embed(["a", "b"])
        assert len(vectors) == 2


# -- what one turn stores --------------------------------------------------------------------------

TURN_LIMIT = 20000  # the documented default of max_message_chars


def _turn(user: str, assistant: str) -> list[AgentMessage]:
    return [
        AgentMessage(role=MessageRole.USER, content=user),
        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
    ]


@pytest.mark.parametrize("backend", backend_params(ALL_BACKENDS))
def test_a_ten_megabyte_utterance_is_stored_cut_and_marked(backend: Backend, tmp_path: Path) -> None:
    huge = "my parking spot is level four " + "blah " * (2 * MB)  # 10 MB
    with backend.open(tmp_path / "mem") as mem:
        mem.update_history(_turn(huge, "noted, level four"), "s")
        mem.update_history(_turn("thanks", "you are welcome"), "s")
        stored = [m.content for m in mem.messages("s")]
        assert len(stored) == 4 and max(len(m) for m in stored) <= TURN_LIMIT
        assert stored[0].startswith("my parking spot is level four")
        if backend.archives:
            hits = mem.search("parking spot level four", session_id="s")
            assert hits and len(hits[0].content) <= 2 * TURN_LIMIT + 10
            assert hits[0].metadata.get("cut") == {"user": len(huge)}, hits[0].metadata
    assert sum(p.stat().st_size for p in (tmp_path / "mem").rglob("*") if p.is_file()) < 8 * MB


def test_a_short_exchange_is_not_marked(tmp_path: Path) -> None:
    from trust_helpers import LEXICAL

    with LEXICAL.open(tmp_path / "mem") as mem:
        mem.update_history(_turn("my parking spot is level four", "noted"), "s")
        assert "cut" not in mem.search("parking spot", session_id="s")[0].metadata
