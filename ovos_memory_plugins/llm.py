"""Language-model access shared by every backend that needs one (digest, dreaming, summaries).

Configured under the key ``llm`` of a backend's config, in one of two forms::

    "llm": {"base_url": "http://127.0.0.1:8080/v1", "api_key": "sk-...", "model": "qwen2.5-7b",
            "timeout": 30}

an OpenAI-compatible chat endpoint through the ``openai`` package (``base_url`` and ``api_key``
fall back to ``OVOS_MEMORY_LLM_BASE_URL`` / ``OVOS_MEMORY_LLM_API_KEY``, then
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``; ``api_url`` and ``key``, the names OVOS chat plugins
use, are accepted as aliases of ``base_url`` and ``api_key``), or::

    "llm": {"module": "ovos-chat-openai-plugin", "config": {...}, "timeout": 30}

any OVOS chat-engine plugin loaded through OPM by name, so a persona reuses its own model.

Every client here:

* asks at temperature 0, with every call bounded by ``timeout`` seconds IN TOTAL (the call
  runs in a worker thread, :class:`~ovos_memory_plugins.guard.CallGuard`, so a server that
  trickles its reply a byte at a time is cut off at the deadline too; no retries inside the
  call: ``max_retries=0`` on the openai client);
* fails open: ``complete`` returns ``None`` and logs, never raises;
* backs off after a failure: the next ``backoff_s`` seconds (doubling per consecutive failure,
  capped at ``backoff_max_s``) calls return ``None`` at once without touching the endpoint,
  so a dead endpoint is not retried on every turn;
* counts calls, failures, skipped calls and tokens in ``stats()``.

A block with an unknown key or a bad value is not thrown away: that key alone is dropped
(its default applies) and the problem is logged with a "did you mean" hint
(:func:`read_llm_config`); :func:`check_llm_config` reports the same problems for strict checks.

:func:`parse_json_reply` extracts a JSON value from a reply that may be fenced, chatty or cut.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from ovos_memory_plugins.errors import LLMError
from ovos_memory_plugins.guard import CallGuard, DeadlineExceeded, ServiceUnavailable, capped_http_client

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
    "close_quietly",
    "llm_stats",
    "make_llm",
    "parse_json_reply",
    "read_llm_config",
]

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT = 30.0
#: Bytes of a chat reply read at most (a reply of a few thousand tokens is a few tens of KB);
#: a longer body fails the call (docs/reliability.md, "Limits").
MAX_REPLY_BYTES = 4 * 1024 * 1024
DEFAULT_BACKOFF_S = 5.0
DEFAULT_BACKOFF_MAX_S = 300.0

_OPENAI_KEYS = {"base_url", "api_key", "model", "timeout", "max_tokens", "json_mode", "backoff_s", "backoff_max_s"}
_OPM_KEYS = {"module", "config", "timeout", "backoff_s", "backoff_max_s"}
#: Other names accepted for keys of the OpenAI form (the names OVOS chat plugins use).
LLM_KEY_ALIASES = {"api_url": "base_url", "key": "api_key"}


@runtime_checkable
class ChatLLM(Protocol):
    """Anything that completes a chat: messages in, text out, ``None`` when it failed."""

    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str | None:
        """The model's reply to ``messages`` (``{"role", "content"}`` dicts), or None on failure."""
        ...


#: The name the team brief uses for the same protocol.
LLMClient = ChatLLM

#: A monotonic clock (a test seam).
Clock = Callable[[], float]


