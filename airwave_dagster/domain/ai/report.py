"""The lineup run's report: what was planned, created, reused, built, skipped and spent.

`ChannelBuildResult` is one build's result (the fan-out op's output; `.of(...)` derives it from a
`ChannelOutcome`). `build_report(...)` aggregates a run; usage is **per model for every API call
of the run** (planner and failed attempts included — the runtime sums its trace rows), priced with
a `PriceTable`; unpriced models are listed, never counted as free. `render_markdown(report)` is
what the CLI prints and the report op attaches as metadata; `measure_built_lineup` re-resolves the
built channels on the snapshot for the report's lineup quality (issue 10).

Deliberate differences from the reference: packages are split into created/reused (the reference
called every plan package "created"), the planner's tokens are in the totals, budget and spend are
shown side by side, and channels the sanitiser dropped are listed with their reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from airwave_dagster.domain.ai.curate import answerable, resolve
from airwave_dagster.domain.ai.numbering import NumberedChannel
from airwave_dagster.domain.ai.plan import DroppedChannel, PlannedChannel
from airwave_dagster.domain.ai.quality import BuiltChannel, LineupQuality, lineup_quality
from airwave_dagster.domain.ai.tools import BuildStatus, ChannelOutcome
from airwave_dagster.domain.ai.usage import PriceTable, Usage, summarise_cost, total_usage
from airwave_dagster.domain.filters import FilterEnvelope, FilterNode, OfferedFields
from airwave_dagster.domain.library import MediaItem

BUDGET_REASON = "budget"
"""`reason` of a build skipped because the run's budget was spent."""


class ChannelBuildResult(BaseModel):
    """How one planned channel's build ended."""

    model_config = ConfigDict(frozen=True)

    key: str
    name: str
    number: int
    package_key: str
    status: BuildStatus
    reason: str | None = None
    channel_id: str | None = None
    pool_items: int | None = None
    pool_hours: float | None = None
    envelope: FilterEnvelope | None = Field(
        default=None, description="The committed filter (for the lineup's quality measures)."
    )
    exclude: FilterNode | None = Field(
        default=None, description="The committed exclusion (EXCLUDE definition), if any."
    )
    callsign: str | None = None
    description: str = ""
    model_calls: int = 0
    tool_calls: int = 0
    usage: dict[str, Usage] = Field(default_factory=dict[str, Usage])

    @classmethod
    def of(
        cls, numbered: NumberedChannel, channel: PlannedChannel, outcome: ChannelOutcome
    ) -> ChannelBuildResult:
        """The result of building `channel` (numbered as `numbered`) that ended as `outcome`."""
        return cls(
            key=channel.key,
            name=channel.name,
            number=outcome.number if outcome.number is not None else numbered.number,
            package_key=numbered.package_key,
            status=outcome.status,
            reason=outcome.reason,
            channel_id=outcome.channel_id,
            pool_items=outcome.pool.total_items if outcome.pool else None,
            pool_hours=outcome.pool.total_runtime_hours if outcome.pool else None,
            envelope=outcome.envelope,
            exclude=outcome.exclude,
            callsign=channel.callsign,
            description=channel.description,
            model_calls=outcome.model_calls,
            tool_calls=outcome.tool_calls,
            usage=dict(outcome.usage),
        )

    @classmethod
    def without_build(
        cls,
        numbered: NumberedChannel,
        channel: PlannedChannel,
        status: BuildStatus,
        reason: str,
        channel_id: str | None = None,
    ) -> ChannelBuildResult:
        """A result decided before any agent ran (budget, duplicate start, number held)."""
        return cls(
            key=channel.key,
            name=channel.name,
            number=numbered.number,
            package_key=numbered.package_key,
            status=status,
            reason=reason,
            channel_id=channel_id,
        )


