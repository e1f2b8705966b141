"""The project's run queue on the test Postgres, and submissions to it as Dagster makes them.

The runs are of a one-op stand-in named like the real job: the coordinator judges a run by its
job name, tags, parent and the launching request's headers, never by its ops.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import SimpleNamespace

import dagster as dg
import pytest
from dagster._core.remote_origin import (
    RegisteredCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.run_coordinator import SubmitRunContext
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import EmptyWorkspaceTarget

from airwave_dagster.cli import environment
from tests.support.instances import instance_on


@dg.op
def _step() -> None:
    """Nothing: the run is judged before any step could start."""


@dg.job(name="import_lineup")
def stand_in() -> None:
    _step()


ORIGIN = RemoteJobOrigin(
    RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("airwave"), "__repository__"),
    "import_lineup",
)
"""Where a queued run says it comes from (Dagster requires one); nothing here loads it."""


@pytest.fixture
def queue_instance(database_url: str) -> Iterator[dg.DagsterInstance]:
    """An instance on the test database with the project's run coordinator."""
    url = environment.with_search_path(database_url, environment.DAGSTER_SCHEMA)
    coordinator = {
        "module": "airwave_dagster.durability.coordinator",
        "class": "AirwaveRunCoordinator",
    }
    with instance_on(url, run_coordinator=coordinator) as instance:
        yield instance


def submit(
    instance: dg.DagsterInstance,
    *,
    tags: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    parent: dg.DagsterRun | None = None,
) -> dg.DagsterRun:
    """Create a run and submit it to the queue as a webserver (with `headers`) or the daemon."""
    run = instance.create_run_for_job(
        stand_in,
        tags=dict(tags or {}),
        parent_run_id=parent.run_id if parent else None,
        root_run_id=(parent.root_run_id or parent.run_id) if parent else None,
        remote_job_origin=ORIGIN,
    )
    source = SimpleNamespace(headers=dict(headers or {}))
    with WorkspaceProcessContext(instance, EmptyWorkspaceTarget()) as process:
        request = process.create_request_context(source=source)
        return instance.run_coordinator.submit_run(SubmitRunContext(run, workspace=request))
