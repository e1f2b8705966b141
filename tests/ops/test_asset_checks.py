"""The asset checks: `ai_lineup`'s quality targets and `plex_library`'s freshness, in process.

Nothing here needs Postgres or Plex: the checks read only the instance's materialisations, so an
ephemeral instance with a recorded materialisation is the whole world they see.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from airwave_dagster.definitions import defs
from airwave_dagster.domain.ai.quality import BuiltChannel, LineupQuality, lineup_quality
from airwave_dagster.domain.library import MediaItem
from ops.ai_lineup.asset_checks import (
    LINEUP_CHECK_SPECS,
    check_ai_lineup,
    lineup_check_evaluations,
    quality_metadata_entry,
)
from ops.library_assets import (
    AI_LINEUP_KEY,
    FRESH_WINDOW,
    PLEX_LIBRARY_KEY,
    ai_lineup_asset,
    check_library_freshness,
    plex_library,
    plex_library_fresh,
    snapshot_freshness,
)
from tests.support.instances import instance_on
from tests.support.schemas import fresh_schema

HOUR_MS = 3_600_000


def _movies(prefix: str, n: int, rating: str, genre: str) -> list[MediaItem]:
    return [
        MediaItem(
            rating_key=f"{prefix}{i}",
            type="movie",
            title=f"{prefix} {i}",
            duration_ms=2 * HOUR_MS,
            content_rating=rating,
            genres=(genre,),
        )
        for i in range(n)
    ]


def _quality(*, slipped: int) -> LineupQuality:
    """A family channel and a thriller channel; `slipped` R-rated thrillers in the family one."""
    family = _movies("f", 6, "PG", "Family")
    thrillers = _movies("t", 6, "R", "Thriller")
    return lineup_quality(
        family + thrillers,
        [
            BuiltChannel("Family Movies", family + thrillers[:slipped]),
            BuiltChannel("Thrillers", thrillers),
        ],
    )


@pytest.fixture
def instance(database_url: str) -> Iterator[dg.DagsterInstance]:
    """Dagster's storage on the test Postgres, in a schema emptied for each test."""
    with instance_on(fresh_schema(database_url, "dagster_checks")) as instance:
        yield instance


def _judge(instance: dg.DagsterInstance, quality: LineupQuality) -> dg.ExecuteInProcessResult:
    """Materialise `ai_lineup` with these measures, then run its checks as the catalog would."""
    instance.report_runless_asset_event(
        dg.AssetMaterialization(asset_key=AI_LINEUP_KEY, metadata=quality_metadata_entry(quality))
    )
    defs = dg.Definitions(
        assets=[ai_lineup_asset],
        asset_checks=[check_ai_lineup],
        jobs=[dg.define_asset_job("judge", selection=dg.AssetSelection.checks(check_ai_lineup))],
    )
    return defs.resolve_job_def("judge").execute_in_process(instance=instance, raise_on_error=False)


def _evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
    }


def test_the_audience_ceiling_is_the_one_blocking_check() -> None:
    assert [s.name for s in LINEUP_CHECK_SPECS if s.blocking] == ["audience_ceiling"]
    assert all(s.asset_key == AI_LINEUP_KEY and s.description for s in LINEUP_CHECK_SPECS)


def test_the_report_steps_evaluations_fail_a_family_channel_above_its_ceiling() -> None:
    evaluations = {e.check_name: e for e in lineup_check_evaluations(_quality(slipped=2))}

    ceiling = evaluations.pop("audience_ceiling")
    assert not ceiling.passed
    assert ceiling.severity == dg.AssetCheckSeverity.ERROR and ceiling.blocking
    assert ceiling.description == "2 item(s) above the ceiling on kids/family channels"
    assert all(
        e.severity == dg.AssetCheckSeverity.WARN and not e.blocking for e in evaluations.values()
    )
    assert {s.name for s in LINEUP_CHECK_SPECS} == {"audience_ceiling", *evaluations}


