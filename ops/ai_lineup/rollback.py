"""The `rollback_lineup` job: put back the lineup an approved `ai_lineup` run replaced.

plan (load the run's snapshot, compare it with the air, refuse when ambiguous; no write) →
approval gate (the `ai_lineup` gate's code and policy, its own gate id) → apply (one
transaction, idempotent). The snapshot, the checks and the restore are
`resources/stores/rollback.py`; docs/ai-lineup.md "Rolling back" defines "ambiguous".
"""

import dagster as dg
from pydantic import BaseModel, Field

from airwave_dagster.domain.ai.lineup_diff import DiffEntry, LineupDiff, OnAirChannel
from airwave_dagster.run_tags import AI_LINEUP_JOB, JOB_TAG, ROLLBACK_LINEUP_JOB
from ops.ai_lineup.approval import diff_metadata_rows, pass_gate
from ops.ai_lineup.checkpoints import ApprovalPolicy
from ops.steps import versioned_op
from resources.database import DatabaseResource
from resources.stores.rollback import RollbackCheck, RollbackRefused

ROLLBACK_VERSION = "rollback-lineup-v1"
"""Code version of every op of this job."""
ROLLBACK_GATE_ID = "approve-rollback:v1"
"""The rollback gate's id and version (an answer to another gate is never taken for it)."""


class RollbackConfig(dg.Config):
    """Which AI lineup to roll back, and when to ask."""

    run_id: str = Field(
        description="A run of `ai_lineup` (any run of its tree) whose replaced lineup to put back."
    )
    approval: ApprovalPolicy = Field(
        default="auto_when_nothing_removed",
        description="When to stop for approval, as `ai_lineup`'s: `required` (always), "
        "`auto_when_nothing_removed` (when an AI channel or package on air would be removed — "
        "nearly always for a rollback), `never`.",
    )
    confirm: bool = Field(
        default=False,
        description="Pre-approve the rollback (for scripts): the gate passes without asking.",
    )
    approval_expiry_hours: float | None = Field(
        default=None, description="An answer after this many hours expires the question."
    )


class RollbackPlan(BaseModel):
    """The plan step's checkpoint: the lineup to roll back and what doing it changes."""

    ledger_id: str
    rollback_id: str
    approval: ApprovalPolicy
    confirm: bool
    approval_expiry_hours: float | None
    diff: LineupDiff
    already_applied: bool = False


class RollbackApproval(BaseModel):
    """The gate's checkpoint."""

    gate_id: str
    decision: str
    resolved_by: str | None


class RollbackResult(BaseModel):
    """The apply step's output: what the rollback did."""

    ledger_id: str
    removed: list[DiffEntry] = Field(default_factory=list)
    restored: list[DiffEntry] = Field(default_factory=list)
    removed_packages: list[str] = Field(default_factory=list)
    restored_packages: list[str] = Field(default_factory=list)
    already_applied: bool = False

    def summary(self) -> str:
        """One line for the log, the CLI and the metadata."""
        if self.already_applied:
            return f"the lineup of run {self.ledger_id} was already restored by this rollback"
        return (
            f"rolled back the AI lineup of run {self.ledger_id}: removed "
            f"{len(self.removed)} channel(s) and {len(self.removed_packages)} package(s), "
            f"restored {len(self.restored)} channel(s) and {len(self.restored_packages)} "
            "package(s)"
        )


def rollback_diff(check: RollbackCheck) -> LineupDiff:
    """The check as the lineup diff the approval gate and `airwave approvals show` print.

    `removed`: the AI run's channels; `created`: the snapshot's channels put back; `unchanged`:
    snapshot channels the run left on air (rewritten as the snapshot holds them).
    """
    return LineupDiff(
        removed=tuple(
            DiffEntry(name=a.name, package=a.package, number=None, previous_number=a.number)
            for a in check.removed
        ),
        created=tuple(
            DiffEntry(name=name, package=package, number=number, previous_number=None)
            for number, name, package in check.restored
        ),
        unchanged=tuple(
            DiffEntry(name=name, package=package, number=number, previous_number=number)
            for number, name, package in check.unchanged
        ),
        renumbered=(),
        untouched=tuple(
            OnAirChannel(
                number=a.number,
                name=a.name,
                package=a.package,
                origin="preset" if a.origin == "preset" else "manual",
            )
            for a in check.untouched
        ),
        removed_packages=check.removed_packages,
        created_packages=check.restored_packages,
        kept_packages=(),
    )


def _refused(ledger_id: str, reasons: tuple[str, ...]) -> dg.Failure:
    return dg.Failure(
        description=(
            f"ROLLBACK REFUSED: the lineup of run {ledger_id} cannot be restored unambiguously: "
            + "; ".join(reasons)
            + ". Nothing was written."
        ),
        metadata={"reasons": dg.MetadataValue.json(list(reasons))},
        allow_retries=False,
    )


