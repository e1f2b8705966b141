"""The run queue applies the permissions policy to every submitted run, whoever created it.

Real parts: Dagster's instance on the test Postgres with this project's `AirwaveRunCoordinator`,
and Dagster's own request context (carrying the proxy header as `airwave serve`'s middleware
sets it), from tests/support/coordinator.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster.domain.permissions import LOCAL_OPERATOR, SERVICE_PRINCIPAL
from airwave_dagster.permissions import PRINCIPAL_HEADER, PermissionDenied
from airwave_dagster.run_tags import STARTED_BY_TAG
from airwave_dagster.settings import PERMISSIONS_ENV
from tests.support.coordinator import submit
from tests.support.permissions import write_policy, write_three_principals

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def instance(queue_instance: dg.DagsterInstance) -> dg.DagsterInstance:
    return queue_instance


def _submit(
    instance: dg.DagsterInstance,
    *,
    tags: dict[str, str] | None = None,
    header: str | None = None,
    parent: dg.DagsterRun | None = None,
) -> dg.DagsterRun:
    """Submit a run, carrying the principal header as `airwave serve`'s middleware sets it."""
    headers = {PRINCIPAL_HEADER: header} if header else None
    return submit(instance, tags=tags, headers=headers, parent=parent)


def _refused(instance: dg.DagsterInstance, **submission: Any) -> tuple[PermissionDenied, Any]:
    before = {run.run_id for run in instance.get_runs()}
    with pytest.raises(PermissionDenied) as caught:
        _submit(instance, **submission)
    (run,) = [run for run in instance.get_runs() if run.run_id not in before]
    return caught.value, run


def _acting_as(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, principal: str) -> None:
    monkeypatch.setenv(PERMISSIONS_ENV, str(write_three_principals(tmp_path, principal)))


def test_a_run_stamped_by_a_viewer_is_failed_and_never_queued(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _acting_as(tmp_path, monkeypatch, "viewer")
    denied, run = _refused(instance, tags={STARTED_BY_TAG: "viewer"})
    assert (denied.principal, denied.permission) == ("viewer", "runs:start:import_lineup")
    assert run.status == dg.DagsterRunStatus.FAILURE
    events = {record.dagster_event_type for record in instance.all_logs(run.run_id)}
    assert dg.DagsterEventType.PIPELINE_ENQUEUED not in events
    assert dg.DagsterEventType.PIPELINE_START not in events
    failure = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.PIPELINE_FAILURE)
    assert "viewer may not runs:start:import_lineup" in (failure[-1].message or "")


def test_a_launchers_run_is_queued_and_stamped(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _acting_as(tmp_path, monkeypatch, "viewer")  # the OS user does not matter: the tag does
    queued = _submit(instance, tags={STARTED_BY_TAG: "launcher"})
    assert queued.status == dg.DagsterRunStatus.QUEUED
    assert queued.tags[STARTED_BY_TAG] == "launcher" and queued.tags["user"] == "launcher"


def test_the_proxy_header_wins_over_any_tag(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _acting_as(tmp_path, monkeypatch, "launcher")
    forged = {STARTED_BY_TAG: "launcher", "dagster/sensor_name": "lineup_upload_sensor"}
    denied, run = _refused(instance, tags=forged, header="viewer")
    assert denied.principal == "viewer"
    assert run.status == dg.DagsterRunStatus.FAILURE
    queued = _submit(instance, header="launcher")
    assert queued.tags[STARTED_BY_TAG] == "launcher"


def test_sensor_schedule_and_retry_runs_are_the_daemon(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _acting_as(tmp_path, monkeypatch, "viewer")
    for tag in ("dagster/sensor_name", "dagster/schedule_name"):
        queued = _submit(instance, tags={tag: "x"})
        assert queued.tags[STARTED_BY_TAG] == SERVICE_PRINCIPAL
    first = _submit(instance, tags={STARTED_BY_TAG: "launcher"})
    retry = _submit(instance, tags={"dagster/retry_number": "1"}, parent=first)
    assert retry.tags[STARTED_BY_TAG] == SERVICE_PRINCIPAL


def test_a_daemon_the_file_gives_nothing_is_refused(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin_only = write_policy(tmp_path, roles={"admin": ["*"]}, principals={"admin": ["admin"]})
    monkeypatch.setenv(PERMISSIONS_ENV, str(admin_only))
    denied, run = _refused(instance, tags={"dagster/sensor_name": "lineup_upload_sensor"})
    assert (denied.principal, denied.permission) == (SERVICE_PRINCIPAL, "runs:start:import_lineup")
    assert run.status == dg.DagsterRunStatus.FAILURE


def test_a_reexecution_needs_resume_and_a_sensor_parent_does_not_make_it_the_daemons(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _acting_as(tmp_path, monkeypatch, "viewer")
    parent = _submit(instance, tags={"dagster/sensor_name": "lineup_upload_sensor"})
    # A re-execution inherits its parent's sensor tag; the tag says nothing of who re-executed.
    inherited = {"dagster/sensor_name": "lineup_upload_sensor", STARTED_BY_TAG: "approver"}
    denied, _ = _refused(instance, tags=inherited, parent=parent)
    assert (denied.principal, denied.permission) == ("approver", "runs:resume:import_lineup")
    resumed = _submit(instance, tags={**inherited, STARTED_BY_TAG: "launcher"}, parent=parent)
    assert resumed.status == dg.DagsterRunStatus.QUEUED
    assert resumed.tags[STARTED_BY_TAG] == "launcher"


def test_without_a_file_the_local_operator_submits(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PERMISSIONS_ENV, raising=False)
    queued = _submit(instance)
    assert queued.status == dg.DagsterRunStatus.QUEUED
    assert queued.tags[STARTED_BY_TAG] == LOCAL_OPERATOR


def test_an_unmapped_os_user_is_nobody(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roles = {"admin": ["*"]}
    monkeypatch.setenv(
        PERMISSIONS_ENV, str(write_policy(tmp_path, roles=roles, principals={"admin": ["admin"]}))
    )
    denied, _ = _refused(instance)  # no header, no daemon tag, no stamp: the OS user
    assert denied.principal.startswith("unknown user ")
