"""Planning an AI lineup: the provider, the vocabulary, and the planner model's bounded retries.

Plain Python over the stores and clients (no Dagster context); the ops in `ops/ai_lineup/ops.py`
turn `PlanningError` into a step failure.
"""

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from airwave_dagster.domain.ai.context import VOCABULARY_FIELDS
from airwave_dagster.domain.ai.models import output_cap
from airwave_dagster.domain.ai.plan import (
    SanitizedPlan,
    plan_input_schema,
    sanitize_plan,
)
from airwave_dagster.domain.ai.prompts import (
    PLANNER_SYSTEM_PROMPT,
    PLANNER_TOOL_DESCRIPTION,
    PLANNER_TOOL_NAME,
    render_planner_prompt,
)
from airwave_dagster.domain.ai.tools import PoolRules
from airwave_dagster.domain.errors import PlanSchemaError
from ops.ai_lineup.checkpoints import (
    AiLineupConfig,
    ExistingPackages,
    LineupContext,
    LineupSettings,
    Provider,
)
from ops.ai_lineup.metering import Meter, price_table, unpriced_budget_problem, usage_columns
from resources.llm import (
    DEFAULT_PLANNER_MODEL,
    DEFAULT_WORKER_MODEL,
    PLANNER_MAX_TOKENS,
    TRUNCATED_STOP_REASONS,
    LlmCallError,
    LlmClient,
    LlmResource,
    spend_notes,
)
from resources.plex import PlexClient
from resources.stores.ai import AiStore
from resources.stores.channels import AirwaveStore


class PlanningError(RuntimeError):
    """The lineup cannot be planned; the message says why and what to do."""


def resolve_provider(config: AiLineupConfig, llm: LlmResource) -> Provider:
    """The provider a run uses: as configured, or (auto) anthropic when its key is set.

    Raises:
        PlanningError: The anthropic provider is asked for without its key.
    """
    if config.provider == "offline":
        return "offline"
    if config.provider == "anthropic":
        if not llm.has_key():
            raise PlanningError(llm.missing_key_message())
        return "anthropic"
    return "anthropic" if llm.has_key() else "offline"


def deployment_models(
    config: AiLineupConfig, store: AirwaveStore, provider: Provider
) -> tuple[str, str]:
    """The planner and worker models: the run config's, else the deployment's.

    Attached, the deployment's models are those of Airwave's planner and worker AI connections
    (docs/reference/airwave-database.md §6.2); standalone, the built-in defaults. This project
    speaks Anthropic's Messages API only, so a connection of another provider is refused unless
    the run config names the model (or the offline provider needs no model).

    Raises:
        PlanningError: Attached, the anthropic provider, and a role whose connection is missing
            or of another provider, with no model in the run config.
    """
    planner, worker = config.planner_model, config.worker_model
    if (
        store.deployment.attached
        and provider == "anthropic"
        and (planner is None or worker is None)
    ):
        connections = dict(zip(("planner", "worker"), store.ai_connection_models(), strict=True))
        chosen = {"planner": planner, "worker": worker}
        for role, connection in connections.items():
            if chosen[role] is not None:
                continue
            if connection is None:
                raise PlanningError(
                    f"Airwave has no AI connection marked as {role}; mark one in Airwave's AI "
                    f"settings, or set {role}_model in the run config"
                )
            if connection.provider != "anthropic":
                raise PlanningError(
                    f"Airwave's {role} connection {connection.name!r} uses provider "
                    f"{connection.provider!r}; this project calls Anthropic's Messages API only: "
                    f"set {role}_model (an Anthropic model) in the run config, or use provider "
                    "'offline'"
                )
            chosen[role] = connection.model
        planner, worker = chosen["planner"], chosen["worker"]
    return planner or DEFAULT_PLANNER_MODEL, worker or DEFAULT_WORKER_MODEL


def lineup_settings(
    config: AiLineupConfig,
    *,
    provider: Provider,
    source_id: str,
    ledger_id: str,
    models: tuple[str, str] = (DEFAULT_PLANNER_MODEL, DEFAULT_WORKER_MODEL),
) -> LineupSettings:
    """The run's settings from its config, checked before anything is written or spent.

    Raises:
        PlanningError: A negative limit or budget, or a budget over an unpriced model.
    """
    if config.limit < 0:
        raise PlanningError(f"limit must be 0 (all) or positive, got {config.limit}")
    if config.budget_usd is not None and config.budget_usd < 0:
        raise PlanningError(f"budget_usd must be >= 0, got {config.budget_usd}")
    settings = LineupSettings(
        provider=provider,
        planner_model=models[0],
        worker_model=models[1],
        limit=config.limit,
        budget_usd=config.budget_usd,
        confirm_wipe=config.confirm_wipe,
        approval=config.approval,
        approval_expiry_hours=config.approval_expiry_hours,
        rules=PoolRules(
            min_items=max(1, config.min_pool_items), min_runtime_hours=config.min_runtime_hours
        ),
        planner_attempts=max(1, config.planner_attempts),
        prices=price_table(config),
        ledger_id=ledger_id,
        source_id=source_id,
        started_at=datetime.now(UTC),
    )
    problem = unpriced_budget_problem(settings)
    if problem is not None:
        raise PlanningError(problem)
    return settings