@versioned_op(ROLLBACK_VERSION)
def plan_rollback(
    context: dg.OpExecutionContext, config: RollbackConfig, database: DatabaseResource
) -> RollbackPlan:
    """Load the snapshot of the run's lineup and compare it with the air (no write).

    Refuses, with every reason, when the run is not an `ai_lineup` run, took no snapshot,
    was rolled back already or replaced since, has not finished, or when the air changed since
    it finished (a channel it left edited, deleted or added; a number or package key the
    snapshot needs taken by something the rollback does not remove).
    """
    run = context.instance.get_run_by_id(config.run_id)
    if run is None:
        raise _refused(config.run_id, (f"no run {config.run_id} on this instance",))
    if run.job_name != AI_LINEUP_JOB:
        raise _refused(
            config.run_id, (f"run {config.run_id} is a {run.job_name} run, not {AI_LINEUP_JOB}",)
        )
    ledger_id = run.root_run_id or run.run_id
    rollback_id = context.dagster_run.root_run_id or context.run_id
    check = database.stores().rollback.plan(ledger_id, rollback_id)
    if check.refusals:
        raise _refused(ledger_id, check.refusals)
    diff = rollback_diff(check)
    context.add_output_metadata(
        {
            "lineup": ledger_id,
            "AI channels removed": len(diff.removed),
            "channels restored": len(diff.created),
            "channels rewritten as they were": len(diff.unchanged),
        }
    )
    return RollbackPlan(
        ledger_id=ledger_id,
        rollback_id=rollback_id,
        approval=config.approval,
        confirm=config.confirm,
        approval_expiry_hours=config.approval_expiry_hours,
        diff=diff,
        already_applied=check.already_by is not None,
    )


@versioned_op(ROLLBACK_VERSION)
def approve_rollback(
    context: dg.OpExecutionContext, plan: RollbackPlan, database: DatabaseResource
) -> RollbackApproval:
    """The `ai_lineup` approval gate (`pass_gate`) with the rollback's diff and its own gate id.

    Under the default policy a rollback that removes AI channels asks; `confirm` pre-approves.
    `airwave approve RUN_ID` continues the run tree from here.
    """
    diff = plan.diff
    if plan.already_applied:
        return RollbackApproval(gate_id=ROLLBACK_GATE_ID, decision="applied", resolved_by=None)
    decision, resolved_by = pass_gate(
        context,
        database.stores().approvals,
        gate_id=ROLLBACK_GATE_ID,
        policy=plan.approval,
        pre_approved=plan.confirm,
        removes_anything=diff.removes_anything,
        payload={"diff": diff.model_dump(mode="json"), "rollback_of": plan.ledger_id},
        expiry_hours=plan.approval_expiry_hours,
        question=(
            f"rolling back the AI lineup of run {plan.ledger_id} removes {len(diff.removed)} "
            f"AI channel(s) and {len(diff.removed_packages)} AI package(s) and restores "
            f"{len(diff.created)} channel(s)"
        ),
        metadata=diff_metadata_rows(diff),
    )
    context.add_output_metadata(
        {**diff_metadata_rows(diff), "decision": decision, "resolved_by": resolved_by or ""}
    )
    return RollbackApproval(gate_id=ROLLBACK_GATE_ID, decision=decision, resolved_by=resolved_by)


@versioned_op(ROLLBACK_VERSION)
def apply_rollback(
    context: dg.OpExecutionContext,
    plan: RollbackPlan,
    approved: RollbackApproval,
    database: DatabaseResource,
) -> RollbackResult:
    """Remove the run's AI lineup and put the snapshot back, in ONE transaction.

    Re-checks under a lock first (the air may have changed while the gate waited). Idempotent:
    a resume after a crash finds either nothing done (and does it) or the snapshot marked
    rolled back by this rollback's root run (and does nothing).
    """
    context.log.info(
        f"approval gate {approved.gate_id}: {approved.decision}"
        + (f" by {approved.resolved_by}" if approved.resolved_by else "")
    )
    try:
        check = database.stores().rollback.apply(plan.ledger_id, plan.rollback_id)
    except RollbackRefused as error:
        raise _refused(plan.ledger_id, error.reasons) from error
    if check.already_by is not None:
        result = RollbackResult(ledger_id=plan.ledger_id, already_applied=True)
    else:
        diff = rollback_diff(check)
        result = RollbackResult(
            ledger_id=plan.ledger_id,
            removed=list(diff.removed),
            restored=list(diff.created),
            removed_packages=list(diff.removed_packages),
            restored_packages=list(diff.created_packages),
        )
    context.log.info(result.summary())
    context.add_output_metadata(
        {
            "summary": result.summary(),
            "removed": len(result.removed),
            "restored": len(result.restored),
            "result": dg.MetadataValue.json(
                {**result.model_dump(mode="json"), "summary": result.summary()}
            ),
        }
    )
    return result


@dg.job(
    name=ROLLBACK_LINEUP_JOB,
    tags={JOB_TAG: ROLLBACK_LINEUP_JOB},
    description="Put back the AI lineup an approved ai_lineup run replaced (from the snapshot "
    "its wipe took), after the same approval gate; refused when the air changed since.",
)
def rollback_lineup():
    """plan (refuse when ambiguous) → approval gate → apply (one transaction)."""
    plan = plan_rollback()
    approved = approve_rollback(plan)
    apply_rollback(plan, approved)
