"""Permissions files for tests: the three-principal policy, the current OS user mapped to one."""

from __future__ import annotations

import getpass
from pathlib import Path

import yaml

from airwave_dagster.domain.permissions import SERVICE_PRINCIPAL

THREE_ROLES: dict[str, list[str]] = {
    "viewer": [],
    "launcher": ["runs:start:*", "runs:resume:*", "runs:cancel:*"],
    # Approving continues the run tree, which is a resume of the gated job.
    "approver": [
        "approvals:resolve:*",
        "runs:resume:ai_lineup",
        "runs:resume:rollback_lineup",
    ],
    "admin": ["*"],
}
THREE_PRINCIPALS: dict[str, list[str]] = {
    "viewer": ["viewer"],
    "launcher": ["launcher"],
    "approver": ["approver"],
    "admin": ["admin"],
    SERVICE_PRINCIPAL: ["launcher"],
}


def write_policy(
    directory: Path,
    *,
    roles: dict[str, list[str]],
    principals: dict[str, list[str]],
    identities: dict[str, str] | None = None,
    name: str = "permissions.yaml",
) -> Path:
    """Write a permissions file and return its path."""
    path = directory / name
    document: dict[str, object] = {"roles": roles, "principals": principals}
    if identities:
        document["identities"] = identities
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def write_three_principals(directory: Path, acting_as: str) -> Path:
    """The viewer/launcher/approver policy with this process's OS user acting as `acting_as`.

    The CLI's identity is its OS user and cannot be chosen; tests switch principals by remapping
    that user in the file, exactly as an operator would.
    """
    return write_policy(
        directory,
        roles=THREE_ROLES,
        principals=THREE_PRINCIPALS,
        identities={getpass.getuser(): acting_as},
    )
