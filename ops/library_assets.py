"""Library assets: `plex_library` (snapshot, refresh, freshness check) → `library_profile`."""

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg

from airwave_dagster.domain.ai.profile import LibraryProfile, build_profile
from airwave_dagster.run_tags import (
    AI_LINEUP_ASSET,
    ATTACHED_MAINTENANCE_OFF,
    JOB_TAG,
    LIBRARY_PROFILE_ASSET,
    PLEX_LIBRARY_ASSET,
)
from resources.database import DatabaseResource
from resources.plex import PlexError, PlexResource
from resources.stores.ai import AiStore, media_items
from resources.stores.library import LibrarySyncResult, sync_library

PLEX_LIBRARY_KEY = dg.AssetKey(PLEX_LIBRARY_ASSET)
"""The snapshot's asset key; downstream assets name it in their `deps`."""
LIBRARY_PROFILE_KEY = dg.AssetKey(LIBRARY_PROFILE_ASSET)
AI_LINEUP_KEY = dg.AssetKey(AI_LINEUP_ASSET)

REFRESH_CRON = "15 * * * *"
"""Hourly, a quarter past: away from the extension on the hour and the repair at half past."""

SAMPLE_KEYS = 20
"""Rating keys listed per kind of change in the materialisation's metadata."""


def _keys(keys: tuple[str, ...]) -> str:
    shown = ", ".join(keys[:SAMPLE_KEYS])
    return shown + (f" … (+{len(keys) - SAMPLE_KEYS})" if len(keys) > SAMPLE_KEYS else "")


def sync_metadata(result: LibrarySyncResult) -> dict[str, Any]:
    """What a refresh changed, as materialisation metadata (`changed` drives follow_library)."""
    return {
        "changed": result.changed,
        "libraries": result.libraries,
        "items": result.items,
        "added": len(result.added),
        "removed": len(result.removed),
        "updated": len(result.updated),
        "added_keys": _keys(result.added),
        "removed_keys": _keys(result.removed),
    }


@dg.asset(
    key=PLEX_LIBRARY_KEY,
    group_name="library",
    code_version="plex-library-v1",
    description=(
        "Every movie and episode of every Plex library, mirrored into airwave.media_item (rows "
        "with available = true are in Plex now). Paged; a Plex outage fails the refresh and "
        "changes nothing."
    ),
)
def plex_library(
    context: dg.AssetExecutionContext, database: DatabaseResource, plex: PlexResource
) -> dg.MaterializeResult:
    """Page every playable item from Plex into the snapshot and mark vanished ones unavailable."""
    if database.deployment.attached:
        raise dg.Failure(description=f"library refresh: {ATTACHED_MAINTENANCE_OFF}")
    try:
        result = sync_library(database.stores().channels, plex.get_client())
    except PlexError as error:
        raise dg.Failure(description=f"library refresh changed nothing: {error}") from error
    context.log.info(
        f"snapshot: {result.items} items, +{len(result.added)} -{len(result.removed)} "
        f"~{len(result.updated)}"
    )
    return dg.MaterializeResult(metadata=sync_metadata(result))


refresh_library = dg.define_asset_job(
    "refresh_library",
    selection=dg.AssetSelection.assets(PLEX_LIBRARY_KEY),
    description="Refresh the plex_library snapshot (hourly, or by hand).",
    tags={JOB_TAG: "refresh_library"},
)


def refresh_library_schedule(*, attached: bool = False) -> dg.ScheduleDefinition:
    """The hourly library refresh: running by default, stopped by default when attached."""
    return dg.ScheduleDefinition(
        name="refresh_library_schedule",
        job=refresh_library,
        cron_schedule=REFRESH_CRON,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED
        if attached
        else dg.DefaultScheduleStatus.RUNNING,
        description="Refresh the library snapshot every hour."
        + (f" Now {ATTACHED_MAINTENANCE_OFF}." if attached else ""),
    )


FRESH_WINDOW = timedelta(hours=2)
"""The snapshot's age at which its freshness check fails: two hourly refreshes missed."""

FRESHNESS_CRON = "45 * * * *"
"""Half an hour after each refresh: a refresh that failed or never ran shows by then."""


