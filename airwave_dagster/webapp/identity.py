"""Who sent a web request: the ASGI middleware in front of Dagster's webserver app.

Dagster OSS authenticates nobody; a reverse proxy does (docs/security.md). The proxy names the
user it authenticated in one header (`AIRWAVE_IDENTITY_HEADER`, default `Remote-User`), and that
header is believed only on a connection from a configured proxy address
(`AIRWAVE_TRUSTED_PROXIES`): anyone else could write it. So a request is

- from a trusted proxy with the header: the policy's principal for that user (an unknown user is
  refused: the proxy let in someone the permissions file does not name);
- from a trusted proxy without the header: refused (the proxy did not authenticate it);
- from any other address carrying the header or `X-Airwave-Principal`: refused as forged;
- from any other address without them: with no proxy configured, the local operator (the server
  binds loopback, the single-user setup); with proxies configured, `ANONYMOUS`, who may read and
  nothing else (the supervisor's health checks are such requests).

The middleware removes every incoming `X-Airwave-Principal` and writes its own: the request
context (`airwave_dagster.webapp.context`) and the run coordinator read the principal there.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network, ip_address
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ANONYMOUS = "anonymous"
"""A direct request (not through the proxy) when proxies are configured: may read, not act."""


class Refused(Exception):
    """A request the server will not serve; the message says why (sent as the 403 body)."""


@dataclass(frozen=True)
class IdentityRules:
    """What the middleware believes: the proxies, their header, and the user -> principal map."""

    proxies: Sequence[IPv4Network | IPv6Network]
    identity_header: str
    principal_header: str
    principal_for: Callable[[str], str | None]
    local_operator: str

    def principal(self, client: str | None, headers: Sequence[tuple[bytes, bytes]]) -> str:
        """The principal of a request from `client` with `headers`; `Refused` when it may not be.

        Args:
            client: The peer address of the connection (no X-Forwarded-For is read).
            headers: The raw ASGI headers (lower-case names).
        """
        identity_name = self.identity_header.lower().encode()
        principal_name = self.principal_header.lower().encode()
        users = [
            value.decode("latin-1").strip() for name, value in headers if name == identity_name
        ]
        forged = any(name == principal_name for name, _ in headers)
        if self._trusted(client):
            if forged:
                raise Refused(f"the proxy passed a client's {self.principal_header} header on")
            if len(users) != 1 or not users[0]:
                raise Refused(
                    f"the trusted proxy sent {len(users) or 'no'} {self.identity_header} "
                    "header(s): it must authenticate every request and name exactly one user"
                )
            principal = self.principal_for(users[0])
            if principal is None:
                raise Refused(f"user {users[0]!r} is not in the permissions file")
            return principal
        if users or forged:
            raise Refused(
                f"identity headers ({self.identity_header}, {self.principal_header}) are accepted "
                f"only from a trusted proxy (AIRWAVE_TRUSTED_PROXIES), not from {client}"
            )
        return self.local_operator if not self.proxies else ANONYMOUS

    def _trusted(self, client: str | None) -> bool:
        if client is None or not self.proxies:
            return False
        try:
            address = ip_address(client)
        except ValueError:
            return False
        return any(address in network for network in self.proxies)


class IdentityMiddleware:
    """Sets the principal header on every HTTP and WebSocket request, or refuses it (403)."""

    def __init__(self, app: ASGIApp, rules: IdentityRules) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        headers = list(scope.get("headers") or [])
        try:
            principal = self.rules.principal(client[0] if client else None, headers)
        except Refused as refusal:
            await _refuse(scope, send, str(refusal))
            return
        principal_name = self.rules.principal_header.lower().encode()
        scope = dict(scope)
        scope["headers"] = [(name, value) for name, value in headers if name != principal_name] + [
            (principal_name, principal.encode())
        ]
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, send: Send, reason: str) -> None:
    if scope["type"] == "websocket":
        # Closing before accepting answers the handshake with HTTP 403.
        await send({"type": "websocket.close", "code": 1008, "reason": reason[:120]})
        return
    body = json.dumps({"error": f"refused: {reason}"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
