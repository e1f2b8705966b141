"""The `ai_lineup` ops between the plan and the first write: number the plan, then the gate.

Numbering writes nothing (it computes against the state the wipe will leave), so the gate can
show the real diff — removed, created, unchanged and renumbered channels with their numbers — and
the expected build cost before anything is deleted or paid for. A gate that must ask records ONE
interrupt row (`resources/stores/approvals.py`) and ends its run with an explained failure: no
process and no queue slot is held while a person decides. `airwave approve RUN_ID` resolves the
row and resumes the same run tree; every completed step (the plan included) is replayed from its
checkpoint, the gate step runs again, finds the approval and lets the writes proceed.
"""

from datetime import UTC, datetime, timedelta

import dagster as dg

from airwave_dagster.domain.ai.lineup_diff import LineupDiff, OnAirChannel, diff_lineup
from airwave_dagster.domain.ai.numbering import ExistingChannel, assign_numbers, build_order
from airwave_dagster.domain.ai.usage import Usage
from airwave_dagster.run_tags import AWAITING_APPROVAL_TAG
from ops.ai_lineup.checkpoints import (
    AnalyzedLibrary,
    ApprovedLineup,
    CostEstimate,
    LineupContext,
    NumberedLineup,
    PlannedLineup,
)
from ops.ai_lineup.ops import OP_VERSION, _phase, _stores, _trace
from ops.steps import versioned_op
from resources.database import DatabaseResource
from resources.prices import call_cost
from resources.stores.approvals import Interrupt

GATE_ID = "approve-plan:v1"
"""The gate's id and version. A resume whose interrupt carries another gate id is refused."""

CALLS_PER_BUILD = 2
"""Expected model calls per channel build: a preview, then the commit (bench: 2.00)."""
BUILD_UNCACHED_INPUT_TOKENS = 3_000
"""Expected uncached input per build call: the channel brief and the growing conversation."""
BUILD_OUTPUT_TOKENS = 600
"""Expected output per build call (a tool call with a filter)."""


@versioned_op(OP_VERSION)
def number_ai_channels(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    database: DatabaseResource,
) -> NumberedLineup:
    """Number every planned channel as if the previous AI lineup were already gone (no write).

    Each package owns a block of 100 from 1000; numbers other channels hold are skipped. `limit`
    picks the builds round-robin across packages, but every planned channel gets its number.
    """
    settings = analyzed.settings
    _, ai = _stores(database)
    plan = planned.sanitized.plan
    with _phase(context, ai, "numberChannels", "numbering"):
        live, package_ids = ai.numbering_state(settings.source_id)
        reuse = {
            p.key: package_ids[p.existing_key]
            for p in plan.packages
            if p.existing_key and p.existing_key in package_ids
        }
        numbering = assign_numbers(
            plan,
            live.keys(),
            package_ids=reuse,
            existing_channels=[ExistingChannel(number=n, package_id=p) for n, p in live.items()],
        )
    selected = build_order(numbering, settings.limit or None)
    if len(selected) < len(numbering.channels):
        context.log.info(f"planned {len(numbering.channels)} channels; building {len(selected)}")
    _trace(
        context,
        ai,
        step_name="numberChannels",
        phase="numbering",
        status="ok",
        output={
            "numbers": {c.key: c.number for c in numbering.channels},
            "selected": [c.number for c in selected],
        },
    )
    context.add_output_metadata({"numbered": len(numbering.channels), "selected": len(selected)})
    return NumberedLineup(numbering=numbering, selected=[c.number for c in selected])


def estimate_cost(
    analyzed: AnalyzedLibrary, shared: LineupContext, numbered: NumberedLineup, spent: float
) -> CostEstimate:
    """Selected channels times expected calls per build, each call priced like the ledger will."""
    settings = analyzed.settings
    context_tokens = shared.context.approx_tokens
    tokens = {
        "cache_read": context_tokens,
        "input": BUILD_UNCACHED_INPUT_TOKENS,
        "output": BUILD_OUTPUT_TOKENS,
    }
    channels = len(numbered.selected)
    estimated: float | None = 0.0
    if settings.provider == "anthropic" and channels:
        typical = Usage(
            input_tokens=BUILD_UNCACHED_INPUT_TOKENS,
            output_tokens=BUILD_OUTPUT_TOKENS,
            cache_read_tokens=context_tokens,
            calls=1,
        )
        # The run's first call writes the shared prefix to the cache; every later one reads it.
        first = typical.model_copy(
            update={"cache_read_tokens": 0, "cache_write_tokens": context_tokens}
        )
        typical_cost = call_cost(settings.worker_model, typical, settings.prices)
        first_cost = call_cost(settings.worker_model, first, settings.prices)
        if typical_cost is None or first_cost is None:
            estimated = None
        else:
            estimated = round(first_cost + typical_cost * (channels * CALLS_PER_BUILD - 1), 6)
    return CostEstimate(
        channels=channels,
        calls_per_build=CALLS_PER_BUILD if settings.provider == "anthropic" else 0,
        tokens_per_call=tokens,
        worker_model=settings.worker_model if settings.provider == "anthropic" else "offline",
        estimated_usd=estimated,
        planner_spent_usd=round(spent, 6),
        budget_usd=settings.budget_usd,
    )


