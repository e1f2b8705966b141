"""The maintenance jobs, schedules and sensor as Dagster runs them."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from airwave_dagster.definitions import defs, production_resources
from ops.library_assets import PLEX_LIBRARY_KEY, plex_library
from ops.maintenance import extend_schedules
from resources.plex import PlexClient
from resources.stores.channels import AirwaveStore
from resources.stores.maintenance import MaintenanceStore
from sensors.library_follow import follow_requested
from tests.support.maintenance import add_channel, genre_filter, lay_window, now_utc, rows_of

EXPECTED_SCHEDULES = {
    "backfill_schedule": ("backfill_schedules", "*/10 * * * *"),
    "extend_schedule": ("extend_schedules", "0 * * * *"),
    "repair_schedule": ("repair_schedules", "30 * * * *"),
    "prune_schedule": ("prune_schedules", "0 2 * * *"),
    "refresh_library_schedule": ("refresh_library", "15 * * * *"),
    "library_freshness_schedule": ("check_library_freshness", "45 * * * *"),
}


def test_the_schedules_exist_run_by_default_and_target_their_jobs() -> None:
    schedules = {s.name: s for s in defs.schedules or []}
    assert set(schedules) >= set(EXPECTED_SCHEDULES)
    for name, (job, cron) in EXPECTED_SCHEDULES.items():
        schedule = schedules[name]
        assert isinstance(schedule, dg.ScheduleDefinition)
        assert (schedule.job_name, schedule.cron_schedule) == (job, cron)
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
        assert schedule.execution_timezone == "UTC"
    jobs = {job.name for job in defs.resolve_all_job_defs()}
    assert jobs >= {j for j, _ in EXPECTED_SCHEDULES.values()} | {"follow_library"}
    assert defs.resolve_job_def("extend_schedules").executor_def.name == "fan_out"
    assert defs.resolve_assets_def(PLEX_LIBRARY_KEY).key == dg.AssetKey("plex_library")
    sensor = defs.resolve_sensor_def("follow_library_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.job_name == "follow_library"


def test_follow_is_requested_unless_the_refresh_says_nothing_changed() -> None:
    assert follow_requested({"changed": dg.MetadataValue.bool(True)})
    assert not follow_requested({"changed": dg.MetadataValue.bool(False)})
    assert not follow_requested({"changed": False})
    assert follow_requested({})


@pytest.mark.postgres
@pytest.mark.plex
def test_a_failing_channel_is_reported_and_the_others_are_extended(
    store: AirwaveStore, plex_client: PlexClient, dagster_instance: dg.DagsterInstance
) -> None:
    source = store.sync_source(plex_client.base_url, plex_client.libraries())
    maintenance = MaintenanceStore(store)
    now = now_utc()
    good = [
        add_channel(store, source, n, genre_filter(g)) for n, g in ((301, "Comedy"), (302, "Drama"))
    ]
    broken = add_channel(store, source, 303, {"mediaTypes": ["radio"]})
    for channel in good:
        plan = maintenance.channel_plan(channel)
        pool = plex_client.resolve_pool(list(plan.definitions), sort=plan.sort)
        lay_window(store, source, channel, pool, now)
    lay_window(store, source, broken, plex_client.resolve(None)[:5], now)
    broken_rows = rows_of(store, broken)

    # batch_size 2: the broken channel shares a step with nobody, and a batch fails nothing.
    result = extend_schedules.execute_in_process(
        resources=production_resources(),
        run_config={"ops": {"plan_extend": {"config": {"batch_size": 2}}}},
        instance=dagster_instance,
    )

    assert result.success
    summary = result.output_for_node("summarize_extend")
    assert (summary.checked, summary.extended, summary.failed) == (3, 2, 1)
    assert summary.failures[0].startswith("303: ")
    assert summary.earliest_runway_seconds is not None
    assert rows_of(store, broken) == broken_rows
    output = next(
        e
        for e in result.all_node_events
        if e.event_type_value == "STEP_OUTPUT" and e.step_key == "summarize_extend"
    )
    metadata: dict[str, Any] = {k: v.value for k, v in output.event_specific_data.metadata.items()}
    assert metadata["channels_extended"] == 2 and metadata["channels_failed"] == 1
    assert metadata["rows_added"] == summary.rows_added > 0
    assert metadata["earliest_runway_hours"] >= 0


@pytest.mark.postgres
@pytest.mark.plex
def test_the_sensor_requests_one_follow_per_changing_refresh(
    clean_db: str, plex_client: PlexClient, dagster_instance: Any
) -> None:
    resources = production_resources()
    first = dg.materialize([plex_library], resources=resources, instance=dagster_instance)
    sensor = defs.resolve_sensor_def("follow_library_sensor")

    tick = sensor.evaluate_tick(
        dg.build_sensor_context(instance=dagster_instance, definitions=defs)
    )

    assert [r.run_key for r in tick.run_requests or []] == [f"follow-{first.run_id}"]
    dg.materialize([plex_library], resources=resources, instance=dagster_instance)
    context = dg.build_sensor_context(
        instance=dagster_instance, definitions=defs, cursor=tick.cursor
    )
    again = sensor.evaluate_tick(context)
    assert not again.run_requests and "changed nothing" in (again.skip_message or "")
