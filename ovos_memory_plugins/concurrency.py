"""The one concurrency helper: a small pool of daemon threads, and waiting with a deadline.

Used wherever this package runs something beside the caller's thread: the composite calling
its members side by side (and each member's ordered writer), and the notes memory's background
digests and dreams.

Not :class:`concurrent.futures.ThreadPoolExecutor`: its workers are joined at interpreter exit,
so one call hung for good (a member blocked on a dead server) would keep the whole persona
service from exiting. :class:`DaemonPool` threads are daemons, start on demand and wait on a
queue; :meth:`DaemonPool.shutdown` never waits longer than it is told, leaving a hung call behind.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any, TypeVar

__all__ = ["DaemonPool", "wait_until"]

T = TypeVar("T")


class DaemonPool:
    """Up to ``max_workers`` daemon threads running submitted callables, oldest first.

    With ``max_workers=1`` the pool is an ordered writer: calls run one after the other, in the
    order they were submitted.
    """

    def __init__(self, name: str, max_workers: int) -> None:
        self.name = name
        self.max_workers = max(1, max_workers)
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._pending = 0
        self._closed = False

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on a pool thread; raises RuntimeError once the pool is shut down."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: the pool is shut down")
            if self._idle > 0:
                self._idle -= 1
            elif len(self._threads) < self.max_workers:
                worker = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads) + 1}", daemon=True)
                self._threads.append(worker)
                worker.start()
            self._pending += 1
            self._queue.put((future, fn))
        return future

    @property
    def pending(self) -> int:
        """Calls submitted and not finished yet (queued or running)."""
        with self._lock:
            return self._pending

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn = item
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn())
                    except BaseException as exc:  # handed to whoever waits on the future
                        future.set_exception(exc)
            finally:
                with self._lock:
                    self._pending -= 1
                    self._idle += 1

    def shutdown(self, *, cancel_pending: bool, join_timeout: float = 0.0) -> bool:
        """Stop taking calls; cancel the queued ones (or let them run first); wait at most
        ``join_timeout`` seconds in all for the threads to end (a hung call is left behind).
        Return whether every thread ended."""
        with self._lock:
            if self._closed:
                return not any(t.is_alive() for t in self._threads)
            self._closed = True
            threads = list(self._threads)
        if cancel_pending:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
                    with self._lock:
                        self._pending -= 1
        for _ in threads:
            self._queue.put(None)
        end = time.monotonic() + max(0.0, join_timeout)
        for worker in threads:
            worker.join(max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in threads)


def wait_until(futures: Iterable[Future[Any]], deadline: float) -> None:
    """Wait until every future is done or ``time.monotonic()`` reaches ``deadline``."""
    pending = [f for f in futures if not f.done()]
    if pending:
        wait_futures(pending, timeout=max(0.0, deadline - time.monotonic()))
