"""The run queue: who may submit the run, and no re-execution replaying changed op code.

Every run queued reaches `submit_run` — Launchpad and GraphQL launches, the CLI through a
webserver, sensor ticks, schedules, automatic retries — so the permissions policy is applied
here whoever created it: the submitter (`identify_submission`) must hold `runs:start:<job>`, or
`runs:resume:<job>` for a re-execution, and the run is stamped with who it was (docs/security.md).

`AirwaveInstance` already refuses from-failure re-executions with changed code. Runs can also be
created as re-executions in other ways (the UI's "re-execute selected steps", GraphQL
`launchPipelineReexecution` with explicit step keys); those reach the queue here too, where the
same check runs. A refused run is marked failed with the reason and never starts.

A first run that arrives without a trace context (the Launchpad, GraphQL, a schedule) gets one
here (`trace_submission`), so every run carries the trace of the call that started it.

A run once queued wakes the daemon of `airwave serve` (`durability/wakeups.py`), which takes it
at once instead of at its next look.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext

from airwave_dagster import tracing
from airwave_dagster.durability.versions import CodeVersionChanged, refuse_if_changed
from airwave_dagster.durability.wakeups import wake_queue
from airwave_dagster.permissions import (
    PermissionDenied,
    PermissionsError,
    identify_submission,
    load_policy,
    started_by_tags,
    submission_permission,
)
from airwave_dagster.run_tags import TRACEPARENT_TAG

TRACEPARENT_HEADER = "traceparent"
"""The W3C header a traced client or proxy sends with the launching request."""


def authorize_submission(instance: dg.DagsterInstance, context: SubmitRunContext) -> None:
    """Refuse (mark failed and raise) a run its submitter may not start; else stamp who it was.

    Raises:
        PermissionDenied: Naming the principal and the permission it lacks.
        PermissionsError: The permissions file became unreadable or invalid (nobody may start
            anything until it is fixed; the message names the file and key path).
    """
    run = context.dagster_run
    try:
        policy = load_policy()
    except PermissionsError as error:
        instance.report_run_failed(run, message=str(error))
        raise
    principal = identify_submission(context)
    permission = submission_permission(run.job_name, reexecution=run.parent_run_id is not None)
    if not policy.allows(principal, permission):
        denied = PermissionDenied(principal, permission)
        instance.report_run_failed(run, message=str(denied))
        raise denied
    instance.add_run_tags(run.run_id, started_by_tags(principal))


def trace_submission(instance: dg.DagsterInstance, context: SubmitRunContext) -> None:
    """Record the trace context of a first run its starter did not trace (tracing.py).

    The CLI and the upload sensor record their own `start <job>` span; a run launched from the
    UI, over GraphQL or by a schedule reaches the queue without one. Here it gets a `submit
    <job>` span, a child of the launching request's `traceparent` header when a traced client
    or proxy sent one. With tracing off in this process only such a header is recorded.
    Re-executions are left alone: they join their root run's trace.
    """
    run = context.dagster_run
    if run.parent_run_id is not None or TRACEPARENT_TAG in run.tags:
        return
    attributes = {"airwave.run.job": run.job_name, "airwave.run.id": run.run_id}
    with tracing.starting(
        f"submit {run.job_name}",
        attributes,
        join=context.get_request_header(TRACEPARENT_HEADER),
        from_environment=False,
    ) as tags:
        if tags:
            instance.add_run_tags(run.run_id, tags)


def guard_submission(instance: dg.DagsterInstance, run: dg.DagsterRun) -> None:
    """Refuse (mark failed and raise) a re-execution that would replay outputs of changed ops."""
    if run.parent_run_id is None or run.step_keys_to_execute is None:
        return  # a first run, or a re-execution of every step: nothing is replayed
    parent = instance.get_run_by_id(run.parent_run_id)
    if parent is None or run.job_snapshot_id is None:
        return
    try:
        refuse_if_changed(instance, parent, instance.get_job_snapshot(run.job_snapshot_id))
    except CodeVersionChanged as error:
        instance.report_run_failed(run, message=str(error))
        raise


class AirwaveRunCoordinator(QueuedRunCoordinator):
    """`QueuedRunCoordinator` checking permissions and code versions, recording trace context."""

    def submit_run(self, context: SubmitRunContext) -> dg.DagsterRun:
        """Check the run, then queue it as usual."""
        authorize_submission(self._instance, context)
        guard_submission(self._instance, context.dagster_run)
        trace_submission(self._instance, context)
        run = super().submit_run(context)
        if run.status == dg.DagsterRunStatus.QUEUED:
            wake_queue(self._instance)
        return run
