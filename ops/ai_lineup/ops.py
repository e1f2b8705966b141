"""The `ai_lineup` design ops: analyze the library, render the context, list packages, plan.

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
from typing import Any

import dagster as dg

from airwave_dagster.domain.ai.context import render_shared_context
from airwave_dagster.domain.ai.curate import curate_lineup
from airwave_dagster.domain.ai.offline import offline_plan
from airwave_dagster.domain.ai.plan import (
    ExistingPackage,
    sanitize_plan,
)
from airwave_dagster.domain.errors import PlanSchemaError
from ops.ai_lineup.checkpoints import (
    AiLineupConfig,
    AnalyzedLibrary,
    ExistingPackages,
    LineupContext,
    PlannedLineup,
)
from ops.ai_lineup.planning import (
    PlanningError,
    deployment_models,
    fetch_vocabulary,
    lineup_settings,
    plan_with_model,
    resolve_provider,
)
from ops.library_assets import (
    LIBRARY_PROFILE_KEY,
    PLEX_LIBRARY_KEY,
    compute_profile,
    profile_metadata,
    profile_sha256,
    sync_metadata,
)
from ops.steps import LLM_POOL, trace_identity, versioned_op
from resources.ai_toolbox import library_sizes
from resources.database import DatabaseResource
from resources.llm import (
    LlmResource,
    MissingApiKeyError,
)
from resources.plex import PlexError, PlexResource
from resources.stores.ai import AiStore, media_items
from resources.stores.channels import AirwaveStore
from resources.stores.library import apply_library_switches, library_synced, sync_library

OP_VERSION = "ai-lineup-v5"
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
    """Trace any exception of the step as a failed row of its phase, then let it propagate.

    A `PlanningError` (a refusal with its reason) becomes the step's `dg.Failure`.
    """
    try:
        yield
    except PlanningError as error:
        _trace(context, ai, step_name=step_name, phase=phase, status="failed", error=str(error))
        raise dg.Failure(description=str(error)) from error
    except Exception as error:
        message = (
            error.description or str(error)
            if isinstance(error, dg.Failure)
            else f"{type(error).__name__}: {error}"
        )
        _trace(context, ai, step_name=step_name, phase=phase, status="failed", error=message)
        raise


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
    provider = resolve_provider(config, llm)
    busy = store.engine_busy()
    if busy is not None:
        raise PlanningError(busy)
    source_id = store.find_source(plex.base_url)
    # Media item rows also come from schedules (only the items scheduled), so rows alone do not
    # prove a snapshot: unless a complete snapshot of this source was taken, sync it now.
    # Attached, the snapshot is private and nothing else refreshes it (Airwave's own metadata
    # sync keeps Airwave's rows), so every run takes a fresh one.
    if source_id is None or store.deployment.attached or not library_synced(store, source_id):
        try:
            synced = sync_library(store, plex.get_client())
        except PlexError as error:
            raise dg.Failure(description=f"cannot snapshot the library: {error}") from error
        source_id = synced.source_id
        context.log_event(
            dg.AssetMaterialization(asset_key=PLEX_LIBRARY_KEY, metadata=sync_metadata(synced))
        )
        context.log.info(f"synced the library snapshot from Plex: {synced.items} items")
    settings = lineup_settings(
        config,
        provider=provider,
        models=deployment_models(config, store, provider),
        source_id=source_id,
        ledger_id=context.dagster_run.root_run_id or context.run_id,
    )
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


@versioned_op(OP_VERSION)
def build_shared_context(
    context: dg.OpExecutionContext,
    analyzed: AnalyzedLibrary,
    database: DatabaseResource,
    plex: PlexResource,
) -> LineupContext:
    """Render the shared prefix: profile + field catalog + tag vocabulary from Plex.

    The catalog lists only the filter fields the server advertises for its libraries (a real
    server has no director or Dolby Vision filter on episodes); the same field list is stored
    for the offline curation, so its in-memory pools are the ones Plex returns.
    The vocabulary is fetched once per field and stored with the rendered text as this step's
    output, so every build of the run (and a resumed run) sends the same bytes. A Plex failure
    fails the step: a silently empty vocabulary would mislead the planner.
    """
    store, ai = _stores(database)
    client = plex.get_client()
    apply_library_switches(client, store, analyzed.settings.source_id)
    try:
        vocabulary = fetch_vocabulary(client)
        offered = client.offered_fields()
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
    shared = render_shared_context(analyzed.profile, vocabulary, offered)
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
    return LineupContext(context=shared, vocabulary=vocabulary, offered=offered)


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


@versioned_op(OP_VERSION, pool=LLM_POOL)
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
                    raw,
                    media_items(ai, settings.source_id),
                    rules=settings.rules,
                    offered=shared.offered,
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
        log = context.log.warning
        try:
            sanitized, attempts = plan_with_model(
                ai, settings, client, shared, existing, step=trace_identity(context), log=log
            )
        except PlanningError as error:
            raise dg.Failure(description=str(error)) from error
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
    return PlannedLineup(
        sanitized=sanitized, model=model, attempts=attempts, offered=shared.offered
    )
