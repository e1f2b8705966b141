"""The `answer_approval` job: approve or reject a stopped run from the Dagster UI's Launchpad.

Dagster OSS has no button of its own for "answer this question", but a person can launch a job.
This job's one op (`resolve_interrupt`) does what `airwave approve` / `airwave reject` do
(airwave_dagster/cli/approvals.py): one conditional update of the interrupt row — of concurrent
answers, from the UI and the CLI alike, exactly one wins — then, for an approval, the complete
resume of the stopped run (every completed step replayed from its checkpoint, the plan never
paid again).

Who answers is never config: it is the principal the run coordinator verified and stamped on
this run (`airwave/started_by`, from the web request's proxy-verified identity), and it must hold
the approve permission of the stopped run's job (`approvals:resolve:<job>`) and, to approve,
its resume permission (the continuation is a resume), checked here against the policy before
anything is written. Launching the job itself needs `runs:start:answer_approval`, checked by
the run coordinator like any start (docs/security.md).
"""

from collections.abc import Sequence
from typing import Literal

import dagster as dg
from dagster._core.execution.plan.resume_retry import ReexecutionStrategy
from dagster._core.remote_origin import CodeLocationOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceLoadTarget
from pydantic import Field

from airwave_dagster.permissions import JOB_PERMISSIONS, load_policy, started_by_tags
from airwave_dagster.run_tags import (
    ANSWER_APPROVAL_JOB,
    JOB_TAG,
    STARTED_BY_TAG,
)
from airwave_dagster.suspension import answered, end_suspended, has_stopped
from resources.database import DatabaseResource

_RUN_END_SECONDS = 120.0
"""How long to wait for the run to be SUSPENDED (its gate records the question a moment before)."""


class AnswerConfig(dg.Config):
    """Which stopped run, and the answer. Who answers is not configurable."""

    run_id: str = Field(
        description="The run that stopped at the approval gate (any run of its tree)."
    )
    decision: Literal["approve", "reject"] = Field(
        description="`approve` continues the run tree; `reject` ends it."
    )
    reason: str = Field(
        default="", description="Why; recorded on the interrupt (expected for a rejection)."
    )


class _Origin(WorkspaceLoadTarget):
    """The code location the stopped run came from, as a workspace of one."""

    def __init__(self, origin: CodeLocationOrigin) -> None:
        self.origin = origin

    def create_origins(self) -> Sequence[CodeLocationOrigin]:
        return [self.origin]


def _refuse(description: str) -> dg.Failure:
    return dg.Failure(description=description, allow_retries=False)


def continue_tree(
    instance: dg.DagsterInstance, stopped: dg.DagsterRun, principal: str
) -> dg.DagsterRun:
    """Create and submit the complete resume of `stopped` as `principal`, as `airwave approve` does.

    The instance's `create_reexecuted_run` is the project's complete resume
    (airwave_dagster/durability/instance.py); the run is submitted to the run coordinator like
    any other, from a workspace of the code location the stopped run came from.
    """
    origin = stopped.remote_job_origin
    if origin is None:
        raise _refuse(f"run {stopped.run_id} has no code location origin to continue from")
    code_origin = origin.repository_origin.code_location_origin
    with WorkspaceProcessContext(instance, _Origin(code_origin)) as process:
        request = process.create_request_context()
        location = request.get_code_location(code_origin.location_name)
        repository = location.get_repository(origin.repository_origin.repository_name)
        job = repository.get_full_job(stopped.job_name)
        run = instance.create_reexecuted_run(
            request_context=request,
            parent_run=stopped,
            code_location=location,
            remote_job=job,
            strategy=ReexecutionStrategy.FROM_FAILURE,
            extra_tags=started_by_tags(principal),
            use_parent_run_tags=True,
        )
        return instance.submit_run(run.run_id, request)


@dg.op
def resolve_interrupt(
    context: dg.OpExecutionContext, config: AnswerConfig, database: DatabaseResource
) -> None:
    """Resolve the run tree's interrupt as this run's verified principal; continue on approval."""
    instance = context.instance
    principal = context.dagster_run.tags.get(STARTED_BY_TAG)
    if not principal:
        raise _refuse(f"this run has no verified {STARTED_BY_TAG} tag: nobody to answer as")
    target = instance.get_run_by_id(config.run_id)
    if target is None:
        raise _refuse(f"no run {config.run_id}")
    declared = JOB_PERMISSIONS.get(target.job_name)
    if declared is None or declared.approve is None:
        raise _refuse(f"job {target.job_name} has no approval gate to answer")
    # As `airwave approve`: an approval also continues the tree, so it needs the resume too;
    # both are checked before anything is written.
    needed = [declared.approve] + ([declared.resume] if config.decision == "approve" else [])
    policy = load_policy()
    for permission in needed:
        if not policy.allows(principal, permission):
            raise _refuse(f"permission denied: {principal} may not {permission}")
    approvals = database.stores().approvals
    interrupt = approvals.find(target.root_run_id or target.run_id)
    if interrupt is None:
        raise _refuse(f"run {config.run_id} has no approval to answer")
    stopped = instance.get_run_by_id(interrupt.run_id)
    if interrupt.open and stopped is not None and stopped.status == dg.DagsterRunStatus.CANCELED:
        # Terminated from the UI while it waited: close the question, restart nothing.
        approvals.resolve(
            interrupt.id, "canceled", resolved_by=principal, reason="the run was canceled"
        )
        raise _refuse(f"conflict: run {interrupt.run_id} was canceled; nothing is left to answer")
    won, row = approvals.resolve(
        interrupt.id,
        "approved" if config.decision == "approve" else "rejected",
        resolved_by=principal,
        reason=config.reason or None,
    )
    if not won:
        if row.status == "expired":
            end_suspended(instance, row.run_id, approved=False, message=row.describe())
        raise _refuse(f"conflict: already {row.describe()}")
    # As `airwave approve`: the answer ends or resumes the run once it is SUSPENDED.
    stopped = answered(instance, row, _RUN_END_SECONDS)
    if row.status == "rejected":
        context.log.info(
            f"{row.describe()}: run tree {row.root_run_id} ends here; nothing was written"
        )
        return
    if stopped is None or not has_stopped(stopped):
        raise _refuse(
            f"{row.describe()}, but run {row.run_id} has not stopped: "
            f"`airwave runs resume {row.run_id}` continues it once it has."
        )
    try:
        continuation = continue_tree(instance, stopped, principal)
    except Exception as error:
        raise _refuse(
            f"{row.describe()}, but the run could not be continued: {error}. The approval "
            f"stands: `airwave runs resume {row.run_id}` continues it."
        ) from error
    approvals.record_continuation(row.id, continuation.run_id)
    end_suspended(
        instance,
        row.run_id,
        approved=True,
        message=f"{row.describe()}; continued as run {continuation.run_id}",
    )
    context.log.info(f"{row.describe()}; continuing as run {continuation.run_id}")


@dg.job(
    name=ANSWER_APPROVAL_JOB,
    tags={JOB_TAG: ANSWER_APPROVAL_JOB, "dagster/max_retries": "0"},
    description="Approve or reject a run stopped at an approval gate (config: run_id, decision, "
    "reason). Answers as the verified user who launches it; an approval continues the run tree.",
)
def answer_approval_job() -> None:
    """One op: resolve the interrupt, then continue the stopped run tree on approval."""
    resolve_interrupt()
