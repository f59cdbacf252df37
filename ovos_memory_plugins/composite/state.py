"""What the parts of :class:`~ovos_memory_plugins.composite.memory.CompositeMemory` share,
declared once: annotations only (no values, no behaviour), so each part type-checks alone and
the class that composes them (``memory.py``) sets and implements everything declared here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ovos_memory_plugins.composite.options import CompositeOptions
from ovos_memory_plugins.concurrency import DaemonPool
from ovos_memory_plugins.config import MemoryConfig
from ovos_memory_plugins.dates import Clock
from ovos_memory_plugins.llm import ChatLLM
from ovos_memory_plugins.protocols import Note
from ovos_memory_plugins.storage.seam import Storage

if TYPE_CHECKING:
    from ovos_memory_plugins.composite.members import Member

T = TypeVar("T")


class CompositeState:
    """The attributes and methods one part of the composite uses and another part (or
    ``memory.py``) provides. See :class:`~ovos_memory_plugins.composite.memory.CompositeMemory`."""

    clock: Clock
    settings: MemoryConfig
    options: CompositeOptions
    root: Path
    skipped: dict[str, str]
    members: dict[str, Any]
    storage: Storage | None
    _members: list[Member]
    _pool: DaemonPool
    _primary: Member | None
    _recorder: Member | None
    _llm: ChatLLM | None
    _expand: bool

    if TYPE_CHECKING:  # provided by memory.py or by another part

        @staticmethod
        def _member_class(module: str) -> type[Any] | None: ...

        # calls
        def _start(
            self, members: Iterable[Member], call: Callable[[Any], T], what: str
        ) -> list[tuple[Member, Future[T]]]: ...
        def _collect(
            self, started: Sequence[tuple[Member, Future[T]]], deadline: float, what: str
        ) -> list[tuple[Member, T]]: ...
        def _deadline(self) -> float: ...
        def _write(self, m: Member, call: Callable[[Any], Any]) -> Future[Any] | None: ...
        def _in_order(self, m: Member, call: Callable[[Any], T]) -> T: ...

        # notes
        def _copies_forgotten(self, source: str, note: Note) -> None: ...