class GuardedLLM:
    """A total deadline, back-off and counters around one raw call; subclasses add the call.

    The deadline and back-off are a :class:`~ovos_memory_plugins.guard.CallGuard`: the raw
    call runs in a worker thread and is abandoned at ``timeout`` seconds, whatever the
    server does meanwhile.

    Args:
        config: the client's config block (not kept: it may hold a key); the guard reads
            ``timeout`` (seconds one call may take, in total), ``backoff_s`` (the pause after a
            first failure; doubles per consecutive failure) and ``backoff_max_s`` (the longest
            pause), each with its default.
        clock: a monotonic clock (a test seam).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, *, clock: Clock = time.monotonic) -> None:
        cfg = config or {}
        self.timeout = float(cfg.get("timeout") or DEFAULT_TIMEOUT)
        self.backoff_s = float(cfg.get("backoff_s", DEFAULT_BACKOFF_S))
        self.backoff_max_s = float(cfg.get("backoff_max_s", DEFAULT_BACKOFF_MAX_S))
        self._clock = clock
        self._guard = CallGuard(
            f"language model ({type(self).__name__})",
            self.timeout,
            backoff_s=self.backoff_s,
            backoff_max_s=self.backoff_max_s,
            clock=clock,
        )
        self._lock = threading.Lock()
        self._tokens = {"prompt_tokens": 0, "completion_tokens": 0}

    def _call(self, messages: list[dict[str, str]], json_mode: bool) -> tuple[str, int, int]:
        """One raw call: (reply text, prompt tokens, completion tokens). Raises on failure."""
        raise NotImplementedError

    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str | None:
        """The reply, or None when the call failed, timed out, or the client is backing off."""
        try:
            text, prompt_tokens, completion_tokens = self._guard.call(self._call, messages, json_mode)
        except DeadlineExceeded as exc:
            LOG.warning("%s; backing off %.1f s", exc, self._guard.retry_in())
            return None
        except ServiceUnavailable:
            return None  # backing off: logged when the failure happened
        except Exception as exc:
            LOG.warning(
                "%s: the language model call failed (%s); backing off %.1f s",
                type(self).__name__,
                exc,
                self._guard.retry_in(),
            )
            return None
        with self._lock:
            self._tokens["prompt_tokens"] += prompt_tokens
            self._tokens["completion_tokens"] += completion_tokens
        return text

    @property
    def backing_off(self) -> bool:
        """Whether calls are being skipped right now because of recent failures."""
        return self._guard.backing_off

    def stats(self) -> dict[str, Any]:
        """Counters: calls made, failures (timeouts among them), calls skipped while backing
        off, tokens."""
        out = self._guard.stats()
        with self._lock:
            out.update(self._tokens)
        return out


class OpenAIChatLLM(GuardedLLM):
    """An OpenAI-compatible chat endpoint through the ``openai`` package.

    Args:
        config: ``{"base_url", "api_key", "model", "timeout", "max_tokens", "json_mode",
            "backoff_s", "backoff_max_s"}``; ``base_url`` and ``api_key`` (or their aliases
            ``api_url`` and ``key``) fall back to the environment (see the module docstring).
            ``json_mode`` (default true) sends ``response_format={"type": "json_object"}``
            when a caller asks for JSON; turn it off for servers that reject that field.
        client: an ``openai.OpenAI`` instance to use instead of building one (a test seam).
    """

    def __init__(
        self, config: Mapping[str, Any] | None = None, *, client: Any = None, clock: Clock = time.monotonic
    ) -> None:
        super().__init__(config, clock=clock)
        cfg = dict(config or {})
        self.model = str(cfg.get("model") or DEFAULT_MODEL)
        self.max_tokens = cfg.get("max_tokens")
        self.json_mode = bool(cfg.get("json_mode", True))
        self.base_url = _base_url(cfg)
        api_key = _api_key(cfg)
        if client is None:
            import openai

            # local servers need no key, but the client insists on one
            client = openai.OpenAI(
                base_url=self.base_url or None,
                api_key=api_key or "no-key",
                timeout=self.timeout * 2,  # the guard's total deadline comes first (counted as a timeout)
                max_retries=0,
                http_client=capped_http_client(MAX_REPLY_BYTES),
            )
        self._client = client

    def _call(self, messages: list[dict[str, str]], json_mode: bool) -> tuple[str, int, int]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "timeout": self.timeout * 2,
        }
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

    The plugin's ``continue_chat`` runs in the guard's worker thread so the timeout holds even
    for a plugin that blocks; a call that times out is abandoned (its thread finishes on its own).
    """

    def __init__(
        self, config: Mapping[str, Any] | None = None, *, engine: Any = None, clock: Clock = time.monotonic
    ) -> None:
        super().__init__(config, clock=clock)
        cfg = dict(config or {})
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
        try:
            reply = self.engine.continue_chat(agent_messages, session_id="ovos-memory-plugins")
        except Exception as exc:
            raise LLMError(f"the chat engine failed: {exc}") from exc
        content = getattr(reply, "content", reply)
        if not isinstance(content, str):
            raise LLMError("the chat engine returned no text")
        prompt = " ".join(m.get("content", "") for m in messages)
        return content, len(prompt.split()), len(content.split())


