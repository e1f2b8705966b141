"""Start `follow_library` after each refresh of the `plex_library` snapshot that changed it."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from airwave_dagster.run_tags import ATTACHED_MAINTENANCE_OFF, PLEX_LIBRARY_ASSET

PLEX_LIBRARY_KEY = dg.AssetKey(PLEX_LIBRARY_ASSET)


def follow_requested(metadata: Mapping[str, object]) -> bool:
    """Whether a materialisation's metadata says the library changed (missing means unknown: yes).

    Args:
        metadata: The materialisation's metadata, values as Dagster stores them.

    Returns:
        False only when the refresh reported `changed = false`.
    """
    value = metadata.get("changed")
    raw = getattr(value, "value", value)
    return raw is not False


def build_follow_library_sensor(
    job: dg.JobDefinition, *, attached: bool = False
) -> dg.SensorDefinition:
    """An asset sensor that runs `job` once per changing materialisation of `plex_library`.

    The job comes in as an argument so sensors never import ops. The run key is the
    materialising run's id, so a sensor restart never starts a second follow for one refresh.
    """

    @dg.asset_sensor(
        asset_key=PLEX_LIBRARY_KEY,
        job=job,
        name="follow_library_sensor",
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.STOPPED
        if attached
        else dg.DefaultSensorStatus.RUNNING,
        description="After a library refresh that changed something, re-resolve channel pools."
        + (f" Now {ATTACHED_MAINTENANCE_OFF}." if attached else ""),
    )
    def follow_library_sensor(
        context: dg.SensorEvaluationContext, asset_event: dg.EventLogEntry
    ) -> dg.RunRequest | dg.SkipReason:
        if attached:
            return dg.SkipReason(ATTACHED_MAINTENANCE_OFF)
        materialization = asset_event.asset_materialization
        metadata = dict(materialization.metadata) if materialization is not None else {}
        if not follow_requested(metadata):
            return dg.SkipReason(f"refresh in run {asset_event.run_id} changed nothing")
        return dg.RunRequest(run_key=f"follow-{asset_event.run_id}")

    return follow_library_sensor
