"""The one loader of memory plugins and persona files, for every front-end and the composite.

A memory plugin is an entry point of the group ``opm.agents.memory``; a persona file is a JSON
object whose ``memory_module`` names one and whose block under that name is its config. The
command, the editor, the tool box, the config validator and the composite all find plugins and
read persona files here, so each rule (which names are accepted, that only the named plugin is
imported, what a persona file must hold) exists once.

Only the named plugin is imported: OPM's ``load_memory_plugin`` imports every plugin of the
group on each call, which costs a start-up the import of every backend installed.

Errors are :class:`PluginNotFound` / :class:`PluginImportError` (both
:class:`~ovos_memory_plugins.errors.BackendError`) and :class:`PersonaFileError` (a
``ValueError``); each message names the plugin or file and what is wrong.
"""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from ovos_memory_plugins.errors import BackendError, OvosMemoryPluginError

__all__ = [
    "GROUP",
    "PREFIX",
    "PersonaFileError",
    "PluginImportError",
    "PluginNotFound",
    "installed_plugins",
    "open_plugin",
    "parse_json_object",
    "persona_memory",
    "plugin_class",
    "read_json_object",
    "read_persona",
    "resolve_plugin_name",
]

#: The entry-point group ovos-persona loads memory plugins from.
GROUP = "opm.agents.memory"
#: The prefix of this package's plugin names; ``lexical`` is short for ``ovos-memory-plugin-lexical``.
PREFIX = "ovos-memory-plugin-"


class PluginNotFound(BackendError, LookupError):
    """No memory plugin of that name is installed."""


class PluginImportError(BackendError):
    """The named memory plugin is installed but could not be imported."""


class PersonaFileError(OvosMemoryPluginError, ValueError):
    """A persona file cannot be read, is not a JSON object, or does not name a usable memory."""


def installed_plugins() -> dict[str, EntryPoint]:
    """The installed memory plugins by entry-point name (nothing is imported)."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def resolve_plugin_name(name: str, *, short_names: bool = True) -> str:
    """The entry-point name for ``name``; with ``short_names``, ``lexical`` means ``ovos-memory-plugin-lexical``.

    Raises :class:`PluginNotFound` listing this package's installed plugins.
    """
    known = installed_plugins()
    if name in known:
        return name
    if short_names and PREFIX + name in known:
        return PREFIX + name
    raise _not_found(name, known, short_names)


def _not_found(name: str, known: dict[str, EntryPoint], short_names: bool) -> PluginNotFound:
    ours = sorted(n for n in known if n.startswith(PREFIX))
    hint = f" (short names work too: {', '.join(n[len(PREFIX) :] for n in ours)})" if short_names and ours else ""
    return PluginNotFound(
        f"no memory plugin named {name!r} is installed (entry-point group {GROUP}); "
        f"installed: {', '.join(ours) or 'none'}{hint}"
    )


def plugin_class(name: str) -> type[Any]:
    """Import the class of the memory plugin ``name`` (an exact entry-point name), and only it.

    Raises :class:`PluginNotFound` or :class:`PluginImportError`.
    """
    known = installed_plugins()
    ep = known.get(name)
    if ep is None:
        raise _not_found(name, known, short_names=False)
    try:
        cls = ep.load()
    except Exception as exc:  # a plugin's import can fail in any way; the caller hears which
        raise PluginImportError(f"memory plugin {name!r} could not be imported: {exc}") from exc
    if not isinstance(cls, type):
        raise PluginImportError(f"memory plugin {name!r} is not a class ({type(cls).__name__})")
    return cls


def open_plugin(name: str, config: dict[str, Any]) -> Any:
    """Build the memory plugin ``name`` with ``config``, as ovos-persona does."""
    return plugin_class(name)(config=dict(config))


def read_json_object(path: str | Path, what: str | None = None) -> dict[str, Any]:
    """The JSON object in the file ``path``; :class:`PersonaFileError` naming it and the problem."""
    what = what or str(path)
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise PersonaFileError(f"cannot read {what}: {exc.strerror or exc}") from exc
    return parse_json_object(text, what)


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """``text`` parsed as a JSON object; :class:`PersonaFileError` naming ``what`` and the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PersonaFileError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    if not isinstance(data, dict):
        raise PersonaFileError(f"{what} must hold a JSON object")
    return data


def read_persona(path: str | Path) -> dict[str, Any]:
    """Read a persona JSON file; :class:`PersonaFileError` naming the problem."""
    return read_json_object(path)


def persona_memory(persona: dict[str, Any], where: str = "the persona") -> tuple[str, dict[str, Any]]:
    """The ``(memory_module, config block)`` a persona selects; :class:`PersonaFileError` otherwise.

    ``where`` names the persona in messages (its file's path).
    """
    module = persona.get("memory_module")
    if not module:
        raise PersonaFileError(
            f'{where} names no memory_module; add e.g. "memory_module": "{PREFIX}lexical"'
            if "memory_module" not in persona
            else f'{where} disables memory ("memory_module": {json.dumps(module)})'
        )
    if not isinstance(module, str):
        raise PersonaFileError(f"{where}: memory_module must be a string, not {json.dumps(module)}")
    block = persona.get(module) or {}
    if not isinstance(block, dict):
        raise PersonaFileError(f"{where}: the block {module!r} must be a JSON object")
    return module, dict(block)
