"""The `ai_lineup` job: analyze, context, packages seen, plan, packages, numbers, builds, report.

Every op's output is its checkpoint (stored as JSON by the Postgres IO manager), so a resumed run
never re-fetches the vocabulary, never re-plans (never pays the planner twice) and never renumbers.
Channel builds fan out through a DynamicOut keyed by channel number, at most six at once; each
build reserves its number first (`resources.claims`), so a duplicate start adopts the committed
channel instead of paying for the model work again. Every model call is charged to a Postgres
ledger shared by all step processes as soon as it returns; once the budget is spent, builds not
yet started are skipped with reason "budget" and a running agent stops at its next call.
"""

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import dagster as dg
from pydantic import BaseModel, Field

from airwave_dagster.domain.ai.context import (
    VOCABULARY_FIELDS,
    SharedContext,
    render_shared_context,
)
from airwave_dagster.domain.ai.curate import curate_lineup, lineup_guard_for
from airwave_dagster.domain.ai.numbering import (
    ExistingChannel,
    LineupNumbering,
    NumberedChannel,
    assign_numbers,
    build_order,
)
from airwave_dagster.domain.ai.offline import build_channel_offline, offline_plan
from airwave_dagster.domain.ai.plan import (
    ExistingPackage,
    PlannedChannel,
    PlanSchemaError,
    SanitizedPlan,
    coerce_accent,
    package_slug,
    plan_input_schema,
    sanitize_plan,
)
from airwave_dagster.domain.ai.profile import LibraryProfile
from airwave_dagster.domain.ai.prompts import (
    CONTEXT_HEADING,
    PLANNER_SYSTEM_PROMPT,
    PLANNER_TOOL_DESCRIPTION,
    PLANNER_TOOL_NAME,
    WORKER_SYSTEM_PROMPT,
    render_channel_brief,
    render_planner_prompt,
)
from airwave_dagster.domain.ai.report import (
    BUDGET_REASON,
    ChannelBuildResult,
    LineupReport,
    PackageSummary,
    build_report,
    measure_built_lineup,
    render_markdown,
)
from airwave_dagster.domain.ai.tools import (
    ChannelCheck,
    ChannelOutcome,
    PoolRules,
    ToolSession,
    tool_definitions_api,
)
from airwave_dagster.domain.ai.usage import (
    ModelPrice,
    PriceTable,
    Usage,
    add_usage,
    budget_exhausted,
    cost_usd,
)
from ops.ai_assets import AI_LINEUP_KEY, LIBRARY_PROFILE_KEY, profile_metadata, profile_sha256
from ops.ai_assets import compute_profile as _compute_profile
from ops.durability import claimant as _claimant
from ops.durability import step_key as _step_key
from ops.library import PLEX_LIBRARY_KEY, sync_metadata
from resources.ai_store import AiStore, NewPackage, media_items
from resources.ai_toolbox import PlexChannelToolbox, library_sizes
from resources.claims import ChannelClaims, Claimant
from resources.database import AirwaveStore, DatabaseResource
from resources.io_manager import CODE_VERSION_TAG
from resources.library_sync import library_synced, sync_library
from resources.llm import (
    DEFAULT_PLANNER_MODEL,
    DEFAULT_WORKER_MODEL,
    PLANNER_MAX_TOKENS,
    BudgetStop,
    LlmCallError,
    LlmClient,
    LlmResource,
    MissingApiKeyError,
    ToolOutcome,
)
from resources.plex import PlexClient, PlexError, PlexResource

BUILD_CONCURRENCY = 6
"""At most this many channel builds run at once (a sliding window, not the reference's waves)."""

OP_VERSION = "ai-lineup-v1"
"""Code version of every op of this job; bump it when an op's behaviour or output type changes."""

Provider = Literal["anthropic", "offline"]


def _op(**kwargs: Any) -> Any:
    """`dg.op` with this job's code version, mirrored into a tag so each run records it."""
    return dg.op(code_version=OP_VERSION, tags={CODE_VERSION_TAG: OP_VERSION}, **kwargs)


class PriceConfig(dg.Config):
    """A model's price in USD per million tokens."""

    input: float = Field(description="USD per million uncached input tokens.")
    output: float = Field(description="USD per million output tokens.")


