"""Fakes for tests: a scripted OpenAI-compatible HTTP server and an in-process scripted LLM.

:class:`ScriptedOpenAIServer` is a real HTTP server (stdlib ``http.server``) bound to
127.0.0.1 on a free port, run in a thread. It speaks ``POST /v1/chat/completions`` and
``POST /v1/embeddings`` in the JSON shapes the ``openai`` client parses, so code under test
talks to it through the real client and the real network stack::

    from ovos_memory_plugins.fakes import Delay, HTTPFailure, ScriptedOpenAIServer

    with ScriptedOpenAIServer(chat=['{"facts": []}', HTTPFailure(500), Delay(5.0)]) as server:
        llm = OpenAIChatLLM({"base_url": server.base_url, "model": "test", "timeout": 1})
        ...
        assert len(server.chat_requests) == 3

Chat replies come from a queue (texts or failure modes, used in order); when the queue is
empty, from ``chat_handler(request_json)`` if set, else ``default_chat_reply``. Embedding
replies come from their own queue, else ``embeddings_handler``, else deterministic unit vectors
derived from a hash of each input text (:func:`hash_vector`).

Failure modes: :class:`HTTPFailure` (an error status with an OpenAI-style error body),
:class:`Delay` (wait, then answer: forces client timeouts), :class:`Trickle` (headers at once,
then the body a byte at a time: only a total deadline stops it), :class:`Garbled` (status 200
with a body that is not JSON) and :class:`CloseConnection` (the socket is closed without a reply).

:class:`ScriptedLLM` implements the :class:`~ovos_memory_plugins.llm.ChatLLM` protocol in
process, for tests that need a model but no HTTP.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ovos_memory_plugins.common import Closing

__all__ = [
    "CloseConnection",
    "Delay",
    "Garbled",
    "HTTPFailure",
    "RecordedRequest",
    "ScriptedLLM",
    "ScriptedOpenAIServer",
    "ToolCallReply",
    "Trickle",
    "hash_vector",
]


@dataclass(frozen=True)
class HTTPFailure:
    """Answer with this HTTP status and an OpenAI-style error body."""

    status: int = 500
    message: str = "scripted failure"


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` (interrupted when the server stops), then answer with ``then``."""

    seconds: float
    then: Any = ""


@dataclass(frozen=True)
class Trickle:
    """Answer with ``then``, its status line and headers at once and then the body one byte
    every ``interval`` seconds (stops when the server stops): a server that is alive but
    never done, which a per-read timeout does not catch."""

    then: Any = None
    interval: float = 1.0


@dataclass(frozen=True)
class Garbled:
    """Answer status 200 with a body that is not valid JSON."""

    body: bytes = b'{"id": "chatcmpl-garbled", "choices": [{"mess'


@dataclass(frozen=True)
class CloseConnection:
    """Close the connection without sending any reply."""


@dataclass(frozen=True)
class ToolCallReply:
    """Answer with an assistant message that calls tools (``finish_reason: "tool_calls"``).

    ``calls`` are ``(name, arguments)`` pairs; ``arguments`` is a dict (sent JSON-encoded, as
    OpenAI does) or a raw string (sent as is, to script malformed arguments). Each call gets the
    id ``call-<n>`` (one counter with the reply ids) unless ``ids`` names them.
    """

    calls: tuple[tuple[str, Any], ...]
    content: str = ""
    ids: tuple[str, ...] = ()


#: What a scripted chat reply may be: a text, a failure mode, a :class:`ToolCallReply`, or
#: ``None`` (the next default).
ChatReply = Any
ChatHandler = Callable[[dict[str, Any]], ChatReply]
EmbeddingsHandler = Callable[[dict[str, Any]], Any]


@dataclass
class RecordedRequest:
    """One request the server received."""

    path: str
    body: dict[str, Any] | None
    headers: dict[str, str]
    time: float = field(default_factory=time.time)


