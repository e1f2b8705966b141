"""`airwave runs show` lists a run's asset check results from its event log.

The run and its check evaluations are written straight to the CLI tests' Dagster storage, as
the report step of an `ai_lineup` run writes them; no run is executed.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import dagster as dg
import pytest
from click.testing import CliRunner

from airwave_dagster.cli import main
from tests.support.instances import instance_on

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def checked_run(cli_dagster_url: str) -> Iterator[str]:
    """A finished `ai_lineup` run whose report step logged a passed and a failed check."""
    run_id = str(uuid.uuid4())
    with instance_on(cli_dagster_url) as instance:
        instance.add_run(
            dg.DagsterRun(job_name="ai_lineup", run_id=run_id, status=dg.DagsterRunStatus.SUCCESS)
        )
        for name, passed, severity, description in (
            ("overlap_bound", True, dg.AssetCheckSeverity.WARN, "max Jaccard 0.29 is below 0.50"),
            (
                "audience_ceiling",
                False,
                dg.AssetCheckSeverity.ERROR,
                "2 item(s) above the ceiling on kids/family channels",
            ),
        ):
            instance.report_dagster_event(
                dg.DagsterEvent(
                    event_type_value=dg.DagsterEventType.ASSET_CHECK_EVALUATION.value,
                    job_name="ai_lineup",
                    step_key="report_lineup",
                    event_specific_data=dg.AssetCheckEvaluation(
                        asset_key=dg.AssetKey("ai_lineup"),
                        check_name=name,
                        passed=passed,
                        severity=severity,
                        description=description,
                        blocking=severity == dg.AssetCheckSeverity.ERROR,
                    ),
                ),
                run_id=run_id,
            )
        yield run_id


def _airwave(env: dict[str, str], *args: str):
    os.environ.clear()
    os.environ.update(env)
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_runs_show_lists_the_runs_asset_checks(cli_env, checked_run, restored_environ) -> None:
    shown = _airwave(cli_env, "runs", "show", checked_run)
    as_json = _airwave(cli_env, "runs", "show", checked_run, "--json")

    assert shown.exit_code == 0, shown.stderr
    assert "asset checks:" in shown.stdout
    assert "ai_lineup:overlap_bound  passed  WARN  max Jaccard 0.29 is below 0.50" in shown.stdout
    assert (
        "ai_lineup:audience_ceiling  FAILED  ERROR  2 item(s) above the ceiling on kids/family "
        "channels"
    ) in shown.stdout
    assert json.loads(as_json.stdout)["checks"] == [
        {
            "asset": "ai_lineup",
            "check": "overlap_bound",
            "passed": True,
            "severity": "WARN",
            "description": "max Jaccard 0.29 is below 0.50",
        },
        {
            "asset": "ai_lineup",
            "check": "audience_ceiling",
            "passed": False,
            "severity": "ERROR",
            "description": "2 item(s) above the ceiling on kids/family channels",
        },
    ]