def _base_url(cfg: Mapping[str, Any]) -> str | None:
    value = cfg.get("base_url") or cfg.get("api_url")
    return value or os.environ.get("OVOS_MEMORY_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or None


def _api_key(cfg: Mapping[str, Any]) -> str | None:
    value = cfg.get("api_key") or cfg.get("key")
    return value or os.environ.get("OVOS_MEMORY_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


def _hint(key: Any, known: set[str]) -> str:
    close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'? " if close else ""


def read_llm_config(config: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """An ``llm`` block cleaned key by key, and its problems (one line each).

    Aliases become their canonical names (``api_url`` -> ``base_url``, ``key`` -> ``api_key``);
    an unknown key or a key with a bad value is dropped alone (its default applies) with a
    line saying so, "did you mean" included. The block is None when it is null, not an
    object, or names an unusable ``module``.
    """
    if config is None:
        return None, []
    if not isinstance(config, Mapping):
        return None, [f"key 'llm': {config!r} is not accepted; expected an object or null"]
    problems: list[str] = []
    opm = "module" in config
    known = _OPM_KEYS if opm else _OPENAI_KEYS
    aliases = {} if opm else LLM_KEY_ALIASES
    clean: dict[str, Any] = {}
    for key, value in config.items():
        name = aliases.get(key, key) if isinstance(key, str) else key
        if name not in known:
            names = known | set(aliases)
            accepted = ", ".join(sorted(names))
            problems.append(f"unknown key 'llm.{key}' (ignored); {_hint(key, names)}accepted keys: {accepted}")
            continue
        if name != key and name in config and config[name] != value:
            problems.append(f"key 'llm.{key}' and its alias target 'llm.{name}' disagree; '{name}' is used")
            continue
        clean[name] = value
    if opm and (not isinstance(clean.get("module"), str) or not clean["module"]):
        problems.append(f"key 'llm.module': {config['module']!r} is not accepted; expected a plugin name")
        return None, problems
    for key in ("timeout", "backoff_s", "backoff_max_s"):
        value = clean.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            problems.append(f"key 'llm.{key}': {value!r} is not accepted (ignored); expected a number > 0")
            del clean[key]
    for key in ("base_url", "api_key", "model"):
        value = clean.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(f"key 'llm.{key}': {value!r} is not accepted (ignored); expected a string")
            del clean[key]
    if "config" in clean and not isinstance(clean["config"], Mapping):
        problems.append(f"key 'llm.config': {clean['config']!r} is not accepted (ignored); expected an object")
        del clean["config"]
    return clean, problems


def check_llm_config(config: Any) -> list[str]:
    """Problems with an ``llm`` block, one line each (empty when it is fine or null)."""
    return read_llm_config(config)[1]


def make_llm(config: Mapping[str, Any] | None) -> ChatLLM | None:
    """The client an ``llm`` block describes, or None when it is null or unusable.

    Never raises: a bad key is logged and dropped alone; a block with nowhere to send calls
    or a plugin that cannot load is logged and gives None.
    """
    clean, problems = read_llm_config(config)
    for problem in problems:
        LOG.warning("llm: %s", problem)
    if clean is None:
        if config is not None:
            LOG.error("llm: the block is unusable; continuing without a language model")
        return None
    try:
        if clean.get("module"):
            return OPMChatLLM(clean)
        if not _base_url(clean) and not _api_key(clean):
            LOG.error(
                "llm: no 'base_url'/'api_url' or 'api_key'/'key' (nor OVOS_MEMORY_LLM_* / OPENAI_* in the "
                "environment); continuing without a language model"
            )
            return None
        return OpenAIChatLLM(clean)
    except Exception as exc:
        LOG.error("llm: cannot set up the language model (%s); continuing without one", exc)
        return None


def close_quietly(thing: Any, what: str = "llm") -> None:
    """Call ``thing.close()`` when it has one (a client, a composite's member); a failure is
    logged at DEBUG under ``what`` and never raised (closing is best effort)."""
    close = getattr(thing, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            LOG.debug("%s: close failed", what, exc_info=True)


#: Close a language-model client's connections (:func:`close_quietly`).
close_llm = close_quietly


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
