"""Language-model access shared by every backend that needs one (digest, dreaming, summaries).

Configured under the key ``llm`` of a backend's config, in one of two forms::

    "llm": {"base_url": "http://127.0.0.1:8080/v1", "api_key": "sk-...", "model": "qwen2.5-7b",
            "timeout": 30}

an OpenAI-compatible chat endpoint through the ``openai`` package (``base_url`` and ``api_key``
fall back to ``OVOS_MEMORY_LLM_BASE_URL`` / ``OVOS_MEMORY_LLM_API_KEY``, then
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``), or::

    "llm": {"module": "ovos-chat-openai-plugin", "config": {...}, "timeout": 30}

any OVOS chat-engine plugin loaded through OPM by name, so a persona reuses its own model.

Every client here:

* asks at temperature 0, with every call bounded by ``timeout`` seconds (no retries inside
  the call: ``max_retries=0`` on the openai client);
* fails open: ``complete`` returns ``None`` and logs, never raises;
* backs off after a failure: the next ``backoff_s`` seconds (doubling per consecutive failure,
  capped at ``backoff_max_s``) calls return ``None`` at once without touching the endpoint,
  so a dead endpoint is not retried on every turn;
* counts calls, failures, skipped calls and tokens in ``stats()``.

:func:`parse_json_reply` extracts a JSON value from a reply that may be fenced, chatty or cut.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.errors import LLMError

LOG = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_TIMEOUT",
    "ChatLLM",
    "GuardedLLM",
    "LLMClient",
    "OPMChatLLM",
    "OpenAIChatLLM",
    "check_llm_config",
    "close_llm",
    "llm_stats",
    "make_llm",
    "parse_json_reply",
]

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT = 30.0
DEFAULT_BACKOFF_S = 5.0
DEFAULT_BACKOFF_MAX_S = 300.0

_OPENAI_KEYS = {"base_url", "api_key", "model", "timeout", "max_tokens", "json_mode", "backoff_s", "backoff_max_s"}
_OPM_KEYS = {"module", "config", "timeout", "backoff_s", "backoff_max_s"}


@runtime_checkable
class ChatLLM(Protocol):
    """Anything that completes a chat: messages in, text out, ``None`` when it failed."""

    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str | None:
        """The model's reply to ``messages`` (``{"role", "content"}`` dicts), or None on failure."""
        ...


#: The name the team brief uses for the same protocol.
LLMClient = ChatLLM


class GuardedLLM:
    """Timeout accounting, back-off and counters around one raw call; subclasses add the call.

    Args:
        timeout: seconds one call may take.
        backoff_s: the pause after a first failure; doubles per consecutive failure.
        backoff_max_s: the longest pause.
        clock: a monotonic clock (a test seam).
    """

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        backoff_s: float = DEFAULT_BACKOFF_S,
        backoff_max_s: float = DEFAULT_BACKOFF_MAX_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = float(timeout)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._retry_at = 0.0
        self._counters = {
            "calls": 0,
            "failures": 0,
            "skipped": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }

    @staticmethod
    def guard_settings(cfg: Mapping[str, Any]) -> dict[str, float]:
        """The ``timeout``, ``backoff_s`` and ``backoff_max_s`` of a config block, with defaults."""
        return {
            "timeout": float(cfg.get("timeout") or DEFAULT_TIMEOUT),
            "backoff_s": float(cfg.get("backoff_s", DEFAULT_BACKOFF_S)),
            "backoff_max_s": float(cfg.get("backoff_max_s", DEFAULT_BACKOFF_MAX_S)),
        }

    def _call(self, messages: list[dict[str, str]], json_mode: bool) -> tuple[str, int, int]:
        """One raw call: (reply text, prompt tokens, completion tokens). Raises on failure."""
        raise NotImplementedError

    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str | None:
        """The reply, or None when the call failed, timed out, or the client is backing off."""
        with self._lock:
            if self._clock() < self._retry_at:
                self._counters["skipped"] += 1
                return None
            self._counters["calls"] += 1
        try:
            text, prompt_tokens, completion_tokens = self._call(messages, json_mode)
        except Exception as exc:
            with self._lock:
                self._counters["failures"] += 1
                self._consecutive_failures += 1
                pause = min(self.backoff_s * 2 ** (self._consecutive_failures - 1), self.backoff_max_s)
                self._retry_at = self._clock() + pause
            LOG.warning("%s: the language model call failed (%s); backing off %.1f s", type(self).__name__, exc, pause)
            return None
        with self._lock:
            self._consecutive_failures = 0
            self._retry_at = 0.0
            self._counters["prompt_tokens"] += prompt_tokens
            self._counters["completion_tokens"] += completion_tokens
        return text

    @property
    def backing_off(self) -> bool:
        """Whether calls are being skipped right now because of recent failures."""
        with self._lock:
            return self._clock() < self._retry_at

    def stats(self) -> dict[str, Any]:
        """Counters: calls made, failures, calls skipped while backing off, tokens."""
        with self._lock:
            out: dict[str, Any] = dict(self._counters)
            out["backing_off"] = self._clock() < self._retry_at
            return out


