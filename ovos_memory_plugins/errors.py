"""The package's exceptions, all under one base.

::

    OvosMemoryPluginError              anything this package raises on purpose
     ├── ConfigError (ValueError)      a config key is unknown or has a bad value
     ├── StorageError                  a database or file could not be read or written
     │    └── CorruptFileError         a file on disk could not be parsed; it is left untouched
     ├── BackendError                  a backend (plugin, member) is missing or breaks its contract
     │    └── IncompleteForgetError    some parts of a memory forgot, others failed (named)
     └── LLMError                      a language-model call failed or returned nothing usable

The public conversation methods (``build_conversation_context``, ``update_history``) never let
any of these escape: they log them and degrade. Direct calls (``store``, ``search``, the CLI)
raise them.
"""

from __future__ import annotations


class OvosMemoryPluginError(Exception):
    """Base class of every exception raised on purpose by ovos-memory-plugins."""


class ConfigError(OvosMemoryPluginError, ValueError):
    """A config key is unknown or has a bad value.

    ``problems`` holds one line per problem, each naming the key, the value and what is accepted.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid memory config:\n  " + "\n  ".join(self.problems))


class StorageError(OvosMemoryPluginError):
    """A database or file could not be read or written."""


class CorruptFileError(StorageError):
    """A file on disk could not be parsed. It is reported and left untouched, never overwritten."""


class BackendError(OvosMemoryPluginError):
    """A backend or composite member is missing, failed to load, or breaks its contract."""


class LLMError(OvosMemoryPluginError):
    """A language-model call failed, timed out, or returned a reply that could not be used."""


class IncompleteForgetError(BackendError):
    """A delete or forget that reached some parts of a memory (a composite's members) but not all.

    The parts that could forget did; the text may still be kept where it failed. ``done`` is
    what the call would have returned (how many documents or notes went where it worked);
    ``failures`` names each part that failed, with the reason.
    """

    def __init__(self, what: str, done: int, failures: dict[str, str]) -> None:
        self.done = int(done)
        self.failures = dict(failures)
        where = "; ".join(f"{name}: {why}" for name, why in self.failures.items())
        super().__init__(
            f"{what} did not reach every part of the memory; it may still be kept by {where} "
            f"({self.done} forgotten where it worked)"
        )
