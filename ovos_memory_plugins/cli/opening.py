"""Which memory a command works on (``--persona`` or ``--module``), opened as the host opens it."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ovos_memory_plugins import loader
from ovos_memory_plugins.cli.output import CommandError, Output, UsageError

PREFIX = loader.PREFIX
DEFAULT_MODULE = PREFIX + "lexical"
#: Where the documentation lives (an installed wheel carries no docs folder).
DOCS_URL = "https://github.com/OpenVoiceOS/ovos-memory-plugins/blob/main/docs"
#: Commands that only read: they never create a memory folder.
READ_ONLY = ("search", "stats", "export")


def plugin_name(name: str) -> str:
    """The entry-point name for ``name`` (``lexical`` -> ``ovos-memory-plugin-lexical``)."""
    return loader.resolve_plugin_name(name)


def plugin_class(name: str) -> type[Any]:
    """Import the plugin class of entry point ``name`` (only that one: no other plugin is imported)."""
    return loader.plugin_class(name)


def _read_file(path: str) -> str:
    """The text of the file ``path``; :class:`CommandError` naming it when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from exc


def read_persona(path: str) -> dict[str, Any]:
    """Read a persona JSON file; raise :class:`~ovos_memory_plugins.loader.PersonaFileError` naming the problem."""
    return loader.read_persona(path)


def persona_memory(path: str) -> tuple[str, dict[str, Any]]:
    """The ``(module, config block)`` a persona file selects."""
    return loader.persona_memory(read_persona(path), path)


def selected_config(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The module name and config the target options select (``--root`` overrides ``root``)."""
    if args.persona and args.module:
        raise UsageError("give either --persona or --module, not both")
    if args.persona:
        module, config = persona_memory(args.persona)
    else:
        module, config = args.module or DEFAULT_MODULE, {}
    if args.config:
        text = _read_file(args.config[1:]) if args.config.startswith("@") else args.config
        try:
            config.update(loader.parse_json_object(text, "--config"))
        except loader.PersonaFileError as exc:
            raise UsageError(str(exc)) from exc
    if args.root:
        config["root"] = args.root
    if args.namespace:
        config["namespace"] = args.namespace
    return plugin_name(module), config


def memory_root(cls: type[Any], config: dict[str, Any]) -> Path | None:
    """The folder a memory built from ``config`` keeps its files in; None when it keeps them in
    RAM or in a database server (``"database": "postgresql://..."``: nothing goes under root)."""
    from ovos_memory_plugins.config import parse_config, resolve_root

    parsed = parse_config(config, getattr(cls, "options_class", None))
    if parsed.memory.database or not (getattr(cls, "persistent", False) or parsed.memory.root):
        return None
    return resolve_root(parsed.memory)


@contextlib.contextmanager
def open_memory(args: argparse.Namespace, output: Output, *, read_only: bool = False) -> Iterator[Any]:
    """Build the selected memory and close it afterwards.

    With ``read_only`` nothing is built when the memory's folder does not exist (a typo'd
    ``--namespace`` must not create a new, empty memory): that is reported as an error naming
    the folder. Config problems reach stderr once, through the plugin's own log line.
    """
    name, config = selected_config(args)
    cls = plugin_class(name)
    if not is_ours(cls):
        raise CommandError(
            f"{name} ({cls.__module__}.{cls.__name__}) is not built on ovos_memory_plugins.BaseRetrievalMemory;"
            " this command works with the plugins of ovos-memory-plugins and backends built on its base"
        )
    root = memory_root(cls, config)
    if read_only and root is not None and not root.is_dir():
        from ovos_memory_plugins.storage.registry import folder_problem

        why = folder_problem(root)
        if why:
            raise CommandError(f"the memory folder {root} cannot be used: {why}; nothing was read")
        raise CommandError(
            f"no memory in {root}: nothing was ever stored there (check --persona, --namespace or --root);"
            " nothing was created"
        )
    if read_only and root is not None:
        _refuse_a_folder_of_another_memory(name, cls, config, root)
    before = _files_under(root) if read_only and root is not None else None
    memory = cls(config=config)
    problem = storage_problem_of(memory)
    if problem is not None:  # answering from RAM would report success and keep nothing
        close = getattr(memory, "close", None)
        if callable(close):
            close()
        where = f" in {root}" if root is not None else ""
        raise CommandError(f"the {name} memory{where} cannot be used: {problem}; nothing was read or changed")
    try:
        yield memory
    finally:
        close = getattr(memory, "close", None)
        if callable(close):
            close()
        if before is not None and root is not None:
            new = sorted(str(p.relative_to(root)) for p in _files_under(root) - before)
            if new:
                output.note(
                    f"warning: {root} held no {name} memory: opening it created {', '.join(new)};"
                    " does --module (or the persona's memory_module) match the memory kept there?"
                )


def _refuse_a_folder_of_another_memory(name: str, cls: type[Any], config: dict[str, Any], root: Path) -> None:
    """For a read-only command: a :class:`CommandError` when none of the files a memory of
    ``cls`` keeps (``stored_files``: every member's, for a composite) is there, before anything
    is built, so a wrong ``--module`` creates no ``history.db`` or ``vector.db`` in another
    memory's folder. Nothing is refused when the files cannot be known (an empty list)."""
    from ovos_memory_plugins.config import parse_config

    parsed = parse_config(config, getattr(cls, "options_class", None))
    files = cls.stored_files(parsed.memory, parsed.options)  # the base's and the composite's
    if not files or any(f.exists() for f in files):
        return
    held = sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []
    holds = f"it holds {', '.join(held)}" if held else "it is empty"
    raise CommandError(
        f"no {name} memory in {root}: {files[0].name} is not there ({holds}); does --module (or the"
        " persona's memory_module) match the memory kept there? nothing was created"
    )


def storage_problem_of(memory: Any) -> str | None:
    """Why ``memory`` keeps nothing it learns (:class:`~ovos_memory_plugins.protocols.StorageStatus`),
    or None."""
    from ovos_memory_plugins.protocols import StorageStatus

    return memory.storage_problem if isinstance(memory, StorageStatus) else None


def _files_under(root: Path) -> set[Path]:
    """The files in ``root`` and its direct sub-folders (SQLite's ``-wal``/``-shm`` left out)."""
    if not root.is_dir():
        return set()
    found = {p for p in root.iterdir() if p.is_file()}
    found |= {p for d in root.iterdir() if d.is_dir() for p in d.iterdir() if p.is_file()}
    return {p for p in found if not p.name.endswith(("-wal", "-shm", "-journal"))}


def is_ours(cls: Any) -> bool:
    """Whether ``cls`` is a memory of this package (built on the base, or the composite)."""
    from ovos_memory_plugins.base import BaseRetrievalMemory
    from ovos_memory_plugins.composite import CompositeMemory

    return isinstance(cls, type) and issubclass(cls, (BaseRetrievalMemory, CompositeMemory))


def notes_keeper_of(memory: Any) -> Any | None:
    """``memory`` when it keeps notes (:class:`~ovos_memory_plugins.protocols.NotesKeeper`), else None."""
    from ovos_memory_plugins.protocols import NotesKeeper

    return memory if isinstance(memory, NotesKeeper) else None


def location_of(memory: Any) -> str:
    from ovos_memory_plugins.transfer import where_kept

    return where_kept(memory)


# -- commands ----------------------------------------------------------------------------------
