"""The tool box's config: its bounds and :func:`parse_toolbox_config` (the JSON form is in the package docs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ovos_memory_plugins import loader

#: The entry-point name (``opm.agents.toolbox``) and the default ``toolbox_id``.
TOOLBOX_ID = "ovos-memory-toolbox"
DEFAULT_MEMORY = "ovos-memory-plugin-lexical"

#: Bounds of the tool arguments (characters).
MAX_QUERY_CHARS = 300
MAX_FACT_CHARS = 300
MAX_DESCRIPTION_CHARS = 200
#: The most results ``search_memory`` returns and notes ``list_notes`` lists.
MAX_TOP_K = 10
MAX_LISTED_NOTES = 50
#: Calls running at once; a memory stuck past its deadline holds one until it returns.
MAX_IN_FLIGHT = 4

READ_TOOLS = ("search_memory", "list_notes")


# -- config ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolboxSettings:
    """The parsed tool box config (the JSON form is in :mod:`ovos_memory_plugins.toolbox`).

    Attributes:
        memory_module: the memory plugin's entry-point name (``opm.agents.memory``).
        memory_config: its block (the same one the persona gives it).
        read_only: offer only the read tools (``search_memory``, ``list_notes``).
        timeout: seconds one tool call may take before the model gets a tool error.
        scope: ``global`` (search and list every session's memories) or ``session`` (only the
            calling session's; use it where sessions are different people).
        session_id: the session a call belongs to when the caller names none.
        max_results: the most hits ``search_memory`` returns (``top_k`` is capped to it).
        forget_mode: ``delete``, the only value: ``forget_memory`` removes the memory for good
            (``retire``, accepted before, is reported and ignored: a fact that stopped being
            true is changed with ``update_memory``).
    """

    memory_module: str = DEFAULT_MEMORY
    memory_config: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False
    timeout: float = 5.0
    scope: Literal["global", "session"] = "global"
    session_id: str = "default"
    max_results: int = 5
    forget_mode: Literal["delete"] = "delete"


_OWN_KEYS = {"memory_module", "persona", "read_only", "timeout", "scope", "session_id", "max_results", "forget_mode"}


def _persona_memory(path: str) -> tuple[str, dict[str, Any]]:
    """The ``(memory_module, block)`` of a persona JSON file; raises ValueError naming the problem."""
    try:
        return loader.persona_memory(loader.read_persona(path), path)
    except loader.PersonaFileError as exc:
        raise ValueError(f"key 'persona': {exc}") from exc


def _from_persona(persona: Mapping[str, Any]) -> dict[str, Any]:
    """A whole persona JSON as tool box config: its memory, and the options of its tool box block."""
    own = persona.get(TOOLBOX_ID)
    config = {k: v for k, v in own.items() if k not in ("persona", "memory_module")} if isinstance(own, dict) else {}
    module = persona.get("memory_module")
    if isinstance(module, str) and module:
        config["memory_module"] = module
        config[module] = persona.get(module) or {}
    return config


def parse_toolbox_config(raw: Mapping[str, Any] | None) -> tuple[ToolboxSettings, list[str]]:
    """Parse the tool box config leniently: ``(settings, problems)``; each bad key keeps its default.

    ``raw`` is the tool box block, or a whole persona JSON (it has ``handlers``): then the memory
    is the persona's and the options come from its ``ovos-memory-toolbox`` block.
    """
    raw = dict(raw or {})
    if isinstance(raw.get("handlers") or raw.get("solvers"), list):
        raw = _from_persona(raw)
    problems: list[str] = []
    defaults = ToolboxSettings()
    module: str = defaults.memory_module
    block: dict[str, Any] = {}
    if raw.get("persona") is not None:
        if "memory_module" in raw:
            problems.append("keys 'persona' and 'memory_module': give one of them; using 'persona'")
        try:
            module, block = _persona_memory(str(raw["persona"]))
        except ValueError as exc:
            problems.append(str(exc))
    elif "memory_module" in raw:
        value = raw["memory_module"]
        if isinstance(value, str) and value:
            module = value
            given = raw.get(module) or {}
            if isinstance(given, dict):
                block = dict(given)
            else:
                problems.append(f"key {module!r}: {given!r} is not accepted; expected an object")
        else:
            problems.append(f"key 'memory_module': {value!r} is not accepted; expected a plugin name")
    values: dict[str, Any] = {"memory_module": module, "memory_config": block}

    def take(key: str, ok: Callable[[Any], bool], accepted: str) -> None:
        if key in raw:
            if ok(raw[key]):
                values[key] = raw[key]
            else:
                problems.append(f"key {key!r}: {raw[key]!r} is not accepted; expected {accepted}")

    take("read_only", lambda v: isinstance(v, bool), "true or false")
    take(
        "timeout",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0.05 <= v <= 120,
        "seconds between 0.05 and 120",
    )
    take("scope", lambda v: v in ("global", "session"), "'global' or 'session'")
    take("session_id", lambda v: isinstance(v, str) and 0 < len(v) <= 200, "a session id")
    take(
        "max_results",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_TOP_K,
        f"a whole number from 1 to {MAX_TOP_K}",
    )
    if raw.get("forget_mode") == "retire":
        problems.append(
            "key 'forget_mode': 'retire' is no longer accepted: forget_memory removes the memory for good; "
            "a fact that stopped being true is changed with update_memory"
        )
    elif "forget_mode" in raw:
        take("forget_mode", lambda v: v == "delete", "'delete'")
    if "timeout" in values:
        values["timeout"] = float(values["timeout"])
    for key in sorted(k for k in raw if k not in _OWN_KEYS and k != values["memory_module"]):
        problems.append(f"key {key!r} is not a tool box key (known: {', '.join(sorted(_OWN_KEYS))})")
    return ToolboxSettings(**values), problems