def hash_vector(text: str, dimensions: int = 16) -> list[float]:
    """A deterministic unit vector for ``text`` (SHA-256 based), the default embeddings reply."""
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}\x00{text}".encode("utf-8", "surrogatepass")).digest()
        for i in range(0, len(digest), 4):
            (n,) = struct.unpack(">I", digest[i : i + 4])
            values.append(n / 0xFFFFFFFF * 2.0 - 1.0)
        counter += 1
    values = values[:dimensions]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def _count_tokens(text: str) -> int:
    """A rough token count (whitespace words), enough for ``usage`` figures."""
    return len(text.split())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedOpenAIServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's name
        """Silence the per-request log lines on stderr."""

    def do_GET(self) -> None:
        self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        owner._record(RecordedRequest(path=path, body=body, headers={k.lower(): v for k, v in self.headers.items()}))
        if path.endswith("/chat/completions"):
            self._answer(owner._next_chat(body or {}), lambda reply: owner._chat_payload(body or {}, reply))
        elif path.endswith("/embeddings"):
            self._answer(owner._next_embeddings(body or {}), lambda reply: owner._embeddings_payload(body or {}, reply))
        else:
            self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def _answer(self, reply: Any, build: Callable[[Any], dict[str, Any]]) -> None:
        owner = self.server.owner
        while isinstance(reply, Delay):
            if owner._stopping.wait(reply.seconds):
                self.close_connection = True
                return
            reply = reply.then
        if isinstance(reply, Trickle):
            self._trickle(json.dumps(build(reply.then)).encode("utf-8"), reply.interval)
        elif isinstance(reply, HTTPFailure):
            self._send_json(reply.status, {"error": {"message": reply.message, "type": "server_error", "code": None}})
        elif isinstance(reply, Garbled):
            self._send_raw(200, reply.body)
        elif isinstance(reply, CloseConnection):
            self.close_connection = True
        else:
            self._send_json(200, build(reply))

    def _trickle(self, data: bytes, interval: float) -> None:
        owner = self.server.owner
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.flush()
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                if owner._stopping.wait(interval):
                    break
        except OSError:
            pass  # the client gave up
        self.close_connection = True

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        self._send_raw(status, json.dumps(payload).encode("utf-8"))

    def _send_raw(self, status: int, data: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client gave up (its timeout): nothing to do


class ScriptedOpenAIServer(Closing):
    """A real OpenAI-compatible HTTP server on 127.0.0.1 with scripted replies.

    Args:
        chat: initial queue of chat replies (texts or failure modes).
        chat_handler: called with the request JSON when the queue is empty; returns a reply.
        default_chat_reply: the reply when the queue is empty and there is no handler.
        embeddings: initial queue of embedding replies (lists of vectors, or failure modes).
        embeddings_handler: called with the request JSON when that queue is empty; returns a
            list of vectors (one per input) or a failure mode.
        dimensions: the length of the default hash vectors.
        model: the model name echoed in replies when a request names none.

    Use it as a context manager, or call :meth:`start` and :meth:`close`.
    """

    def __init__(
        self,
        chat: Iterable[ChatReply] = (),
        *,
        chat_handler: ChatHandler | None = None,
        default_chat_reply: ChatReply = "",
        embeddings: Iterable[Any] = (),
        embeddings_handler: EmbeddingsHandler | None = None,
        dimensions: int = 16,
        model: str = "scripted-model",
    ) -> None:
        self._lock = threading.Lock()
        self._chat: deque[ChatReply] = deque(chat)
        self._embeddings: deque[Any] = deque(embeddings)
        self.chat_handler = chat_handler
        self.default_chat_reply = default_chat_reply
        self.embeddings_handler = embeddings_handler
        self.dimensions = dimensions
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> ScriptedOpenAIServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="scripted-openai", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, wake delayed handlers, and release the socket."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedOpenAIServer:
        """Start serving (in a background thread) and return self; the block's end stops it."""
        return self.start()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._server is None:
            raise RuntimeError("the server is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client, ending in ``/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ---------------------------------------------------------------------------

    def queue_chat(self, *replies: ChatReply) -> None:
        """Append chat replies (texts or failure modes), used in order."""
        with self._lock:
            self._chat.extend(replies)

    def queue_embeddings(self, *replies: Any) -> None:
        """Append embedding replies (lists of vectors or failure modes), used in order."""
        with self._lock:
            self._embeddings.extend(replies)

    @property
    def pending_chat(self) -> int:
        """How many queued chat replies are still unused."""
        with self._lock:
            return len(self._chat)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of every chat request received, in order."""
        with self._lock:
            return [r.body or {} for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of every embeddings request received, in order."""
        with self._lock:
            return [r.body or {} for r in self.requests if r.path.endswith("/embeddings")]

    # -- serving (called from handler threads) ------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next(
        self, queued: deque[Any], handler: Callable[[dict[str, Any]], Any] | None, body: dict[str, Any], default: Any
    ) -> Any:
        """The next queued reply, else the handler's answer, else ``default``."""
        with self._lock:
            if queued:
                return queued.popleft()
        return handler(body) if handler is not None else default

    def _next_chat(self, body: dict[str, Any]) -> ChatReply:
        return self._next(self._chat, self.chat_handler, body, self.default_chat_reply)

    def _next_embeddings(self, body: dict[str, Any]) -> Any:
        return self._next(self._embeddings, self.embeddings_handler, body, None)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}-{self._counter}"

    def _tool_call_message(self, reply: ToolCallReply) -> dict[str, Any]:
        calls = []
        for i, (name, arguments) in enumerate(reply.calls):
            call_id = reply.ids[i] if i < len(reply.ids) else self._next_id("call")
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}})
        return {"role": "assistant", "content": reply.content or None, "tool_calls": calls}

    def _chat_payload(self, body: dict[str, Any], reply: Any) -> dict[str, Any]:
        if isinstance(reply, ToolCallReply):
            message, finish, prompt_tokens, completion_tokens = self._tool_call_message(reply), "tool_calls", 0, 0
        else:
            text = "" if reply is None else str(reply)
            prompt = " ".join(str(m.get("content") or "") for m in body.get("messages") or [] if isinstance(m, dict))
            message, finish = {"role": "assistant", "content": text}, "stop"
            prompt_tokens, completion_tokens = _count_tokens(prompt), _count_tokens(text)
        return {
            "id": self._next_id("chatcmpl"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _embeddings_payload(self, body: dict[str, Any], reply: Any) -> dict[str, Any]:
        raw = body.get("input")
        inputs = [raw] if isinstance(raw, str) else [str(x) for x in raw or []]
        dims = body.get("dimensions")
        size = int(dims) if isinstance(dims, int) and dims > 0 else self.dimensions
        vectors = reply if reply is not None else [hash_vector(text, size) for text in inputs]
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for i, vector in enumerate(vectors):
            floats = [float(v) for v in vector]
            embedding: Any = (
                base64.b64encode(struct.pack(f"<{len(floats)}f", *floats)).decode("ascii") if as_base64 else floats
            )
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        tokens = sum(_count_tokens(t) for t in inputs)
        return {
            "object": "list",
            "data": data,
            "model": str(body.get("model") or self.model),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


class ScriptedLLM:
    """An in-process :class:`~ovos_memory_plugins.llm.ChatLLM` with scripted replies.

    Replies come from the queue, then from ``handler(messages)``, then ``default``. A reply of
    ``None`` stands for a failed call. Every call's messages are kept in ``calls``.
    """

    def __init__(
        self,
        replies: Iterable[str | None] = (),
        *,
        handler: Callable[[list[dict[str, str]]], str | None] | None = None,
        default: str | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._replies: deque[str | None] = deque(replies)
        self.handler = handler
        self.default = default
        self.calls: list[list[dict[str, str]]] = []

    def queue(self, *replies: str | None) -> None:
        """Append replies, used in order."""
        with self._lock:
            self._replies.extend(replies)

    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str | None:
        """The next scripted reply for ``messages``."""
        with self._lock:
            self.calls.append([dict(m) for m in messages])
            if self._replies:
                return self._replies.popleft()
        if self.handler is not None:
            return self.handler(messages)
        return self.default

    def stats(self) -> dict[str, Any]:
        """Call count, in the shape of the real clients' ``stats()``."""
        with self._lock:
            return {"calls": len(self.calls), "failures": 0, "prompt_tokens": 0, "completion_tokens": 0}
