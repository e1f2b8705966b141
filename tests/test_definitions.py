"""The code location loads, names what the issues bind, and keeps the dependency rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

import resources
from airwave_dagster.definitions import defs

ROOT = Path(__file__).resolve().parent.parent


def test_definitions_load() -> None:
    dg.Definitions.validate_loadable(defs)


def test_binding_job_names() -> None:
    assert {job.name for job in defs.resolve_all_job_defs()} >= {"import_lineup"}


def test_the_asset_checks_are_bound() -> None:
    checks = {key.to_user_string() for key in defs.resolve_asset_graph().asset_check_keys}

    assert checks == {
        "plex_library:fresh",
        "ai_lineup:audience_ceiling",
        "ai_lineup:no_strict_subsets",
        "ai_lineup:overlap_bound",
        "ai_lineup:channels_per_item",
        "ai_lineup:channels_verified",
        "ai_lineup:genres_covered",
    }


def test_import_lineup_runs_on_the_multiprocess_executor() -> None:
    # The bound of four concurrent builds is proven by measurement in
    # tests/integration/test_import_lineup.py; here, only that the job is not in-process.
    assert defs.resolve_job_def("import_lineup").executor_def.name == "fan_out"


def test_top_level_packages_are_this_repository() -> None:
    # `resources` is a generic top-level name; make sure no other distribution shadows it.
    assert Path(resources.__file__).resolve().is_relative_to(ROOT)


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The domain is pure KEPT" in result.stdout


def test_attached_mode_keeps_maintenance_off_and_says_why() -> None:
    """Airwave's server keeps every channel's schedule when attached (docs/attached.md)."""
    from airwave_dagster.definitions import build_definitions, production_resources
    from airwave_dagster.run_tags import ATTACHED_MAINTENANCE_OFF

    standalone = build_definitions(production_resources(), attached=False)
    attached = build_definitions(production_resources(), attached=True)
    schedules = list(attached.schedules or [])
    assert {s.name for s in schedules} >= {
        "backfill_schedule",
        "refresh_library_schedule",
        "library_freshness_schedule",
    }
    for schedule in schedules:
        assert isinstance(schedule, dg.ScheduleDefinition)
        assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED, schedule.name
        assert ATTACHED_MAINTENANCE_OFF in (schedule.description or ""), schedule.name
    assert all(
        isinstance(s, dg.ScheduleDefinition)
        and s.default_status == dg.DefaultScheduleStatus.RUNNING
        for s in standalone.schedules or []
    )
    follow = attached.get_sensor_def("follow_library_sensor")
    assert follow.default_status == dg.DefaultSensorStatus.STOPPED
    upload = attached.get_sensor_def("lineup_upload_sensor")
    assert upload.default_status == dg.DefaultSensorStatus.RUNNING, "imports stay this project's"


@pytest.mark.postgres
def test_a_maintenance_run_launched_by_hand_when_attached_refuses_with_the_reason(
    database_url: str,
) -> None:
    from airwave_dagster.run_tags import ATTACHED_MAINTENANCE_OFF
    from ops.maintenance import prune_schedules
    from resources.database import DatabaseResource

    result = prune_schedules.execute_in_process(
        resources={"database": DatabaseResource(url=database_url, mode="attached")},
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert ATTACHED_MAINTENANCE_OFF in str(failure.step_failure_data.error)


def test_idle_daemon_polls_stay_off_the_terminal() -> None:
    # Issue 27.11: `airwave dev` printed two sensor lines every 5 s with nothing to do.
    import logging

    from airwave_dagster.durability.instance import quiet_idle_sensor_ticks

    quiet_idle_sensor_ticks()
    quiet_idle_sensor_ticks()  # once per process, however many instances it makes
    sensors = logging.getLogger("dagster.daemon.SensorDaemon")
    assert len(sensors.filters) == 1

    def shown(message: str, level: int = logging.INFO) -> bool:
        record = sensors.makeRecord(sensors.name, level, __file__, 1, message, None, None)
        return sensors.filter(record)

    assert not shown("Checking for new runs for sensor: lineup_upload_sensor")
    assert not shown("Sensor lineup_upload_sensor skipped: no new lineup files")
    assert shown("Sensor lineup_upload_sensor skipped: x.json: run created, moved to processed/")
    assert shown("Launching run for lineup_upload_sensor")
    assert shown("Checking for new runs for sensor: x", logging.WARNING)


def test_loading_the_definitions_raises_no_beta_warning() -> None:
    import warnings

    import dagster as dg

    from airwave_dagster.definitions import build_definitions, production_resources

    with warnings.catch_warnings():
        warnings.simplefilter("error", dg.BetaWarning)
        warnings.simplefilter("error", dg.PreviewWarning)
        # Every process that loads the location resolves the repository (code server, run
        # worker, each step); Dagster's sensor rebinding used to warn there.
        build_definitions(production_resources(), attached=False).get_repository_def()
