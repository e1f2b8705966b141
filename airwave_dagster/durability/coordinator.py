"""The run queue: who may submit the run, and no re-execution replaying changed op code.

Every run queued reaches `submit_run` — Launchpad and GraphQL launches, the CLI through a
webserver, sensor ticks, schedules, automatic retries — so the permissions policy is applied
here whoever created it: the submitter (`identify_submission`) must hold `runs:start:<job>`, or
`runs:resume:<job>` for a re-execution, and the run is stamped with who it was (docs/security.md).

`AirwaveInstance` already refuses from-failure re-executions with changed code. Runs can also be
created as re-executions in other ways (the UI's "re-execute selected steps", GraphQL
`launchPipelineReexecution` with explicit step keys); those reach the queue here too, where the
same check runs. A refused run is marked failed with the reason and never starts.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext

from airwave_dagster.durability.versions import CodeVersionChanged, refuse_if_changed
from airwave_dagster.permissions import (
    PermissionDenied,
    PermissionsError,
    identify_submission,
    load_policy,
    started_by_tags,
    submission_permission,
)


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
    """`QueuedRunCoordinator` with the permission check and the code-version guard on submit."""

    def submit_run(self, context: SubmitRunContext) -> dg.DagsterRun:
        """Check the run, then queue it as usual."""
        authorize_submission(self._instance, context)
        guard_submission(self._instance, context.dagster_run)
        return super().submit_run(context)
