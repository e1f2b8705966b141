"""Composition root: binds the jobs, sensors and resources into the `airwave` code location."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping

import dagster as dg

from airwave_dagster.permissions import check_declarations, load_policy
from airwave_dagster.run_tags import AI_LINEUP_JOB, IMPORT_LINEUP_JOB
from airwave_dagster.settings import DATABASE_URL_ENV, PLEX_TOKEN_ENV, PLEX_URL_ENV, Settings
from ops.ai_lineup.asset_checks import check_ai_lineup
from ops.ai_lineup.job import ai_lineup
from ops.ai_lineup.rollback import rollback_lineup
from ops.approval_answer import answer_approval_job
from ops.library_assets import (
    ai_lineup_asset,
    check_library_freshness,
    library_freshness_schedule,
    library_profile,
    plex_library,
    plex_library_fresh,
    refresh_library,
    refresh_library_schedule,
)
from ops.lineup_import.job import import_lineup
from ops.maintenance import MAINTENANCE_JOBS, follow_library, maintenance_schedules
from ops.steps import traced_executor
from resources.database import DatabaseResource
from resources.io_manager import PostgresJsonIOManager
from resources.lineup_files import LineupFilesResource
from resources.llm import LlmResource
from resources.plex import PlexResource
from resources.uploads import UploadInboxResource
from sensors.library_follow import build_follow_library_sensor
from sensors.lineup_upload import LINEUP_INBOX, build_lineup_upload_sensor

LOCATION_NAME = "airwave"
"""The code location's name (pyproject.toml, `[tool.dg.project]`), named in its load errors."""


def production_resources(settings: Settings | None = None) -> dict[str, object]:
    """The resources of the code location; secrets and URLs are read when a run starts.

    `airwave` commands export these variables (starting the private Postgres and the Plex
    emulator when nothing is configured) before any Dagster process starts. Values that are not
    secrets (the inbox, the home, the claim timeout) come validated from `Settings`, so a bad one
    fails the code location's load with the variable's name.

    Args:
        settings: The settings to bind; None reads them now (`Settings.load()`).
    """
    settings = settings or Settings.load()
    database = DatabaseResource(
        url=dg.EnvVar(DATABASE_URL_ENV),
        claim_stale_seconds=settings.claim_stale_seconds,
        mode=settings.mode,
        source_id=settings.source_id,
        user_email=settings.airwave_user,
    )
    return {
        "database": database,
        # The token is read from PLEX_TOKEN when a step connects; unset, none is sent (a server
        # that allows access without one). An EnvVar here would fail every run without it.
        "plex": PlexResource(base_url=dg.EnvVar(PLEX_URL_ENV), token_env_var=PLEX_TOKEN_ENV),
        "uploads": UploadInboxResource(path=str(settings.resolved_inbox())),
        # Relative lineup paths in run config resolve here, not against whatever directory the
        # run worker happened to start in (docs/importer.md).
        "lineup_files": LineupFilesResource(directory=str(settings.resolved_home())),
        "io_manager": PostgresJsonIOManager(database=database),
        # The key is looked up (ANTHROPIC_API_KEY) only when the anthropic provider runs.
        "llm": LlmResource(),
    }


def build_definitions(resources: Mapping[str, object], *, attached: bool = False) -> dg.Definitions:
    """The code location's definitions with the given resources bound.

    Args:
        resources: The resources to bind (`production_resources()` in production).
        attached: On a running Airwave's database: maintenance schedules, the library refresh
            and the follow-library sensor are stopped by default and their runs refuse, since
            Airwave's own server maintains every channel (docs/attached.md).
    """
    definitions = dg.Definitions(
        executor=traced_executor(),
        jobs=[
            import_lineup,
            *MAINTENANCE_JOBS,
            follow_library,
            refresh_library,
            check_library_freshness,
            ai_lineup,
            rollback_lineup,
            answer_approval_job,
        ],
        assets=[plex_library, library_profile, ai_lineup_asset, LINEUP_INBOX],
        asset_checks=[plex_library_fresh, check_ai_lineup],
        schedules=[
            *maintenance_schedules(attached=attached),
            refresh_library_schedule(attached=attached),
            library_freshness_schedule(attached=attached),
        ],
        sensors=[
            build_follow_library_sensor(follow_library, attached=attached),
            build_lineup_upload_sensor(import_lineup),
        ],
        resources=dict(resources),
    )
    # Binding the resources copies each sensor with `owners=[]`, which Dagster 1.13 reports as
    # a beta parameter although no sensor here sets one: one BetaWarning in every process that
    # loads the location (code server, run worker, each step: 185 in a 30-minute `make dev`).
    # Resolving here, under a filter limited to this call, builds the cached repository quietly
    # in every process that loads the location; nothing else Dagster warns about is hidden.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        repository = definitions.get_repository_def()
    require_permissions(repository.get_all_jobs())
    return definitions


def require_permissions(jobs: Iterable[dg.JobDefinition]) -> None:
    """Fail the code location's load unless every job declares its permissions and the
    permissions file (`AIRWAVE_PERMISSIONS`) can grant each one (docs/security.md).

    Raises:
        PermissionsError: Naming the undeclared job, the permission no role grants, or the
            file's role permission that matches nothing.
    """
    check_declarations((job.name for job in jobs), load_policy(), location=LOCATION_NAME)


_settings = Settings.load()
defs = build_definitions(production_resources(_settings), attached=_settings.attached)


def import_lineup_job() -> dg.JobDefinition:
    """The bound `import_lineup` job, for `dg.reconstructable` (tests, benchmarks)."""
    return defs.resolve_job_def(IMPORT_LINEUP_JOB)


def ai_lineup_job() -> dg.JobDefinition:
    """The bound `ai_lineup` job, for `dg.reconstructable` (tests, benchmarks)."""
    return defs.resolve_job_def(AI_LINEUP_JOB)
