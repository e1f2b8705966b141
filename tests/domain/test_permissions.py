"""Tests for the permissions policy: parsing, wildcards, identities and the errors it names."""

from __future__ import annotations

import pytest

from airwave_dagster.domain.permissions import (
    DEFAULT_POLICY,
    LOCAL_OPERATOR,
    SERVICE_PRINCIPAL,
    PermissionsError,
    matches,
    parse_policy,
)

SOURCE = "/etc/airwave/permissions.yaml"
DOCUMENT = {
    "roles": {
        "viewer": [],
        "launcher": ["runs:start:import_lineup", "runs:resume:import_lineup", "runs:cancel:*"],
        "approver": ["approvals:resolve:*"],
        "admin": ["*"],
    },
    "principals": {
        "alice": ["admin"],
        "bob": ["launcher"],
        "carol": ["approver", "viewer"],
        "dave": ["viewer"],
        SERVICE_PRINCIPAL: ["launcher"],
    },
    "identities": {"root": "alice"},
}


def refusal(data: object) -> str:
    with pytest.raises(PermissionsError) as caught:
        parse_policy(data, source=SOURCE)
    return str(caught.value)


@pytest.mark.parametrize(
    ("pattern", "permission", "expected"),
    [
        ("*", "runs:start:ai_lineup", True),
        ("*", "automation:toggle", True),
        ("runs:*", "runs:cancel:ai_lineup", True),
        ("runs:*", "approvals:resolve:ai_lineup", False),
        ("runs:start:*", "runs:start:ai_lineup", True),
        ("runs:start:*", "runs:resume:ai_lineup", False),
        ("runs:start:import_lineup", "runs:start:import_lineup", True),
        ("runs:start:import_lineup", "runs:start:import_lineup_x", False),
        # A wildcard segment is a whole segment: `runs:*` is no prefix of `runsx:...`.
        ("runs:*", "runsx:start:a", False),
    ],
)
def test_wildcards_cover_whole_trailing_segments(
    pattern: str, permission: str, expected: bool
) -> None:
    assert matches(pattern, permission) is expected


def test_principals_hold_what_their_roles_grant() -> None:
    policy = parse_policy(DOCUMENT, source=SOURCE)
    assert policy.allows("alice", "automation:toggle")
    assert policy.allows("bob", "runs:start:import_lineup")
    assert policy.allows("bob", "runs:cancel:ai_lineup")
    assert not policy.allows("bob", "runs:start:ai_lineup")
    assert not policy.allows("bob", "approvals:resolve:ai_lineup")
    assert policy.allows("carol", "approvals:resolve:rollback_lineup")
    assert not policy.allows("carol", "runs:start:import_lineup")
    assert not policy.allows("dave", "runs:start:import_lineup")
    assert policy.allows(SERVICE_PRINCIPAL, "runs:start:import_lineup")
    assert not policy.allows("nobody", "runs:start:import_lineup")


def test_identities_map_user_names_and_unknown_names_are_nobody() -> None:
    policy = parse_policy(DOCUMENT, source=SOURCE)
    assert policy.principal_for("root") == "alice"
    assert policy.principal_for("bob") == "bob"  # a principal's own name
    assert policy.principal_for("mallory") is None


def test_a_star_identity_maps_every_other_name() -> None:
    policy = parse_policy({**DOCUMENT, "identities": {"*": "dave", "root": "alice"}}, source=SOURCE)
    assert policy.principal_for("mallory") == "dave"
    assert policy.principal_for("root") == "alice"
    assert policy.principal_for("bob") == "bob"


def test_the_default_policy_lets_the_local_operator_and_the_daemon_do_everything() -> None:
    assert DEFAULT_POLICY.principal_for("anyone-at-all") == LOCAL_OPERATOR
    for principal in (LOCAL_OPERATOR, SERVICE_PRINCIPAL):
        assert DEFAULT_POLICY.allows(principal, "runs:start:import_lineup")
        assert DEFAULT_POLICY.allows(principal, "approvals:resolve:ai_lineup")
        assert DEFAULT_POLICY.allows(principal, "automation:toggle")
    DEFAULT_POLICY.require_holdable(["runs:start:anything"], where="test")


def test_an_unknown_role_names_the_file_and_the_key_path() -> None:
    message = refusal({**DOCUMENT, "principals": {"bob": ["launcher", "launcer"]}})
    assert SOURCE in message
    assert "principals.bob[1]: unknown role 'launcer'" in message
    assert "admin, approver, launcher, viewer" in message


def test_every_problem_is_listed_with_its_path() -> None:
    message = refusal(
        {
            "roles": {"x": "runs:start:a", "y": ["runs:begin:a", "runs:*:a", "", "automation:*"]},
            "principals": {"p": ["x"], "q": "x"},
            "identities": {"u": "ghost"},
            "extra": 1,
        }
    )
    assert "roles.x: expected a list of names, got str" in message
    assert "roles.y[0]: 'runs:begin:a' is not a permission" in message
    assert "roles.y[1]: 'runs:*:a' may use `*` only as its whole last segment" in message
    assert "roles.y[2]: expected a non-empty string" in message
    assert "roles.y[3]" not in message  # `automation:*` is a fine wildcard
    assert "principals.q: expected a list of names" in message
    assert "identities.u: 'ghost' is not a principal" in message
    assert "'extra': unknown key" in message


@pytest.mark.parametrize("data", [None, [], "roles: x"])
def test_a_document_that_is_no_mapping_is_refused(data: object) -> None:
    assert "expected a mapping" in refusal(data)


def test_a_document_without_principals_is_refused() -> None:
    assert "principals: missing" in refusal({"roles": {"admin": ["*"]}})


def test_a_declared_permission_no_role_grants_is_named() -> None:
    policy = parse_policy(DOCUMENT, source=SOURCE)
    policy.require_holdable(["runs:start:import_lineup", "approvals:resolve:ai_lineup"], where="x")
    no_admin = parse_policy(
        {
            "roles": {"launcher": ["runs:start:*"]},
            "principals": {"bob": ["launcher"]},
        },
        source=SOURCE,
    )
    with pytest.raises(PermissionsError) as caught:
        no_admin.require_holdable(
            ["runs:start:a", "runs:cancel:a", "automation:toggle"], where="code location 'airwave'"
        )
    message = str(caught.value)
    assert SOURCE in message
    assert "code location 'airwave': permission 'runs:cancel:a' is declared" in message
    assert "'automation:toggle'" in message
    assert "'runs:start:a'" not in message


def test_a_role_permission_naming_no_declared_job_is_named() -> None:
    policy = parse_policy(
        {
            "roles": {"launcher": ["runs:start:import_lineup", "runs:start:import_lineups"]},
            "principals": {"bob": ["launcher"]},
        },
        source=SOURCE,
    )
    with pytest.raises(PermissionsError) as caught:
        policy.require_declared(["runs:start:import_lineup"], where="code location 'airwave'")
    message = str(caught.value)
    assert "roles.launcher[1]: 'runs:start:import_lineups' matches no permission" in message
    assert "roles.launcher[0]" not in message
