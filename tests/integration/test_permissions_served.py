"""A served `airwave dev` under a permissions file: the CLI through it, the sensor, the queue.

An `airwave dev` of its own (its own Dagster schema, so no other test's daemon takes its runs)
with the viewer/launcher/approver policy of tests/support/permissions.py. The CLI finds it and
submits over GraphQL; the run queue in the webserver and in the daemon applies the policy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster import settings
from airwave_dagster.cli import launcher
from airwave_dagster.domain.permissions import SERVICE_PRINCIPAL
from airwave_dagster.run_tags import LINEUP_TAG, STARTED_BY_TAG
from tests.support import lineups
from tests.support.dagster_dev import LAUNCH, Dev, _pause_background_automation, serving, wait_for
from tests.support.homes import user_env
from tests.support.permissions import write_three_principals
from tests.support.schemas import empty_project_tables, fresh_schema

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

SCHEMA = "dagster_permissions"


@pytest.fixture
def served(database_url: str, plex_emulator: Any, tmp_path: Path) -> Iterator[Dev]:
    """`airwave dev` with AIRWAVE_PERMISSIONS set; the OS user starts as the launcher."""
    empty_project_tables(database_url)
    policy = write_three_principals(tmp_path, "launcher")
    env = user_env(
        tmp_path,
        **{
            settings.DAGSTER_PG_URL_ENV: fresh_schema(database_url, SCHEMA),
            settings.PLEX_URL_ENV: plex_emulator.url,
            settings.PLEX_TOKEN_ENV: plex_emulator.token,
            settings.INBOX_ENV: str(tmp_path / "inbox"),
            settings.PERMISSIONS_ENV: str(policy),
        },
    )
    with serving(env, Path(env["DAGSTER_HOME"]), tmp_path, load_seconds=180) as running:
        _pause_background_automation(running)  # only the upload sensor keeps running
        yield running


def _by_lineup(dev: Dev, name: str) -> dg.DagsterRun | None:
    runs = dev.instance.get_runs(filters=dg.RunsFilter(tags={LINEUP_TAG: name}))
    return runs[0] if runs else None


@pytest.mark.timeout(900)
def test_cli_sensor_and_queue_under_the_permissions_file(served: Dev, tmp_path: Path) -> None:
    lineup = tmp_path / "mine.json"
    lineup.write_text(json.dumps(lineups.genre_lineup(1, first_number=700)))

    # The CLI's check comes first, through a webserver too: nothing reaches the server.
    write_three_principals(tmp_path, "viewer")
    refused = served.airwave("import", str(lineup), "--dry-run")
    assert refused.returncode == 4, refused.stderr
    assert "permission denied: viewer may not runs:start:import_lineup" in refused.stderr
    assert _by_lineup(served, "mine.json") is None

    # The launcher's import goes through the webserver's queue, which trusts the CLI's stamp
    # (no proxy header on a loopback request).
    write_three_principals(tmp_path, "launcher")
    started = served.airwave("import", str(lineup), "--dry-run", "--wait")
    assert started.returncode == 0, started.stderr
    run = _by_lineup(served, "mine.json")
    assert run is not None and run.tags[STARTED_BY_TAG] == "launcher"
    assert run.tags["user"] == "launcher"

    # A file dropped into the inbox: the daemon's sensor starts the run, as airwave-daemon.
    inbox = Path(served.env[settings.INBOX_ENV])
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / ".part").write_text(json.dumps(lineups.genre_lineup(1, first_number=710)))
    (inbox / ".part").rename(inbox / "dropped.json")

    def submitted() -> dg.DagsterRun | None:
        # The daemon creates the run, then submits it: the queue stamps who it was on submit.
        run = _by_lineup(served, "dropped.json")
        return run if run is not None and run.status != dg.DagsterRunStatus.NOT_STARTED else None

    dropped = wait_for(submitted, 180, "the sensor's run", 1.0)
    assert dropped.tags["dagster/sensor_name"] == "lineup_upload_sensor"
    assert dropped.tags[STARTED_BY_TAG] == SERVICE_PRINCIPAL
    finished = launcher.wait_for_run(served.instance, dropped.run_id)
    assert finished.status == dg.DagsterRunStatus.SUCCESS

    # A submission the CLI never checked (a script on this machine stamping the viewer): the
    # webserver's queue refuses it, and the run is failed without ever starting.
    config = {"lineup": {"inline": {"content": lineup.read_text(), "name": "script.json"}}}
    answer = served.graphql(
        LAUNCH,
        {
            "params": {
                "selector": {
                    "repositoryLocationName": "airwave",
                    "repositoryName": "__repository__",
                    "jobName": "import_lineup",
                },
                "runConfigData": {"ops": {"plan_import_lineup": {"config": config}}},
                "executionMetadata": {
                    "tags": [
                        {"key": STARTED_BY_TAG, "value": "viewer"},
                        {"key": LINEUP_TAG, "value": "script.json"},
                    ]
                },
            }
        },
    )["launchRun"]
    assert answer["__typename"] == "PythonError", answer
    assert "viewer may not runs:start:import_lineup" in answer["message"]
    script_run = _by_lineup(served, "script.json")
    assert script_run is not None and script_run.status == dg.DagsterRunStatus.FAILURE
    record = served.instance.get_run_record_by_id(script_run.run_id)
    assert record is not None and record.start_time is None
