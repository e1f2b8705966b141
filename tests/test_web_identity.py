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


POLICY = {
    "roles": {
        "viewer": [],
        "launcher": ["runs:start:import_lineup", "runs:cancel:*"],
        "automation": ["automation:toggle"],
        "admin": ["*"],
    },
    "principals": {
        "vera": ["viewer"],
        "lena": ["launcher"],
        "otto": ["automation"],
        "ada": ["admin"],
    },
}


def _map(principal: str) -> dict[str, bool]:
    from airwave_dagster.domain.permissions import parse_policy
    from airwave_dagster.permissions import JOB_PERMISSIONS
    from airwave_dagster.webapp.context import granted

    policy = parse_policy(POLICY, source="test")
    return {k: v.enabled for k, v in granted(policy, principal, JOB_PERMISSIONS).items()}


def test_the_dagster_permission_map_follows_the_principal() -> None:
    from dagster._core.workspace.permissions import Permissions as P

    vera, lena, otto, ada = (_map(p) for p in ("vera", "lena", "otto", "ada"))
    assert {k for k, on in vera.items() if on} == {P.RELOAD_REPOSITORY_LOCATION, P.RELOAD_WORKSPACE}
    assert lena[P.LAUNCH_PIPELINE_EXECUTION] and lena[P.TERMINATE_PIPELINE_EXECUTION]
    assert not lena[P.LAUNCH_PIPELINE_REEXECUTION] and not lena[P.START_SCHEDULE]
    assert not lena[P.LAUNCH_PARTITION_BACKFILL] and not lena[P.WIPE_ASSETS]
    assert otto[P.START_SCHEDULE] and otto[P.EDIT_SENSOR] and not otto[P.LAUNCH_PIPELINE_EXECUTION]
    assert all(on for k, on in ada.items() if k != P.EDIT_APP_MANAGED_COMPONENTS)
    assert _map("nobody-known") == vera


def test_a_refusal_names_the_principal_and_what_it_lacks() -> None:
    from airwave_dagster.domain.permissions import parse_policy
    from airwave_dagster.permissions import JOB_PERMISSIONS
    from airwave_dagster.webapp.context import granted

    result = granted(parse_policy(POLICY, source="t"), "vera", JOB_PERMISSIONS)
    reason = result["launch_pipeline_execution"].disabled_reason or ""
    assert reason.startswith("vera does not hold runs:start:")
    assert "runs:start:import_lineup" in reason
