"""The threads run worker's event log over kept connections (resources/event_storage.py)."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest
from dagster_postgres.event_log import PostgresEventLogStorage

from resources.event_storage import APPLICATION_NAME, kept_event_connections
from tests.support.homes import query

pytestmark = [pytest.mark.postgres]


def _run(instance: dg.DagsterInstance) -> dg.DagsterRun:
    @dg.op
    def noop() -> None:
        return None

    @dg.job
    def probe() -> None:
        noop()

    return instance.create_run_for_job(probe)


def _backend_starts(database_url: str) -> int:
    """Connections Postgres has started for the test database so far (its session counter)."""
    (row,) = query(
        database_url, "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
    )
    return int(row.sessions)


def _terminate_kept(database_url: str) -> int:
    """Cut the kept connections (as a Postgres restart would); how many there were."""
    (row,) = query(
        database_url,
        "SELECT count(pg_terminate_backend(pid)) AS killed FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = :name",
        {"name": APPLICATION_NAME},
    )
    return int(row.killed)


def test_events_reuse_kept_connections_survive_a_cut_and_the_engine_comes_back(
    dagster_instance: Any, database_url: str
) -> None:
    instance: dg.DagsterInstance = dagster_instance
    storage = instance.event_log_storage
    assert isinstance(storage, PostgresEventLogStorage)
    original = storage._engine  # the private attribute the helper swaps (pinned dagster-postgres)
    run = _run(instance)

    def write(count: int) -> None:
        for n in range(count):
            instance.report_engine_event(f"probe event {n}", run)

    write(3)  # warm: the storage's own engine, a connection per event
    before = _backend_starts(database_url)
    write(20)
    unpooled = _backend_starts(database_url) - before - 1  # minus the counting query's own

    with kept_event_connections(instance, 2):
        assert storage._engine is not original
        before = _backend_starts(database_url)
        write(20)
        pooled = _backend_starts(database_url) - before - 1
        # A Postgres restart or an administrator cuts the kept connection: the next write
        # notices (pre-ping) and opens another instead of failing.
        assert _terminate_kept(database_url) == 1
        write(1)
    assert storage._engine is original

    assert unpooled >= 20, unpooled
    assert pooled <= 1, pooled
    logged = [e for e in instance.all_logs(run.run_id) if (e.message or "").startswith("probe")]
    assert len(logged) == 3 + 20 + 20 + 1
