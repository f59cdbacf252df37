"""The editor's guards: loopback-only binding, Host and Origin checks, the per-run token.

The editor shows and changes everything a persona remembers, so it is reachable only from the
machine it runs on, and only by the page it served:

* :func:`check_bind_host` refuses any address but loopback unless ``allow_remote`` is set.
* :class:`GuardMiddleware` answers 403 to a request whose ``Host`` is not the address the
  server is bound to (a DNS-rebinding page names its own host there), whose ``Origin`` is
  another site (a cross-site form or fetch), or whose ``Sec-Fetch-Site`` says ``cross-site``;
  and 401 to an API call without the per-run token in the ``X-Editor-Token`` header. A
  cross-site page can neither read the token nor set that header without a CORS preflight,
  which the editor never grants.
* Every response carries a strict Content-Security-Policy (scripts only from the page's own
  origin, no inline script), ``nosniff``, ``no-referrer`` and no-store caching.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

__all__ = [
    "TOKEN_HEADER",
    "GuardMiddleware",
    "allowed_hosts_for",
    "check_bind_host",
    "is_loopback",
    "new_token",
]

#: The header every API call carries the per-run token in.
TOKEN_HEADER = "x-editor-token"

#: Paths that need no token (the page itself and the OpenAPI description hold no memory).
PUBLIC_PATHS = frozenset({"/", "/index.html", "/api/openapi.json", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    """A fresh random token (32 bytes of entropy, URL-safe)."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only reaches this machine."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind_host(host: str, allow_remote: bool = False) -> None:
    """Raise ``ValueError`` unless ``host`` is loopback or ``allow_remote`` is set."""
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"refusing to serve the memory editor on {host!r}: it shows everything the persona "
            "remembers, so it binds to 127.0.0.1 only; pass allow_remote=True "
            "(`--allow-remote`) to serve on another interface"
        )


def _host_with_port(host: str, port: int) -> str:
    host = host.strip("[]")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{host.lower()}:{port}"


def allowed_hosts_for(bind_host: str, port: int, extra: Iterable[str] = ()) -> set[str]:
    """The ``Host`` header values accepted for a server bound to ``bind_host:port``.

    Loopback servers accept ``127.0.0.1``, ``localhost`` and ``[::1]`` with the port. ``extra``
    adds names (with or without a port) for a server exposed on purpose.
    """
    names = {bind_host}
    if is_loopback(bind_host):
        names |= {"127.0.0.1", "localhost", "::1"}
    out = {_host_with_port(n, port) for n in names}
    for name in extra:
        name = name.lower()
        out.add(name if name.rsplit(":", 1)[-1].isdigit() and not name.endswith("]") else _host_with_port(name, port))
    return out


class GuardMiddleware:
    """ASGI middleware applying the Host, Origin, fetch-site and token checks.

    Args:
        app: the application to guard.
        token: the per-run token API calls must carry.
        allowed_hosts: accepted ``Host`` values, each ``name:port``. Set it (or call
            :meth:`set_allowed_hosts`) once the port is known; an empty set refuses everything.
    """

    def __init__(self, app: ASGIApp, token: str, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.token = token
        self.allowed_hosts: set[str] = set(allowed_hosts)

    def set_allowed_hosts(self, hosts: Iterable[str]) -> None:
        """Replace the accepted ``Host`` values."""
        self.allowed_hosts = set(hosts)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why the request must be refused (status, reason), or None when it may pass."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "").lower()
        if host not in self.allowed_hosts:
            return 403, f"Host {host!r} is not this editor's address"
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in {f"http://{h}" for h in self.allowed_hosts}:
            return 403, f"Origin {origin!r} is not this editor's page"
        if headers.get("sec-fetch-site") == "cross-site":
            return 403, "cross-site requests are refused"
        path = scope.get("path", "")
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            return None
        given = headers.get(TOKEN_HEADER, "")
        if not secrets.compare_digest(given.encode("utf-8", "replace"), self.token.encode()):
            return 401, f"missing or wrong {TOKEN_HEADER} header (open the URL the server printed)"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if refused is not None:
            status, reason = refused
            body = json.dumps({"detail": reason}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json"), *_SECURITY_HEADERS],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in _SECURITY_HEADERS if k not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


_SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
