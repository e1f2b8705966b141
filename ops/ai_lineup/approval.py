"""The `ai_lineup` ops between the plan and the first write: number the plan, then the gate.

Numbering writes nothing (it computes against the state the wipe will leave), so the gate can
show the real diff — removed, created, unchanged and renumbered channels with their numbers — and
the expected build cost before anything is deleted or paid for. A gate that must ask records ONE
interrupt row (`resources/stores/approvals.py`) and ends its step with an explained failure; the
run is then stored as SUSPENDED (airwave_dagster/suspension.py): no process and no queue slot is
held while a person decides, and the run's `airwave/status` tag says `awaiting-approval`.
`airwave approve RUN_ID`, or the
`answer_approval` job launched from the UI, resolves the row and resumes the same run tree;
every completed step (the plan included) is replayed from its checkpoint, the gate step runs
again, finds the approval and lets the writes proceed.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import dagster as dg

from airwave_dagster.domain.ai.lineup_diff import (
    LineupDiff,
    OnAirChannel,
    diff_lineup,
    signature,
)
from airwave_dagster.domain.ai.models import expected_build_calls, min_cacheable_tokens
from airwave_dagster.domain.ai.numbering import (
    ExistingChannel,
    LineupNumbering,
    assign_numbers,
    build_order,
)
from airwave_dagster.domain.ai.plan import LineupPlan
from airwave_dagster.domain.ai.prompts import (
    CONTEXT_HEADING,
    WORKER_SYSTEM_PROMPT,
    render_channel_brief,
)
from airwave_dagster.domain.ai.tools import tool_definitions_api
from airwave_dagster.run_tags import AWAITING_APPROVAL, AWAITING_APPROVAL_TAG, STATUS_TAG
from airwave_dagster.suspension import GATE_STOP_PREFIX
from ops.ai_lineup.checkpoints import (
    BUILD_CONCURRENCY,
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
from resources.llm import LlmCallError, LlmResource, MissingApiKeyError, PromptMeasure
from resources.prices import call_cost
from resources.stores.ai import AiStore
from resources.stores.approvals import ApprovalStore, Interrupt

GATE_ID = "approve-plan:v1"
"""The gate's id and version. A resume whose interrupt carries another gate id is refused."""

