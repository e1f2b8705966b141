"""The `plex_library` asset (the library snapshot), its refresh job and its hourly schedule."""

from typing import Any

import dagster as dg

from resources.database import DatabaseResource
from resources.library_sync import LibrarySyncResult, sync_library
from resources.plex import PlexError, PlexResource

PLEX_LIBRARY_KEY = dg.AssetKey("plex_library")
"""The snapshot's asset key; downstream assets name it in their `deps`."""

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
    try:
        result = sync_library(database.get_store(), plex.get_client())
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
    tags={"airwave/job": "refresh_library"},
)

refresh_library_schedule = dg.ScheduleDefinition(
    name="refresh_library_schedule",
    job=refresh_library,
    cron_schedule=REFRESH_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Refresh the library snapshot every hour.",
)