class PackageSummary(BaseModel):
    """A plan package and what the packages step did with it."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Plan package key.")
    name: str
    package_id: str | None = None
    action: Literal["created", "reused"]
    removed_empty: bool = Field(
        default=False, description="Created, but removed again because no channel was built in it."
    )


class ModelSpend(BaseModel):
    """Tokens and USD of one model over the run."""

    model_config = ConfigDict(frozen=True)

    model: str
    usage: Usage
    usd: float | None = Field(description="None: the model has no price.")


class KeptChannel(BaseModel):
    """An AI channel on air the approved diff kept whose rebuild did not commit: put back as it was.

    `reason` says why, e.g. "its rebuild was skipped because commit refused: …".
    """

    model_config = ConfigDict(frozen=True)

    number: int = Field(description="Where it is on air after the run.")
    previous_number: int
    name: str
    reason: str

    def describe(self) -> str:
        """One line for the report."""
        moved = (
            f" (at {self.number}, its planned number)"
            if self.number != self.previous_number
            else ""
        )
        return f"kept the old channel {self.previous_number} ({self.name}){moved}: {self.reason}"


class LineupReport(BaseModel):
    """The outcome of an AI lineup run.

    The derived counts (packages created/reused, channels built, budget exhausted, pool totals)
    are computed fields, so they appear in JSON dumps and are ignored when a dump is read back.
    """

    model_config = ConfigDict(frozen=True)

    source_id: str
    provider: str
    packages: tuple[PackageSummary, ...] = ()
    channels_planned: int = Field(description="Every channel of the sanitised plan.")
    channels_selected: int = Field(description="Channels the fan-out was asked to build (limit).")
    built: tuple[ChannelBuildResult, ...] = ()
    skipped: tuple[ChannelBuildResult, ...] = ()
    kept_old: tuple[KeptChannel, ...] = Field(
        default=(),
        description="Channels the approved diff kept whose rebuild did not commit: their old "
        "row is back on air.",
    )
    failed: tuple[ChannelBuildResult, ...] = ()
    dropped: tuple[DroppedChannel, ...] = Field(
        default=(), description="Channels the sanitiser removed from the plan."
    )
    spend: tuple[ModelSpend, ...] = ()
    total_usd: float = 0.0
    unpriced_models: tuple[str, ...] = ()
    budget_usd: float | None = None
    cache_read_ratio: float = 0.0
    duration_seconds: float = Field(
        default=0.0, description="Working time: the run tree's wall time minus the approval wait."
    )
    approval_wait_seconds: float = Field(
        default=0.0, description="Time the plan waited at the approval gate for a person."
    )
    quality: LineupQuality | None = Field(
        default=None, description="The built lineup's measures (overlap, coverage, audience)."
    )

    def quality_metadata(self) -> dict[str, float | int | str]:
        """The lineup's headline measures as flat metadata values (see `quality_metadata`)."""
        return quality_metadata(self.quality)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def packages_planned(self) -> int:
        """Packages in the plan."""
        return len(self.packages)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def packages_created(self) -> int:
        """New AI packages created (including ones removed again as empty)."""
        return sum(1 for p in self.packages if p.action == "created")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def packages_reused(self) -> int:
        """Existing packages channels were filed into."""
        return sum(1 for p in self.packages if p.action == "reused")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def packages_removed_empty(self) -> int:
        """Created packages removed because nothing was built in them."""
        return sum(1 for p in self.packages if p.removed_empty)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def channels_built(self) -> int:
        """Builds that ended `created`."""
        return len(self.built)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def budget_exhausted(self) -> bool:
        """Whether spend reached the budget."""
        return self.budget_usd is not None and self.total_usd >= self.budget_usd

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pool_items_total(self) -> int:
        """Items across the built channels' pools (an item in two channels counts twice)."""
        return sum(r.pool_items or 0 for r in self.built)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def pool_hours_total(self) -> float:
        """Programming hours across the built channels' pools."""
        return round(sum(r.pool_hours or 0.0 for r in self.built), 1)