class AiLineupConfig(dg.Config):
    """How to build the AI lineup."""

    limit: int = Field(
        default=0,
        description="Build at most this many channels, picked round-robin across packages; "
        "0 builds all. Never shrinks the plan: every planned channel is numbered.",
    )
    budget_usd: float | None = Field(
        default=None,
        description="Most the run may spend on model calls (planner included). Once spent, "
        "builds not yet started are skipped with reason 'budget'. Unset: no limit.",
    )
    confirm_wipe: bool = Field(
        default=False,
        description="Replace this source's previous AI lineup (its AI channels and packages are "
        "deleted). Without it a run that finds one stops before writing anything.",
    )
    provider: Literal["auto", "anthropic", "offline"] = Field(
        default="auto",
        description="'anthropic' (needs ANTHROPIC_API_KEY), 'offline' (deterministic, no "
        "network), or 'auto': anthropic when the key is set, otherwise offline.",
    )
    planner_model: str = Field(default=DEFAULT_PLANNER_MODEL, description="Planner model id.")
    worker_model: str = Field(default=DEFAULT_WORKER_MODEL, description="Channel builder model.")
    min_runtime_hours: float = Field(
        default=10.0, description="A channel is committed only with at least this much runtime."
    )
    min_pool_items: int = Field(
        default=3, description="A channel is committed only with at least this many items."
    )
    planner_attempts: int = Field(
        default=3, description="Planner calls allowed when replies break the plan schema."
    )
    prices: dict[str, PriceConfig] = Field(
        default_factory=dict,
        description="Extra or replacement prices by model id prefix (USD per million tokens).",
    )


class LineupSettings(BaseModel):
    """The run's resolved settings, stored with the first checkpoint so a resume keeps them."""

    provider: Provider
    planner_model: str
    worker_model: str
    limit: int
    budget_usd: float | None
    confirm_wipe: bool
    rules: PoolRules
    planner_attempts: int
    prices: PriceTable
    ledger_id: str
    source_id: str
    started_at: datetime


class AnalyzedLibrary(BaseModel):
    """Phase 1's checkpoint: the settings and the profile every later phase uses."""

    settings: LineupSettings
    profile: LibraryProfile
    profile_sha256: str
    library_items: dict[str, int]


class LineupContext(BaseModel):
    """Phase 2's checkpoint: the shared prefix and the vocabulary it was rendered from."""

    context: SharedContext
    vocabulary: dict[str, list[str]]


class ExistingPackages(BaseModel):
    """Phase 3's checkpoint: non-AI packages the planner may file into (read before the wipe)."""

    packages: list[ExistingPackage]


class PlannedLineup(BaseModel):
    """Phase 4's checkpoint: the sanitised plan (a resume never pays for a second plan)."""

    sanitized: SanitizedPlan
    model: str | None
    attempts: int


class CreatedPackages(BaseModel):
    """Phase 5's checkpoint: plan package key → package id, and what the wipe removed."""

    ids: dict[str, str]
    created: list[str]
    reused: list[str]
    wiped_channels: int
    wiped_packages: int


class NumberedLineup(BaseModel):
    """Phase 6's checkpoint: every planned channel's number, and the ones selected to build."""

    numbering: LineupNumbering
    selected: list[int]


class BuildTask(BaseModel):
    """One mapped build: a numbered channel and the settings it runs under."""

    settings: LineupSettings
    channel: PlannedChannel
    numbered: NumberedChannel
    earlier: list[PlannedChannel] = Field(default_factory=list)
    """The plan's channels before this one: the lineup its commit is checked against."""


def _mapping_key(number: int) -> str:
    return f"ch_{number}"


def _stores(database: DatabaseResource) -> tuple[AirwaveStore, AiStore]:
    store = database.get_store()
    return store, AiStore(store.engine)


def _trace(context: dg.OpExecutionContext, ai: AiStore, **fields: Any) -> None:
    """One trace row keyed by this run, step and attempt (best effort)."""
    ai.record_trace(
        run_id=context.run_id,
        step_key=_step_key(context),
        attempt=context.retry_number + 1,
        **fields,
    )


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


def _usage_columns(model: str | None, usage: Usage, prices: PriceTable) -> dict[str, Any]:
    return {
        "model": model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost_usd": None if model is None else cost_usd(model, usage, prices),
    }