class OpenAIChatLLM(GuardedLLM):
    """An OpenAI-compatible chat endpoint through the ``openai`` package.

    Args:
        config: ``{"base_url", "api_key", "model", "timeout", "max_tokens", "json_mode",
            "backoff_s", "backoff_max_s"}``; ``base_url`` and ``api_key`` fall back to the
            environment (see the module docstring). ``json_mode`` (default true) sends
            ``response_format={"type": "json_object"}`` when a caller asks for JSON; turn it
            off for servers that reject that field.
        client: an ``openai.OpenAI`` instance to use instead of building one (a test seam).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        client: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        cfg = dict(config or {})
        super().__init__(**self.guard_settings(cfg), clock=clock)
        self.model = str(cfg.get("model") or DEFAULT_MODEL)
        self.max_tokens = cfg.get("max_tokens")
        self.json_mode = bool(cfg.get("json_mode", True))
        self.base_url = (
            cfg.get("base_url") or os.environ.get("OVOS_MEMORY_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        )
        api_key = cfg.get("api_key") or os.environ.get("OVOS_MEMORY_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if client is None:
            import openai

            # local servers need no key, but the client insists on one
            client = openai.OpenAI(
                base_url=self.base_url or None,
                api_key=api_key or "no-key",
                timeout=self.timeout,
                max_retries=0,
            )
        self._client = client

    def _call(self, messages: list[dict[str, str]], json_mode: bool) -> tuple[str, int, int]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0, "timeout": self.timeout}
        if json_mode and self.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if self.max_tokens:
            kwargs["max_tokens"] = int(self.max_tokens)
        response = self._client.chat.completions.create(**kwargs)
        choices = getattr(response, "choices", None)
        if not choices:
            raise LLMError("the reply has no choices")
        content = choices[0].message.content
        if not isinstance(content, str):
            raise LLMError("the reply has no text content")
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return content, prompt_tokens, completion_tokens

    def close(self) -> None:
        """Close the HTTP client's connections."""
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


