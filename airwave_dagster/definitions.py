"""Composition root: binds the jobs, sensors and resources into the `airwave` code location."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from airwave_dagster.run_tags import AI_LINEUP_JOB, IMPORT_LINEUP_JOB
from ops.ai_lineup.job import ai_lineup
from ops.library_assets import (
    ai_lineup_asset,
    library_profile,
    plex_library,
    refresh_library,
    refresh_library_schedule,
)
from ops.lineup_import.job import import_lineup
from ops.maintenance import MAINTENANCE_JOBS, follow_library, maintenance_schedules
from resources.database import DatabaseResource
from resources.io_manager import PostgresJsonIOManager
from resources.llm import LlmResource
from resources.plex import PlexResource
from sensors.library_follow import build_follow_library_sensor
from sensors.lineup_upload import lineup_upload_sensor


def production_resources() -> dict[str, object]:
    """Resources read from the environment when a run starts, never at import.

    `airwave` commands export these variables (starting the private Postgres and the Plex
    emulator when nothing is configured) before any Dagster process starts.
    """
    database = DatabaseResource(url=dg.EnvVar("AIRWAVE_DATABASE_URL"))
    return {
        "database": database,
        "plex": PlexResource(base_url=dg.EnvVar("PLEX_URL"), token=dg.EnvVar("PLEX_TOKEN")),
        "io_manager": PostgresJsonIOManager(database=database),
        # The key is looked up (ANTHROPIC_API_KEY) only when the anthropic provider runs.
        "llm": LlmResource(),
    }


def build_definitions(resources: Mapping[str, object]) -> dg.Definitions:
    """The code location's definitions with the given resources bound."""
    return dg.Definitions(
        jobs=[import_lineup, *MAINTENANCE_JOBS, follow_library, refresh_library, ai_lineup],
        assets=[plex_library, library_profile, ai_lineup_asset],
        schedules=[*maintenance_schedules(), refresh_library_schedule],
        sensors=[build_follow_library_sensor(follow_library), lineup_upload_sensor],
        resources=dict(resources),
    )


defs = build_definitions(production_resources())


def import_lineup_job() -> dg.JobDefinition:
    """The bound `import_lineup` job, for `dg.reconstructable` (tests, benchmarks)."""
    return defs.resolve_job_def(IMPORT_LINEUP_JOB)


def ai_lineup_job() -> dg.JobDefinition:
    """The bound `ai_lineup` job, for `dg.reconstructable` (tests, benchmarks)."""
    return defs.resolve_job_def(AI_LINEUP_JOB)
