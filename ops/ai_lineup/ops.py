"""The `ai_lineup` ops: analyze, context, packages seen, plan, packages, numbers, builds, report.

Every op's output is its checkpoint (stored as JSON by the Postgres IO manager), so a resumed run
never re-fetches the vocabulary, never re-plans (never pays the planner twice) and never renumbers.
Channel builds fan out through a DynamicOut keyed by channel number, at most six at once; each
build reserves its number first (`resources.stores.claims`), so a duplicate start adopts the
committed channel instead of paying for the model work again. Every model call is charged to a
Postgres ledger shared by all step processes as soon as it returns; once the budget is spent,
builds not yet started are skipped with reason "budget" and a running agent stops at its next call.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from airwave_dagster.domain.ai.context import VOCABULARY_FIELDS, render_shared_context
from airwave_dagster.domain.ai.numbering import ExistingChannel, assign_numbers, build_order
from airwave_dagster.domain.ai.offline import offline_plan
from airwave_dagster.domain.ai.plan import (
    ExistingPackage,
    PlanSchemaError,
    SanitizedPlan,
    coerce_accent,
    package_slug,
    plan_input_schema,
    sanitize_plan,
)
from airwave_dagster.domain.ai.prompts import (
    PLANNER_SYSTEM_PROMPT,
    PLANNER_TOOL_DESCRIPTION,
    PLANNER_TOOL_NAME,
    render_planner_prompt,
)
from airwave_dagster.domain.ai.report import (
    ChannelBuildResult,
    LineupReport,
    PackageSummary,
    build_report,
    render_markdown,
)
from airwave_dagster.domain.ai.tools import PoolRules
from airwave_dagster.domain.ai.usage import Usage
from ops.ai_lineup.channel_build import BuildDeps, TransientBuildError, run_build
from ops.ai_lineup.checkpoints import (
    AiLineupConfig,
    AnalyzedLibrary,
    BuildTask,
    CreatedPackages,
    ExistingPackages,
    LineupContext,
    LineupSettings,
    NumberedLineup,
    PlannedLineup,
    Provider,
)
from ops.ai_lineup.metering import Meter, price_table, unpriced_budget_problem, usage_columns
from ops.library_assets import (
    AI_LINEUP_KEY,
    LIBRARY_PROFILE_KEY,
    PLEX_LIBRARY_KEY,
    compute_profile,
    profile_metadata,
    profile_sha256,
    sync_metadata,
)
from ops.steps import claimant, mapping_key, trace_identity, versioned_op
from resources.ai_toolbox import library_sizes
from resources.database import DatabaseResource
from resources.llm import (
    PLANNER_MAX_TOKENS,
    LlmCallError,
    LlmClient,
    LlmResource,
    MissingApiKeyError,
)
from resources.plex import PlexClient, PlexError, PlexResource
from resources.stores.ai import AiStore, NewPackage
from resources.stores.channels import AirwaveStore
from resources.stores.library import library_synced, sync_library

OP_VERSION = "ai-lineup-v1"
"""Code version of every op of this job; bump it when an op's behaviour or output type changes."""


def _stores(database: DatabaseResource) -> tuple[AirwaveStore, AiStore]:
    stores = database.stores()
    return stores.channels, stores.ai


def _trace(context: dg.OpExecutionContext, ai: AiStore, **fields: Any) -> None:
    """One trace row keyed by this run, step and attempt (best effort)."""
    ai.record_trace(**trace_identity(context), **fields)


@contextmanager
def _phase(
    context: dg.OpExecutionContext, ai: AiStore, step_name: str, phase: str
) -> Iterator[None]:
    """Trace any exception of the step as a failed row of its phase, then let it propagate."""
    try:
        yield
    except Exception as error:
        message = (
            error.description or str(error)
            if isinstance(error, dg.Failure)
            else f"{type(error).__name__}: {error}"
        )
        _trace(context, ai, step_name=step_name, phase=phase, status="failed", error=message)
        raise


