"""`airwave lineup rollback` as a subprocess: the gate, the approval, the restored export."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from airwave_dagster.cli import main
from airwave_dagster.cli.ai_lineup import rollback_run_config

pytestmark = [pytest.mark.postgres, pytest.mark.plex]

AIRWAVE = str(Path(sys.executable).parent / "airwave")


def _airwave(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_lineup_stays_a_command_and_gains_a_rollback_verb() -> None:
    listing = CliRunner().invoke(main, ["lineup", "--help"], terminal_width=100).output
    assert "--confirm-wipe" in listing and "rollback" in listing
    verb = CliRunner().invoke(main, ["lineup", "rollback", "--help"], terminal_width=100).output
    assert "RUN_ID" in verb and "--confirm" in verb and "--approval" in verb


def test_rollback_run_config_addresses_the_plan_step() -> None:
    config = rollback_run_config("abc", approval="required", confirm=True)
    assert config["ops"]["plan_rollback"]["config"] == {
        "run_id": "abc",
        "approval": "required",
        "confirm": True,
    }


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_rollback_through_the_cli_restores_the_export(
    synced, store, cli_env, tmp_path: Path
) -> None:
    lineup = ("lineup", "--provider", "offline", "--limit", "2", "--confirm-wipe", "--wait")
    first = _airwave(cli_env, *lineup)
    assert first.returncode == 0, first.stderr
    before = _airwave(cli_env, "export")
    second = _airwave(cli_env, *lineup, "--json")
    assert second.returncode == 0, second.stderr
    run_id = json.loads(second.stdout.strip().splitlines()[-1])["run_id"]

    stopped = _airwave(cli_env, "lineup", "rollback", run_id, "--wait")

    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert "approval approve-rollback:v1" in stopped.stdout
    rollback_run = stopped.stderr.split("`airwave approve ")[1].split("`")[0]
    approved = _airwave(cli_env, "approve", rollback_run, "--wait")
    # The exchange, kept for a reader (pytest's --basetemp keeps it after the run).
    (tmp_path / "transcript.txt").write_text(
        "\n".join((stopped.stdout, stopped.stderr, approved.stdout, approved.stderr))
    )
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert "rolled back the AI lineup of run" in approved.stdout
    after = _airwave(cli_env, "export")
    assert _without_stamp(after.stdout) == _without_stamp(before.stdout)


def _without_stamp(export: str) -> dict[str, object]:
    payload = json.loads(export)
    payload.pop("exportedAt", None)
    return payload
