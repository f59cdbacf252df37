"""Calling a composite's members: side by side on the query pool, each bounded by
``member_timeout_ms`` (a member that raises or is late is skipped, logged once, and left out
while its late call runs), and each member's ordered writer (its writes queued in order, a
bounded queue; a call after the queued writes, as a forget makes). Part of
:class:`~ovos_memory_plugins.composite.memory.CompositeMemory`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from ovos_memory_plugins.composite.members import Member
from ovos_memory_plugins.composite.state import CompositeState
from ovos_memory_plugins.concurrency import wait_until

LOG = logging.getLogger("ovos_memory_plugins.composite")  # the name it had before the split

__all__ = ["FORGET_TIMEOUT_S", "MAX_PENDING_WRITES", "CallsMixin"]

T = TypeVar("T")


#: Writes queued for one member beyond which new ones are dropped (a member that hangs on writes).
MAX_PENDING_WRITES = 256
#: Seconds a delete or forget waits for one member (behind its queued writes) before it reports
#: that member as not done.
FORGET_TIMEOUT_S = 30.0


class CallsMixin(CompositeState):
    """Calling the members on the pool and on their ordered writers."""

    def _start(self, members: Iterable[Member], call: Callable[[Any], T], what: str) -> list[tuple[Member, Future[T]]]:
        """Submit ``call(instance)`` for each member not still busy with a late call."""
        started: list[tuple[Member, Future[T]]] = []
        for m in members:
            with m.lock:
                busy = m.late > 0
            if busy:
                LOG.debug("CompositeMemory: member %r still busy with a late call; skipped for %s", m.name, what)
                continue
            try:
                started.append((m, self._pool.submit(functools.partial(call, m.instance))))
            except RuntimeError:  # the pool is shut down (closed memory)
                break
        return started

    def _collect(
        self, started: Sequence[tuple[Member, Future[T]]], deadline: float, what: str
    ) -> list[tuple[Member, T]]:
        """The results that arrived by ``deadline``; failures and late members are logged and left out."""
        wait_until((f for _, f in started), deadline)
        out: list[tuple[Member, T]] = []
        for m, future in started:
            if not future.done():
                with m.lock:
                    m.late += 1
                future.add_done_callback(functools.partial(_settle_late, m))
                limit = self.options.member_timeout_ms
                _report(m, f"took longer than {limit} ms for {what}; skipped for this turn")
                continue
            exc = future.exception()
            if exc is not None:
                _report(m, f"raised {type(exc).__name__} for {what}: {exc}; skipped for this turn")
                continue
            if m.failing:
                m.failing = False
                LOG.info("CompositeMemory: member %r answers again", m.name)
            out.append((m, future.result()))
        return out

    def _deadline(self) -> float:
        return time.monotonic() + float(self.options.member_timeout_ms) / 1000.0

    def _write(self, m: Member, call: Callable[[Any], Any]) -> Future[Any] | None:
        with m.lock:
            if m.pending_writes >= MAX_PENDING_WRITES:
                LOG.error(
                    "CompositeMemory: member %r has %d writes pending; this one is dropped", m.name, m.pending_writes
                )
                return None
            m.pending_writes += 1

        def run() -> Any:
            try:
                return call(m.instance)
            finally:
                with m.lock:
                    m.pending_writes -= 1
                    if m.pending_writes == 0:
                        m.write_late = False

        try:
            return m.writer.submit(run)
        except RuntimeError:
            with m.lock:
                m.pending_writes -= 1
            return None

    def _in_order(self, m: Member, call: Callable[[Any], T]) -> T:
        """``call(member)`` after the member's queued writes (on its ordered writer, so a turn
        recorded just before is forgotten too), waited for up to :data:`FORGET_TIMEOUT_S`;
        raises what the call raised, or TimeoutError when the member is still busy."""
        future = self._write(m, call)
        if future is None:  # closed, or too many writes pending: call it here, now
            return call(m.instance)
        try:
            result: T = future.result(timeout=FORGET_TIMEOUT_S)
        except FutureTimeout:
            raise TimeoutError(
                f"still busy after {FORGET_TIMEOUT_S:g} s (the forget runs when its queued writes are done)"
            ) from None
        return result


def _report(m: Member, problem: str) -> None:
    """A WARNING when a member starts failing, DEBUG while it keeps failing (no log flood)."""
    level = logging.DEBUG if m.failing else logging.WARNING
    m.failing = True
    LOG.log(level, "CompositeMemory: member %r %s", m.name, problem)


def _settle_late(m: Member, _future: Future[Any]) -> None:
    with m.lock:
        m.late -= 1