def _resolve_provider(config: AiLineupConfig, llm: LlmResource) -> Provider:
    if config.provider == "offline":
        return "offline"
    if config.provider == "anthropic":
        if not llm.has_key():
            raise dg.Failure(description=llm.missing_key_message())
        return "anthropic"
    return "anthropic" if llm.has_key() else "offline"


@versioned_op(OP_VERSION)
def analyze_library(
    context: dg.OpExecutionContext,
    config: AiLineupConfig,
    database: DatabaseResource,
    plex: PlexResource,
    llm: LlmResource,
) -> AnalyzedLibrary:
    """Resolve the run's settings and profile the library snapshot (no Plex call when synced).

    The profile is recomputed from `airwave.media_item` (the `library_profile` asset's input) so
    it describes exactly the items the builds will verify against, and stored as the
    `library_profile` materialisation; being this step's output, a resumed run reuses it. A
    source whose library was never completely snapshotted is synced from Plex first (and a
    `plex_library` materialisation recorded). The anthropic provider without its key
    is refused here, before anything is written or spent.
    """
    store, ai = _stores(database)
    with _phase(context, ai, "analyzeLibrary", "analyze"):
        return _analyze(context, config, store, ai, plex, llm)


def _analyze(
    context: dg.OpExecutionContext,
    config: AiLineupConfig,
    store: AirwaveStore,
    ai: AiStore,
    plex: PlexResource,
    llm: LlmResource,
) -> AnalyzedLibrary:
    provider = _resolve_provider(config, llm)
    source_id = store.find_source(plex.base_url)
    # Media item rows also come from schedules (only the items scheduled), so rows alone do not
    # prove a snapshot: unless a complete snapshot of this source was taken, sync it now.
    if source_id is None or not library_synced(store, source_id):
        try:
            synced = sync_library(store, plex.get_client())
        except PlexError as error:
            raise dg.Failure(description=f"cannot snapshot the library: {error}") from error
        source_id = synced.source_id
        context.log_event(
            dg.AssetMaterialization(asset_key=PLEX_LIBRARY_KEY, metadata=sync_metadata(synced))
        )
        context.log.info(f"synced the library snapshot from Plex: {synced.items} items")
    if config.limit < 0:
        raise dg.Failure(description=f"limit must be 0 (all) or positive, got {config.limit}")
    if config.budget_usd is not None and config.budget_usd < 0:
        raise dg.Failure(description=f"budget_usd must be >= 0, got {config.budget_usd}")
    settings = LineupSettings(
        provider=provider,
        planner_model=config.planner_model,
        worker_model=config.worker_model,
        limit=config.limit,
        budget_usd=config.budget_usd,
        confirm_wipe=config.confirm_wipe,
        rules=PoolRules(
            min_items=max(1, config.min_pool_items), min_runtime_hours=config.min_runtime_hours
        ),
        planner_attempts=max(1, config.planner_attempts),
        prices=price_table(config),
        ledger_id=context.dagster_run.root_run_id or context.run_id,
        source_id=source_id,
        started_at=datetime.now(UTC),
    )
    problem = unpriced_budget_problem(settings)
    if problem is not None:
        raise dg.Failure(description=problem)
    ai.open_ledger(settings.ledger_id, settings.budget_usd)
    profile = compute_profile(ai, source_id)
    if profile.totals.movies + profile.totals.episodes == 0:
        raise dg.Failure(description=f"the library of {plex.base_url} has no available items")
    sha256 = profile_sha256(profile)
    ai.save_profile(source_id, profile.model_dump(mode="json"), sha256, context.run_id)
    context.log_event(
        dg.AssetMaterialization(
            asset_key=LIBRARY_PROFILE_KEY, metadata=profile_metadata(profile, sha256)
        )
    )
    _trace(
        context,
        ai,
        step_name="analyzeLibrary",
        phase="analyze",
        status="ok",
        input={"sourceId": source_id, "provider": provider},
        output={"totals": profile.totals.model_dump(), "sha256": sha256},
    )
    context.add_output_metadata(
        {"provider": provider, "source_id": source_id, "profile_sha256": sha256}
    )
    return AnalyzedLibrary(
        settings=settings,
        profile=profile,
        profile_sha256=sha256,
        library_items=library_sizes(store, source_id),
    )


