"""One command recovers any crash: an `airwave import` killed whole, with no daemon to notice.

The README's main path is `airwave import FILE` without `airwave dev`. These tests run it as a
user would (the CLI in its own session, its own DAGSTER_HOME and AIRWAVE_HOME), SIGKILL every
process of it mid fan-out — the CLI, its code server, the run worker and the step processes — and
then recover with one command: `airwave runs resume`, the same `airwave import` again, or `airwave
runs cancel` (which must answer in seconds). Each case then asserts the exactly-once end state.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import dagster as dg
import pytest

from tests.support import lineups
from tests.support.dagster_dev import wait_for
from tests.support.standalone import (
    CHANNELS,
    airwave,
    assert_exactly_once,
    build_keys,
    claims_held,
    descendants,
    kill_import_mid_fan_out,
    start_waiting_import,
)

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]


def test_runs_resume_of_a_dead_started_run_fails_it_and_finishes_it(
    alone: dict[str, Any], clean_db: str
) -> None:
    run_id, _, done, in_flight = kill_import_mid_fan_out(alone)

    resumed = airwave(alone["env"], "runs", "resume", run_id, "--wait", "--json")

    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "SUCCESS"
    parent = alone["instance"].get_run_by_id(run_id)
    assert parent.status == dg.DagsterRunStatus.FAILURE
    assert parent.tags.get("dagster/will_retry") == "false", "a daemon must not resume it again"
    planned = sorted(c["number"] for c in lineups.genre_lineup(CHANNELS)["channels"])
    assert sorted(c["number"] for c in outcome["report"]["channels"]) == planned
    assert_exactly_once(clean_db, [run_id, outcome["run_id"]], done, in_flight)


def test_the_same_import_again_resumes_the_dead_run(alone: dict[str, Any], clean_db: str) -> None:
    run_id, path, done, in_flight = kill_import_mid_fan_out(alone)

    again = airwave(alone["env"], "import", str(path), "--json")

    assert again.returncode == 0, again.stderr
    outcome = json.loads(again.stdout)
    assert outcome["status"] == "SUCCESS"
    assert outcome["run_id"] != run_id
    assert alone["instance"].get_run_by_id(outcome["run_id"]).parent_run_id == run_id
    assert f"resuming it as run {outcome['run_id']}" in again.stderr
    assert_exactly_once(clean_db, [run_id, outcome["run_id"]], done, in_flight)
    # The key now names the resume: a third start returns it instead of starting anything.
    third = airwave(alone["env"], "import", str(path))
    assert third.returncode == 0, third.stderr
    assert f"existing run {outcome['run_id']}" in third.stdout


def test_cancel_of_a_run_whose_processes_are_gone_answers_in_seconds(
    alone: dict[str, Any], clean_db: str
) -> None:
    run_id, _, done, in_flight = kill_import_mid_fan_out(alone)
    held = claims_held(clean_db, run_id)

    started = time.monotonic()
    canceled = airwave(alone["env"], "runs", "cancel", run_id, "--json")
    elapsed = time.monotonic() - started

    assert canceled.returncode == 0, canceled.stderr
    outcome = json.loads(canceled.stdout)
    assert outcome["status"] == "CANCELED"
    # The CLI's own start-up is most of it (8-27 s measured, the longer with the rest of the
    # suite sharing two cores); waiting for the vanished worker, the bug, took 60 s and more.
    assert elapsed < 45, f"cancel took {elapsed:.1f} s"
    assert outcome["claims_released"] == held
    assert claims_held(clean_db, run_id) == 0
    resumed = airwave(alone["env"], "runs", "resume", run_id, "--wait", "--json")
    assert resumed.returncode == 0, resumed.stderr
    child = json.loads(resumed.stdout)["run_id"]
    assert_exactly_once(clean_db, [run_id, child], done, in_flight)


def test_a_waiting_import_whose_worker_vanished_ends_in_seconds(
    alone: dict[str, Any], clean_db: str
) -> None:
    """The CLI's code server and run worker die, the CLI itself lives on: nothing would ever end
    the run (no daemon; the code server that would notice is gone), so the waiting CLI checks
    the worker itself and marks the run FAILURE instead of waiting for good. Also the end of a
    run worker that died while Postgres was down and could not record the run's failure."""
    instance = alone["instance"]
    cli, _, log = start_waiting_import(alone["env"], alone["tmp"], "vanish.json")
    try:
        run = wait_for(lambda: next(iter(instance.get_runs(limit=1)), None), 120, "the run")

        def in_flight() -> bool:
            assert cli.poll() is None, log.read_text(errors="replace")[-3000:]
            done = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_SUCCESS)
            started = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_START)
            return bool(started - done)

        wait_for(in_flight, 180, "builds in flight", poll=0.05)
        for pid in descendants(cli.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        killed = time.monotonic()
        exit_code = cli.wait(timeout=90)
        elapsed = time.monotonic() - killed
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait(timeout=30)

    output = log.read_text(errors="replace")
    assert exit_code == 1, output[-3000:]
    failed = instance.get_run_by_id(run.run_id)
    assert failed.status == dg.DagsterRunStatus.FAILURE
    assert failed.tags.get("dagster/will_retry") == "false", "a daemon must not resume it again"
    assert "marked FAILURE by the airwave CLI" in output, output[-3000:]
    # One health check every 10 s, after the CLI's own reads of the run.
    assert elapsed < 60, f"the CLI took {elapsed:.0f} s to notice"
