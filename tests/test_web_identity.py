"""The identity middleware's rules: whose header is believed, what is refused, what is stripped."""

from __future__ import annotations

import asyncio
from ipaddress import ip_network
from typing import Any

import pytest

from airwave_dagster.webapp.identity import (
    ANONYMOUS,
    IdentityMiddleware,
    IdentityRules,
    Refused,
)

USERS = {"alice": "alice", "root": "alice", "bob": "bob"}


def _rules(*proxies: str) -> IdentityRules:
    return IdentityRules(
        proxies=[ip_network(p, strict=False) for p in proxies],
        identity_header="Remote-User",
        principal_header="X-Airwave-Principal",
        principal_for=USERS.get,
        local_operator="local-operator",
    )


def _headers(**values: str) -> list[tuple[bytes, bytes]]:
    return [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in values.items()]


def test_the_trusted_proxy_names_the_user_and_the_policy_maps_it() -> None:
    rules = _rules("127.0.0.3", "10.0.0.0/24")
    assert rules.principal("127.0.0.3", _headers(Remote_User="bob")) == "bob"
    assert rules.principal("10.0.0.7", _headers(Remote_User="root")) == "alice"


@pytest.mark.parametrize(
    ("client", "headers", "why"),
    [
        ("127.0.0.1", {"Remote_User": "alice"}, "only from a trusted proxy"),
        ("127.0.0.1", {"X_Airwave_Principal": "alice"}, "only from a trusted proxy"),
        ("127.0.0.3", {}, "no Remote-User"),
        ("127.0.0.3", {"Remote_User": "mallory"}, "'mallory' is not in the permissions file"),
        (
            "127.0.0.3",
            {"Remote_User": "bob", "X_Airwave_Principal": "alice"},
            "X-Airwave-Principal",
        ),
    ],
)
def test_forged_missing_or_unknown_identities_are_refused(
    client: str, headers: dict[str, str], why: str
) -> None:
    with pytest.raises(Refused, match=why):
        _rules("127.0.0.3").principal(client, _headers(**headers))


def test_two_identity_headers_from_the_proxy_are_refused() -> None:
    headers = _headers(Remote_User="bob") + _headers(Remote_User="alice")
    with pytest.raises(Refused, match="2 Remote-User"):
        _rules("127.0.0.3").principal("127.0.0.3", headers)


def test_without_a_proxy_every_request_is_the_local_operator_and_headers_are_refused() -> None:
    rules = _rules()
    assert rules.principal("127.0.0.1", []) == "local-operator"
    with pytest.raises(Refused):
        rules.principal("127.0.0.1", _headers(Remote_User="alice"))


def test_a_direct_request_without_identity_is_anonymous_when_a_proxy_is_configured() -> None:
    assert _rules("127.0.0.3").principal("127.0.0.1", []) == ANONYMOUS


def _call(rules: IdentityRules, scope: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    seen: list[Any] = []
    sent: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["headers"])

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(IdentityMiddleware(app, rules)(scope, receive, send))
    return seen, sent


def test_the_middleware_replaces_the_principal_header_with_its_own() -> None:
    scope = {
        "type": "http",
        "client": ("127.0.0.3", 5000),
        "headers": _headers(Remote_User="root", Accept="*/*"),
    }
    seen, sent = _call(_rules("127.0.0.3"), scope)
    assert sent == []
    assert seen == [
        [(b"remote-user", b"root"), (b"accept", b"*/*"), (b"x-airwave-principal", b"alice")]
    ]


def test_the_middleware_answers_a_refusal_with_403_and_never_calls_the_app() -> None:
    scope = {
        "type": "http",
        "client": ("127.0.0.2", 5000),
        "headers": _headers(Remote_User="alice"),
    }
    seen, sent = _call(_rules("127.0.0.3"), scope)
    assert seen == []
    assert sent[0]["status"] == 403
    assert b"only from a trusted proxy" in sent[1]["body"]