CALLS_PER_BUILD = 2
"""Expected model calls per channel build: a preview, then the commit (bench: 2.00)."""
BUILD_OUTPUT_TOKENS = 600
"""Expected output per build call (a tool call with a filter, and a few sentences)."""
TOOL_RESULT_TOKENS = 300
"""What one tool result (a preview's summary) adds to the next call's input (bench: 220-370)."""


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
    With a `limit` the run removes nothing: every AI channel on air that no selected channel
    replaces (same name) is kept as it is — its number stays taken, and a plan package with the
    name of its AI package is filed into that package.
    """
    settings = analyzed.settings
    _, ai = _stores(database)
    plan = planned.sanitized.plan
    with _phase(context, ai, "numberChannels", "numbering"):
        numbering = _number(ai, settings.source_id, plan, keep=())
        selected = build_order(numbering, settings.limit or None)
        kept: list[int] = []
        reuse_ai: dict[str, str] = {}
        if settings.limit > 0:
            chosen = [c.key for c in selected]
            replaced = {signature(plan.channel(key).name) for key in chosen}
            kept = sorted(
                row["number"]
                for row in ai.on_air(settings.source_id)
                if row["origin"] == "ai" and signature(row["name"]) not in replaced
            )
            surviving = {
                signature(name): key
                for name, key in ai.surviving_ai_packages(settings.source_id, kept).items()
            }
            reuse_ai = {
                p.key: surviving[signature(p.name)]
                for p in plan.packages
                if not p.existing_key and signature(p.name) in surviving
            }
            numbering = _number(ai, settings.source_id, plan, keep=kept, reuse_ai=reuse_ai)
            by_key = numbering.by_key()
            selected = [by_key[key] for key in chosen]
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
    context.add_output_metadata(
        {"numbered": len(numbering.channels), "selected": len(selected), "kept": len(kept)}
    )
    return NumberedLineup(
        numbering=numbering, selected=[c.number for c in selected], kept=kept, reuse=reuse_ai
    )


def _number(
    ai: AiStore,
    source_id: str,
    plan: LineupPlan,
    *,
    keep: Sequence[int],
    reuse_ai: Mapping[str, str] | None = None,
) -> LineupNumbering:
    """The plan numbered against the state the wipe will leave (`keep` stays on air)."""
    live, package_ids = ai.numbering_state(source_id, keep)
    reuse = {
        p.key: package_ids[p.existing_key]
        for p in plan.packages
        if p.existing_key and p.existing_key in package_ids
    }
    reuse |= {
        key: package_ids[package_key]
        for key, package_key in (reuse_ai or {}).items()
        if package_key in package_ids
    }
    return assign_numbers(
        plan,
        live.keys(),
        package_ids=reuse,
        existing_channels=[ExistingChannel(number=n, package_id=p) for n, p in live.items()],
    )


def estimate_cost(
    analyzed: AnalyzedLibrary,
    shared: LineupContext,
    briefs: Sequence[str],
    spent: float,
    measure: PromptMeasure | None = None,
) -> CostEstimate:
    """Every expected build call priced like the ledger will price it, one call at a time.

    The worker's prefix (tools, system prompt, shared context) is the one `count_tokens`
    measured when the gate could ask the API, else a four-characters-a-token estimate. It is
    priced as the prompt cache will treat it: below the worker model's minimum cacheable prefix
    every call pays it in full; above it, the first call of each build that starts with the
    first wave (up to BUILD_CONCURRENCY, all sent before any response begins) pays a cache
    write, and every other call reads it.

    Args:
        analyzed: The run's settings.
        shared: The shared context the builds send.
        briefs: The briefs of the channels to build, in build order.
        spent: USD spent so far (the planner).
        measure: The measured prefix and first brief; None when not measured.
    """
    settings = analyzed.settings
    channels = len(briefs)
    model = settings.worker_model
    floor = min_cacheable_tokens(model)
    if measure is not None:
        prefix = measure.prefix_tokens
        first = max(1, len(briefs[0])) if briefs else 1
        brief_tokens = [round(measure.brief_tokens * len(b) / first) for b in briefs]
    else:
        tools = json.dumps(tool_definitions_api(), separators=(",", ":"))
        prefix = shared.context.approx_tokens + (len(WORKER_SYSTEM_PROMPT) + len(tools)) // 4
        brief_tokens = [(len(b) + 3) // 4 for b in briefs]
    concurrency = min(BUILD_CONCURRENCY, channels)
    calls = expected_build_calls(
        prefix_tokens=prefix,
        brief_tokens=brief_tokens,
        floor=floor,
        concurrency=concurrency,
        calls_per_build=CALLS_PER_BUILD,
        output_tokens=BUILD_OUTPUT_TOKENS,
        tool_result_tokens=TOOL_RESULT_TOKENS,
    )
    cached = prefix >= floor
    estimated: float | None = 0.0
    if settings.provider == "anthropic" and channels:
        costs = [call_cost(model, call, settings.prices) for call in calls]
        priced = [cost for cost in costs if cost is not None]
        estimated = round(sum(priced), 6) if len(priced) == len(costs) else None
    mean_brief = round(sum(brief_tokens) / channels) if channels else 0
    return CostEstimate(
        channels=channels,
        calls_per_build=CALLS_PER_BUILD if settings.provider == "anthropic" else 0,
        tokens_per_call={
            "prefix": prefix,
            "brief": mean_brief,
            "output": BUILD_OUTPUT_TOKENS,
            "tool_result": TOOL_RESULT_TOKENS,
        },
        worker_model=model if settings.provider == "anthropic" else "offline",
        estimated_usd=estimated,
        planner_spent_usd=round(spent, 6),
        budget_usd=settings.budget_usd,
        prefix_tokens=prefix,
        prefix_measured=measure is not None,
        cache_floor=floor,
        prefix_cached=cached,
        cache_writes=min(concurrency, channels) if cached else 0,
    )


def measure_prompt(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    shared: LineupContext,
    briefs: Sequence[str],
    llm: LlmResource,
) -> PromptMeasure | None:
    """The worker's prefix and first brief counted by the API, or None (offline, or it failed)."""
    settings = analyzed.settings
    if settings.provider != "anthropic" or not briefs:
        return None
    try:
        return llm.get_client().measure_worker_prompt(
            model=settings.worker_model,
            system=WORKER_SYSTEM_PROMPT,
            tools=tool_definitions_api(),
            context_block=f"{CONTEXT_HEADING}\n{shared.context.text}",
            brief=briefs[0],
        )
    except (LlmCallError, MissingApiKeyError) as error:
        context.log.warning(f"cannot count the worker prompt's tokens ({error}); estimating")
        return None