def test_from_the_catalog_a_family_channel_above_its_ceiling_fails_the_blocking_check(
    instance: dg.DagsterInstance,
) -> None:
    result = _judge(instance, _quality(slipped=1))

    # Dagster fails the step of a blocking check that failed with ERROR severity: in an asset
    # job that is what keeps downstream assets from materialising.
    assert not result.success
    evaluations = _evaluations(result)
    assert not evaluations["audience_ceiling"].passed
    assert evaluations["audience_ceiling"].blocking
    assert all(e.passed for name, e in evaluations.items() if name != "audience_ceiling")
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(AI_LINEUP_KEY, "audience_ceiling")]
    )
    assert record[dg.AssetCheckKey(AI_LINEUP_KEY, "audience_ceiling")].status.value == "FAILED"


def test_from_the_catalog_a_lineup_under_its_ceilings_passes(
    instance: dg.DagsterInstance,
) -> None:
    result = _judge(instance, _quality(slipped=0))

    assert result.success
    evaluations = _evaluations(result)
    assert set(evaluations) == {s.name for s in LINEUP_CHECK_SPECS}
    assert all(e.passed for e in evaluations.values())


def test_without_a_measured_materialisation_the_catalog_check_fails_and_says_why(
    instance: dg.DagsterInstance,
) -> None:
    defs = dg.Definitions(
        assets=[ai_lineup_asset],
        asset_checks=[check_ai_lineup],
        jobs=[dg.define_asset_job("judge", selection=dg.AssetSelection.checks(check_ai_lineup))],
    )

    result = defs.resolve_job_def("judge").execute_in_process(
        instance=instance, raise_on_error=False
    )

    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    description = failure.step_failure_data.user_failure_data.description
    assert "run the ai_lineup job" in (description or "")


def test_freshness_passes_within_two_hours_and_fails_beyond() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    fresh = snapshot_freshness(now - timedelta(minutes=50), now)
    stale = snapshot_freshness(now - FRESH_WINDOW - timedelta(minutes=1), now)
    never = snapshot_freshness(None, now)

    assert fresh.passed and fresh.description == "refreshed 50 min ago (within 120 min)"
    assert not stale.passed and stale.description == "refreshed 121 min ago (over 120 min)"
    assert not never.passed
    assert {r.severity for r in (fresh, stale, never)} == {dg.AssetCheckSeverity.WARN}


def test_the_freshness_job_judges_the_latest_refresh(instance: dg.DagsterInstance) -> None:
    # The check reads only the instance: the snapshot's resources are bound but never used.
    unused = dg.ResourceDefinition.none_resource()
    job = dg.Definitions(
        assets=[plex_library],
        asset_checks=[plex_library_fresh],
        jobs=[check_library_freshness],
        resources={"database": unused, "plex": unused},
    ).resolve_job_def("check_library_freshness")

    before = job.execute_in_process(instance=instance, raise_on_error=False)
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=PLEX_LIBRARY_KEY))
    after = job.execute_in_process(instance=instance, raise_on_error=False)

    # A WARN failure is a verdict, not a failed run: the schedule's runs stay green.
    assert before.success and after.success
    assert not _evaluations(before)["fresh"].passed
    assert _evaluations(after)["fresh"].passed
    assert [node.name for node in job.nodes] == ["plex_library_fresh"]


def test_the_refresh_job_evaluates_freshness_after_the_snapshot() -> None:
    job = defs.resolve_job_def("refresh_library")

    assert sorted(node.name for node in job.nodes) == ["plex_library", "plex_library_fresh"]


def test_the_freshness_schedule_runs_half_an_hour_after_the_refresh() -> None:
    schedules = {s.name: s for s in defs.schedules or [] if isinstance(s, dg.ScheduleDefinition)}

    refresh = schedules["refresh_library_schedule"].cron_schedule
    freshness = schedules["library_freshness_schedule"]

    assert (refresh, freshness.cron_schedule) == ("15 * * * *", "45 * * * *")
    assert freshness.job_name == "check_library_freshness"