class Meter:
    """Charges every model call to the run's ledger the moment it returns, and sums it."""

    def __init__(
        self, context: dg.OpExecutionContext, ai: AiStore, settings: LineupSettings, phase: str
    ) -> None:
        self.context = context
        self.ai = ai
        self.settings = settings
        self.phase = phase
        self.by_model: dict[str, Usage] = {}

    def __call__(self, model: str, usage: Usage) -> None:
        """Record one call (`UsageSink`)."""
        self.by_model = add_usage(self.by_model, model, usage)
        self.ai.charge(
            self.settings.ledger_id,
            run_id=self.context.run_id,
            step_key=_step_key(self.context),
            attempt=self.context.retry_number + 1,
            phase=self.phase,
            model=model,
            usage=usage,
            cost_usd=cost_usd(model, usage, self.settings.prices),
        )

    def exhausted(self) -> bool:
        """Whether the ledger (all processes of the lineup) has reached the budget."""
        if self.settings.budget_usd is None:
            return False
        state = self.ai.ledger(self.settings.ledger_id)
        return budget_exhausted(state.budget_usd, state.spent_usd)

    def check(self) -> None:
        """`before_call` hook: stop before a call once the budget is spent."""
        if self.exhausted():
            raise BudgetStop()


def _resolve_provider(config: AiLineupConfig, llm: LlmResource) -> Provider:
    if config.provider == "offline":
        return "offline"
    if config.provider == "anthropic":
        if not llm.has_key():
            raise dg.Failure(description=llm.missing_key_message())
        return "anthropic"
    return "anthropic" if llm.has_key() else "offline"


def _prices(config: AiLineupConfig) -> PriceTable:
    overrides = {
        model: ModelPrice(input=price.input, output=price.output)
        for model, price in config.prices.items()
    }
    return PriceTable().with_overrides(overrides)


def _refuse_unpriced(settings: LineupSettings) -> None:
    """A budget can only be enforced over priced models: refuse before anything is spent."""
    if settings.provider != "anthropic" or settings.budget_usd is None:
        return
    for model in (settings.planner_model, settings.worker_model):
        if settings.prices.price_of(model) is None:
            raise dg.Failure(
                description=(
                    f"budget_usd is set but model {model!r} has no price, so its spend could not "
                    "be counted; add it under `prices` in the run config or drop the budget"
                )
            )


@_op()
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
        prices=_prices(config),
        ledger_id=context.dagster_run.root_run_id or context.run_id,
        source_id=source_id,
        started_at=datetime.now(UTC),
    )
    _refuse_unpriced(settings)
    ai.open_ledger(settings.ledger_id, settings.budget_usd)
    profile = _compute_profile(ai, source_id)
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


@_op()
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


@_op()
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
    meter = Meter(context, ai, settings, "plan")
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
                **_usage_columns(settings.planner_model, error.usage, settings.prices),
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
                **_usage_columns(settings.planner_model, usage, settings.prices),
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
            **_usage_columns(settings.planner_model, usage, settings.prices),
        )
        return sanitized, attempt
    raise dg.Failure(
        description=(
            f"the planner's reply broke the plan schema {settings.planner_attempts} time(s); "
            f"the raw replies are in ai_lineup_trace (phase 'plan'). Last problem: "
            f"{last_error[:1500]}"
        )
    )


@_op()
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
                # Lineup checks on the snapshot: the concurrent builds cannot see each other.
                curated = curate_lineup(
                    raw, media_items(ai, settings.source_id), rules=settings.rules
                )
                sanitized = sanitize_plan(curated.plan, existing_package_keys=keys)
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
                "curated": [list(removed) for removed in curated.removed],
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


@_op()
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


@_op(out={"numbered": dg.Out(NumberedLineup), "builds": dg.DynamicOut(BuildTask)})
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
    order = [channel for _, channel in plan.channels()]
    for numbered in selected:
        channel = plan.channel(numbered.key)
        earlier = order[: order.index(channel)]
        yield dg.DynamicOutput(
            BuildTask(settings=settings, channel=channel, numbered=numbered, earlier=earlier),
            output_name="builds",
            mapping_key=_mapping_key(numbered.number),
        )


def channel_signature(settings: LineupSettings, channel_key: str) -> str:
    """Identity of one planned channel of one lineup: equal across retries and re-executions."""
    text = f"ai-lineup:{settings.ledger_id}:{channel_key}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _claim_values(task: BuildTask, run_id: str) -> dict[str, Any]:
    channel = task.channel
    return {
        "name": channel.name.strip(),
        "description": channel.description or None,
        "callsign": channel.callsign,
        "icon": channel.icon,
        "tint": task.numbered.accent,
        "ordering": channel.ordering,
        "sort_field": channel.sort_field or "title",
        "sort_dir": channel.sort_dir or "asc",
        "media_source_id": task.settings.source_id,
        "package_id": task.numbered.package_id,
        "ai_generated": True,
        "created_by_run_id": run_id,
    }