def quality_metadata(quality: LineupQuality | None) -> dict[str, float | int | str]:
    """The lineup's headline measures as flat metadata values (empty without measures)."""
    if quality is None:
        return {}
    return {
        "quality_median_jaccard": quality.median_jaccard,
        "quality_max_jaccard": quality.max_jaccard,
        "quality_strict_subset_pairs": quality.strict_subset_pairs,
        "quality_runtime_covered": quality.runtime_covered,
        "quality_channels_per_item": quality.mean_channels_per_item,
        "quality_items_per_channel_median": float(quality.items_per_channel_median),
        "quality_audience_violations": quality.audience_violations,
        "quality_genres_without_channel": ", ".join(quality.genres_without_channel) or "none",
    }


def build_report(
    *,
    source_id: str,
    provider: str,
    packages: Sequence[PackageSummary],
    results: Sequence[ChannelBuildResult],
    channels_planned: int,
    usage_by_model: Mapping[str, Usage],
    prices: PriceTable | None = None,
    dropped: Sequence[DroppedChannel] = (),
    budget_usd: float | None = None,
    duration_seconds: float = 0.0,
    quality: LineupQuality | None = None,
    approval_wait_seconds: float = 0.0,
) -> LineupReport:
    """Aggregate a run into its report.

    Args:
        source_id: The media source.
        provider: `anthropic` or `offline`.
        packages: What the packages step did, plan order.
        results: One result per selected build, any order (sorted by number here).
        channels_planned: Channels in the sanitised plan.
        usage_by_model: Every API call of the run, summed per model (planner included).
        prices: Price table; defaults when None.
        dropped: Channels the sanitiser removed.
        budget_usd: The run's budget, if any.
        duration_seconds: Working time of the run tree so far (without the approval wait).
        quality: The built lineup's measures (`measure_built_lineup`), if taken.
        approval_wait_seconds: How long the plan waited at the approval gate.

    Returns:
        The report.
    """
    ordered = sorted(results, key=lambda r: (r.number, r.key))
    cost = summarise_cost(usage_by_model, prices)
    spend = tuple(
        ModelSpend(model=model, usage=usage_by_model[model], usd=cost.by_model_usd[model])
        for model in sorted(usage_by_model)
    )
    return LineupReport(
        source_id=source_id,
        provider=provider,
        packages=tuple(packages),
        channels_planned=channels_planned,
        channels_selected=len(ordered),
        built=tuple(r for r in ordered if r.status == "created"),
        skipped=tuple(r for r in ordered if r.status == "skipped"),
        failed=tuple(r for r in ordered if r.status == "failed"),
        dropped=tuple(dropped),
        spend=spend,
        total_usd=round(cost.total_usd, 6),
        unpriced_models=cost.unpriced_models,
        budget_usd=budget_usd,
        cache_read_ratio=round(total_usage(usage_by_model).cache_read_ratio, 4),
        duration_seconds=round(duration_seconds, 1),
        approval_wait_seconds=round(approval_wait_seconds, 1),
        quality=quality,
    )


def measure_built_lineup(
    items: Sequence[MediaItem],
    results: Sequence[ChannelBuildResult],
    show_networks: Mapping[str, str] | None = None,
    offered: OfferedFields | None = None,
) -> LineupQuality:
    """The quality measures of the built channels, each pool resolved again on the snapshot.

    A pool is the committed filter minus its exclusion, as the channel's definitions resolve.

    Channels whose committed filter uses a field the snapshot cannot answer (e.g. `network`
    without the shows' networks) are left out of the measures rather than guessed.

    Args:
        items: The library snapshot's available items.
        results: The run's build results (only `created` ones with a filter are measured).
        show_networks: Network per show rating key, if known.
        offered: The server's filter vocabulary, so pools equal Plex's (see `curate.resolve`).

    Returns:
        The measures.
    """
    built = [r for r in sorted(results, key=lambda r: (r.number, r.key)) if r.status == "created"]
    measured = [
        r
        for r in built
        if r.envelope is not None
        and answerable(r.envelope.filter, networks=bool(show_networks), exclude=r.exclude)
    ]
    channels = [
        BuiltChannel(
            name=r.name,
            pool=resolve(r.envelope, items, show_networks, r.exclude, offered),
            callsign=r.callsign,
            description=r.description,
        )
        for r in measured
        if r.envelope is not None
    ]
    # Said in the report: "12 built" beside a quality section of 10 channels read as a mistake.
    unmeasured = tuple(r.name for r in built if r not in measured)
    return lineup_quality(items, channels).model_copy(update={"unmeasured": unmeasured})


