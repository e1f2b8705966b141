"""`import_lineup` on the threads executor (the default) through the shared `airwave dev`.

Real parts: `airwave dev` (webserver, daemon with run monitoring and run retries, the code
server whose run workers orchestrate), the Plex emulator, Postgres. A run worker killed mid
fan-out on threads is tests/integration/test_crash_resume.py's (both executors); the kill points
inside a build are tests/integration/test_kill_points.py's.
"""

from __future__ import annotations

import time

import dagster as dg
import pytest

from airwave_dagster.cli import launcher
from tests.integration.test_crash_resume import _assert_complete, _build_keys, _lineup
from tests.support.dagster_dev import Dev, wait_for
from tests.support.homes import query
from tests.support.standalone import CHANNELS_WITH_CLAIMS

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]


def _messages(dev: Dev, run_id: str, kind: dg.DagsterEventType) -> list[str]:
    return [r.user_message for r in dev.instance.all_logs(run_id, of_type=kind)]


def test_an_import_on_threads_builds_every_channel_one_step_each(
    fresh: Dev, database_url: str
) -> None:
    run_id = fresh.launch_import(_lineup(), executor="threads")
    final = launcher.follow(fresh.instance, run_id)
    assert final.status == dg.DagsterRunStatus.SUCCESS
    planned = {f"build_channel[ch_{c['number']}]" for c in _lineup()["channels"]}
    for kind in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS):
        assert _build_keys(fresh, run_id, kind) == planned
    starts = [
        r.dagster_event.step_key
        for r in fresh.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
        if r.dagster_event and (r.dagster_event.step_key or "").startswith("build_channel[")
    ]
    assert len(starts) == len(planned), "one step per channel, each started once"
    # Dispatched as threads of the run worker, not step processes.
    dispatched = _messages(fresh, run_id, dg.DagsterEventType.STEP_WORKER_STARTING)
    assert dispatched and all(m.startswith("Starting a thread for") for m in dispatched)
    assert not _messages(fresh, run_id, dg.DagsterEventType.STEP_WORKER_STARTED)
    _assert_complete(fresh, database_url, run_id)


def test_a_run_canceled_mid_fan_out_ends_canceled_within_the_grace(
    fresh: Dev, database_url: str
) -> None:
    """`airwave runs cancel`'s path (the code server terminates the run worker): no build
    starts after it, the ones running get the grace period, the run ends CANCELED, no claim
    is left behind."""
    from ops.threads_executor import STOP_GRACE_SECONDS

    run_id = fresh.launch_import(_lineup(), tags={"dagster/max_retries": "0"}, executor="threads")

    def in_flight() -> set[str]:
        done = _build_keys(fresh, run_id, dg.DagsterEventType.STEP_SUCCESS)
        started = _build_keys(fresh, run_id, dg.DagsterEventType.STEP_START)
        return started - done if done else set()

    wait_for(in_flight, 120, "a build done and more in flight", poll=0.05)
    asked = time.monotonic()
    final, changed, _ = launcher.cancel(
        fresh.instance, run_id, "threads test", timeout=STOP_GRACE_SECONDS + 30
    )
    took = time.monotonic() - asked
    assert changed and final.status == dg.DagsterRunStatus.CANCELED, final.status
    assert took <= STOP_GRACE_SECONDS + 30, took
    messages = _messages(fresh, run_id, dg.DagsterEventType.ENGINE_EVENT)
    assert any(m.startswith("Threads executor: termination requested") for m in messages)
    left = query(database_url, CHANNELS_WITH_CLAIMS + " WHERE k.run_id IS NOT NULL")
    assert not left, "no claim left behind"
