"""A total deadline and a back-off around every call to another process or service.

:class:`CallGuard` runs one call (an HTTP request to an embedding server or a language model,
a plugin's method) in a worker thread and waits for it at most ``deadline_s`` seconds in all:
connecting, a server that never answers, or one that trickles its reply a byte at a time all
end at the deadline, not per read. A call that overruns is abandoned (its daemon thread ends
on its own when the socket times out or the server closes) and counts as a failure.

After a failure the guard backs off: for ``backoff_s`` seconds (doubling per consecutive
failure, capped at ``backoff_max_s``) calls fail at once with :class:`ServiceUnavailable`
without touching the service. So with a service dead or hung, a turn costs at most one
deadline once, and microseconds after that until the back-off ends; the first success
resets it.

A deadline bounds time, not bytes: a server that answers fast with a huge (or endless) body
would fill the process's memory within it (a 400 MB reply added ~850 MB), and an abandoned
call would go on reading. :func:`capped_http_client` is the HTTP client every ``openai``
client of the package is built with: it reads at most ``max_bytes`` of a response body (a
``Content-Length`` above it is refused before the body is read) and fails the request with
:class:`ResponseTooLarge` past it, so a reply costs at most about ``max_bytes`` of memory.

Exceptions (all :class:`~ovos_memory_plugins.errors.BackendError`)::

    BackendError
    ├── ServiceUnavailable      raised instead of calling, while backing off
    │   └── DeadlineExceeded    the call did not finish within the deadline
    └── ResponseTooLarge        a response body was longer than the client reads
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ovos_memory_plugins.errors import BackendError

__all__ = ["CallGuard", "DeadlineExceeded", "ResponseTooLarge", "ServiceUnavailable", "capped_http_client"]

T = TypeVar("T")

DEFAULT_BACKOFF_S = 5.0
DEFAULT_BACKOFF_MAX_S = 300.0


class ServiceUnavailable(BackendError):
    """The service failed recently; the call was not made (the guard is backing off)."""


class ResponseTooLarge(BackendError):
    """A service's response body was longer than :func:`capped_http_client` reads; the
    connection was closed there."""


def capped_http_client(max_bytes: int) -> Any:
    """An HTTP client for ``openai.OpenAI(http_client=...)`` that reads at most ``max_bytes``
    of any response body: a larger ``Content-Length`` is refused before the body is read, and
    a body that goes on past it (no length, chunked, endless) is cut there; both raise
    :class:`ResponseTooLarge` (the openai client reports it as a connection error, so the
    guard counts a failure and backs off). Otherwise it is the openai package's default client.
    """
    import openai

    client_class: Any = openai.DefaultHttpxClient
    # the HTTP library the openai package is built on (httpx, or a fork of it), for its transport
    http: Any = __import__(client_class.__mro__[1].__module__.split(".")[0])

    class _CappedStream(http.SyncByteStream):  # type: ignore[misc]  # a class of the HTTP library found at run time
        def __init__(self, inner: Any, where: str) -> None:
            self.inner = inner
            self.where = where

        def __iter__(self) -> Any:
            read = 0
            for chunk in self.inner:
                read += len(chunk)
                if read > max_bytes:
                    raise ResponseTooLarge(
                        f"the response of {self.where} is longer than {max_bytes:,} bytes; cut there"
                    )
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class _CappedTransport(http.BaseTransport):  # type: ignore[misc]  # a class of the HTTP library found at run time
        def __init__(self) -> None:
            self.inner = http.HTTPTransport()

        def handle_request(self, request: Any) -> Any:
            response = self.inner.handle_request(request)
            where = f"{request.url.scheme}://{request.url.host}:{request.url.port or ''}{request.url.path}"
            length = response.headers.get("content-length", "")
            if length.strip().isdigit() and int(length) > max_bytes:
                response.close()
                raise ResponseTooLarge(
                    f"the response of {where} announces {int(length):,} bytes; at most {max_bytes:,} are read"
                )
            response.stream = _CappedStream(response.stream, where)
            return response

        def close(self) -> None:
            self.inner.close()

    return client_class(transport=_CappedTransport())


class DeadlineExceeded(ServiceUnavailable):
    """The call did not finish within its total deadline (it was abandoned)."""


class CallGuard:
    """Deadline, back-off and counters for the calls to one service.

    Args:
        name: how log lines and errors name the service.
        deadline_s: the most one call may take, in total (> 0).
        backoff_s: the pause after a first failure; doubles per consecutive failure.
        backoff_max_s: the longest pause.
        clock: a monotonic clock (a test seam).
    """

    def __init__(
        self,
        name: str,
        deadline_s: float,
        *,
        backoff_s: float = DEFAULT_BACKOFF_S,
        backoff_max_s: float = DEFAULT_BACKOFF_MAX_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0, not {deadline_s!r}")
        self.name = name
        self.deadline_s = float(deadline_s)
        self.backoff_s = max(0.0, float(backoff_s))
        self.backoff_max_s = max(self.backoff_s, float(backoff_max_s))
        self._clock = clock
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._retry_at = 0.0
        self.counters = {"calls": 0, "failures": 0, "timeouts": 0, "skipped": 0}
        self.last_error = ""

    @property
    def backing_off(self) -> bool:
        """Whether calls fail at once right now because of recent failures."""
        with self._lock:
            return self._clock() < self._retry_at

    def retry_in(self) -> float:
        """Seconds until calls are made again (0 when they are)."""
        with self._lock:
            return max(0.0, self._retry_at - self._clock())

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` within the deadline; raises on failure, timeout or back-off.

        An exception from ``fn`` is re-raised as is (after being counted); a timeout raises
        :class:`DeadlineExceeded`; a call during the back-off raises :class:`ServiceUnavailable`.
        """
        with self._lock:
            wait = self._retry_at - self._clock()
            if wait > 0:
                self.counters["skipped"] += 1
                raise ServiceUnavailable(
                    f"{self.name}: not called, backing off {wait:.1f} s more after: {self.last_error}"
                )
            self.counters["calls"] += 1
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=run, name=f"ovos-memory-call:{self.name}", daemon=True)
        worker.start()
        worker.join(self.deadline_s)
        if worker.is_alive():
            error: BaseException = DeadlineExceeded(f"{self.name}: no complete answer within {self.deadline_s:g} s")
            self._failed(error, timeout=True)
            raise error
        if "error" in box:
            self._failed(box["error"], timeout=False)
            raise box["error"]
        with self._lock:
            self._consecutive_failures = 0
            self._retry_at = 0.0
        return box["value"]  # type: ignore[no-any-return]

    def _failed(self, error: BaseException, timeout: bool) -> None:
        with self._lock:
            self.counters["failures"] += 1
            if timeout:
                self.counters["timeouts"] += 1
            self._consecutive_failures += 1
            pause = min(self.backoff_s * 2 ** (self._consecutive_failures - 1), self.backoff_max_s)
            self._retry_at = self._clock() + pause
            self.last_error = str(error) or type(error).__name__

    def stats(self) -> dict[str, Any]:
        """Calls made, failures (timeouts among them), calls skipped while backing off."""
        with self._lock:
            out: dict[str, Any] = dict(self.counters)
            out["backing_off"] = self._clock() < self._retry_at
            return out
