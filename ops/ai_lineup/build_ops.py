"""The `ai_lineup` ops that write (after the approval gate): packages, builds, the report.

Thin adapters like the design ops in `ops/ai_lineup/ops.py`; the build itself is
`ops/ai_lineup/channel_build.py` and the report `ops/ai_lineup/reporting.py`.
"""

from datetime import UTC, datetime

import dagster as dg

from airwave_dagster.domain.ai.plan import (
    coerce_accent,
    package_slug,
)
from airwave_dagster.domain.ai.report import (
    ChannelBuildResult,
    LineupReport,
    render_markdown,
)
from airwave_dagster.domain.ai.usage import Usage
from ops.ai_lineup.asset_checks import lineup_check_evaluations, quality_metadata_entry
from ops.ai_lineup.channel_build import (
    BuildDeps,
    TransientBuildError,
    build_trace_fields,
    run_build,
)
from ops.ai_lineup.checkpoints import (
    AnalyzedLibrary,
    ApprovedLineup,
    BuildTask,
    CreatedPackages,
    LineupContext,
    NumberedLineup,
    PlannedLineup,
)
from ops.ai_lineup.metering import Meter, usage_columns
from ops.ai_lineup.ops import OP_VERSION, _phase, _stores, _trace
from ops.ai_lineup.reporting import (
    UnsettledChannels,
    approval_wait,
    assemble_report,
    report_metadata,
    settle_parked,
)
from ops.library_assets import (
    AI_LINEUP_KEY,
)
from ops.steps import (
    LLM_POOL,
    claimant,
    mapping_key,
    root_cause_failure,
    trace_identity,
    versioned_op,
)
from resources.ai_toolbox import library_sizes
from resources.database import DatabaseResource
from resources.llm import (
    WORKER_MAX_TOKENS,
    LlmClient,
    LlmResource,
    MissingApiKeyError,
    spend_notes,
)
from resources.plex import PlexResource
from resources.stores.ai import NewPackage
from resources.stores.library import apply_library_switches

BRIEF_TOKENS = 3_000
"""Tools, system prompt and channel brief on top of the shared context: a pre-call estimate."""


@versioned_op(OP_VERSION)
def create_ai_packages(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    numbered: NumberedLineup,
    approved: ApprovedLineup,
    database: DatabaseResource,
) -> CreatedPackages:
    """Replace this source's previous AI lineup with the plan's packages (one transaction).

    Runs only once the approval gate passed (approved, pre-approved by `confirm_wipe`, or not
    needed by the policy). Only AI-generated rows of this source are wiped; manual and preset
    rows are never touched. Only what the approved diff removes is deleted: the channels it
    keeps and rebuilds (`unchanged`, `renumbered`) are parked until `report_lineup` settles
    them, and those a `limit` keeps (`kept`) are left alone.
    """
    settings = analyzed.settings
    _, ai = _stores(database)
    context.log.info(
        f"approval gate {approved.gate_id}: {approved.decision}"
        + (f" by {approved.resolved_by}" if approved.resolved_by else "")
    )
    plan = planned.sanitized.plan
    reuse = {p.key: p.existing_key for p in plan.packages if p.existing_key}
    reuse |= numbered.reuse
    park = [
        e.previous_number
        for e in (*approved.diff.unchanged, *approved.diff.renumbered)
        if e.previous_number is not None
    ]
    create = [
        NewPackage(
            plan_key=p.key,
            key=package_slug(p.name, ()),
            name=p.name,
            description=p.description or None,
            icon=p.icon,
            tint=coerce_accent(p.accent),
        )
        for p in plan.packages
    ]
    wiped, ids, created = ai.replace_ai_packages(
        settings.source_id,
        reuse=reuse,
        create=create,
        keep=numbered.kept,
        park=park,
        ledger_id=settings.ledger_id,
    )
    reused = [key for key in ids if key not in created]
    _trace(
        context,
        ai,
        step_name="createPackages",
        phase="packages",
        status="ok",
        output={
            "wiped": {"channels": wiped.channels, "packages": wiped.packages},
            "parked": wiped.parked,
            "kept": len(numbered.kept),
            "created": created,
            "reused": reused,
        },
    )
    context.add_output_metadata(
        {
            "wiped_channels": wiped.channels,
            "wiped_packages": wiped.packages,
            "parked_channels": wiped.parked,
            "created": len(created),
            "reused": len(reused),
        }
    )
    return CreatedPackages(
        ids=ids,
        created=created,
        reused=reused,
        wiped_channels=wiped.channels,
        wiped_packages=wiped.packages,
    )


