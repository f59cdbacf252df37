"""The command's output: one line per error, ``--json`` for scripts, warnings once, progress."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any


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
def command_logging(output: Output, debug: bool) -> Iterator[None]:
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


def progress_bar(total: int, unit: str, output: Output, quiet: bool) -> Any:
    """A tqdm bar on stderr (redrawn on a terminal; off with ``--quiet`` or ``--json``)."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=output.err, disable=quiet or output.as_json, leave=True, delay=0.5)


# -- choosing the memory -----------------------------------------------------------------------