class OPMChatLLM(GuardedLLM):
    """Any OVOS chat-engine plugin, loaded through OPM by name.

    Args:
        config: ``{"module": "<plugin name>", "config": {...}, "timeout", "backoff_s",
            "backoff_max_s"}``.
        engine: a chat-engine instance to use instead of loading ``module`` (a test seam).

    The plugin's ``continue_chat`` runs in a helper thread so the timeout holds even for a
    plugin that blocks; a call that times out is abandoned (its thread finishes on its own).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        engine: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        cfg = dict(config or {})
        super().__init__(**self.guard_settings(cfg), clock=clock)
        self.module = str(cfg.get("module") or "")
        if engine is None:
            from ovos_plugin_manager.agents import load_chat_plugin

            cls = load_chat_plugin(self.module)
            if cls is None:
                raise LLMError(f"no chat-engine plugin named {self.module!r} is installed (OPM)")
            engine = cls(dict(cfg.get("config") or {}))
        self.engine = engine

    def _call(self, messages: list[dict[str, str]], json_mode: bool) -> tuple[str, int, int]:
        from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

        agent_messages = [
            AgentMessage(role=MessageRole(str(m.get("role", "user")).lower()), content=str(m.get("content", "")))
            for m in messages
        ]
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["reply"] = self.engine.continue_chat(agent_messages, session_id="ovos-memory-plugins")
            except Exception as exc:
                box["error"] = exc

        worker = threading.Thread(target=run, name="ovos-memory-llm", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise LLMError(f"the chat engine {self.module or type(self.engine).__name__} timed out")
        if "error" in box:
            raise LLMError(f"the chat engine failed: {box['error']}")
        reply = box.get("reply")
        content = getattr(reply, "content", reply)
        if not isinstance(content, str):
            raise LLMError("the chat engine returned no text")
        prompt = " ".join(m.get("content", "") for m in messages)
        return content, len(prompt.split()), len(content.split())


def check_llm_config(config: Any) -> list[str]:
    """Problems with an ``llm`` block, one line each (empty when it is fine or null)."""
    if config is None:
        return []
    if not isinstance(config, Mapping):
        return [f"key 'llm': {config!r} is not accepted; expected an object or null"]
    problems: list[str] = []
    known = _OPM_KEYS if "module" in config else _OPENAI_KEYS
    for key in sorted(set(config) - known, key=str):
        problems.append(f"unknown key 'llm.{key}'; accepted keys: {', '.join(sorted(known))}")
    if "module" in config and (not isinstance(config["module"], str) or not config["module"]):
        problems.append(f"key 'llm.module': {config['module']!r} is not accepted; expected a plugin name")
    for key in ("timeout", "backoff_s", "backoff_max_s"):
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            problems.append(f"key 'llm.{key}': {value!r} is not accepted; expected a number > 0")
    for key in ("base_url", "api_key", "model"):
        value = config.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(f"key 'llm.{key}': {value!r} is not accepted; expected a string")
    if "config" in config and not isinstance(config["config"], Mapping):
        problems.append(f"key 'llm.config': {config['config']!r} is not accepted; expected an object")
    return problems


def make_llm(config: Mapping[str, Any] | None) -> ChatLLM | None:
    """The client an ``llm`` block describes, or None when it is null or unusable.

    Never raises: a bad block or a plugin that cannot load is logged and gives None.
    """
    if config is None:
        return None
    problems = check_llm_config(config)
    if problems:
        for problem in problems:
            LOG.error("llm: %s (no language model will be used)", problem)
        return None
    try:
        if config.get("module"):
            return OPMChatLLM(config)
        base_url = (
            config.get("base_url") or os.environ.get("OVOS_MEMORY_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        )
        api_key = config.get("api_key") or os.environ.get("OVOS_MEMORY_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if not base_url and not api_key:
            LOG.error(
                "llm: no 'base_url' or 'api_key' (nor OVOS_MEMORY_LLM_* / OPENAI_* in the environment); "
                "continuing without a language model"
            )
            return None
        return OpenAIChatLLM(config)
    except Exception as exc:
        LOG.error("llm: cannot set up the language model (%s); continuing without one", exc)
        return None


def close_llm(llm: Any) -> None:
    """Close a client's connections when it has a ``close`` method."""
    close = getattr(llm, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            LOG.debug("llm: close failed", exc_info=True)


def llm_stats(llm: Any) -> dict[str, Any]:
    """A client's ``stats()`` when it has one, else an empty dict."""
    stats = getattr(llm, "stats", None)
    if callable(stats):
        try:
            return dict(stats())
        except Exception:
            return {}
    return {}


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def parse_json_reply(text: str | None) -> Any:
    """The JSON value in a model's reply, or None when there is none.

    Tries, in order: the whole text; each fenced block (```json ... ```); the first balanced
    ``{...}`` or ``[...]`` span found by a string-aware scan. A ``<think>...</think>`` preamble
    is dropped first.
    """
    if not isinstance(text, str):
        return None
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL).strip()
    if not text:
        return None
    candidates = [text, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
    for start, char in enumerate(text):
        if char not in "{[":
            continue
        end = _balanced_end(text, start)
        if end is None:
            continue
        try:
            return json.loads(text[start:end])
        except (json.JSONDecodeError, ValueError):
            continue
    return None


def _balanced_end(text: str, start: int) -> int | None:
    """The index after the bracket closing the one at ``start``, honouring JSON strings."""
    stack: list[str] = []
    in_string = False
    escaped = False
    pairs = {"{": "}", "[": "]"}
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in pairs:
            stack.append(pairs[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            if not stack:
                return i + 1
    return None
