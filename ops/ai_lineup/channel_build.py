"""Building one AI channel: claim its number, let the agent (or offline builder) verify and commit.

Plain Python over the stores, the Plex client and the LLM client (no Dagster context): the op
`build_ai_channel` only resolves resources, traces and reports, and tests call `run_build`
directly.
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airwave_dagster import failpoints
from airwave_dagster.domain.ai.context import SharedContext
from airwave_dagster.domain.ai.curate import lineup_guard_for
from airwave_dagster.domain.ai.offline import build_channel_offline
from airwave_dagster.domain.ai.prompts import (
    CONTEXT_HEADING,
    WORKER_SYSTEM_PROMPT,
    render_channel_brief,
)
from airwave_dagster.domain.ai.report import BUDGET_REASON, ChannelBuildResult
from airwave_dagster.domain.ai.tools import (
    ChannelCheck,
    ChannelOutcome,
    ToolSession,
    tool_definitions_api,
)
from airwave_dagster.domain.ai.usage import Usage
from airwave_dagster.domain.filters import OfferedFields
from ops.ai_lineup.checkpoints import BuildTask, LineupSettings
from resources.ai_toolbox import PlexChannelToolbox
from resources.llm import (
    TRUNCATED_STOP_REASONS,
    BudgetStop,
    LlmCallError,
    LlmClient,
    ToolOutcome,
)
from resources.plex import PlexClient
from resources.stores.ai import AiStore, media_items
from resources.stores.channels import AirwaveStore, channel_row
from resources.stores.claims import ChannelClaims, Claimant


def build_trace_fields(task: BuildTask, context_sha256: str, started: datetime) -> dict[str, Any]:
    """The trace columns every row of one build attempt shares (what was asked of it)."""
    channel = task.channel
    return {
        "step_name": "buildChannel",
        "phase": "build",
        "channel_key": channel.key,
        "channel_number": task.numbered.number,
        "channel_name": channel.name,
        "context_sha256": context_sha256,
        "started_at": started,
        "input": {
            "theme": channel.theme,
            "targetPoolSize": channel.target_pool_size,
            "mediaTypes": list(channel.media_types),
            "proposedFilter": channel.filter.model_dump(mode="json", by_alias=True),
            "proposedExclude": None
            if channel.exclude is None
            else channel.exclude.model_dump(mode="json", by_alias=True),
        },
    }


def channel_signature(settings: LineupSettings, channel_key: str) -> str:
    """Identity of one planned channel of one lineup: equal across retries and re-executions."""
    text = f"ai-lineup:{settings.ledger_id}:{channel_key}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _claim_values(task: BuildTask, created_by_id: str | None) -> dict[str, Any]:
    channel = task.channel
    return channel_row(
        name=channel.name,
        description=channel.description or None,
        callsign=channel.callsign,
        icon=channel.icon,
        tint=task.numbered.accent,
        ordering=channel.ordering,
        sort_field=channel.sort_field or "title",
        sort_dir=channel.sort_dir or "asc",
        media_source_id=task.settings.source_id,
        package_id=task.numbered.package_id,
        created_by_id=created_by_id,
        ai_generated=True,
    )


@dataclass(frozen=True)
class BuildDeps:
    """What one build needs besides its task (plain values, so tests can call `run_build`)."""

    store: AirwaveStore
    ai: AiStore
    claims: ChannelClaims
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
    offered: OfferedFields | None = None,
) -> tuple[ChannelBuildResult, dict[str, Any]]:
    """Build one channel: claim its number, run the agent (or offline builder), settle.

    Returns the result and extra trace fields. A duplicate start adopts the committed channel
    of an earlier attempt without any model call; a failed or abandoned build deletes its claim.
    `offered` is the server's filter vocabulary: the lineup guard resolves earlier channels on
    the snapshot with it, so their pools are the ones Plex returns.

    Raises:
        TransientBuildError: The model API failed after the SDK's retries (claim released).
    """
    settings = task.settings
    channel, numbered = task.channel, task.numbered
    if settings.provider == "anthropic" and exhausted():
        return ChannelBuildResult.without_build(numbered, channel, "skipped", BUDGET_REASON), {}
    claims = deps.claims
    claim = claims.claim(
        number=numbered.number,
        claimant=deps.claimant,
        signature=channel_signature(settings, channel.key),
        values=_claim_values(task, deps.store.creator_id()),
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
    failpoints.reach(failpoints.BUILD_CLAIMED, key=numbered.number)
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
    outcome, transient = _run_agent(task, shared, toolbox, llm, meter, exhausted, offered)
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
    offered: OfferedFields | None = None,
) -> tuple[ChannelOutcome, str | None]:
    """Drive the tools with the model or the offline builder; the outcome and a transient error."""
    settings = task.settings
    channel = task.channel
    guard = lineup_guard_for(
        task.earlier, media_items(toolbox.ai_store, settings.source_id), offered=offered
    )
    lineup = ChannelCheck.of(guard, channel.name, channel.description, channel.theme)
    if settings.provider == "offline" or llm is None:
        try:
            with toolbox.claims.held(toolbox.channel_id, toolbox.claimant):
                outcome = build_channel_offline(channel, toolbox, rules=settings.rules, guard=guard)
                return outcome, None
        except Exception as error:
            session = ToolSession(toolbox, planned=channel.envelope(), rules=settings.rules)
            return session.finish(error=f"{type(error).__name__}: {error}"), None
    session = ToolSession(
        toolbox,
        planned=channel.envelope(),
        rules=settings.rules,
        check=lineup,
        planned_exclude=channel.exclude_node(),
    )
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
    cut_off = None
    if agent.stop in TRUNCATED_STOP_REASONS and not session.finished:
        # The tools of a cut-off reply were never run: its input may be incomplete.
        cut_off = (
            "the model's reply was cut off before the channel was committed ("
            + (
                "its context window is full"
                if agent.stop == "model_context_window_exceeded"
                else "it reached max_tokens"
            )
            + ")"
        )
    outcome = session.finish(model_calls=agent.calls, usage=usage, error=cut_off)
    if agent.stop == "budget" and outcome.status != "created":
        outcome = outcome.model_copy(update={"status": "skipped", "reason": BUDGET_REASON})
    return outcome, None
