"""The `llm` pool: one limit on model calls across concurrent `ai_lineup` runs, freed when one dies.

Each run has a run worker process of its own (`tests.support.job_process`) and a database of its
own, so the two lineups never compete for channel numbers: only the pool, in the shared Dagster
instance, couples them. The LLM stub records how many Messages requests it answers at once.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
import pytest
import sqlalchemy as sa
from dagster._core.events import EngineEventData
from dagster._core.storage.tags import GRPC_INFO_TAG

from airwave_dagster import settings
from airwave_dagster.cli import environment, launcher
from ops.steps import LLM_POOL
from resources import tables as t
from tests.fakes.scripted_model import ScriptedModel, small_plan
from tests.support import job_process
from tests.support.ai import lineup_config, write_snapshot
from tests.support.dagster_dev import wait_for
from tests.support.standalone import kill_tree

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

LIMIT = 2
GENRES = ("Drama", "Comedy", "Action")
"""Three builds a run: more than the pool's two slots even within one run."""
POOLED = ("plan_lineup", "build_ai_channel")


@pytest.fixture
def llm_pool(dagster_instance: dg.DagsterInstance) -> Iterator[dg.DagsterInstance]:
    """The session's instance; afterwards the pool is gone, so later in-process runs are free."""
    yield dagster_instance
    storage = dagster_instance.event_log_storage
    for slot in storage.get_concurrency_info(LLM_POOL).claimed_slots:
        storage.free_concurrency_slots_for_run(slot.run_id)
    storage.delete_concurrency_limit(LLM_POOL)


@pytest.fixture
def second_database(
    database_url: str, plex_emulator: Any, library_snapshot: Any, request: pytest.FixtureRequest
) -> str:
    """Another migrated project database holding the same library snapshot (one per executor)."""
    from resources.migrations import upgrade
    from resources.stores import open_stores

    callspec = getattr(request.node, "callspec", None)
    executor = callspec.params.get("executor", "") if callspec else ""
    name = f"{sa.make_url(database_url).database}_pool{'_' + executor if executor else ''}"
    url = environment.ensure_database(database_url, name)
    conn = psycopg2.connect(environment.libpq_dsn(url))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("DROP SCHEMA IF EXISTS airwave CASCADE")
    finally:
        conn.close()
    environment.ensure_schemas(url)
    upgrade(url)
    libraries, items = library_snapshot
    write_snapshot(open_stores(url).channels, plex_emulator.url, libraries, items)
    return url


def _env(database_url: str, executor: str = "multiprocess") -> dict[str, str]:
    return {
        **os.environ,
        settings.DATABASE_URL_ENV: database_url,
        settings.LLM_CONCURRENCY_ENV: str(LIMIT),
        settings.ENV_FILE_ENV: "/nonexistent/.env",
        settings.EXECUTOR_ENV: executor,
    }


def _pooled_intervals(instance: dg.DagsterInstance, run_id: str) -> list[tuple[float, float]]:
    """(start, end) of every pooled step of the run, from its event log."""
    starts: dict[str, float] = {}
    intervals = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or not (event.step_key or "").startswith(POOLED):
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            starts[event.step_key] = record.timestamp
        elif event.event_type in (
            dg.DagsterEventType.STEP_SUCCESS,
            dg.DagsterEventType.STEP_FAILURE,
        ):
            intervals.append((starts.pop(event.step_key), record.timestamp))
    return intervals


def _held(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    info = instance.event_log_storage.get_concurrency_info(LLM_POOL)
    return sorted(slot.step_key for slot in info.claimed_slots if slot.run_id == run_id)


def _ai_channels(url: str) -> int:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(t.channel)
                    .where(t.channel.c.ai_generated.is_(True), t.channel.c.enabled.is_(True))
                ).scalar_one()
            )
    finally:
        engine.dispose()


def _kill(process: Any) -> None:
    """SIGKILL a run worker and everything below it (forkserver, step processes)."""
    kill_tree(process.pid)
    process.wait(timeout=30)


