"""The `ai_lineup` job's run config and checkpoints (every op output, stored as JSON).

A resumed run loads these back from Postgres instead of recomputing them: the plan is never paid
for twice and numbers are never reassigned. A change to a model's shape is a change of the job's
code version (`OP_VERSION` in `ops/ai_lineup/ops.py`).

Order since the approval gate (issue 12): the plan is numbered *before* anything is written
(`NumberedLineup`, computed against the state the wipe will leave), the gate decides
(`ApprovedLineup`), and only then are packages replaced (`CreatedPackages`) and builds fanned out.
"""

from datetime import datetime
from typing import Literal

import dagster as dg
from pydantic import BaseModel, Field

from airwave_dagster.domain.ai.context import SharedContext
from airwave_dagster.domain.ai.lineup_diff import LineupDiff
from airwave_dagster.domain.ai.numbering import LineupNumbering, NumberedChannel
from airwave_dagster.domain.ai.plan import ExistingPackage, PlannedChannel, SanitizedPlan
from airwave_dagster.domain.ai.profile import LibraryProfile
from airwave_dagster.domain.ai.tools import PoolRules
from airwave_dagster.domain.ai.usage import PriceTable
from airwave_dagster.domain.filters import OfferedFields
from resources.llm import DEFAULT_PLANNER_MODEL, DEFAULT_WORKER_MODEL

BUILD_CONCURRENCY = 6
"""At most this many channel builds of one run at once (a sliding window, not the reference's
waves); across runs the `llm` pool (AIRWAVE_LLM_CONCURRENCY) bounds them as well. The approval
estimate uses it too: that many first calls go out before any response has begun."""

Provider = Literal["anthropic", "offline"]
ApprovalPolicy = Literal["required", "auto_when_nothing_removed", "never"]


class PriceConfig(dg.Config):
    """A model's price in USD per million tokens."""

    input: float = Field(description="USD per million uncached input tokens.")
    output: float = Field(description="USD per million output tokens.")


class AiLineupConfig(dg.Config):
    """How to build the AI lineup."""

    limit: int = Field(
        default=0,
        description="A trial: build only this many channels of the plan (picked round-robin "
        "across packages) and remove nothing — every AI channel on air that none of them "
        "replaces (same name) stays as it is, and the approval diff lists it as 'kept'. "
        "0 builds the whole plan and replaces the previous AI lineup (AI channels the plan "
        "drops are removed, after approval).",
    )
    budget_usd: float | None = Field(
        default=None,
        description="Most the run may spend on model calls (planner included). Once spent, "
        "builds not yet started are skipped with reason 'budget'. Unset: no limit.",
    )
    confirm_wipe: bool = Field(
        default=False,
        description="Pre-approve replacing this source's previous AI lineup (for scripts): the "
        "approval gate passes without asking. Without it, `approval` decides.",
    )
    approval: ApprovalPolicy = Field(
        default="auto_when_nothing_removed",
        description="When the run stops at the approval gate (after the plan, before any write): "
        "'required' always; 'auto_when_nothing_removed' only when an AI channel or package on "
        "air would be removed; 'never' does not ask.",
    )
    approval_expiry_hours: float | None = Field(
        default=None,
        gt=0,
        description="Close an unanswered approval after this many hours (the run then stays "
        "ended, nothing written). Unset: it stays open until answered or canceled.",
    )
    provider: Literal["auto", "anthropic", "offline"] = Field(
        default="auto",
        description="'anthropic' (needs ANTHROPIC_API_KEY), 'offline' (deterministic, no "
        "network), or 'auto': anthropic when the key is set, otherwise offline.",
    )
    planner_model: str | None = Field(
        default=None,
        description="Planner model id. Unset: Airwave's planner connection when attached, "
        f"else {DEFAULT_PLANNER_MODEL}.",
    )
    worker_model: str | None = Field(
        default=None,
        description="Channel builder model id. Unset: Airwave's worker connection when "
        f"attached, else {DEFAULT_WORKER_MODEL}.",
    )
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
    approval: ApprovalPolicy = "auto_when_nothing_removed"
    approval_expiry_hours: float | None = None
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
    offered: OfferedFields | None = Field(
        default=None,
        description="The server's filter fields per library; None in checkpoints written "
        "before it was read (every catalog field is then judged in memory).",
    )


class ExistingPackages(BaseModel):
    """Phase 3's checkpoint: non-AI packages the planner may file into (read before the wipe)."""

    packages: list[ExistingPackage]


class PlannedLineup(BaseModel):
    """Phase 4's checkpoint: the sanitised plan (a resume never pays for a second plan)."""

    sanitized: SanitizedPlan
    model: str | None
    attempts: int
    offered: OfferedFields | None = Field(
        default=None,
        description="The server's filter fields the plan was curated against; the report "
        "measures the built pools against the same.",
    )


class CostEstimate(BaseModel):
    """What building the selected channels is expected to cost, next to what was spent."""

    channels: int
    calls_per_build: int
    tokens_per_call: dict[str, int]
    worker_model: str
    estimated_usd: float | None
    planner_spent_usd: float
    budget_usd: float | None
    prefix_tokens: int = Field(default=0, description="The worker's shared prefix, in tokens.")
    prefix_measured: bool = Field(
        default=False, description="Counted by the API's count_tokens (else estimated)."
    )
    cache_floor: int = Field(
        default=0, description="The worker model's minimum cacheable prefix, in tokens."
    )
    prefix_cached: bool = Field(
        default=False, description="Whether the prefix reaches the floor (else never cached)."
    )
    cache_writes: int = Field(
        default=0, description="Builds whose first call writes the prefix (the first wave)."
    )


class ApprovedLineup(BaseModel):
    """The gate's checkpoint: the decision, who made it, and the diff it was made on."""

    gate_id: str
    decision: Literal["approved", "auto", "never", "confirm_wipe"]
    resolved_by: str | None
    diff: LineupDiff
    estimate: CostEstimate


class CreatedPackages(BaseModel):
    """Phase 7's checkpoint: plan package key → package id, and what the wipe removed."""

    ids: dict[str, str]
    created: list[str]
    reused: list[str]
    wiped_channels: int
    wiped_packages: int


class NumberedLineup(BaseModel):
    """Phase 5's checkpoint: every planned channel's number, and the ones selected to build.

    Computed before the wipe, against the state the wipe will leave; the package ids of
    packages not yet created are filled in when the builds fan out.
    """

    numbering: LineupNumbering
    selected: list[int]
    kept: list[int] = Field(
        default_factory=list,
        description="Numbers of the AI channels on air a `limit` leaves as they are (their "
        "numbers count as taken).",
    )
    reuse: dict[str, str] = Field(
        default_factory=dict,
        description="Plan package key → key of the AI package on air (kept by a `limit`) "
        "it is filed into, matched by name.",
    )

    def selected_keys(self) -> set[str]:
        """Plan keys of the channels selected to build (all of them without a limit)."""
        chosen = set(self.selected)
        return {c.key for c in self.numbering.channels if c.number in chosen}


class BuildTask(BaseModel):
    """One mapped build: a numbered channel and the settings it runs under."""

    settings: LineupSettings
    channel: PlannedChannel
    numbered: NumberedChannel
    earlier: list[PlannedChannel] = Field(default_factory=list)
    """The selected channels before this one in plan order: the lineup its commit is checked
    against (channels a `limit` leaves out are never built, so they are not in it)."""