def snapshot_freshness(
    last_refreshed: datetime | None, now: datetime, window: timedelta = FRESH_WINDOW
) -> dg.AssetCheckResult:
    """The freshness verdict on a snapshot last refreshed at `last_refreshed` (None: never)."""
    if last_refreshed is None:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description="never refreshed: materialize plex_library",
        )
    age = now - last_refreshed
    minutes = int(age.total_seconds() // 60)
    passed = age <= window
    limit = int(window.total_seconds() // 60)
    return dg.AssetCheckResult(
        passed=passed,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"refreshed {minutes} min ago ({'within' if passed else 'over'} {limit} min)",
        metadata={
            "last_refreshed": last_refreshed.isoformat(),
            "age_minutes": minutes,
            "window_minutes": limit,
        },
    )


@dg.asset_check(
    asset=PLEX_LIBRARY_KEY,
    name="fresh",
    description=(
        f"The snapshot was refreshed within the last {FRESH_WINDOW.total_seconds() / 3600:g} h "
        "(the hourly refresh keeps it under 1 h)."
    ),
)
def plex_library_fresh(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """Judge the age of the latest `plex_library` materialisation."""
    event = context.instance.get_latest_materialization_event(PLEX_LIBRARY_KEY)
    last = datetime.fromtimestamp(event.timestamp, UTC) if event is not None else None
    return snapshot_freshness(last, datetime.now(UTC))


check_library_freshness = dg.define_asset_job(
    "check_library_freshness",
    selection=dg.AssetSelection.checks(plex_library_fresh),
    description="Check that the plex_library snapshot is fresh (hourly, or by hand).",
    tags={JOB_TAG: "check_library_freshness"},
)


def library_freshness_schedule(*, attached: bool = False) -> dg.ScheduleDefinition:
    """The hourly freshness check: stopped by default when attached, as the refresh is."""
    return dg.ScheduleDefinition(
        name="library_freshness_schedule",
        job=check_library_freshness,
        cron_schedule=FRESHNESS_CRON,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED
        if attached
        else dg.DefaultScheduleStatus.RUNNING,
        description="Check the library snapshot's freshness every hour."
        + (
            f" Stopped by default: the refresh it judges is {ATTACHED_MAINTENANCE_OFF}."
            if attached
            else ""
        ),
    )


def profile_sha256(profile: LibraryProfile) -> str:
    """A stable digest of a profile (its canonical JSON), to tell profiles apart in metadata."""
    text = json.dumps(profile.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compute_profile(store: AiStore, source_id: str) -> LibraryProfile:
    """The profile of a source's available snapshot items.

    No Plex call: docs/reference/ai-lineup.md §3.
    """
    return build_profile(media_items(store, source_id), source_id=source_id)


def profile_metadata(profile: LibraryProfile, sha256: str) -> dict[str, Any]:
    """What the catalog shows for a profile."""
    totals = profile.totals
    return {
        "source_id": profile.source_id,
        "movies": totals.movies,
        "shows": totals.shows,
        "episodes": totals.episodes,
        "hours": round(totals.movie_hours + totals.episode_hours, 1),
        "genres": len(profile.genres),
        "sha256": sha256,
        "profile": dg.MetadataValue.md(f"```\n{profile.render_text()}\n```"),
    }


@dg.asset(
    key=LIBRARY_PROFILE_KEY,
    deps=[PLEX_LIBRARY_KEY],
    group_name="library",
    code_version="library-profile-v1",
    description=(
        "A small statistical summary of the library snapshot (titles per genre, studio, rating "
        "and decade, the biggest shows, score and runtime distributions) that the AI planner "
        "designs a lineup from. Stored as JSON in airwave.library_profile."
    ),
)
def library_profile(
    context: dg.AssetExecutionContext, database: DatabaseResource, plex: PlexResource
) -> dg.MaterializeResult:
    """Profile the available items of the Plex server's snapshot and store the profile."""
    stores = database.stores()
    source_id = stores.channels.find_source(plex.base_url)
    if source_id is None:
        raise dg.Failure(
            description=(
                f"no library snapshot of {plex.base_url} yet: materialize plex_library first"
            )
        )
    ai = stores.ai
    profile = compute_profile(ai, source_id)
    sha256 = profile_sha256(profile)
    ai.save_profile(source_id, profile.model_dump(mode="json"), sha256, context.run_id)
    return dg.MaterializeResult(metadata=profile_metadata(profile, sha256))


ai_lineup_asset = dg.AssetSpec(
    AI_LINEUP_KEY,
    deps=[LIBRARY_PROFILE_KEY],
    group_name="library",
    description=(
        "The AI-built lineup (packages and verified channels). Materialised by the report step "
        "of the ai_lineup job."
    ),
)
