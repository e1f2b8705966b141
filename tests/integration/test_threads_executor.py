"""`import_lineup` on `AIRWAVE_EXECUTOR=threads` through a running `airwave dev`.

Real parts: `airwave dev` (webserver, daemon with run monitoring and run retries, the code
server whose run workers orchestrate), the Plex emulator, Postgres. Its Dagster storage is a
schema of its own, so its daemon never acts on the shared test server's runs.

What threads change: a run worker's death now takes every in-flight build with it (under
multiprocess the orphaned step processes finish theirs). The run must still be failed by run
monitoring, resumed by run retries and end with every channel exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster import settings
from airwave_dagster.cli import launcher
from airwave_dagster.durability.run_launcher import worker_pid
from ops.lineup_import.job import IMPORT_CONCURRENCY
from tests.integration.test_crash_resume import _assert_complete, _build_keys, _lineup
from tests.support.dagster_dev import (
    STALE_SECONDS,
    Dev,
    _pause_background_automation,
    serving,
    wait_for,
)
from tests.support.homes import query, user_env
from tests.support.schemas import empty_project_tables, fresh_schema
from tests.support.standalone import CHANNELS_WITH_CLAIMS

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def threads_dev(
    database_url: str, slow_plex: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dev]:
    """`airwave dev` whose run workers run fan-out steps in threads."""
    workdir = tmp_path_factory.mktemp("threads_dev")
    env = user_env(
        workdir,
        **{
            settings.PLEX_URL_ENV: slow_plex.url,
            settings.PLEX_TOKEN_ENV: slow_plex.token,
            settings.CLAIM_STALE_ENV: STALE_SECONDS,
            settings.INBOX_ENV: str(workdir / "inbox"),
            settings.EXECUTOR_ENV: "threads",
            settings.DAGSTER_PG_URL_ENV: fresh_schema(database_url, "dagster_threads_dev"),
        },
    )
    with serving(env, Path(env["DAGSTER_HOME"]), workdir, load_seconds=180) as running:
        _pause_background_automation(running)
        yield running


@pytest.fixture
def on_threads(threads_dev: Dev, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Dev:
    """The threads server over emptied application tables, its environment exported."""
    for name in (
        "DAGSTER_HOME",
        "AIRWAVE_HOME",
        settings.PLEX_URL_ENV,
        settings.PLEX_TOKEN_ENV,
        settings.CLAIM_STALE_ENV,
        settings.INBOX_ENV,
        settings.EXECUTOR_ENV,
        settings.DAGSTER_PG_URL_ENV,
    ):
        monkeypatch.setenv(name, threads_dev.env[name])
    empty_project_tables(database_url)
    return threads_dev


def _messages(dev: Dev, run_id: str, kind: dg.DagsterEventType) -> list[str]:
    return [r.user_message for r in dev.instance.all_logs(run_id, of_type=kind)]


def test_an_import_on_threads_builds_every_channel_one_step_each(
    on_threads: Dev, database_url: str
) -> None:
    run_id = on_threads.launch_import(_lineup())
    final = launcher.follow(on_threads.instance, run_id)
    assert final.status == dg.DagsterRunStatus.SUCCESS
    planned = {f"build_channel[ch_{c['number']}]" for c in _lineup()["channels"]}
    for kind in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS):
        assert _build_keys(on_threads, run_id, kind) == planned
    starts = [
        r.dagster_event.step_key
        for r in on_threads.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
        if r.dagster_event and (r.dagster_event.step_key or "").startswith("build_channel[")
    ]
    assert len(starts) == len(planned), "one step per channel, each started once"
    # Dispatched as threads of the run worker, not step processes.
    dispatched = _messages(on_threads, run_id, dg.DagsterEventType.STEP_WORKER_STARTING)
    assert dispatched and all(m.startswith("Starting a thread for") for m in dispatched)
    assert not _messages(on_threads, run_id, dg.DagsterEventType.STEP_WORKER_STARTED)
    _assert_complete(on_threads, database_url, run_id)


def test_a_run_worker_killed_mid_fan_out_is_resumed_exactly_once(
    on_threads: Dev, database_url: str
) -> None:
    """kill -9 of the run worker takes its in-flight builds along; the daemon fails the run,
    resumes it, and the resume takes over the dead builds' claims once they go stale."""
    run_id = on_threads.launch_import(_lineup())

    def in_flight() -> set[str]:
        done = _build_keys(on_threads, run_id, dg.DagsterEventType.STEP_SUCCESS)
        started = _build_keys(on_threads, run_id, dg.DagsterEventType.STEP_START)
        return started - done if len(done) >= 2 else set()

    killed_builds = wait_for(in_flight, 120, "two builds done and more in flight", poll=0.05)
    pid = wait_for(lambda: worker_pid(on_threads.instance, run_id), 60, "the run worker's pid")
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: on_threads.instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE,
        90,
        "run monitoring to fail the run",
    )
    child = wait_for(
        lambda: next(
            (
                r
                for r in launcher.run_tree(on_threads.instance, run_id)
                if r.parent_run_id == run_id
            ),
            None,
        ),
        120,
        "the automatic resume",
    )
    assert child.tags.get("dagster/retry_number") == "1"
    final = launcher.follow(on_threads.instance, run_id)
    assert final.status == dg.DagsterRunStatus.SUCCESS
    # Only the builds the kill interrupted (at most the bound) may have started their work twice.
    assert killed_builds
    _assert_complete(on_threads, database_url, run_id, killed=IMPORT_CONCURRENCY)


def test_a_run_canceled_mid_fan_out_ends_canceled_within_the_grace(
    on_threads: Dev, database_url: str
) -> None:
    """`airwave runs cancel`'s path (the code server terminates the run worker): no build
    starts after it, the ones running get the grace period, the run ends CANCELED, no claim
    is left behind."""
    from ops.threads_executor import STOP_GRACE_SECONDS

    run_id = on_threads.launch_import(_lineup(), tags={"dagster/max_retries": "0"})

    def in_flight() -> set[str]:
        done = _build_keys(on_threads, run_id, dg.DagsterEventType.STEP_SUCCESS)
        started = _build_keys(on_threads, run_id, dg.DagsterEventType.STEP_START)
        return started - done if done else set()

    wait_for(in_flight, 120, "a build done and more in flight", poll=0.05)
    asked = time.monotonic()
    final, changed, _ = launcher.cancel(
        on_threads.instance, run_id, "threads test", timeout=STOP_GRACE_SECONDS + 30
    )
    took = time.monotonic() - asked
    assert changed and final.status == dg.DagsterRunStatus.CANCELED, final.status
    assert took <= STOP_GRACE_SECONDS + 30, took
    messages = _messages(on_threads, run_id, dg.DagsterEventType.ENGINE_EVENT)
    assert any(m.startswith("Threads executor: termination requested") for m in messages)
    left = query(database_url, CHANNELS_WITH_CLAIMS + " WHERE k.run_id IS NOT NULL")
    assert not left, "no claim left behind"
