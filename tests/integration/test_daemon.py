"""The upload sensor under the real daemon, and the run-worker health check."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.events import EngineEventData
from dagster._core.launcher import WorkerStatus

from airwave_dagster.cli import launcher
from airwave_dagster.durability.run_launcher import AirwaveRunLauncher
from tests.support import lineups
from tests.support.dagster_dev import AIRWAVE, Dev, wait_for
from tests.support.probe_runs import probe_run

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.mark.plex
@pytest.mark.slow
def test_a_dropped_file_is_imported_by_the_daemon(fresh: Dev) -> None:
    inbox = Path(fresh.env["AIRWAVE_INBOX"])
    inbox.mkdir(parents=True, exist_ok=True)
    staging = inbox / ".upload.part"
    staging.write_text(json.dumps(lineups.genre_lineup(2, first_number=500)))
    # A broken file dropped with it: the tick that requests the good file's run must still
    # show the rejection where a person looks (issue 27, item 9).
    (inbox / "dropped-broken.json").write_text('{"version": 1, "channels": [')
    staging.rename(inbox / "dropped.json")  # how an uploader publishes a finished file

    def the_run() -> dg.DagsterRun | None:
        runs = fresh.instance.get_runs(
            filters=dg.RunsFilter(tags={"airwave/lineup": "dropped.json"})
        )
        return runs[0] if runs else None

    run = wait_for(the_run, 180, "the sensor to start a run", poll=1.0)
    assert run.tags["dagster/sensor_name"] == "lineup_upload_sensor"
    assert launcher.wait_for_run(fresh.instance, run.run_id).status == dg.DagsterRunStatus.SUCCESS
    wait_for(lambda: not (inbox / "dropped.json").exists(), 60, "the file to move to processed/")
    assert any(p.name.endswith("-dropped.json") for p in (inbox / "processed").iterdir())

    # The asset catalog: the daemon stored each outcome as an observation of `lineup_inbox`.
    records = fresh.instance.fetch_observations(dg.AssetKey("lineup_inbox"), limit=50).records
    outcomes = {
        r.asset_observation.metadata["file"].value: r.asset_observation.metadata
        for r in records
        if r.asset_observation is not None
    }
    assert outcomes["dropped.json"]["outcome"].value == "run requested"
    assert outcomes["dropped-broken.json"]["outcome"].value == "rejected"
    assert "dropped-broken.json" in outcomes["dropped-broken.json"]["reason"].value
    # And the CLI.
    listed = subprocess.run(
        [AIRWAVE, "inbox", "--json"], env=fresh.env, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    rejected = json.loads(listed.stdout)["rejected"]
    assert any(r["file"].endswith("-dropped-broken.json") for r in rejected), rejected
    assert any("dropped-broken.json" in r["reason"] for r in rejected)


def test_health_check_sees_a_dead_worker(dagster_instance) -> None:
    run = probe_run(dagster_instance, {"host": "localhost", "socket": "/x"})
    checker = AirwaveRunLauncher()
    checker.register_instance(dagster_instance)
    assert checker.check_run_worker_health(run).status == WorkerStatus.RUNNING  # no pid yet
    worker = subprocess.Popen(["sleep", "60"])
    dagster_instance.report_engine_event(
        f"Started process for run (pid: {worker.pid}).", run, EngineEventData.in_process(worker.pid)
    )
    assert checker.check_run_worker_health(run).status == WorkerStatus.RUNNING
    worker.kill()
    time.sleep(0.2)  # not reaped yet: a zombie counts as dead
    assert checker.check_run_worker_health(run).status == WorkerStatus.FAILED
    worker.wait()
    assert checker.check_run_worker_health(run).status == WorkerStatus.FAILED
    remote = probe_run(dagster_instance, {"host": "10.1.2.3", "port": 4000})
    assert checker.check_run_worker_health(remote).status == WorkerStatus.RUNNING