def diff_metadata(diff: LineupDiff, estimate: CostEstimate) -> dict[str, dg.MetadataValue]:
    """The diff and the estimate as UI tables (one row per channel, one per figure)."""
    figures = [
        ("AI channels removed", str(len(diff.removed))),
        ("AI channels created", str(len(diff.created))),
        ("AI channels renumbered", str(len(diff.renumbered))),
        ("AI channels unchanged", str(len(diff.unchanged))),
        ("AI channels kept as they are (limit)", str(len(diff.kept))),
        ("manual/preset channels untouched", str(len(diff.untouched))),
        ("AI packages removed", ", ".join(diff.removed_packages) or "—"),
        ("AI packages created", ", ".join(diff.created_packages) or "—"),
        ("channels to build", str(estimate.channels)),
        ("expected calls per build", str(estimate.calls_per_build)),
        ("worker model", estimate.worker_model),
        (
            "worker prompt prefix (tokens)",
            f"{estimate.prefix_tokens:,} ({'counted' if estimate.prefix_measured else 'estimated'})"
            f"; cached from {estimate.cache_floor:,}: "
            + (
                f"yes, {estimate.cache_writes} first-wave cache writes"
                if estimate.prefix_cached
                else "no, every call pays it in full"
            ),
        ),
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
        **diff_metadata_rows(diff),
        "approval summary": dg.MetadataValue.table(
            records=[dg.TableRecord({"figure": f, "value": v}) for f, v in figures],
            schema=summary_schema,
        ),
    }


def diff_metadata_rows(diff: LineupDiff) -> dict[str, dg.MetadataValue]:
    """The diff as a UI table, one row per channel (`ai_lineup`'s gate and the rollback's)."""
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
            ("kept (beyond the limit)", diff.kept),
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
    return {"lineup diff": dg.MetadataValue.table(records=rows, schema=channel_schema)}


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