def diff_metadata(diff: LineupDiff, estimate: CostEstimate) -> dict[str, dg.MetadataValue]:
    """The diff and the estimate as UI tables (one row per channel, one per figure)."""
    channel_schema = dg.TableSchema(
        columns=[
            dg.TableColumn("change", "string"),
            dg.TableColumn("number", "int", description="number after the lineup"),
            dg.TableColumn("previous", "int", description="number on air now"),
            dg.TableColumn("channel", "string"),
            dg.TableColumn("package", "string"),
        ]
    )
    rows = [
        dg.TableRecord(
            {
                "change": kind,
                "number": e.number,
                "previous": e.previous_number,
                "channel": e.name,
                "package": e.package or "",
            }
        )
        for kind, entries in (
            ("removed", diff.removed),
            ("created", diff.created),
            ("renumbered", diff.renumbered),
            ("unchanged", diff.unchanged),
        )
        for e in entries
    ]
    rows += [
        dg.TableRecord(
            {
                "change": f"untouched ({c.origin})",
                "number": c.number,
                "previous": c.number,
                "channel": c.name,
                "package": c.package or "",
            }
        )
        for c in diff.untouched
    ]
    figures = [
        ("AI channels removed", str(len(diff.removed))),
        ("AI channels created", str(len(diff.created))),
        ("AI channels renumbered", str(len(diff.renumbered))),
        ("AI channels unchanged", str(len(diff.unchanged))),
        ("manual/preset channels untouched", str(len(diff.untouched))),
        ("AI packages removed", ", ".join(diff.removed_packages) or "—"),
        ("AI packages created", ", ".join(diff.created_packages) or "—"),
        ("channels to build", str(estimate.channels)),
        ("expected calls per build", str(estimate.calls_per_build)),
        ("worker model", estimate.worker_model),
        (
            "estimated build cost (USD)",
            "unpriced" if estimate.estimated_usd is None else f"{estimate.estimated_usd:.4f}",
        ),
        ("planner spent so far (USD)", f"{estimate.planner_spent_usd:.4f}"),
        ("budget (USD)", "none" if estimate.budget_usd is None else f"{estimate.budget_usd:.4f}"),
    ]
    summary_schema = dg.TableSchema(
        columns=[dg.TableColumn("figure", "string"), dg.TableColumn("value", "string")]
    )
    return {
        "lineup diff": dg.MetadataValue.table(records=rows, schema=channel_schema),
        "approval summary": dg.MetadataValue.table(
            records=[dg.TableRecord({"figure": f, "value": v}) for f, v in figures],
            schema=summary_schema,
        ),
    }


def _commands(run_id: str) -> str:
    return (
        f"Review: `airwave approvals show {run_id}`; approve: `airwave approve {run_id}`; "
        f"reject: `airwave reject {run_id} --reason TEXT`."
    )


def _closed(interrupt: Interrupt, run_id: str) -> dg.Failure:
    return dg.Failure(
        description=(
            f"the lineup's approval was {interrupt.describe()}"
            + (f" ({interrupt.reason})" if interrupt.reason else "")
            + ". Nothing was written; start a new run for another lineup."
        ),
        allow_retries=False,
    )


