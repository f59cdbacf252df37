"""The memory editor: a local web page to see, search, correct and wipe what a persona remembers.

Start it with ``ovos-memory serve`` or from Python::

    from ovos_memory_plugins.editor import serve
    serve({"memory_module": "ovos-memory-plugin-notes", "ovos-memory-plugin-notes": {...}})

It binds 127.0.0.1 on a free port and prints a URL carrying a per-run token; only that page,
on that address, can use the API (see :mod:`ovos_memory_plugins.editor.security`). Needs the
``editor`` extra: ``pip install 'ovos-memory-plugins[editor]'``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ovos_memory_plugins import loader
from ovos_memory_plugins.common import Closing
from ovos_memory_plugins.errors import BackendError

LOG = logging.getLogger(__name__)

__all__ = ["EditorServer", "load_memory", "make_app", "serve"]

try:
    import uvicorn

    from ovos_memory_plugins.editor.app import EditorApp, make_app
    from ovos_memory_plugins.editor.security import allowed_hosts_for, check_bind_host
except ImportError as _exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the memory editor needs FastAPI and uvicorn: pip install 'ovos-memory-plugins[editor]'"
    ) from _exc


def load_memory(config: dict[str, Any], plugin: str | None = None) -> Any:
    """Build a memory plugin from a persona JSON or from a plugin's own config block.

    Args:
        config: a persona (with ``memory_module`` and the block keyed by that name) or, with
            ``plugin``, the plugin's config block itself.
        plugin: the entry-point name (``"ovos-memory-plugin-notes"``); default: the persona's
            ``memory_module``.

    Raises :class:`~ovos_memory_plugins.errors.BackendError` when no plugin is named or installed.
    """
    if plugin is None:
        plugin = config.get("memory_module")
        if not isinstance(plugin, str) or not plugin:
            raise BackendError("the persona names no memory_module; pass the plugin name")
        config = config.get(plugin) or {}
    return loader.open_plugin(plugin, config)


class EditorServer(Closing):
    """The editor served by uvicorn, in the calling thread (:meth:`run`) or a background one.

    Args:
        memory: the memory plugin instance to edit.
        host: the address to bind; loopback only unless ``allow_remote``.
        port: the port; 0 picks a free one.
        allow_remote: serve on a non-loopback address (the page is then reachable from the
            network by whoever has the token).
        allowed_hosts: extra ``Host`` header values to accept (``name`` or ``name:port``), for a
            server reached under another name on purpose.
        token: the per-run token (default: a fresh random one).
        title: whose memory this is (a persona's name), shown as the page's title.

    Use as a context manager to serve in a background thread (tests, embedding)::

        with EditorServer(memory) as server:
            print(server.url)
    """

    def __init__(
        self,
        memory: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        allow_remote: bool = False,
        allowed_hosts: Iterable[str] = (),
        token: str | None = None,
        title: str | None = None,
    ) -> None:
        check_bind_host(host, allow_remote)
        self.memory = memory
        self.host = host
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind((host.strip("[]"), port))
            self.socket.listen(64)
        except OSError:
            self.socket.close()
            raise
        self.port: int = self.socket.getsockname()[1]
        self.editor: EditorApp = make_app(memory, token=token, title=title)
        self.editor.guard.set_allowed_hosts(allowed_hosts_for(host, self.port, allowed_hosts))
        config = uvicorn.Config(self.editor.app, log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def token(self) -> str:
        """The per-run token."""
        return self.editor.token

    @property
    def base_url(self) -> str:
        """``http://host:port`` (loopback servers use 127.0.0.1)."""
        host = self.host.strip("[]")
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The page's address with the token (in the fragment, so it is never sent or logged)."""
        return f"{self.base_url}/#token={self.token}"

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C), in the calling thread."""
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.socket.close()

    def start(self) -> EditorServer:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.run, name="ovos-memory-editor", daemon=True)
        self._thread.start()
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the editor server stopped while starting")
            self._thread.join(0.01)
        return self

    def stop(self) -> None:
        """Stop a server started with :meth:`start`."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self.socket.close()

    close = stop

    def __enter__(self) -> EditorServer:
        """Start serving (in a background thread) and return self; the block's end stops it."""
        return self.start()


def serve(
    memory_or_config: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    plugin: str | None = None,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    token: str | None = None,
    open_browser: bool = False,
    announce: Callable[[str], None] = print,
    title: str | None = None,
) -> None:
    """Serve the editor until interrupted (Ctrl-C returns normally).

    Args:
        memory_or_config: a memory plugin instance, or a persona JSON / plugin config (see
            :func:`load_memory`).
        host, port, allow_remote, allowed_hosts, token: see :class:`EditorServer`.
        plugin: the entry-point name when ``memory_or_config`` is a plugin's own config block.
        open_browser: open the page in the default browser.
        announce: called with the line giving the URL (default: ``print``).
        title: whose memory this is (a persona's name), shown as the page's title.
    """
    memory = load_memory(memory_or_config, plugin) if isinstance(memory_or_config, dict) else memory_or_config
    server = EditorServer(
        memory, host, port, allow_remote=allow_remote, allowed_hosts=allowed_hosts, token=token, title=title
    )
    who = server.editor.whose()
    where = f" ({who['where']})" if who["where"] != "RAM" else ""
    announce(f"memory editor for {who['label']}{where}: {server.url}  (Ctrl-C to stop)")
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how the editor is stopped
        server.run()