def _usd(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.4f}"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def render_markdown(report: LineupReport) -> str:
    """The report as markdown: summary, packages, spend, skipped/failed/dropped channels."""
    lines = [
        f"## AI lineup report ({report.provider})",
        "",
        f"- Packages: {report.packages_planned} planned, {report.packages_created} created, "
        f"{report.packages_reused} reused, {report.packages_removed_empty} removed as empty",
        f"- Channels: {report.channels_planned} planned, {report.channels_selected} selected, "
        f"{report.channels_built} built, {len(report.skipped)} skipped, "
        f"{len(report.failed)} failed, {len(report.dropped)} dropped by the sanitiser",
        f"- Built pools: {report.pool_items_total} items, {report.pool_hours_total:.1f} h",
    ]
    if report.budget_usd is None:
        lines.append(f"- Spend: ${report.total_usd:.4f} (no budget)")
    else:
        state = " — budget exhausted" if report.budget_exhausted else ""
        lines.append(
            f"- Spend: ${report.total_usd:.4f} of a ${report.budget_usd:.2f} budget{state}"
        )
    if report.unpriced_models:
        lines.append("- Unpriced models (not in the total): " + ", ".join(report.unpriced_models))
    lines.append(f"- Prompt-cache read ratio: {report.cache_read_ratio:.1%}")
    duration = f"- Duration: {report.duration_seconds:.1f} s working"
    if report.approval_wait_seconds:
        duration += f", plus {report.approval_wait_seconds:.1f} s waiting for approval"
    lines.append(duration)
    if report.quality is not None:
        measured = report.quality.channels
        scope = (
            ""
            if measured == report.channels_built
            else f" ({measured} of the {report.channels_built} built channels)"
        )
        lines += ["", f"### Lineup quality{scope}", ""]
        lines += [f"- {line}" for line in report.quality.lines()]
    if report.spend:
        lines += [
            "",
            "| model | calls | input | output | cache read | cache write | USD |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in report.spend:
            u = row.usage
            lines.append(
                f"| {_cell(row.model)} | {u.calls} | {u.input_tokens} | {u.output_tokens} | "
                f"{u.cache_read_tokens} | {u.cache_write_tokens} | {_usd(row.usd)} |"
            )
    if report.built:
        lines += ["", "| # | channel | items | hours | model calls |", "|---:|---|---:|---:|---:|"]
        for r in report.built:
            hours = "" if r.pool_hours is None else f"{r.pool_hours:.1f}"
            items = "" if r.pool_items is None else str(r.pool_items)
            lines.append(f"| {r.number} | {_cell(r.name)} | {items} | {hours} | {r.model_calls} |")
    for title, rows in (("Skipped", report.skipped), ("Failed", report.failed)):
        if rows:
            lines += ["", f"### {title}", ""]
            lines += [f"- {r.number} {r.name}: {r.reason or 'no reason given'}" for r in rows]
    if report.kept_old:
        lines += ["", "### Kept on air (the approved diff kept them)", ""]
        lines += [f"- {k.describe()}" for k in report.kept_old]
    if report.dropped:
        lines += ["", "### Dropped by the sanitiser", ""]
        lines += [f"- {d.name} ({d.channel_key}): {d.reason}" for d in report.dropped]
    return "\n".join(lines) + "\n"
