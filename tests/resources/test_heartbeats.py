"""Run-worker heartbeats: written around a real run's orchestration, judged by the health check.

A worker on another machine cannot be checked by pid; the run launcher judges it by its last
beat instead (resources/heartbeats.py, airwave_dagster/durability/run_launcher.py).
"""

import os
import time
from typing import Any

import dagster as dg
import pytest
from dagster import OpExecutionContext
from dagster._core.launcher import WorkerStatus

from airwave_dagster.durability.run_launcher import AirwaveRunLauncher
from ops.steps import fan_out_executor
from resources import heartbeats
from tests.support.probe_runs import probe_run


@dg.op
def report_beat(context: OpExecutionContext) -> dict[str, Any]:
    """What the step sees of its run worker's heartbeat, from its own process."""
    beat = heartbeats.last_beat(context.instance, context.run_id)
    assert beat is not None, "no heartbeat while the run is orchestrated"
    return {"beat_pid": beat.pid, "step_pid": os.getpid(), "ended": beat.ended, "at": beat.at}


@dg.job(executor_def=fan_out_executor(2, start_method="spawn"))
def beating_job() -> None:
    report_beat()


@pytest.mark.parametrize("executor", ["threads", "multiprocess"])
def test_a_real_run_beats_from_its_run_worker_and_ends_its_beat(
    dagster_instance: dg.DagsterInstance, executor: str
) -> None:
    started = time.time()
    config = {"execution": {"config": {"executor": executor}}}
    with dg.execute_job(
        dg.reconstructable(beating_job), instance=dagster_instance, run_config=config
    ) as result:
        assert result.success
        seen = result.output_for_node("report_beat")
        run_id = result.run_id
    # The orchestrating process (here the test's own: execute_job) beats; under multiprocess the
    # step process, which built the same executor, does not; under threads the step is a thread
    # of the orchestrating process.
    assert seen["beat_pid"] == os.getpid()
    assert (seen["step_pid"] == os.getpid()) is (executor == "threads"), seen
    assert seen["ended"] is False and seen["at"] >= started - 1
    last = heartbeats.last_beat(dagster_instance, run_id)
    assert last is not None and last.ended and last.pid == os.getpid()


def test_a_worker_elsewhere_is_judged_by_its_heartbeat(
    dagster_instance: dg.DagsterInstance,
) -> None:
    run = probe_run(dagster_instance, {"host": "10.1.2.3", "port": 4000})
    checker = AirwaveRunLauncher()
    checker.register_instance(dagster_instance)
    unknown = checker.check_run_worker_health(run)
    assert unknown.status == WorkerStatus.RUNNING and "no heartbeat yet" in (unknown.msg or "")

    heartbeats.record(dagster_instance, run.run_id)
    assert checker.check_run_worker_health(run).status == WorkerStatus.RUNNING

    heartbeats.record(dagster_instance, run.run_id, at=time.time() - 120)
    stale = checker.check_run_worker_health(run)
    assert stale.status == WorkerStatus.FAILED
    assert f"run worker {os.getpid()} on " in (stale.msg or "")
    assert "no heartbeat for 120 s" in (stale.msg or "")


def test_a_beat_within_the_window_is_fresh_and_one_past_it_is_not() -> None:
    beat = heartbeats.Beat(host="worker-2", pid=7, at=1000.0)
    assert beat.stale_reason(1000.0 + heartbeats.STALE_SECONDS) is None
    reason = beat.stale_reason(1000.0 + heartbeats.STALE_SECONDS + 1)
    assert reason is not None and "worker 7 on worker-2" in reason
