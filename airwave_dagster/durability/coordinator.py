"""The run queue, guarding every submitted re-execution against changed op code versions.

`AirwaveInstance` already refuses from-failure re-executions with changed code. Runs can also be
created as re-executions in other ways (the UI's "re-execute selected steps", GraphQL
`launchPipelineReexecution` with explicit step keys); those reach the queue through `submit_run`,
where the same check runs. A refused run is marked failed with the reason and never starts.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext

from airwave_dagster.durability.versions import CodeVersionChanged, refuse_if_changed


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
    """`QueuedRunCoordinator` with the code-version guard on submit."""

    def submit_run(self, context: SubmitRunContext) -> dg.DagsterRun:
        """Check the run, then queue it as usual."""
        guard_submission(self._instance, context.dagster_run)
        return super().submit_run(context)