# Under threads the pool's slots are claimed by the same Dagster machinery, from one process.
@pytest.mark.parametrize("executor", ["multiprocess", "threads"])
def test_two_runs_never_have_more_model_calls_in_flight_than_the_pool(
    executor: str,
    synced: str,
    database_url: str,
    second_database: str,
    stub: Any,
    llm_pool: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    stub.responder = ScriptedModel(small_plan(GENRES))
    # Long enough that builds of both runs (three each) are waiting at the same time.
    stub.latency = 1.5
    config = lineup_config(stub, provider="anthropic")
    databases = {"a": database_url, "b": second_database}
    workers = {
        label: job_process.start(
            llm_pool, config, label=label, tmp=tmp_path, env=_env(url, executor)
        )
        for label, url in databases.items()
    }
    try:
        for label, worker in workers.items():
            assert worker.wait(timeout=400) == 0, job_process.output(tmp_path, label)
    finally:
        for worker in workers.values():
            if worker.poll() is None:
                _kill(worker)

    assert stub.peak_in_flight == LIMIT
    assert len(stub.logical_calls()) == 2 * (1 + 2 * len(GENRES))  # planner + 2 turns a build
    runs = {label: job_process.labelled_run(llm_pool, label) for label in databases}
    intervals = {
        label: _pooled_intervals(llm_pool, run.run_id)
        for label, run in runs.items()
        if run is not None
    }
    assert [len(spans) for spans in intervals.values()] == [1 + len(GENRES)] * 2
    # Without overlap the runs would not have shared anything and the test would prove nothing.
    assert any(
        a_start < b_end and b_start < a_end
        for a_start, a_end in intervals["a"]
        for b_start, b_end in intervals["b"]
    )
    info = llm_pool.event_log_storage.get_concurrency_info(LLM_POOL)
    assert info.slot_count == LIMIT and info.claimed_slots == []
    assert [_ai_channels(url) for url in databases.values()] == [len(GENRES)] * 2


@pytest.mark.parametrize("recovery", ["cancel", "resume check"])
def test_a_killed_runs_slot_is_freed_by_the_cli_without_a_daemon(
    recovery: str,
    synced: str,
    database_url: str,
    stub: Any,
    llm_pool: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    instance = llm_pool
    release = threading.Event()
    model = ScriptedModel(small_plan(GENRES[:1]))

    def held_planner(body: dict[str, Any]) -> dict[str, Any]:
        release.wait(120)  # the planner call is in flight, holding its slot, when the kill comes
        return model(body)

    stub.responder = held_planner
    worker = job_process.start(
        instance,
        lineup_config(stub, provider="anthropic"),
        label="killed",
        tmp=tmp_path,
        env=_env(database_url),
    )
    try:

        def planning() -> bool:
            assert worker.poll() is None, job_process.output(tmp_path, "killed")
            return bool(stub.messages_requests())

        wait_for(planning, 240, "the planner's model call")
    finally:
        _kill(worker)
        release.set()
    run = job_process.labelled_run(instance, "killed")
    assert run is not None
    assert run.status == dg.DagsterRunStatus.STARTED
    # Nothing in Dagster gives the slot back without a monitoring daemon.
    assert _held(instance, run.run_id) == ["plan_lineup"]

    if recovery == "cancel":
        final, changed, _ = launcher.cancel(instance, run.run_id, "worker killed", timeout=1.0)
        assert changed and final.status == dg.DagsterRunStatus.CANCELED
    else:
        # What a code server's launch records and `execute_job` does not: the CLI's health
        # check only judges run workers it knows were started on this machine.
        instance.add_run_tags(run.run_id, {GRPC_INFO_TAG: json.dumps({"socket": "/gone"})})
        instance.report_engine_event(
            f"Started process for run (pid: {worker.pid}).",
            run,
            EngineEventData.in_process(worker.pid),
        )
        final = launcher.fail_if_dead(instance, instance.get_run_by_id(run.run_id))
        assert final.status == dg.DagsterRunStatus.FAILURE

    assert _held(instance, run.run_id) == []
    info = instance.event_log_storage.get_concurrency_info(LLM_POOL)
    assert info.slot_count == LIMIT and info.claimed_slots == []
