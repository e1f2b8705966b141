"""The threads run worker's event log over kept connections (resources/event_storage.py)."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster_postgres.event_log import PostgresEventLogStorage

from resources.event_storage import kept_event_connections
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


def _terminate(database_url: str, pid: int) -> bool:
    """Cut one connection (as a Postgres restart would)."""
    (row,) = query(database_url, "SELECT pg_terminate_backend(:pid) AS cut", {"pid": pid})
    return bool(row.cut)


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

    def connects(engine: sa.Engine, backends: list[int]) -> None:
        """Record the backend pid of every connection `engine` opens from now on."""
        sa.event.listen(
            engine, "connect", lambda dbapi, _: backends.append(dbapi.get_backend_pid())
        )

    unpooled: list[int] = []
    connects(original, unpooled)
    write(20)
    pooled: list[int] = []
    with kept_event_connections(instance, 2):
        assert storage._engine is not original
        connects(storage._engine, pooled)
        write(20)
        # A Postgres restart or an administrator cuts the kept connection: the next write
        # notices (pre-ping) and opens another instead of failing.
        assert len(pooled) == 1 and _terminate(database_url, pooled[0])
        write(1)
    assert storage._engine is original

    assert len(unpooled) >= 20, unpooled  # Dagster's storage: a connection per event
    assert len(pooled) == 2, pooled  # one kept for 20 events, one after the cut
    logged = [e for e in instance.all_logs(run.run_id) if (e.message or "").startswith("probe")]
    assert len(logged) == 20 + 20 + 1


def test_a_run_event_is_stored_in_one_statement_as_dagster_stores_it(
    dagster_instance: Any,
) -> None:
    instance: dg.DagsterInstance = dagster_instance
    storage = instance.event_log_storage
    assert isinstance(storage, PostgresEventLogStorage)
    run = _run(instance)
    instance.report_engine_event("stored by Dagster", run)
    statements: list[str] = []
    with kept_event_connections(instance, 2):
        sa.event.listen(
            storage._engine,
            "before_cursor_execute",
            lambda conn, cursor, statement, *rest: statements.append(statement),
        )
        instance.report_engine_event("stored by the run worker", run)
        # An asset event still goes through Dagster's method: its id indexes the asset tables.
        instance.report_runless_asset_event(dg.AssetMaterialization("probe_asset"))
    assert [s.split()[0] for s in statements if "event_logs" in s] == ["INSERT", "INSERT"]
    assert sum("NOTIFY" in s for s in statements) == 1, "only the asset event's"
    assert storage.store_event.__qualname__ == PostgresEventLogStorage.store_event.__qualname__
    ours, dagsters = (
        next(e for e in instance.all_logs(run.run_id) if e.message == message)
        for message in ("stored by the run worker", "stored by Dagster")
    )
    assert ours.dagster_event is not None and dagsters.dagster_event is not None
    assert ours.dagster_event.event_type == dagsters.dagster_event.event_type
    assert (ours.run_id, ours.job_name, ours.level) == (
        dagsters.run_id,
        dagsters.job_name,
        dagsters.level,
    )
    assert abs(ours.timestamp - dagsters.timestamp) < 60
    [record] = instance.fetch_materializations(dg.AssetKey("probe_asset"), limit=1).records
    assert record.asset_key == dg.AssetKey("probe_asset")