def fetch_vocabulary(client: PlexClient) -> dict[str, list[str]]:
    """The values of every vocabulary tag field: one Plex lookup per field, failures raised."""
    return {field: client.tag_values(field, ()) for field in VOCABULARY_FIELDS}


def _approx_tokens(text: str) -> int:
    # About four characters a token for English prose and JSON; only a pre-call estimate.
    return len(text) // 4 + 1


def plan_with_model(
    ai: AiStore,
    settings: LineupSettings,
    client: LlmClient,
    shared: LineupContext,
    existing: ExistingPackages,
    *,
    step: Mapping[str, Any],
    log: Callable[[str], None],
) -> tuple[SanitizedPlan, int]:
    """Call the planner until its reply fits the schema (bounded), tracing every attempt.

    Args:
        ai: The AI store (ledger and trace).
        settings: The run's settings.
        client: The model client.
        shared: The shared context the prompt is rendered from.
        existing: Packages the planner may file channels into.
        step: The attempt's identity (`run_id`, `step_key`, `attempt`) for traces and charges.
        log: Where warnings about unusable replies go.

    Returns:
        The sanitised plan and the attempt that produced it.

    Raises:
        PlanningError: The budget is spent, a call failed, or every reply broke the schema.
    """
    keys = [p.key for p in existing.packages]
    prompt = render_planner_prompt(shared.context.text, existing.packages)
    meter = Meter(
        ai,
        settings,
        "plan",
        step,
        model=settings.planner_model,
        max_output_tokens=output_cap(settings.planner_model, PLANNER_MAX_TOKENS),
        first_input_tokens=_approx_tokens(prompt),
    )
    tool = {
        "name": PLANNER_TOOL_NAME,
        "description": PLANNER_TOOL_DESCRIPTION,
        "input_schema": plan_input_schema(),
    }
    last_error = ""
    for attempt in range(1, settings.planner_attempts + 1):
        if meter.exhausted():
            raise PlanningError(
                "the budget cannot pay for the planner's next call at its worst case "
                f"(${meter.next_call_worst_case():.4f}: the prompt uncached plus "
                f"{meter.max_output_tokens} output tokens); the planner was not called"
            )
        common = {
            "step_name": "planLineup",
            "phase": "plan",
            "context_sha256": shared.context.sha256,
            "input": {"existingPackages": keys, "plannerTry": attempt},
        }
        try:
            with spend_notes(meter.span_notes):
                reply = client.plan(
                    model=settings.planner_model,
                    system=PLANNER_SYSTEM_PROMPT,
                    content=[
                        {"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}}
                    ],
                    tool=tool,
                    max_tokens=PLANNER_MAX_TOKENS,
                    on_usage=meter,
                )
        except LlmCallError as error:
            ai.record_trace(
                **step,
                status="failed",
                reason="planner call failed",
                error=str(error),
                **common,
                **usage_columns(settings.planner_model, error.usage, settings.prices),
            )
            advice = "" if error.needs_operator else " Resume the run to try again."
            raise PlanningError(f"planner call failed: {error}.{advice}") from error
        usage = reply.usage
        try:
            # A cut-off reply is never a plan, even when what arrived happens to parse.
            if reply.tool_input is None or reply.stop_reason in TRUNCATED_STOP_REASONS:
                raise PlanSchemaError([])
            sanitized = sanitize_plan(reply.tool_input, existing_package_keys=keys)  # type: ignore[arg-type]
        except PlanSchemaError as error:
            if reply.stop_reason == "model_context_window_exceeded":
                last_error = (
                    "the reply filled the model's context window before the plan was complete"
                )
            elif reply.stop_reason == "max_tokens":
                last_error = (
                    "the reply hit the output cap (max_tokens) before the plan was complete"
                )
            else:
                last_error = str(error) if error.issues else "the reply called no plan tool"
            ai.record_trace(
                **step,
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
            log(f"planner attempt {attempt} unusable: {last_error[:400]}")
            continue
        ai.record_trace(
            **step,
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
    raise PlanningError(
        f"the planner's reply broke the plan schema {settings.planner_attempts} time(s); "
        f"the raw replies are in ai_lineup_trace (phase 'plan'). Last problem: "
        f"{last_error[:1500]}"
    )