@versioned_op(OP_VERSION, out={"builds": dg.DynamicOut(BuildTask)})
def fan_out_ai_builds(
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    numbered: NumberedLineup,
    packages: CreatedPackages,
):
    """One mapped build per selected channel (keyed `ch_<number>`), with its package's id.

    Each build is checked against the *selected* channels before it in plan order: a channel a
    `limit` leaves out is never built, so nothing may be refused for repeating it.
    """
    plan = planned.sanitized.plan
    order = [channel for _, channel in plan.only(numbered.selected_keys()).channels()]
    by_number = {c.number: c for c in numbered.numbering.channels}
    for number in numbered.selected:
        channel = by_number[number]
        planned_channel = plan.channel(channel.key)
        earlier = order[: order.index(planned_channel)]
        yield dg.DynamicOutput(
            BuildTask(
                settings=analyzed.settings,
                channel=planned_channel,
                numbered=channel.model_copy(
                    update={"package_id": packages.ids.get(channel.package_key)}
                ),
                earlier=earlier,
            ),
            output_name="builds",
            mapping_key=mapping_key(number),
        )


@versioned_op(
    OP_VERSION,
    pool=LLM_POOL,
    retry_policy=dg.RetryPolicy(max_retries=1, delay=2.0, backoff=dg.Backoff.EXPONENTIAL),
)
def build_ai_channel(
    context: dg.OpExecutionContext,
    task: BuildTask,
    shared: LineupContext,
    database: DatabaseResource,
    plex: PlexResource,
    llm: LlmResource,
) -> ChannelBuildResult:
    """Reserve the channel number, let the agent verify and commit its filter, lay 12 h.

    The commit re-resolves the filter itself and refuses pools under the minimum items or
    runtime. A failed or abandoned build deletes its reservation; a duplicate start adopts the
    committed channel without calling the model. A transient model-API failure (after the SDK's
    retries) fails the step so a retry or resume builds it again.
    """
    started = datetime.now(UTC)
    settings = task.settings
    stores = database.stores()
    store, ai = stores.channels, stores.ai
    client: LlmClient | None = None
    if settings.provider == "anthropic":
        try:
            client = llm.get_client()
        except MissingApiKeyError as error:
            raise dg.Failure(description=str(error)) from error
    meter = Meter(
        ai,
        settings,
        "build",
        trace_identity(context),
        model=settings.worker_model,
        max_output_tokens=WORKER_MAX_TOKENS,
        first_input_tokens=shared.context.approx_tokens + BRIEF_TOKENS,
    )
    plex_client = plex.get_client()
    apply_library_switches(plex_client, store, settings.source_id)
    deps = BuildDeps(
        store=store,
        ai=ai,
        claims=stores.claims,
        plex=plex_client,
        claimant=claimant(context),
        run_id=context.run_id,
        library_items=library_sizes(store, settings.source_id),
    )
    common = build_trace_fields(task, shared.context.sha256, started)
    model = settings.worker_model if settings.provider == "anthropic" else "offline"
    try:
        with spend_notes(meter.span_notes):
            result, extra = run_build(
                task,
                shared.context,
                deps,
                llm=client,
                meter=meter,
                exhausted=meter.exhausted,
                log=context.log.info,
                offered=shared.offered,
            )
    except TransientBuildError as error:
        usage = meter.by_model.get(settings.worker_model, Usage())
        _trace(
            context,
            ai,
            status="failed",
            reason="model API failed; the step is retried or the run resumed",
            error=str(error),
            **common,
            **usage_columns(model, usage, settings.prices, cost=meter.cost_by_model.get(model)),
        )
        raise dg.Failure(description=f"channel {task.numbered.number}: {error}") from error
    except dg.DagsterError:
        raise
    except Exception as error:
        raise root_cause_failure(f"channel {task.numbered.number}", error) from error
    usage = result.usage.get(model, Usage()) if settings.provider == "anthropic" else Usage()
    status = {"created": "ok", "skipped": "skipped", "failed": "failed"}[result.status]
    _trace(
        context,
        ai,
        status=status,
        reason=result.reason,
        error=result.reason if result.status == "failed" else None,
        output={
            "status": result.status,
            "channelId": result.channel_id,
            "poolItems": result.pool_items,
            "poolHours": result.pool_hours,
            "scheduleSlots": extra.get("schedule_slots"),
            "scheduleError": extra.get("schedule_error"),
        },
        trace=extra.get("trace"),
        agent_steps=extra.get("agent_steps", 0),
        **common,
        **usage_columns(
            model,
            usage,
            settings.prices,
            cost=meter.cost_by_model.get(model) if model != "offline" else None,
        ),
    )
    context.add_output_metadata(
        {
            "number": task.numbered.number,
            "status": result.status,
            "pool_items": result.pool_items if result.pool_items is not None else -1,
            "model_calls": result.model_calls,
        }
    )
    return result