@dataclass(frozen=True)
class BuildDeps:
    """What one build needs besides its task (plain values, so tests can call `run_build`)."""

    store: AirwaveStore
    ai: AiStore
    plex: PlexClient
    claimant: Claimant
    run_id: str
    library_items: dict[str, int]


class TransientBuildError(Exception):
    """The model API failed transiently: the build's claim is released, a resume retries it."""


def _execute(session: ToolSession) -> Callable[[str, Any], ToolOutcome]:
    def execute(name: str, tool_input: Any) -> ToolOutcome:
        result = session.call(name, tool_input)
        return ToolOutcome(
            content=result.content,
            is_error=result.is_error,
            terminal=result.terminal is not None,
        )

    return execute


def run_build(
    task: BuildTask,
    shared: SharedContext,
    deps: BuildDeps,
    *,
    llm: LlmClient | None,
    meter: Callable[[str, Usage], None],
    exhausted: Callable[[], bool],
    log: Callable[[str], None] = lambda message: None,
) -> tuple[ChannelBuildResult, dict[str, Any]]:
    """Build one channel: claim its number, run the agent (or offline builder), settle.

    Returns the result and extra trace fields. A duplicate start adopts the committed channel
    of an earlier attempt without any model call; a failed or abandoned build deletes its claim.

    Raises:
        TransientBuildError: The model API failed after the SDK's retries (claim released).
    """
    settings = task.settings
    channel, numbered = task.channel, task.numbered
    if settings.provider == "anthropic" and exhausted():
        return ChannelBuildResult.without_build(numbered, channel, "skipped", BUDGET_REASON), {}
    claims = ChannelClaims(deps.store.engine)
    claim = claims.claim(
        number=numbered.number,
        claimant=deps.claimant,
        signature=channel_signature(settings, channel.key),
        values=_claim_values(task, deps.run_id),
    )
    if claim.kind == "existing":
        log(f"channel {numbered.number} was already built by an earlier attempt: adopted")
        return ChannelBuildResult.without_build(
            numbered,
            channel,
            "created",
            "already built by an earlier attempt (adopted, no model call)",
            channel_id=claim.channel_id,
        ), {}
    if claim.kind == "conflict" or claim.channel_id is None:
        reason = claim.detail or f"channel number {numbered.number} is taken"
        return ChannelBuildResult.without_build(numbered, channel, "skipped", reason), {}
    toolbox = PlexChannelToolbox(
        plex=deps.plex,
        store=deps.store,
        ai_store=deps.ai,
        claims=claims,
        claimant=deps.claimant,
        channel_id=claim.channel_id,
        number=numbered.number,
        source_id=settings.source_id,
        ordering=channel.ordering,
        sort_field=channel.sort_field or "title",
        sort_dir=channel.sort_dir or "asc",
        library_items=deps.library_items,
    )
    outcome, transient = _run_agent(task, shared, toolbox, llm, meter, exhausted)
    if outcome.status != "created":
        toolbox.release()
    result = ChannelBuildResult.of(numbered, channel, outcome)
    extra: dict[str, Any] = {
        "trace": [step.model_dump(mode="json", exclude_none=True) for step in outcome.trace],
        "agent_steps": outcome.model_calls,
    }
    if toolbox.schedule_error:
        extra["schedule_error"] = toolbox.schedule_error
    if toolbox.schedule_slots is not None:
        extra["schedule_slots"] = toolbox.schedule_slots
    if transient is not None:
        raise TransientBuildError(transient) from None
    return result, extra