@versioned_op(OP_VERSION)
def approve_lineup(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    shared: LineupContext,
    planned: PlannedLineup,
    numbered: NumberedLineup,
    database: DatabaseResource,
) -> ApprovedLineup:
    """Approval gate: show the lineup diff and expected cost; stop the run until approved.

    Nothing has been written when this runs. If the policy needs an answer (`approval:
    required`, or an AI channel/package on air would be removed under the default
    `auto_when_nothing_removed`), it records one interrupt row, tags the run
    `airwave/awaiting_approval` and ENDS the run — no process waits. `airwave approve RUN_ID`
    continues the same run tree from here (the plan is replayed, never paid again);
    `airwave reject` ends it with nothing written. `confirm_wipe` is a pre-approval.
    """
    settings = analyzed.settings
    stores = database.stores()
    ai, approvals = stores.ai, stores.approvals
    with _phase(context, ai, "approveLineup", "approval"):
        on_air = [OnAirChannel(**row) for row in ai.on_air(settings.source_id)]
        # Only what will be built: with a `limit`, the channels left out are not created (and
        # an AI channel on air that only they would have replaced is removed).
        diff = diff_lineup(
            on_air,
            ai.doomed_package_names(settings.source_id),
            planned.sanitized.plan.only(numbered.selected_keys()),
            numbered.numbering,
        )
        spent = ai.ledger(settings.ledger_id).spent_usd
        estimate = estimate_cost(analyzed, shared, numbered, spent)
    metadata = diff_metadata(diff, estimate)
    root = context.dagster_run.root_run_id or context.run_id
    interrupt = approvals.find(root)
    if interrupt is not None and interrupt.gate_id != GATE_ID:
        raise dg.Failure(
            description=(
                f"this run tree stopped at gate {interrupt.gate_id!r}, but this code's gate is "
                f"{GATE_ID!r}: its answer cannot be trusted for this gate. Start a new run."
            ),
            allow_retries=False,
        )
    decision: str
    resolved_by: str | None = None
    if interrupt is not None and interrupt.status == "approved":
        decision, resolved_by = "approved", interrupt.resolved_by
    elif interrupt is not None and not interrupt.open:
        raise _closed(interrupt, context.run_id)
    elif interrupt is None and settings.approval == "never":
        decision = "never"
    elif interrupt is None and settings.confirm_wipe:
        decision = "confirm_wipe"
    elif (
        interrupt is None
        and settings.approval == "auto_when_nothing_removed"
        and not diff.removes_anything
    ):
        decision = "auto"
    else:
        expires = (
            None
            if settings.approval_expiry_hours is None
            else datetime.now(UTC) + timedelta(hours=settings.approval_expiry_hours)
        )
        if interrupt is None:
            interrupt = approvals.open_interrupt(
                root_run_id=root,
                run_id=context.run_id,
                gate_id=GATE_ID,
                payload={
                    "diff": diff.model_dump(mode="json"),
                    "estimate": estimate.model_dump(mode="json"),
                },
                expires_at=expires,
            )
        if interrupt.expires_at is not None and interrupt.expires_at <= datetime.now(UTC):
            _, interrupt = approvals.resolve(interrupt.id, "expired", resolved_by="expiry")
            raise _closed(interrupt, context.run_id)
        context.instance.add_run_tags(context.run_id, {AWAITING_APPROVAL_TAG: GATE_ID})
        _trace(
            context,
            ai,
            step_name="approveLineup",
            phase="approval",
            status="skipped",
            reason="awaiting approval",
            output={"interrupt": interrupt.id, "gate": GATE_ID},
        )
        why = (
            f"{len(diff.removed)} AI channel(s) and {len(diff.removed_packages)} AI package(s) "
            "on air would be removed"
            if diff.removes_anything
            else "approval is required for every lineup of this run"
        )
        raise dg.Failure(
            description=(
                f"AWAITING APPROVAL ({GATE_ID}): {why}; {len(diff.created)} created, "
                f"{len(diff.renumbered)} renumbered, {len(diff.unchanged)} unchanged; expected "
                "build cost "
                + (
                    "unpriced"
                    if estimate.estimated_usd is None
                    else f"${estimate.estimated_usd:.4f}"
                )
                + f". Nothing was written and this run holds no worker. {_commands(context.run_id)}"
            ),
            metadata=metadata,
            allow_retries=False,
        )
    _trace(
        context,
        ai,
        step_name="approveLineup",
        phase="approval",
        status="ok",
        output={"decision": decision, "resolvedBy": resolved_by, "gate": GATE_ID},
    )
    context.add_output_metadata(
        {**metadata, "decision": decision, "resolved_by": resolved_by or ""}
    )
    return ApprovedLineup(
        gate_id=GATE_ID,
        decision=decision,
        resolved_by=resolved_by,
        diff=diff,
        estimate=estimate,
    )