@versioned_op(OP_VERSION)
def report_lineup(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    packages: CreatedPackages,
    numbered: NumberedLineup,
    results: list[ChannelBuildResult],
    approved: ApprovedLineup,
    database: DatabaseResource,
) -> LineupReport:
    """Settle the kept channels, collect every build into the report, remove empty AI packages.

    Fails loudly if a selected channel has no build result (for example after a crash that a
    plain re-execution did not repair), naming the missing channel numbers. Then keeps the
    approval's promise (`settle_parked`): a channel the approved diff kept whose rebuild did
    not commit is put back on air as it was, and the report says so. Spend counts every
    model call of the lineup from the ledger: planner, retries and failed attempts included.
    Materialises `ai_lineup` and logs its asset checks, the quality targets judged on the
    report's measures.
    """
    _, ai = _stores(database)
    with _phase(context, ai, "reportLineup", "report"):
        missing = [n for n in numbered.selected if n not in {r.number for r in results}]
        if missing:
            raise dg.Failure(
                description=(
                    f"{len(missing)} selected channel(s) have no build result: "
                    f"{', '.join(mapping_key(n) for n in missing)}. Resume run {context.run_id} "
                    "(`airwave runs resume`) to build them."
                )
            )
        try:
            kept = settle_parked(
                ai, analyzed.settings.ledger_id, approved.diff, numbered, packages, results
            )
        except UnsettledChannels as error:
            raise dg.Failure(description=str(error)) from error
        for channel in kept:
            context.log.warning(channel.describe())
        # What this lineup leaves on air, so a rollback can tell whether anyone changed it since.
        database.stores().rollback.record_after(analyzed.settings.ledger_id)
        root = context.dagster_run.root_run_id or context.run_id
        waited = approval_wait(database.stores().approvals.find(root))
        report = assemble_report(analyzed, planned, packages, results, ai, kept, waited)
        _trace(
            context,
            ai,
            step_name="reportLineup",
            phase="report",
            status="ok",
            output={**report.model_dump(mode="json"), "markdown": render_markdown(report)},
        )
        metadata = report_metadata(report)
        measures = quality_metadata_entry(report.quality) if report.quality else {}
        context.log_event(
            dg.AssetMaterialization(asset_key=AI_LINEUP_KEY, metadata={**metadata, **measures})
        )
        # Logged, not yielded: a failed blocking check then fails no step. The lineup is on air
        # by now and a resume would only judge it again (docs/ai-lineup.md, "Asset checks").
        # log_event takes AssetCheckEvaluation at run time (Dagster 1.13 has the branch); its
        # UserEvent annotation does not list it.
        for evaluation in lineup_check_evaluations(report.quality) if report.quality else []:
            context.log_event(evaluation)  # type: ignore[arg-type]
        context.add_output_metadata(metadata)
        context.log.info(
            f"AI lineup: {report.channels_built} built, {len(report.skipped)} skipped, "
            f"{len(report.failed)} failed, {len(report.kept_old)} kept as they were; "
            f"${report.total_usd:.4f}"
        )
        return report