def _run_agent(
    task: BuildTask,
    shared: SharedContext,
    toolbox: PlexChannelToolbox,
    llm: LlmClient | None,
    meter: Callable[[str, Usage], None],
    exhausted: Callable[[], bool],
) -> tuple[ChannelOutcome, str | None]:
    """Drive the tools with the model or the offline builder; the outcome and a transient error."""
    settings = task.settings
    channel = task.channel
    guard = lineup_guard_for(task.earlier, media_items(toolbox.ai_store, settings.source_id))
    lineup = ChannelCheck.of(guard, channel.name, channel.description, channel.theme)
    if settings.provider == "offline" or llm is None:
        try:
            with toolbox.claims.held(toolbox.channel_id, toolbox.claimant):
                outcome = build_channel_offline(channel, toolbox, rules=settings.rules, guard=guard)
                return outcome, None
        except Exception as error:
            session = ToolSession(toolbox, planned=channel.envelope(), rules=settings.rules)
            return session.finish(error=f"{type(error).__name__}: {error}"), None
    session = ToolSession(toolbox, planned=channel.envelope(), rules=settings.rules, check=lineup)
    model = settings.worker_model

    def check() -> None:
        if exhausted():
            raise BudgetStop()

    try:
        with toolbox.claims.held(toolbox.channel_id, toolbox.claimant):
            agent = llm.run_agent(
                model=model,
                system=WORKER_SYSTEM_PROMPT,
                tools=tool_definitions_api(),
                context_block=f"{CONTEXT_HEADING}\n{shared.text}",
                brief=render_channel_brief(channel),
                execute=_execute(session),
                on_usage=meter,
                on_text=session.says,
                before_call=check,
            )
    except LlmCallError as error:
        usage = {model: error.usage} if error.usage.calls else {}
        outcome = session.finish(model_calls=error.calls, usage=usage, error=str(error))
        return outcome, (str(error) if error.transient and not session.finished else None)
    except Exception as error:
        # Plex unreachable mid-build, a database error...: this build fails, the others go on.
        outcome = session.finish(error=f"{type(error).__name__}: {error}")
        return outcome, None
    usage = {model: agent.usage} if agent.calls else {}
    outcome = session.finish(model_calls=agent.calls, usage=usage)
    if agent.stop == "budget" and outcome.status != "created":
        outcome = outcome.model_copy(update={"status": "skipped", "reason": BUDGET_REASON})
    return outcome, None


@_op(retry_policy=dg.RetryPolicy(max_retries=1, delay=2.0, backoff=dg.Backoff.EXPONENTIAL))
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
    store, ai = _stores(database)
    client: LlmClient | None = None
    if settings.provider == "anthropic":
        try:
            client = llm.get_client()
        except MissingApiKeyError as error:
            raise dg.Failure(description=str(error)) from error
    meter = Meter(context, ai, settings, "build")
    deps = BuildDeps(
        store=store,
        ai=ai,
        plex=plex.get_client(),
        claimant=_claimant(context),
        run_id=context.run_id,
        library_items=_library_items(store, settings.source_id),
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
            **_usage_columns(model, usage, settings.prices),
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
        **_usage_columns(model, usage, settings.prices),
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


def _library_items(store: AirwaveStore, source_id: str) -> dict[str, int]:
    return library_sizes(store, source_id)


@_op()
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
                f"{', '.join(_mapping_key(n) for n in missing)}. Resume run {context.run_id} "
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
    usage: dict[str, Usage] = {}
    for row in ai.spend_rows(settings.ledger_id):
        usage = add_usage(
            usage,
            row["model"],
            Usage(
                input_tokens=row["input_tokens"],
                output_tokens=row["output_tokens"],
                cache_read_tokens=row["cache_read_tokens"],
                cache_write_tokens=row["cache_write_tokens"],
                calls=1,
            ),
        )
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
        quality=measure_built_lineup(media_items(ai, settings.source_id), results),
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
        **report.quality_metadata(),
        "report": dg.MetadataValue.md(markdown),
    }
    context.log_event(dg.AssetMaterialization(asset_key=AI_LINEUP_KEY, metadata=metadata))
    context.add_output_metadata(metadata)
    context.log.info(
        f"AI lineup: {report.channels_built} built, {len(report.skipped)} skipped, "
        f"{len(report.failed)} failed; ${report.total_usd:.4f}"
    )
    return report


def ai_lineup_executor(start_method: str = "forkserver") -> dg.ExecutorDefinition:
    """The multiprocess executor bounding channel builds to BUILD_CONCURRENCY at once."""
    method: dict[str, object] = (
        {"forkserver": {"preload_modules": ["airwave_dagster.definitions"]}}
        if start_method == "forkserver"
        else {"spawn": {}}
    )
    return dg.multiprocess_executor.configured(
        {"max_concurrent": BUILD_CONCURRENCY, "start_method": method}
    )


@dg.job(
    executor_def=ai_lineup_executor(),
    tags={"airwave/job": "ai_lineup", "airwave/report_op": "report_lineup"},
    description="Design a whole lineup from the library profile and build every channel with a "
    "verifying agent (anthropic or offline), within a budget.",
)
def ai_lineup():
    """Analyze → context → existing packages → plan → packages → numbers → builds → report."""
    analyzed = analyze_library()
    shared = build_shared_context(analyzed)
    existing = list_existing_packages(analyzed)
    planned = plan_lineup(analyzed, shared, existing)
    packages = create_ai_packages(analyzed, planned)
    numbered, builds = assign_channel_numbers(analyzed, planned, packages)
    results = builds.map(lambda task: build_ai_channel(task, shared))
    report_lineup(analyzed, planned, packages, numbered, results.collect())