def fetch_vocabulary(client: PlexClient) -> dict[str, list[str]]:
    """The values of every vocabulary tag field: one Plex lookup per field, failures raised."""
    return {field: client.tag_values(field, ()) for field in VOCABULARY_FIELDS}


@versioned_op(OP_VERSION)
def build_shared_context(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    database: DatabaseResource,
    plex: PlexResource,
) -> LineupContext:
    """Render the shared prefix: profile + field catalog + tag vocabulary from Plex.

    The vocabulary is fetched once per field and stored with the rendered text as this step's
    output, so every build of the run (and a resumed run) sends the same bytes. A Plex failure
    fails the step: a silently empty vocabulary would mislead the planner.
    """
    _, ai = _stores(database)
    try:
        vocabulary = fetch_vocabulary(plex.get_client())
    except PlexError as error:
        _trace(
            context,
            ai,
            step_name="buildSharedContext",
            phase="context",
            status="failed",
            error=str(error),
        )
        raise dg.Failure(description=f"cannot read the tag vocabulary: {error}") from error
    shared = render_shared_context(analyzed.profile, vocabulary)
    _trace(
        context,
        ai,
        step_name="buildSharedContext",
        phase="context",
        status="ok",
        context_sha256=shared.sha256,
        output={
            "chars": shared.chars,
            "approxTokens": shared.approx_tokens,
            "values": {field: len(values) for field, values in vocabulary.items()},
        },
    )
    context.add_output_metadata(
        {"sha256": shared.sha256, "chars": shared.chars, "approx_tokens": shared.approx_tokens}
    )
    return LineupContext(context=shared, vocabulary=vocabulary)


@versioned_op(OP_VERSION)
def list_existing_packages(
    context: dg.OpExecutionContext, analyzed: AnalyzedLibrary, database: DatabaseResource
) -> ExistingPackages:
    """Read the packages the planner may reuse, before the wipe; AI packages are never offered."""
    _, ai = _stores(database)
    packages = [
        ExistingPackage(
            key=row.key,
            name=row.name,
            description=row.description,
            origin="preset" if row.generated else "manual",
            channel_count=row.channel_count,
        )
        for row in ai.packages()
        if not row.ai_generated
    ]
    context.add_output_metadata({"packages": len(packages)})
    return ExistingPackages(packages=packages)


