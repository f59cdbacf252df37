"""``ovos-memory``: see, correct, wipe, move and check what a persona remembers.

Every command works on the same files the persona uses while it runs (SQLite in WAL mode with a
busy timeout, so a running persona and the command can share them). Pick the memory with
``--persona persona.json`` (its ``memory_module`` and that module's block) or with
``--module NAME [--config JSON] [--root DIR]``; ``--module`` accepts the short names
(``lexical``) as well as entry-point names. Output is for people; ``--json`` prints JSON for
scripts. Exit codes: 0 success, 1 failure (the message says why), 2 bad usage.

Commands: ``demo``, ``search``, ``remember``, ``forget``, ``notes``, ``dream``, ``stats``, ``serve``,
``export``, ``import``, ``ingest``, ``check``. ``ovos-memory COMMAND --help`` explains each.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import IO, Any, NoReturn

from ovos_memory_plugins.errors import ConfigError, OvosMemoryPluginError

__all__ = ["main"]

GROUP = "opm.agents.memory"
PREFIX = "ovos-memory-plugin-"
DEFAULT_MODULE = PREFIX + "lexical"


class CommandError(Exception):
    """A failure the command reports in one line and exits 1 for."""


# -- output ------------------------------------------------------------------------------------


class Output:
    """Human text on stdout by default; one JSON document with ``--json``."""

    def __init__(self, as_json: bool, out: IO[str] | None = None, err: IO[str] | None = None) -> None:
        self.as_json = as_json
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def emit(self, data: Any, human: str | Callable[[], str]) -> None:
        """Print ``data`` as JSON, or ``human`` (text or a function making it) as text."""
        if self.as_json:
            self.out.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
        else:
            text = human() if callable(human) else human
            if text:
                self.out.write(text.rstrip("\n") + "\n")

    def note(self, text: str) -> None:
        """A message for people that never mixes with the JSON on stdout."""
        self.err.write(text.rstrip("\n") + "\n")


class Progress:
    """A progress bar on stderr: ``[#####-----] 5/10 name``, redrawn in place on a terminal;
    elsewhere (a log file, a pipe) only the final state is written, once."""

    def __init__(self, err: IO[str], width: int = 24) -> None:
        self.err = err
        self.width = width
        self.drawn = False
        isatty = getattr(err, "isatty", None)
        self.live = bool(isatty()) if callable(isatty) else False

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.live and done < total:
            return
        filled = self.width * done // max(total, 1)
        label = name if len(name) <= 40 else "…" + name[-39:]
        bar = f"[{'#' * filled}{'-' * (self.width - filled)}] {done}/{total} {label}"
        self.err.write(f"\r{bar}\x1b[K" if self.live else bar)
        self.err.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            self.err.write("\n")
            self.err.flush()


# -- choosing the memory -----------------------------------------------------------------------


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def plugin_name(name: str) -> str:
    """The entry-point name for ``name`` (``lexical`` -> ``ovos-memory-plugin-lexical``)."""
    known = _entry_points()
    if name in known:
        return name
    if PREFIX + name in known:
        return PREFIX + name
    ours = sorted(n for n in known if n.startswith(PREFIX))
    raise CommandError(
        f"no memory plugin named {name!r} is installed; installed: {', '.join(ours) or 'none'}"
        f" (short names work too: {', '.join(n[len(PREFIX) :] for n in ours)})"
    )


def plugin_class(name: str) -> type[Any]:
    """Import the plugin class of entry point ``name``."""
    ep = _entry_points()[name]
    try:
        return ep.load()  # type: ignore[no-any-return]
    except Exception as exc:
        raise CommandError(f"memory plugin {name!r} could not be imported: {exc}") from exc


def read_persona(path: str) -> dict[str, Any]:
    """Read a persona JSON file; raise :class:`CommandError` naming the problem."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    if not isinstance(data, dict):
        raise CommandError(f"{path}: a persona file must hold a JSON object")
    return data


def persona_memory(path: str) -> tuple[str, dict[str, Any]]:
    """The ``(module, config block)`` a persona file selects."""
    persona = read_persona(path)
    module = persona.get("memory_module")
    if not module:
        raise CommandError(
            f'{path} names no memory_module; add e.g. "memory_module": "{DEFAULT_MODULE}"'
            if "memory_module" not in persona
            else f'{path} disables memory ("memory_module": {json.dumps(module)})'
        )
    if not isinstance(module, str):
        raise CommandError(f"{path}: memory_module must be a string, not {json.dumps(module)}")
    block = persona.get(module) or {}
    if not isinstance(block, dict):
        raise CommandError(f"{path}: the block {module!r} must be a JSON object")
    return module, dict(block)


def selected_config(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The module name and config the target options select (``--root`` overrides ``root``)."""
    if args.persona:
        module, config = persona_memory(args.persona)
        if args.module:
            raise CommandError("give either --persona or --module, not both")
    else:
        module, config = args.module or DEFAULT_MODULE, {}
    if args.config:
        text = args.config
        if text.startswith("@"):
            try:
                text = Path(text[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"cannot read {text[1:]}: {exc.strerror or exc}") from exc
        try:
            extra = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--config is not valid JSON: {exc.msg}") from exc
        if not isinstance(extra, dict):
            raise CommandError("--config must be a JSON object")
        config.update(extra)
    if args.root:
        config["root"] = args.root
    if args.namespace:
        config["namespace"] = args.namespace
    return plugin_name(module), config


@contextlib.contextmanager
def open_memory(args: argparse.Namespace, output: Output) -> Iterator[Any]:
    """Build the selected memory; report its config problems on stderr; close it afterwards."""
    name, config = selected_config(args)
    cls = plugin_class(name)
    if not _ours(cls):
        raise CommandError(
            f"{name} ({cls.__module__}.{cls.__name__}) is not built on ovos_memory_plugins.BaseRetrievalMemory;"
            " this command works with the plugins of ovos-memory-plugins and backends built on its base"
        )
    memory = cls(config=config)
    for problem in getattr(memory, "config_problems", []):
        output.note(f"warning: {problem} (using the default for that key)")
    try:
        yield memory
    finally:
        close = getattr(memory, "close", None)
        if callable(close):
            close()


def _ours(cls: Any) -> bool:
    from ovos_memory_plugins.base import BaseRetrievalMemory
    from ovos_memory_plugins.composite import CompositeMemory

    return isinstance(cls, type) and issubclass(cls, (BaseRetrievalMemory, CompositeMemory))


def _needs(memory: Any, *names: str, verb: str) -> Callable[..., Any]:
    for name in names:
        method = getattr(memory, name, None)
        if callable(method):
            return method  # type: ignore[no-any-return]
    raise CommandError(f"{type(memory).__name__} has no {verb} (it has none of: {', '.join(names)})")


# -- commands ----------------------------------------------------------------------------------


def _hit_data(hit: Any) -> dict[str, Any]:
    meta = dict(hit.metadata)
    return {
        "id": hit.source,
        "score": hit.score,
        "session_id": meta.get("session_id"),
        "content": hit.content,
        "metadata": meta,
    }


def _indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def cmd_search(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output) as memory:
        hits = memory.search(args.query, session_id=args.session, top_k=args.top_k)
    data = [_hit_data(h) for h in hits]

    def human() -> str:
        if not hits:
            return "no memories match"
        lines = []
        for i, hit in enumerate(hits, start=1):
            session = f" session {hit.metadata['session_id']}" if hit.metadata.get("session_id") else ""
            lines.append(f"{i}. {hit.source}  score {hit.score:.4g}{session}")
            lines.append(_indent(hit.content))
        return "\n".join(lines)

    output.emit(data, human)
    return 0


def _parse_meta(items: Sequence[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"--meta expects KEY=VALUE, got {item!r}")
        try:
            meta[key] = json.loads(value)
        except json.JSONDecodeError:
            meta[key] = value
    return meta


def cmd_remember(args: argparse.Namespace, output: Output) -> int:
    text = " ".join(args.text)
    with open_memory(args, output) as memory:
        remember = getattr(memory, "remember", None)
        if callable(remember) and not args.document:
            meta = _parse_meta(args.meta)
            if meta and not _accepts_keyword(remember, "metadata"):
                raise CommandError(f"{type(memory).__name__}.remember takes no metadata; drop --meta or add --document")
            result = remember(text, session_id=args.session, **({"metadata": meta} if meta else {}))
            if _field(result, "status") in ("ambiguous", "not_found"):
                output.emit(_plain(result), f"not remembered ({_field(result, 'status')})")
                return 1
            data = {"remembered": text, "session_id": args.session, "result": _plain(result)}
            status = _field(result, "status")
            suffix = f" ({result})" if isinstance(result, str) else f" ({status})" if status else ""
            output.emit(data, f"remembered: {text}{suffix}")
            return 0
        doc_id = memory.store(text, args.session, _parse_meta(args.meta))
    output.emit({"id": doc_id, "text": text, "session_id": args.session}, f"stored {doc_id}: {text}")
    return 0


def _plain(value: Any) -> Any:
    """``value`` made JSON-friendly (dataclasses become dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _note_text(note: Any) -> str:
    if isinstance(note, str):
        return note
    if isinstance(note, dict):
        return str(note.get("text") or note.get("fact") or note)
    return str(getattr(note, "text", None) or getattr(note, "fact", None) or note)


def _accepts_keyword(func: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _field(result: Any, name: str) -> Any:
    return result.get(name) if isinstance(result, dict) else getattr(result, name, None)


#: what the backends' ``forget`` reports (sticky: deleted/ambiguous/none; notes:
#: forgotten/ambiguous/not_found)
_FORGOTTEN = ("deleted", "forgotten")


def _forget_match(memory: Any, args: argparse.Namespace, output: Output) -> int:
    """``forget --match``: the backend's own ``forget(description)`` (notes, sticky notes)."""
    forget = _needs(memory, "forget", verb="note removal (--match)")
    if _accepts_keyword(forget, "session_id"):
        result = forget(args.match, session_id=args.session or "default")
    else:
        result = forget(args.match)
    data = _plain(result)
    status = _field(result, "status") or ("deleted" if result else "none")
    if status in _FORGOTTEN:
        gone = _field(result, "deleted") or _field(result, "note")
        output.emit(data, f"forgot: {_note_text(gone)}" if gone else f"forgot notes matching {args.match!r}")
        return 0
    if status == "ambiguous":
        lines = [f"{args.match!r} matches several notes about equally; nothing was deleted. Be more specific:"]
        lines += [f"  - {_note_text(c)}" for c in _field(result, "candidates") or []]
        output.emit(data, "\n".join(lines))
        return 1
    output.emit(data, f"no note matches {args.match!r}; nothing was deleted")
    return 1


def cmd_forget(args: argparse.Namespace, output: Output) -> int:
    if args.match:
        if args.ids or args.all:
            raise CommandError("--match cannot be combined with ids or --all")
        with open_memory(args, output) as memory:
            return _forget_match(memory, args, output)
    chosen = sum(bool(x) for x in (args.ids, args.session, args.all))
    if chosen != 1:
        raise CommandError("say what to forget: document ids, or --session ID, or --all, or --match TEXT")
    with open_memory(args, output) as memory:
        if args.all:
            if not args.yes:
                raise CommandError("--all deletes every memory and all history; add --yes to confirm")
            n = memory.forget_all()
            what = "every memory and all history"
        elif args.session:
            n = memory.forget_session(args.session)
            what = f"session {args.session!r} (its memories and history)"
        else:
            n = memory.delete(args.ids)
            what = f"{len(args.ids)} id(s)"
    output.emit({"deleted": n}, f"forgot {what}: {n} document(s) deleted")
    if args.ids and n < len(args.ids):
        output.note(f"{len(args.ids) - n} id(s) were not found")
        return 1
    return 0


def _notes_text(memory: Any) -> str:
    """The backend's notes as text: ``notes_body()`` (notes) or ``notes()`` (sticky) rendered."""
    read = _needs(memory, "notes_body", "notes", verb="curated notes")
    value = read()
    if isinstance(value, str):
        return value
    return "\n".join(f"- {_note_text(item)}" for item in value or [])


STICKY_EDIT_HEADER = (
    "# One note per line, starting with '- '. Delete a line to forget that note, add a line to\n"
    "# remember a new one, change a line to replace it. Lines starting with '#' are ignored.\n\n"
)


def _edit_in_editor(text: str, name: str) -> str:
    """``text`` after the user edited it in ``$VISUAL``/``$EDITOR`` (else ``vi``)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="ovos-memory-notes-") as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        try:
            status = subprocess.call([*shlex.split(editor), str(path)])
        except OSError as exc:
            raise CommandError(f"cannot run the editor {editor!r}: {exc}") from exc
        if status != 0:
            raise CommandError(f"the editor {editor!r} exited with status {status}; notes unchanged")
        return path.read_text(encoding="utf-8")


def _edit_listed_notes(memory: Any, output: Output) -> int:
    """Edit notes that have ids (sticky notes): removed lines are deleted, new lines remembered."""
    remember = _needs(memory, "remember", verb="editable notes")
    notes = list(memory.notes())
    by_text: dict[str, list[str]] = {}
    for note in notes:
        by_text.setdefault(_note_text(note), []).append(str(note.id))
    before = STICKY_EDIT_HEADER + "".join(f"- {text}\n" for text in by_text)
    after = _edit_in_editor(before, "notes.md")
    wanted = [line[2:].strip() for line in after.splitlines() if line.startswith("- ") and line[2:].strip()]
    gone = [doc_id for text, ids in by_text.items() if text not in wanted for doc_id in ids]
    added = [text for text in dict.fromkeys(wanted) if text not in by_text]
    if gone:
        memory.delete(gone)
    for text in added:
        remember(text)
    data = {"changed": bool(gone or added), "forgotten": len(gone), "remembered": added}
    output.emit(data, f"notes saved: {len(added)} added, {len(gone)} removed" if gone or added else "notes unchanged")
    return 0


def cmd_notes(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output) as memory:
        if not args.edit:
            text = _notes_text(memory)
            output.emit({"notes": text}, text or "(no notes yet)")
            return 0
        if not callable(getattr(memory, "replace_notes", None)) and callable(getattr(memory, "notes", None)):
            return _edit_listed_notes(memory, output)
        write = _needs(memory, "replace_notes", verb="editable notes")
        before = _notes_text(memory)
        after = _edit_in_editor(before, "MEMORY.md")
        if after == before:
            output.emit({"changed": False}, "notes unchanged")
            return 0
        write(after)
    output.emit({"changed": True, "notes": after}, "notes saved")
    return 0


def cmd_dream(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output) as memory:
        dream = _needs(memory, "dream", verb="dreaming (consolidation)")
        result = dream()
    status = _field(result, "status") or ("rewritten" if result else "failed")
    reason = _field(result, "reason") or ""
    human = {
        "rewritten": "the notes were consolidated",
        "unchanged": "the model found nothing to change",
        "rejected": "the model's rewrite was rejected (unusable, or it lost or invented a fact); notes untouched",
        "failed": "no model answered; notes untouched",
        "skipped": "skipped: no language model (key llm), or no notes",
    }.get(str(status), f"dream: {status}")
    before, after = _field(result, "before"), _field(result, "after")
    if before is not None and status == "rewritten":
        human += f" ({before} -> {after} notes)"
    if reason:
        human = f"dream {status}: {reason}"
    output.emit(_plain(result) if not isinstance(result, bool) else {"status": status}, human)
    return 0 if status in ("rewritten", "unchanged") else 1


def cmd_serve(args: argparse.Namespace, output: Output) -> int:
    try:
        from ovos_memory_plugins.editor import serve
    except ImportError as exc:
        raise CommandError(str(exc)) from exc

    def announce(line: str) -> None:
        output.out.write(line + "\n")
        output.out.flush()

    with open_memory(args, output) as memory:
        serve(
            memory,
            args.host,
            args.port,
            allow_remote=args.allow_remote,
            allowed_hosts=args.allowed_host,
            open_browser=args.open,
            announce=announce,
        )
    return 0


def _flatten(data: dict[str, Any], prefix: str = "") -> list[str]:
    lines = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            lines += _flatten(value, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}: {value}")
    return lines


def cmd_stats(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output) as memory:
        stats = memory.stats()
    output.emit(stats, lambda: "\n".join(_flatten(stats)))
    return 0


def cmd_export(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import export_jsonl, is_curated_notes

    with open_memory(args, output) as memory:
        if is_curated_notes(memory):
            archived = (memory.stats().get("archive") or {}).get("documents")
            if archived:
                output.note(
                    f"warning: only the notes are exported, not the {archived} document(s) of the archive"
                    " (export the archive itself with --root <root>/archive --module its-module)"
                )
        if args.file in (None, "-"):
            n = export_jsonl(memory, output.out)
            output.note(f"exported {n} document(s)")
            return 0
        target = Path(args.file)
        tmp = target.with_name(target.name + ".part")
        try:
            with tmp.open("w", encoding="utf-8") as fp:
                n = export_jsonl(memory, fp)
                fp.flush()
                os.fsync(fp.fileno())
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    output.emit({"exported": n, "file": str(target)}, f"exported {n} document(s) to {target}")
    return 0


def cmd_import(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import import_jsonl

    with open_memory(args, output) as memory:
        if args.file == "-":
            report = import_jsonl(memory, sys.stdin, "<stdin>")
        else:
            try:
                with open(args.file, encoding="utf-8") as fp:
                    report = import_jsonl(memory, fp, args.file)
            except OSError as exc:
                raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    for reason in report.reasons:
        output.note(f"warning: {reason}")
    output.emit(
        {"imported": report.imported, "skipped": report.skipped, "reasons": report.reasons},
        f"imported {report.imported} document(s)" + (f", skipped {report.skipped}" if report.skipped else ""),
    )
    return 0


def cmd_ingest(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import ingest_paths

    progress = Progress(output.err)
    with open_memory(args, output) as memory:
        try:
            report = ingest_paths(memory, [Path(p) for p in args.paths], args.session, None if args.quiet else progress)
        except FileNotFoundError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            progress.finish()
    data = {"files": report.files, "exchanges": report.exchanges, "documents": report.documents}
    output.emit(
        data,
        f"ingested {report.files} file(s): {report.exchanges} exchange(s), {report.documents} text chunk(s)",
    )
    return 0


#: Chat engines that drop SYSTEM messages unless their config sets ``allow_system_prompts``.
SYSTEM_DROPPING_ENGINES = ("ovos-chat-openai-plugin",)


def system_prompt_warnings(persona: dict[str, Any], module: str, config: dict[str, Any]) -> list[str]:
    """Warnings for a persona whose chat engine would drop what the memory sends as SYSTEM text."""
    handlers = persona.get("handlers") or persona.get("solvers") or []
    warnings = []
    for engine in handlers if isinstance(handlers, list) else []:
        if engine not in SYSTEM_DROPPING_ENGINES:
            continue
        block = persona.get(engine) or {}
        if isinstance(block, dict) and block.get("allow_system_prompts") is True:
            continue
        sends_system = (
            config.get("inject_mode", "system") in ("system", "system_prompt", "tool")
            or bool(config.get("system_prompt"))
            or module.endswith(("-notes", "-sticky", "-composite"))
        )
        if sends_system:
            warnings.append(
                f'{engine} drops every SYSTEM message unless its block sets "allow_system_prompts": true;'
                " the system prompt, recalled memories and notes this memory sends as SYSTEM text would"
                " never reach the model (see docs/ovos-openai.md)"
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


def cmd_check(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.config import validate_config

    module, config = persona_memory(args.persona_file)
    name = plugin_name(module)
    cls = plugin_class(name)
    persona = read_persona(args.persona_file)
    warnings = handler_warnings(persona) + system_prompt_warnings(persona, name, config)
    if not _ours(cls):
        lines = [f"{args.persona_file}: {name} is not a plugin of ovos-memory-plugins; its config was not checked"]
        lines += [f"warning: {w}" for w in warnings]
        data = {"ok": True, "checked": False, "module": name, "problems": [], "warnings": warnings}
        output.emit(data, "\n".join(lines))
        return 0
    problems: list[str] = []
    try:
        validate_config(config, plugin=cls)
    except ConfigError as exc:
        problems = list(exc.problems)
    lines = []
    if problems:
        lines.append(f"{args.persona_file}: the {name} config has {len(problems)} problem(s):")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append(f"{args.persona_file}: the {name} config is valid")
    lines += [f"warning: {w}" for w in warnings]
    data = {"ok": not problems, "checked": True, "module": name, "problems": problems, "warnings": warnings}
    output.emit(data, "\n".join(lines))
    return 1 if problems else 0


# -- demo --------------------------------------------------------------------------------------

DEMO_SYSTEM = "You are Ada, a friendly voice assistant."
DEMO_CONVERSATION: list[tuple[str, str, str]] = [
    (
        "kitchen",
        "My sister Ingrid lives in Tromsø and her birthday is on the 14th of March.",
        "Noted: Ingrid, 14 March.",
    ),
    ("kitchen", "I am allergic to peanuts, so never suggest satay.", "Understood, no peanuts."),
    ("hallway", "The spare house key is under the blue flowerpot by the door.", "Got it, blue flowerpot."),
]
DEMO_QUESTIONS: list[tuple[str, str]] = [
    ("living-room", "When is my sister's birthday?"),
    ("kitchen", "Where did I leave the spare key?"),
]


def cmd_demo(args: argparse.Namespace, output: Output) -> int:
    from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

    started = time.perf_counter()
    name = plugin_name(args.module or DEFAULT_MODULE)
    cls = plugin_class(name)
    keep = args.root is not None
    root = Path(args.root) if keep else Path(tempfile.mkdtemp(prefix="ovos-memory-demo-"))
    config: dict[str, Any] = {"root": str(root), "system_prompt": DEMO_SYSTEM}
    lines = [f"ovos-memory demo: {name} in {root}" + ("" if keep else " (removed afterwards)"), ""]
    turns: list[dict[str, Any]] = []
    try:
        memory = cls(config=dict(config))
        try:
            for session, user, assistant in DEMO_CONVERSATION:
                memory.update_history(
                    [
                        AgentMessage(role=MessageRole.USER, content=user),
                        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
                    ],
                    session,
                )
                turns.append({"session_id": session, "user": user, "assistant": assistant})
                lines += [f"[{session}] user:      {user}", f"[{session}] assistant: {assistant}"]
        finally:
            memory.close()
        lines += ["", "-- restart: the memory is closed and built again from its files --", ""]
        recalled = []
        memory = cls(config=dict(config))
        try:
            for session, question in DEMO_QUESTIONS:
                messages = memory.build_conversation_context(question, session)
                shown = [{"role": str(getattr(m.role, "value", m.role)), "content": m.content} for m in messages]
                recalled.append({"session_id": session, "utterance": question, "messages": shown})
                lines.append(f'[{session}] next turn "{question}": the chat engine receives')
                for m in shown:
                    head = f"  {m['role']}: "
                    body = m["content"].splitlines() or [""]
                    lines.append(head + body[0])
                    lines += [" " * len(head) + more for more in body[1:]]
                lines.append("")
        finally:
            memory.close()
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    seconds = time.perf_counter() - started
    if keep:
        lines.append(f"done in {seconds:.2f} s, offline. Look inside: ovos-memory search --root {root} birthday")
    else:
        lines.append(f"done in {seconds:.2f} s, offline. Keep the files with: ovos-memory demo --root DIR")
    data = {"module": name, "root": str(root), "conversation": turns, "after_restart": recalled, "seconds": seconds}
    output.emit(data, "\n".join(lines))
    return 0


# -- the parser --------------------------------------------------------------------------------


def _target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("which memory")
    group.add_argument("--persona", metavar="FILE", help="a persona JSON file: its memory_module and that block")
    group.add_argument("--module", metavar="NAME", help=f"a memory plugin (default {DEFAULT_MODULE}; 'lexical' works)")
    group.add_argument("--config", metavar="JSON", help="config keys as a JSON object, or @file.json (merged on top)")
    group.add_argument("--root", metavar="DIR", help="the memory's folder (overrides the config's root)")
    group.add_argument("--namespace", metavar="NAME", help="the memory's namespace (overrides the config's)")


def build_parser() -> argparse.ArgumentParser:
    """The ``ovos-memory`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="ovos-memory",
        description="See, correct, wipe, move and check what an OVOS persona remembers.",
        epilog="Exit codes: 0 success, 1 failure, 2 bad usage. Docs: docs/cli.md",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts instead of text")
    # the same flag after the command; SUPPRESS keeps it from resetting a --json given before it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, help_text: str, func: Callable[[argparse.Namespace, Output], int]
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
        p.set_defaults(func=func)
        return p

    p = command("demo", "a scripted conversation, a restart and the recalled context (offline, seconds)", cmd_demo)
    p.add_argument("--module", metavar="NAME", help=f"the plugin to demonstrate (default {DEFAULT_MODULE})")
    p.add_argument("--root", metavar="DIR", help="keep the demo's files in DIR instead of a temporary folder")

    p = command("search", "the memories best matching a query", cmd_search)
    _target(p)
    p.add_argument("query")
    p.add_argument("--session", metavar="ID", help="only this session's memories")
    p.add_argument("-k", "--top-k", type=int, default=5, help="how many at most (default 5)")

    p = command("remember", "store a text (as a note, where the backend keeps notes)", cmd_remember)
    _target(p)
    p.add_argument("text", nargs="+")
    p.add_argument("--session", metavar="ID", default="default", help="the session it belongs to (default 'default')")
    p.add_argument("--meta", metavar="KEY=VALUE", action="append", default=[], help="metadata (value parsed as JSON)")
    p.add_argument("--document", action="store_true", help="store a plain document even if the backend keeps notes")

    p = command("forget", "delete documents by id, a session, every memory, or notes matching a text", cmd_forget)
    _target(p)
    p.add_argument("ids", nargs="*", metavar="ID", help="document ids (as search and export show them)")
    p.add_argument(
        "--session", metavar="ID", help="a whole session: its documents and history (with --match: the session asking)"
    )
    p.add_argument("--all", action="store_true", help="everything (needs --yes)")
    p.add_argument("--yes", action="store_true", help="confirm --all")
    p.add_argument("--match", metavar="TEXT", help="notes matching TEXT (notes and sticky backends)")

    p = command("notes", "show the curated notes, or edit them in $EDITOR", cmd_notes)
    _target(p)
    p.add_argument("--edit", action="store_true", help="open the notes in $VISUAL / $EDITOR and save the result")

    p = command("dream", "consolidate the notes now (notes backend; needs its language model)", cmd_dream)
    _target(p)

    p = command("stats", "figures about the memory: documents, history, sessions, files", cmd_stats)
    _target(p)

    p = command("serve", "the memory editor: a local web page to see, search, correct and wipe memories", cmd_serve)
    _target(p)
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --allow-remote)"
    )
    p.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    p.add_argument(
        "--allow-remote", action="store_true", help="allow a non-loopback --host (anyone with the URL can edit)"
    )
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME", help="another Host name to accept")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")

    p = command("export", "write every document as JSON Lines (to FILE or stdout)", cmd_export)
    _target(p)
    p.add_argument("file", nargs="?", help="the output file (default: stdout)")

    p = command("import", "store every document of an export (ids kept)", cmd_import)
    _target(p)
    p.add_argument("file", help="a JSON Lines export, or - for stdin")

    p = command("ingest", "feed transcripts and text files (or folders of them) into the memory", cmd_ingest)
    _target(p)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--session", metavar="ID", default="default", help="session id (default: each transcript's name)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = command("check", "validate a persona's memory config and say exactly what is wrong", cmd_check)
    p.add_argument("persona_file", metavar="persona.json")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ovos-memory``; return the exit code (0 success, 1 failure, 2 bad usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    output = Output(args.json)
    try:
        # Plugins and the libraries they import may print log lines on stdout (OVOS's logger
        # does); stdout belongs to the command's output, so they go to stderr meanwhile.
        with contextlib.redirect_stdout(output.err):
            return int(args.func(args, output))
    except (CommandError, OvosMemoryPluginError, ValueError, OSError) as exc:
        output.note(f"ovos-memory {args.command}: error: {exc}")
        return 1
    except KeyboardInterrupt:
        output.note("interrupted")
        return 130


def _run() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    _run()