def pass_gate(
    context: dg.OpExecutionContext,
    approvals: ApprovalStore,
    *,
    gate_id: str,
    policy: str,
    pre_approved: bool,
    removes_anything: bool,
    payload: Mapping[str, object],
    expiry_hours: float | None,
    question: str,
    metadata: Mapping[str, dg.MetadataValue],
    on_stop: Callable[[Interrupt], None] | None = None,
) -> tuple[str, str | None]:
    """The approval gate every job that replaces channels on air goes through.

    Decides from the run tree's interrupt and the policy: an approval of this gate passes;
    a closed one (rejected, canceled, expired) or another gate's fails for good; `never`,
    a pre-approval (`pre_approved`) or `auto_when_nothing_removed` with nothing removed
    passes without asking. Otherwise it records ONE interrupt (payload: what `airwave
    approvals show` prints), tags the run `airwave/awaiting_approval` and fails the step with
    a description that starts `AWAITING APPROVAL (gate_id)`, which the instance turns into the
    run's SUSPENDED status (airwave_dagster/suspension.py): no process waits.

    Returns:
        (decision — approved, never, confirm_wipe or auto —, who approved it).
    """
    root = context.dagster_run.root_run_id or context.run_id
    interrupt = approvals.find(root)
    if interrupt is not None and interrupt.gate_id != gate_id:
        raise dg.Failure(
            description=(
                f"this run tree stopped at gate {interrupt.gate_id!r}, but this code's gate is "
                f"{gate_id!r}: its answer cannot be trusted for this gate. Start a new run."
            ),
            allow_retries=False,
        )
    if interrupt is not None and interrupt.status == "approved":
        return "approved", interrupt.resolved_by
    if interrupt is not None and not interrupt.open:
        raise _closed(interrupt, context.run_id)
    if interrupt is None and policy == "never":
        return "never", None
    if interrupt is None and pre_approved:
        return "confirm_wipe", None
    if interrupt is None and policy == "auto_when_nothing_removed" and not removes_anything:
        return "auto", None
    expires = None if expiry_hours is None else datetime.now(UTC) + timedelta(hours=expiry_hours)
    if interrupt is None:
        interrupt = approvals.open_interrupt(
            root_run_id=root,
            run_id=context.run_id,
            gate_id=gate_id,
            payload=dict(payload),
            expires_at=expires,
        )
    if interrupt.expires_at is not None and interrupt.expires_at <= datetime.now(UTC):
        _, interrupt = approvals.resolve(interrupt.id, "expired", resolved_by="expiry")
        raise _closed(interrupt, context.run_id)
    context.instance.add_run_tags(
        context.run_id, {AWAITING_APPROVAL_TAG: gate_id, STATUS_TAG: AWAITING_APPROVAL}
    )
    if on_stop is not None:
        on_stop(interrupt)
    raise dg.Failure(
        description=(
            f"{GATE_STOP_PREFIX}{gate_id}): {question}. Nothing was written and this run "
            f"holds no worker. {_commands(context.run_id)}"
        ),
        metadata=dict(metadata),
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
    llm: LlmResource,
) -> ApprovedLineup:
    """Approval gate: show the lineup diff and expected cost; stop the run until approved.

    Nothing has been written when this runs. If the policy needs an answer (`approval:
    required`, or an AI channel/package on air would be removed under the default
    `auto_when_nothing_removed`), it records one interrupt row, tags the run
    `airwave/awaiting_approval` and SUSPENDS the run — no process waits. `airwave approve RUN_ID`
    continues the same run tree from here (the plan is replayed, never paid again);
    `airwave reject` ends it with nothing written. `confirm_wipe` is a pre-approval.
    """
    settings = analyzed.settings
    stores = database.stores()
    ai, approvals = stores.ai, stores.approvals
    with _phase(context, ai, "approveLineup", "approval"):
        on_air = [OnAirChannel(**row) for row in ai.on_air(settings.source_id)]
        # Only what will be built: with a `limit`, the channels left out are not created, and
        # every AI channel on air that no selected channel replaces is kept as it is.
        diff = diff_lineup(
            on_air,
            ai.doomed_package_names(settings.source_id, numbered.kept),
            planned.sanitized.plan.only(numbered.selected_keys()),
            numbered.numbering,
            keep=numbered.kept,
            reused_packages=numbered.reuse.keys(),
        )
        spent = ai.ledger(settings.ledger_id).spent_usd
        selected = planned.sanitized.plan.only(numbered.selected_keys()).channels()
        briefs = [render_channel_brief(channel) for _, channel in selected]
        measure = measure_prompt(context, analyzed, shared, briefs, llm)
        estimate = estimate_cost(analyzed, shared, briefs, spent, measure)
    metadata = diff_metadata(diff, estimate)

    def stopping(interrupt: Interrupt) -> None:
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
    decision, resolved_by = pass_gate(
        context,
        approvals,
        gate_id=GATE_ID,
        policy=settings.approval,
        pre_approved=settings.confirm_wipe,
        removes_anything=diff.removes_anything,
        payload={
            "diff": diff.model_dump(mode="json"),
            "estimate": estimate.model_dump(mode="json"),
        },
        expiry_hours=settings.approval_expiry_hours,
        question=(
            f"{why}; {len(diff.created)} created, "
            f"{len(diff.renumbered)} renumbered, {len(diff.unchanged)} unchanged"
            + (f", {len(diff.kept)} kept as they are (limit)" if diff.kept else "")
            + "; expected "
            "build cost "
            + ("unpriced" if estimate.estimated_usd is None else f"${estimate.estimated_usd:.4f}")
        ),
        metadata=metadata,
        on_stop=stopping,
    )
    _trace(
        context,
        ai,
        step_name="approveLineup",
        phase="approval",
        status="ok",
        output={
            "decision": decision,
            "resolvedBy": resolved_by,
            "gate": GATE_ID,
            "estimate": estimate.model_dump(mode="json"),
        },
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
