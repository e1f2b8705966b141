"""Composition root: binds the jobs, sensors and resources into the `airwave` code location."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from ops.lineup_import import import_lineup
from resources.database import DatabaseResource
from resources.io_manager import PostgresJsonIOManager
from resources.plex import PlexResource


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
    }


def build_definitions(resources: Mapping[str, object]) -> dg.Definitions:
    """The code location's definitions with the given resources bound."""
    return dg.Definitions(jobs=[import_lineup], resources=dict(resources))


defs = build_definitions(production_resources())


def import_lineup_job() -> dg.JobDefinition:
    """The bound `import_lineup` job, for `dg.reconstructable` (tests, benchmarks)."""
    return defs.resolve_job_def("import_lineup")
