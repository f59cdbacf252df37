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

The package: this module holds the parser and :func:`main`; ``output`` the one-line errors,
``--json`` and warnings; ``opening`` which memory a command works on and how it is opened;
``commands`` search, remember, forget, notes, dream, serve and stats; ``transfer`` export,
import, ingest and migrate; ``check`` and ``demo`` their commands.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

from ovos_memory_plugins.cli.check import (
    chat_engine_warnings,
    cmd_check,
    extra_warnings,
    handler_warnings,
    server_problems,
)
from ovos_memory_plugins.cli.commands import (
    cmd_dream,
    cmd_forget,
    cmd_notes,
    cmd_remember,
    cmd_search,
    cmd_serve,
    cmd_stats,
)
from ovos_memory_plugins.cli.demo import cmd_demo
from ovos_memory_plugins.cli.opening import DEFAULT_MODULE, DOCS_URL, plugin_class, plugin_name, read_persona
from ovos_memory_plugins.cli.output import CommandError, Output, UsageError, command_logging
from ovos_memory_plugins.cli.transfer import cmd_export, cmd_import, cmd_ingest, cmd_migrate
from ovos_memory_plugins.errors import OvosMemoryPluginError

__all__ = [
    "COMMANDS",
    "DOCS_URL",
    "CommandError",
    "Output",
    "UsageError",
    "build_parser",
    "chat_engine_warnings",
    "extra_warnings",
    "handler_warnings",
    "main",
    "plugin_class",
    "plugin_name",
    "read_persona",
    "server_problems",
]

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
        with command_logging(output, debug), contextlib.redirect_stdout(output.err):
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


def run() -> NoReturn:
    """Run the command and exit with its code."""
    sys.exit(main())