def _plan_with_model(
    context: dg.OpExecutionContext,
    ai: AiStore,
    settings: LineupSettings,
    client: LlmClient,
    shared: LineupContext,
    existing: ExistingPackages,
) -> tuple[SanitizedPlan, int]:
    """Call the planner until its reply fits the schema (bounded), tracing every attempt."""
    meter = Meter(ai, settings, "plan", trace_identity(context))
    keys = [p.key for p in existing.packages]
    prompt = render_planner_prompt(shared.context.text, existing.packages)
    tool = {
        "name": PLANNER_TOOL_NAME,
        "description": PLANNER_TOOL_DESCRIPTION,
        "input_schema": plan_input_schema(),
    }
    last_error = ""
    for attempt in range(1, settings.planner_attempts + 1):
        if meter.exhausted():
            raise dg.Failure(description="the budget is spent; the planner was not called")
        common = {
            "step_name": "planLineup",
            "phase": "plan",
            "context_sha256": shared.context.sha256,
            "input": {"existingPackages": keys, "plannerTry": attempt},
        }
        try:
            reply = client.plan(
                model=settings.planner_model,
                system=PLANNER_SYSTEM_PROMPT,
                content=[{"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}}],
                tool=tool,
                max_tokens=PLANNER_MAX_TOKENS,
                on_usage=meter,
            )
        except LlmCallError as error:
            _trace(
                context,
                ai,
                status="failed",
                reason="planner call failed",
                error=str(error),
                **common,
                **usage_columns(settings.planner_model, error.usage, settings.prices),
            )
            raise dg.Failure(
                description=f"planner call failed: {error}. Resume the run to try again."
            ) from error
        usage = reply.usage
        try:
            if reply.tool_input is None:
                raise PlanSchemaError([])
            sanitized = sanitize_plan(reply.tool_input, existing_package_keys=keys)  # type: ignore[arg-type]
        except PlanSchemaError as error:
            truncated = reply.stop_reason == "max_tokens"
            last_error = (
                "the reply hit the output cap (max_tokens) before the plan was complete"
                if truncated
                else (str(error) if error.issues else "the reply called no plan tool")
            )
            _trace(
                context,
                ai,
                status="failed",
                reason=last_error,
                error=last_error,
                output={
                    "stopReason": reply.stop_reason,
                    "rawTextChars": len(reply.raw_text),
                    "raw": reply.raw_text,
                },
                **common,
                **usage_columns(settings.planner_model, usage, settings.prices),
            )
            context.log.warning(f"planner attempt {attempt} unusable: {last_error[:400]}")
            continue
        _trace(
            context,
            ai,
            status="ok",
            output={
                "plan": sanitized.plan.model_dump(mode="json", by_alias=True),
                "changes": [c.model_dump(mode="json") for c in sanitized.changes],
                "dropped": [d.model_dump(mode="json") for d in sanitized.dropped_channels],
            },
            **common,
            **usage_columns(settings.planner_model, usage, settings.prices),
        )
        return sanitized, attempt
    raise dg.Failure(
        description=(
            f"the planner's reply broke the plan schema {settings.planner_attempts} time(s); "
            f"the raw replies are in ai_lineup_trace (phase 'plan'). Last problem: "
            f"{last_error[:1500]}"
        )
    )


@versioned_op(OP_VERSION)
def plan_lineup(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    shared: LineupContext,
    existing: ExistingPackages,
    database: DatabaseResource,
    llm: LlmResource,
) -> PlannedLineup:
    """Design the whole lineup: one structured-output planner call (or the offline planner).

    The plan is sanitised before it is stored: unknown fields, operators and media-type
    mismatches are removed and traced, and a channel left without a filter is dropped with a
    reason (it would otherwise match the whole library).
    """
    settings = analyzed.settings
    _, ai = _stores(database)
    if settings.provider == "offline":
        keys = [p.key for p in existing.packages]
        with _phase(context, ai, "planLineup", "plan"):
            try:
                raw = offline_plan(analyzed.profile, shared.vocabulary, existing.packages)
                sanitized = sanitize_plan(raw, existing_package_keys=keys)
            except (ValueError, PlanSchemaError) as error:
                raise dg.Failure(
                    description=f"the offline planner found no lineup: {error}"
                ) from error
        _trace(
            context,
            ai,
            step_name="planLineup",
            phase="plan",
            status="ok",
            model="offline",
            context_sha256=shared.context.sha256,
            input={"existingPackages": keys},
            output={
                "plan": sanitized.plan.model_dump(mode="json", by_alias=True),
                "changes": [c.model_dump(mode="json") for c in sanitized.changes],
                "dropped": [d.model_dump(mode="json") for d in sanitized.dropped_channels],
            },
        )
        model, attempts = None, 1
    else:
        try:
            client = llm.get_client()
        except MissingApiKeyError as error:
            raise dg.Failure(description=str(error)) from error
        sanitized, attempts = _plan_with_model(context, ai, settings, client, shared, existing)
        model = settings.planner_model
    for change in sanitized.changes:
        context.log.warning(f"plan sanitised: {change.path}: {change.reason}")
    context.add_output_metadata(
        {
            "packages": len(sanitized.plan.packages),
            "channels": sanitized.channel_count,
            "changes": len(sanitized.changes),
            "dropped": len(sanitized.dropped_channels),
        }
    )
    return PlannedLineup(sanitized=sanitized, model=model, attempts=attempts)


@versioned_op(OP_VERSION)
def create_ai_packages(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    database: DatabaseResource,
) -> CreatedPackages:
    """Replace this source's previous AI lineup with the plan's packages (one transaction).

    Destructive, so guarded: when a previous AI lineup of this source exists and `confirm_wipe`
    is not set, the step stops before any write and says what would be deleted. Only
    AI-generated rows of this source are wiped; manual and preset rows are never touched.
    """
    settings = analyzed.settings
    _, ai = _stores(database)
    previous = ai.wipe_counts(settings.source_id)
    if previous.anything and not settings.confirm_wipe:
        message = (
            f"a previous AI lineup of this source exists: {previous.channels} AI channel(s) in "
            f"{previous.packages} AI package(s) ({previous.schedule_items} schedule rows) would "
            "be deleted. Nothing was changed. To replace it, run again with confirm_wipe: true "
            "(`airwave lineup --confirm-wipe`)."
        )
        _trace(
            context,
            ai,
            step_name="createPackages",
            phase="packages",
            status="failed",
            reason=message,
        )
        raise dg.Failure(description=message)
    plan = planned.sanitized.plan
    reuse = {p.key: p.existing_key for p in plan.packages if p.existing_key}
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
    wiped, ids, created = ai.replace_ai_packages(settings.source_id, reuse=reuse, create=create)
    reused = [key for key in ids if key not in created]
    _trace(
        context,
        ai,
        step_name="createPackages",
        phase="packages",
        status="ok",
        output={
            "wiped": {"channels": wiped.channels, "packages": wiped.packages},
            "created": created,
            "reused": reused,
        },
    )
    context.add_output_metadata(
        {
            "wiped_channels": wiped.channels,
            "wiped_packages": wiped.packages,
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


@versioned_op(
    OP_VERSION, out={"numbered": dg.Out(NumberedLineup), "builds": dg.DynamicOut(BuildTask)}
)
def assign_channel_numbers(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    packages: CreatedPackages,
    database: DatabaseResource,
):
    """Number every planned channel against live state (after the wipe), then fan out builds.

    Each package owns a block of 100 from 1000; numbers already taken are skipped. `limit` picks
    the builds round-robin across packages, but every planned channel gets its number.
    """
    settings = analyzed.settings
    _, ai = _stores(database)
    with _phase(context, ai, "assignNumbers", "numbering"):
        live = ai.channel_numbers()
        numbering = assign_numbers(
            planned.sanitized.plan,
            live.keys(),
            package_ids=packages.ids,
            existing_channels=[ExistingChannel(number=n, package_id=p) for n, p in live.items()],
        )
    selected = build_order(numbering, settings.limit or None)
    if len(selected) < len(numbering.channels):
        context.log.info(f"planned {len(numbering.channels)} channels; building {len(selected)}")
    _trace(
        context,
        ai,
        step_name="assignNumbers",
        phase="numbering",
        status="ok",
        output={
            "numbers": {c.key: c.number for c in numbering.channels},
            "selected": [c.number for c in selected],
        },
    )
    yield dg.Output(
        NumberedLineup(numbering=numbering, selected=[c.number for c in selected]),
        output_name="numbered",
    )
    plan = planned.sanitized.plan
    for numbered in selected:
        yield dg.DynamicOutput(
            BuildTask(settings=settings, channel=plan.channel(numbered.key), numbered=numbered),
            output_name="builds",
            mapping_key=mapping_key(numbered.number),
        )


@versioned_op(
    OP_VERSION,
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
    meter = Meter(ai, settings, "build", trace_identity(context))
    deps = BuildDeps(
        store=store,
        ai=ai,
        claims=stores.claims,
        plex=plex.get_client(),
        claimant=claimant(context),
        run_id=context.run_id,
        library_items=library_sizes(store, settings.source_id),
    )
    common: dict[str, Any] = {
        "step_name": "buildChannel",
        "phase": "build",
        "channel_key": task.channel.key,
        "channel_number": task.numbered.number,
        "channel_name": task.channel.name,
        "context_sha256": shared.context.sha256,
        "started_at": started,
        "input": {
            "theme": task.channel.theme,
            "targetPoolSize": task.channel.target_pool_size,
            "mediaTypes": list(task.channel.media_types),
            "proposedFilter": task.channel.filter.model_dump(mode="json", by_alias=True),
        },
    }
    model = settings.worker_model if settings.provider == "anthropic" else "offline"
    try:
        result, extra = run_build(
            task,
            shared.context,
            deps,
            llm=client,
            meter=meter,
            exhausted=meter.exhausted,
            log=context.log.info,
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
            **usage_columns(model, usage, settings.prices),
        )
        raise dg.Failure(description=f"channel {task.numbered.number}: {error}") from error
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
        **usage_columns(model, usage, settings.prices),
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
    database: DatabaseResource,
) -> LineupReport:
    """Collect every build into the report; remove AI packages that ended up empty.

    Fails loudly if a selected channel has no build result (for example after a crash that a
    plain re-execution did not repair), naming the missing channel numbers. Spend counts every
    model call of the lineup from the ledger: planner, retries and failed attempts included.
    """
    _, ai = _stores(database)
    with _phase(context, ai, "reportLineup", "report"):
        return _report(context, analyzed, planned, packages, numbered, results, ai)


def _report(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    packages: CreatedPackages,
    numbered: NumberedLineup,
    results: list[ChannelBuildResult],
    ai: AiStore,
) -> LineupReport:
    settings = analyzed.settings
    built = {r.number for r in results}
    missing = [n for n in numbered.selected if n not in built]
    if missing:
        raise dg.Failure(
            description=(
                f"{len(missing)} selected channel(s) have no build result: "
                f"{', '.join(mapping_key(n) for n in missing)}. Resume run {context.run_id} "
                "(`airwave runs resume`) to build them."
            )
        )
    removed = set(ai.remove_empty_ai_packages([packages.ids[k] for k in packages.created]))
    plan = planned.sanitized.plan
    id_keys = {package_id: key for key, package_id in packages.ids.items()}
    removed_keys = {id_keys.get(i) for i in removed}
    summaries = [
        PackageSummary(
            key=package.key,
            name=package.name,
            package_id=packages.ids.get(package.key),
            action="created" if package.key in packages.created else "reused",
            removed_empty=package.key in removed_keys,
        )
        for package in plan.packages
    ]
    usage = ai.usage_by_model(settings.ledger_id)
    report = build_report(
        source_id=settings.source_id,
        provider=settings.provider,
        packages=summaries,
        results=results,
        channels_planned=planned.sanitized.channel_count,
        usage_by_model=usage,
        prices=settings.prices,
        dropped=planned.sanitized.dropped_channels,
        budget_usd=settings.budget_usd,
        duration_seconds=(datetime.now(UTC) - settings.started_at).total_seconds(),
    )
    markdown = render_markdown(report)
    _trace(
        context,
        ai,
        step_name="reportLineup",
        phase="report",
        status="ok",
        output={**report.model_dump(mode="json"), "markdown": markdown},
    )
    metadata: dict[str, Any] = {
        "channels_planned": report.channels_planned,
        "channels_built": report.channels_built,
        "channels_skipped": len(report.skipped),
        "channels_failed": len(report.failed),
        "total_usd": report.total_usd,
        "cache_read_ratio": report.cache_read_ratio,
        "report": dg.MetadataValue.md(markdown),
    }
    context.log_event(dg.AssetMaterialization(asset_key=AI_LINEUP_KEY, metadata=metadata))
    context.add_output_metadata(metadata)
    context.log.info(
        f"AI lineup: {report.channels_built} built, {len(report.skipped)} skipped, "
        f"{len(report.failed)} failed; ${report.total_usd:.4f}"
    )
    return report
