"""`airwave` commands under a permissions file: refused ones exit 4 having written nothing.

The policy has three people (viewer, launcher, approver) and the daemon. The CLI's identity is
its OS user, which a test cannot change; each step remaps that user in the file to the principal
it acts as, as an operator would (docs/security.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airwave_dagster.settings import PERMISSIONS_ENV
from resources import tables as t
from resources.stores.approvals import ApprovalStore
from tests.support.permissions import write_three_principals

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

AIRWAVE = str(Path(sys.executable).parent / "airwave")
LINEUP = ("lineup", "--provider", "offline", "--limit", "1", "--approval", "required", "--wait")


def _airwave(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _run_ids(env: dict[str, str]) -> set[str]:
    listed = _airwave(env, "runs", "list", "--limit", "200", "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["run_id"] for row in json.loads(listed.stdout)}


def _show(env: dict[str, str], run_id: str) -> dict[str, Any]:
    shown = _airwave(env, "runs", "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return dict(json.loads(shown.stdout))


def _interrupts(store: Any) -> list[Any]:
    with store.engine.connect() as conn:
        return list(conn.execute(sa.select(t.interrupt)).all())


@pytest.mark.timeout(900)
def test_start_approve_and_cancel_follow_the_permissions_file(
    synced: str, store: Any, cli_env: dict[str, str], tmp_path: Path
) -> None:
    policy_dir = tmp_path / "policy"
    policy_dir.mkdir()
    env = {**cli_env, PERMISSIONS_ENV: str(policy_dir / "permissions.yaml")}

    def acting_as(principal: str) -> None:
        write_three_principals(policy_dir, principal)

    # The viewer may not start a lineup: exit 4, one line naming both, no run, no interrupt.
    acting_as("viewer")
    before = _run_ids(env)
    refused = _airwave(env, *LINEUP)
    assert refused.returncode == 4, refused.stderr
    assert "permission denied: viewer may not runs:start:ai_lineup" in refused.stderr
    assert _run_ids(env) == before and not _interrupts(store)

    # The launcher may: the run stops at its gate (exit 3) and names who started it.
    acting_as("launcher")
    stopped = _airwave(env, *LINEUP)
    assert stopped.returncode == 3, stopped.stderr
    (started,) = _run_ids(env) - before
    gate_run = _show(env, started)
    assert gate_run["started_by"] == "launcher"
    listed = _airwave(env, "runs", "list")
    assert "launcher" in listed.stdout and "by" in listed.stdout

    # The launcher may not answer the gate, nor the viewer cancel it: the interrupt stays open.
    for principal, args, permission in (
        ("launcher", ("approve", started), "approvals:resolve:ai_lineup"),
        ("launcher", ("reject", started, "--reason", "no"), "approvals:resolve:ai_lineup"),
        ("viewer", ("runs", "cancel", started), "runs:cancel:ai_lineup"),
    ):
        acting_as(principal)
        answer = _airwave(env, *args)
        assert answer.returncode == 4, answer.stderr
        assert f"permission denied: {principal} may not {permission}" in answer.stderr
        (interrupt,) = _interrupts(store)
        assert interrupt.status == "open" and interrupt.resolved_by is None
    assert _show(env, started) == gate_run  # nothing canceled, tagged or resumed

    # The approver may: the interrupt records the approver, who also started the continuation.
    acting_as("approver")
    approved = _airwave(env, "approve", started, "--wait")
    assert approved.returncode == 0, approved.stderr
    resolved = ApprovalStore(store.engine).find(started)
    assert resolved is not None and resolved.status == "approved"
    assert resolved.resolved_by == "approver"
    assert resolved.continuation_run_id is not None
    continuation = _show(env, resolved.continuation_run_id)
    assert continuation["started_by"] == "approver" and continuation["status"] == "SUCCESS"
