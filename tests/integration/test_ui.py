"""`airwave dev`: the Dagster UI serves the code location and launches runs with typed config."""

from __future__ import annotations

import json

import dagster as dg
import pytest
import yaml

from airwave_dagster.cli import launcher
from airwave_dagster.data import DEMO_LINEUP
from tests.support import lineups
from tests.support.channels import import_report
from tests.support.dagster_dev import LAUNCH, Dev

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]


SCHEMA = """
query Schema($selector: PipelineSelector!) {
  runConfigSchemaOrError(selector: $selector) {
    __typename
    ... on RunConfigSchema { rootDefaultYaml }
  }
}
"""
REPOSITORY = {"repositoryLocationName": "airwave", "repositoryName": "__repository__"}


def _launch(dev: Dev, run_config: dict) -> dict:
    """`launchRun` as the Launchpad sends it; the answer, whatever its type."""
    params = {"selector": {**REPOSITORY, "jobName": "import_lineup"}, "runConfigData": run_config}
    return dev.graphql(LAUNCH, {"params": params})["launchRun"]


def test_dev_starts_without_a_superseded_command(dev: Dev) -> None:
    # `dagster dev` warns on every start that it is superseded by `dg dev`; `airwave dev` runs
    # what `dg dev` runs, so the shared server's whole log (start to now) has no such warning.
    log = (dev.workdir / "dev.log").read_text(errors="replace")
    assert "Launching Dagster services" in log
    assert "supersede" not in log.lower(), log[-4000:]


def test_ui_launches_an_import_with_typed_config(fresh: Dev, store) -> None:
    config = {
        "lineup": {
            "inline": {
                "content": json.dumps(lineups.genre_lineup(2)),
                "name": "from-the-ui.json",
            }
        },
        "dry_run": True,
    }
    run_id = fresh.launch_run("import_lineup", {"ops": {"plan_import_lineup": {"config": config}}})
    finished = launcher.wait_for_run(fresh.instance, run_id)
    assert finished.status == dg.DagsterRunStatus.SUCCESS
    report = import_report(store, run_id)
    assert report["lineup_name"] == "from-the-ui.json"
    assert report["dry_run"] is True
    assert store.counts()["channels"] == 0


def test_a_config_without_exactly_one_lineup_is_refused_before_a_run_exists(fresh: Dev) -> None:
    before = fresh.instance.get_runs_count()

    answers = [
        _launch(fresh, {"ops": {"plan_import_lineup": {"config": config}}})
        for config in (
            {"dry_run": True},
            {"lineup": {}},
            {"lineup": {"file": {"path": "a.json"}, "inline": {"content": "{}"}}},
        )
    ]

    assert [a["__typename"] for a in answers] == ["RunConfigValidationInvalid"] * 3, answers
    messages = [" ".join(e["message"] for e in a["errors"]) for a in answers]
    assert 'Missing required config entry "lineup"' in messages[0]
    assert "Must specify a field" in messages[1]
    assert "You can only specify a single field" in messages[2]
    assert fresh.instance.get_runs_count() == before, "no run was created"


def test_the_launchpad_opens_on_a_dry_run_of_the_bundled_example(fresh: Dev, store) -> None:
    selector = {**REPOSITORY, "pipelineName": "import_lineup"}
    schema = fresh.graphql(SCHEMA, {"selector": selector})["runConfigSchemaOrError"]
    assert schema["__typename"] == "RunConfigSchema", schema
    # What the Launchpad puts in its editor when it opens the job.
    default = yaml.safe_load(schema["rootDefaultYaml"])
    assert default["ops"]["plan_import_lineup"]["config"] == {
        "dry_run": True,
        "lineup": {"file": {"path": str(DEMO_LINEUP)}},
    }

    launched = _launch(fresh, default)

    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    finished = launcher.wait_for_run(fresh.instance, run_id)
    assert finished.status == dg.DagsterRunStatus.SUCCESS
    report = import_report(store, run_id)
    assert report["dry_run"] is True
    assert report["lineup_name"] == str(DEMO_LINEUP)
    assert report["channels_failed"] == 0 and len(report["channels"]) == 14
    assert store.counts()["channels"] == 0


@pytest.mark.timeout(900)  # three CLI processes and a run; each CLI start is slow on a busy box
def test_cli_submits_through_the_running_webserver(fresh: Dev, tmp_path) -> None:
    code_server_log = fresh.workdir / "home" / "logs" / "code-server.log"
    before = code_server_log.stat().st_size if code_server_log.exists() else 0
    path = lineups.write(tmp_path, lineups.genre_lineup(1, first_number=500), "quick.json")

    started = fresh.airwave("import", str(path), "--dry-run")

    assert started.returncode == 0, started.stderr
    run_id = started.stdout.split()[-1]
    run = fresh.instance.get_run_by_id(run_id)
    assert run is not None and run.job_name == "import_lineup"
    # No code server of the CLI's own was started: the webserver's took the run.
    after = code_server_log.stat().st_size if code_server_log.exists() else 0
    assert after == before
    finished = launcher.wait_for_run(fresh.instance, run_id)
    assert finished.status == dg.DagsterRunStatus.SUCCESS

    missing = fresh.airwave("runs", "resume", "00000000-0000-0000-0000-000000000000")
    assert missing.returncode == 5, missing.stderr
    finished_already = fresh.airwave("runs", "resume", run_id)
    assert finished_already.returncode == 4, finished_already.stderr
    assert "nothing to resume" in finished_already.stderr
