"""Crash matrix: kill -9 a launched `import_lineup` run at several points, then resume it.

Every case asserts the same end state: every planned channel exists exactly once, enabled; no
claim is left; each channel's expensive work (a claim acquired, then its pool resolved) happened
once — except where the test killed the very process doing it; and the run tree ends SUCCESS with
a complete report.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from typing import Any

import dagster as dg
import pytest

from airwave_dagster.cli import launcher
from airwave_dagster.durability.run_launcher import worker_pid
from ops.lineup_import.job import IMPORT_CONCURRENCY
from tests.support import lineups
from tests.support.dagster_dev import REEXECUTE, Dev, wait_for
from tests.support.homes import query
from tests.support.standalone import CHANNELS_WITH_CLAIMS, claim_ledger

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

CHANNELS = 16
"""Four builds run at once: at a kill after two are done, at least half of these never started
(with 8, a loaded machine's worker had dispatched them all before its STEP_START events showed)."""
NO_AUTO_RESUME = {"dagster/max_retries": "0"}


def _lineup() -> dict[str, Any]:
    return lineups.genre_lineup(CHANNELS)


def _events(dev: Dev, run_id: str, kind: dg.DagsterEventType) -> list[Any]:
    return [
        record.dagster_event
        for record in dev.instance.all_logs(run_id, of_type=kind)
        if record.dagster_event is not None
    ]


def _build_keys(dev: Dev, run_id: str, kind: dg.DagsterEventType) -> set[str]:
    return {
        e.step_key
        for e in _events(dev, run_id, kind)
        if e.step_key and e.step_key.startswith("build_channel[")
    }


def _kill_worker(dev: Dev, run_id: str) -> int:
    pid = wait_for(lambda: worker_pid(dev.instance, run_id), 60, "the run worker's pid")
    os.kill(pid, signal.SIGKILL)
    return int(pid)


def _status(dev: Dev, run_id: str) -> str:
    run = dev.instance.get_run_by_id(run_id)
    return run.status.value if run else "MISSING"


def _wait_failed(dev: Dev, run_id: str) -> None:
    wait_for(lambda: _status(dev, run_id) == "FAILURE", 90, f"run {run_id} to be marked FAILURE")


def _assert_complete(dev: Dev, database_url: str, root_run_id: str, *, killed: int = 0) -> None:
    tree = launcher.run_tree(dev.instance, root_run_id)
    run_ids = [r.run_id for r in tree]
    final = max(tree, key=lambda r: dev.instance.get_run_record_by_id(r.run_id).create_timestamp)
    assert final.status == dg.DagsterRunStatus.SUCCESS, [(r.run_id, r.status) for r in tree]
    channels = query(database_url, CHANNELS_WITH_CLAIMS + " ORDER BY c.number")
    work = claim_ledger(database_url, run_ids)
    planned = sorted(c["number"] for c in _lineup()["channels"])
    assert [row.number for row in channels] == planned, "every planned channel exactly once"
    assert all(row.enabled for row in channels)
    assert all(row.claim_run_id is None for row in channels), "no claim left behind"
    assert sorted(work) == planned, "every channel's work was started"
    repeated = {number: count for number, count in work.items() if count > 1}
    logging.getLogger(__name__).warning(
        "crash matrix: expected %d channels, present %d, duplicated builds %d (%s), runs %d",
        len(planned),
        len(channels),
        sum(count - 1 for count in repeated.values()),
        repeated,
        len(run_ids),
    )
    assert sum(count - 1 for count in repeated.values()) <= killed, repeated
    # Step outputs live in Postgres only: nothing under the instance's local storage.
    local = dev.home / "storage"
    assert not [p for p in local.rglob("*") if p.is_file()] if local.exists() else True
    report = launcher.follow(dev.instance, root_run_id)
    from resources.io_manager import stored_report

    stored = stored_report(dev.instance, report.run_id, database_url)
    assert stored is not None
    assert sorted(c["number"] for c in stored["channels"]) == planned


@pytest.mark.parametrize("executor", ["threads", "multiprocess"])
def test_worker_killed_mid_fan_out_is_resumed_automatically(
    fresh: Dev, database_url: str, executor: str
) -> None:
    """kill -9 of the run worker; the daemon fails the run and resumes it.

    On multiprocess the in-flight builds' step processes outlive it and finish; on threads they
    die with it, and the resume takes over their claims once they go stale: only those builds
    (at most the bound) may have started their work twice.
    """
    run_id = fresh.launch_import(_lineup(), executor=executor)

    def in_flight() -> bool:
        done = _build_keys(fresh, run_id, dg.DagsterEventType.STEP_SUCCESS)
        started = _build_keys(fresh, run_id, dg.DagsterEventType.STEP_START)
        return len(done) >= 2 and bool(started - done)

    wait_for(in_flight, 120, "two builds done and more in flight", poll=0.05)
    done_at_kill = _build_keys(fresh, run_id, dg.DagsterEventType.STEP_SUCCESS)
    _kill_worker(fresh, run_id)
    _wait_failed(fresh, run_id)
    # The daemon's run retries resume it (complete resume, through the instance class).
    child = wait_for(
        lambda: next(
            (r for r in launcher.run_tree(fresh.instance, run_id) if r.parent_run_id == run_id),
            None,
        ),
        120,
        "the automatic resume",
    )
    assert child.tags.get("dagster/retry_number") == "1"
    # dagster#20925: mapped steps that never started in the crashed run are part of the resume.
    planned = {f"build_channel[ch_{c['number']}]" for c in _lineup()["channels"]}
    never_started = planned - _build_keys(fresh, run_id, dg.DagsterEventType.STEP_START)
    assert never_started, "the kill came too late to leave builds unstarted"
    assert never_started <= set(child.step_keys_to_execute or [])
    final = launcher.follow(fresh.instance, run_id)
    assert final.status == dg.DagsterRunStatus.SUCCESS
    # Builds that had finished were replayed from their stored outputs, not executed again.
    assert not (_build_keys(fresh, child.run_id, dg.DagsterEventType.STEP_START) & done_at_kill)
    _assert_complete(
        fresh, database_url, run_id, killed=IMPORT_CONCURRENCY if executor == "threads" else 0
    )


@pytest.mark.parametrize(
    ("point", "via", "executor"),
    [
        ("before_fan_out", "ui", "threads"),
        # The report step is a process of its own here, whose start this test waits for; on
        # threads the report is done within milliseconds of its start, before any kill lands.
        ("during_report", "cli", "multiprocess"),
    ],
)
def test_worker_killed_then_resumed_by_hand(
    fresh: Dev, database_url: str, point: str, via: str, executor: str
) -> None:
    run_id = fresh.launch_import(_lineup(), tags=NO_AUTO_RESUME, executor=executor)
    if point == "before_fan_out":
        wait_for(
            lambda: any(
                e.step_key == "create_packages"
                for e in _events(fresh, run_id, dg.DagsterEventType.STEP_START)
            ),
            120,
            "create_packages to start",
            poll=0.05,
        )
    else:
        wait_for(
            lambda: (
                any(
                    e.step_key == "summarize_import"
                    for e in _events(fresh, run_id, dg.DagsterEventType.STEP_WORKER_STARTED)
                )
                or _status(fresh, run_id) == "SUCCESS"
            ),
            180,
            "summarize_import to start",
            poll=0.05,
        )
        assert _status(fresh, run_id) != "SUCCESS", "the report finished before the kill"
    _kill_worker(fresh, run_id)
    _wait_failed(fresh, run_id)
    if via == "cli":
        resumed = fresh.airwave("runs", "resume", run_id, "--wait", "--json")
        assert resumed.returncode == 0, resumed.stderr
        outcome = json.loads(resumed.stdout)
        assert outcome["status"] == "SUCCESS"
        assert outcome["report"]["channels_created"] == CHANNELS
    else:  # the UI's "Re-execute from failure" is the same complete resume
        launched = fresh.graphql(REEXECUTE, {"parentRunId": run_id})["launchRunReexecution"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        assert launcher.follow(fresh.instance, run_id).status == dg.DagsterRunStatus.SUCCESS
    _assert_complete(fresh, database_url, run_id)


def test_a_killed_step_process_is_retried_and_built_once(fresh: Dev, database_url: str) -> None:
    """Multiprocess only: a step process dies alone (on threads a step has no process)."""
    run_id = fresh.launch_import(_lineup(), tags=NO_AUTO_RESUME, executor="multiprocess")

    def a_build_worker() -> tuple[str, int] | None:
        for event in _events(fresh, run_id, dg.DagsterEventType.STEP_WORKER_STARTED):
            if event.step_key and event.step_key.startswith("build_channel["):
                pid = event.event_specific_data.metadata.get("pid")
                if pid is not None:
                    return event.step_key, int(str(pid.value))
        return None

    step_key, pid = wait_for(a_build_worker, 120, "a build step process", poll=0.05)
    os.kill(pid, signal.SIGKILL)
    parent = launcher.wait_for_run(fresh.instance, run_id)
    # The crash is a step failure: the step's retry policy runs it again inside the same run.
    retried = [
        e
        for kind in (dg.DagsterEventType.STEP_UP_FOR_RETRY, dg.DagsterEventType.STEP_FAILURE)
        for e in _events(fresh, run_id, kind)
        if e.step_key == step_key
    ]
    assert retried, f"killing {step_key} (pid {pid}) did not fail its attempt"
    if parent.status == dg.DagsterRunStatus.FAILURE:
        resumed = fresh.airwave("runs", "resume", run_id, "--wait", "--json")
        assert resumed.returncode == 0, resumed.stderr
    _assert_complete(fresh, database_url, run_id, killed=1)
