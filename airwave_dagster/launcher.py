"""Start runs the way the Dagster UI does, so CLI runs are visible and re-executable there.

Dagster has no public "launch this job with config and give me the run" call for a workspace
(notes/dagster-findings.md Q5): `dagster job launch` wraps the same internal steps used here. The
run is created against the code location from `workspace.yaml`, so it carries a remote job origin
and the UI can re-execute it. It then goes to the run queue when a daemon is running (`airwave
dev`), or straight to the run launcher otherwise, so the CLI works without the daemon.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from dagster._core.remote_representation.external import RemoteJob
from dagster._core.workspace.context import BaseWorkspaceRequestContext, WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceFileTarget

from airwave_dagster.environment import airwave_home, project_root

LOCATION_NAME = "airwave"
_DAEMON_FRESH_SECONDS = 60


@contextmanager
def _children_write_to(log_path: Path) -> Iterator[None]:
    """Point fds 1 and 2 at a log file while child processes are started.

    The code server started here launches run workers, which print every event to the stdout
    they inherit. That would flood the CLI's own output (and break `--json`), so the children
    get the log file instead; the full event log is in Postgres and the UI anyway.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log_path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


@contextmanager
def workspace(instance: dg.DagsterInstance) -> Iterator[BaseWorkspaceRequestContext]:
    """A request context over the project's `workspace.yaml` (starts a code server).

    The code server's output, and that of the run workers it launches, goes to
    `.airwave/logs/code-server.log`.
    """
    target = WorkspaceFileTarget(paths=[str(project_root() / "workspace.yaml")])
    with _children_write_to(airwave_home() / "logs" / "code-server.log"):
        process_context = WorkspaceProcessContext(instance, target)
    with process_context:
        yield process_context.create_request_context()


def remote_job(context: BaseWorkspaceRequestContext, job_name: str) -> RemoteJob:
    """The job as the code server describes it."""
    location = context.get_code_location(LOCATION_NAME)
    repository = next(iter(location.get_repositories().values()))
    return repository.get_full_job(job_name)


def daemon_running(instance: dg.DagsterInstance) -> bool:
    """Whether a queued-run daemon heartbeat is fresh (then runs go through the queue)."""
    heartbeats = instance.get_daemon_heartbeats()
    beat = heartbeats.get("QUEUED_RUN_COORDINATOR")
    return beat is not None and time.time() - beat.timestamp < _DAEMON_FRESH_SECONDS


def create_run(
    instance: dg.DagsterInstance,
    context: BaseWorkspaceRequestContext,
    job_name: str,
    run_config: Mapping[str, object],
    tags: Mapping[str, str],
) -> dg.DagsterRun:
    """Create a NOT_STARTED run of `job_name` with a remote origin (UI re-executable)."""
    location = context.get_code_location(LOCATION_NAME)
    job = remote_job(context, job_name)
    plan = location.get_execution_plan(
        job, dict(run_config), step_keys_to_execute=None, known_state=None, instance=instance
    )
    snapshot = plan.execution_plan_snapshot
    repository = next(iter(location.get_repositories().values()))
    return instance.create_run(
        job_name=job.name,
        run_id=None,
        run_config=dict(run_config),
        resolved_op_selection=None,
        step_keys_to_execute=snapshot.step_keys_to_execute,
        op_selection=None,
        status=None,
        root_run_id=None,
        parent_run_id=None,
        tags={**job.tags, **tags},
        job_snapshot=job.job_snapshot,
        execution_plan_snapshot=snapshot,
        parent_job_snapshot=job.parent_job_snapshot,
        remote_job_origin=job.get_remote_origin(),
        job_code_origin=job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repository.asset_graph,
    )


def start_run(
    instance: dg.DagsterInstance,
    context: BaseWorkspaceRequestContext,
    run: dg.DagsterRun,
) -> dg.DagsterRun:
    """Queue the run if a daemon serves the queue, otherwise launch it now."""
    if daemon_running(instance):
        return instance.submit_run(run.run_id, context)
    return instance.launch_run(run.run_id, context)


def wait_for_run(
    instance: dg.DagsterInstance, run_id: str, *, poll_seconds: float = 0.5
) -> dg.DagsterRun:
    """Block until the run reaches a finished status and return it."""
    while True:
        run = instance.get_run_by_id(run_id)
        if run is None:
            raise LookupError(f"run {run_id} not found")
        if run.is_finished:
            return run
        time.sleep(poll_seconds)


def failure_messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The step and run failure messages of a run, in order."""
    messages: list[str] = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            if data.user_failure_data is not None and data.user_failure_data.description:
                messages.append(f"{event.step_key}: {data.user_failure_data.description}")
            elif data.error is not None:
                messages.append(f"{event.step_key}: {data.error.message.strip()}")
        elif event.event_type == dg.DagsterEventType.RUN_FAILURE and not messages:
            messages.append(record.message or "run failed")
    return messages
