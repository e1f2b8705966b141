"""The lineup report: packages that ended up empty removed, spend from the ledger, UI tables."""

from datetime import UTC, datetime
from typing import Any

import dagster as dg

from airwave_dagster.domain.ai.lineup_diff import LineupDiff
from airwave_dagster.domain.ai.report import (
    ChannelBuildResult,
    KeptChannel,
    LineupReport,
    PackageSummary,
    build_report,
    measure_built_lineup,
)
from ops.ai_lineup.checkpoints import (
    AnalyzedLibrary,
    CreatedPackages,
    NumberedLineup,
    PlannedLineup,
)
from resources.stores.ai import AiStore, media_items
from resources.stores.approvals import Interrupt


class UnsettledChannels(RuntimeError):
    """Kept channels that could not be put back: every number they could take is held."""


def settle_parked(
    ai: AiStore,
    ledger_id: str,
    diff: LineupDiff,
    numbered: NumberedLineup,
    packages: CreatedPackages,
    results: list[ChannelBuildResult],
) -> list[KeptChannel]:
    """Keep the approval's promise: no channel the approved diff kept leaves the air.

    Every channel the packages step parked (the diff listed it `unchanged` or `renumbered`, so
    it was rebuilt) is settled here, whatever happened to its build: if the rebuild committed,
    the old row is deleted — the replacement the diff announced. Otherwise (skipped, failed,
    budget, no result at all) the old row is put back on air as it was, at its planned number
    (free, since that build released its claim) or else its old one, in its plan package.
    Each channel is settled in its own transaction with its parked record (marked restored,
    with the reason), so a resumed report settles only what is left and still reports every
    channel the lineup put back.

    Raises:
        UnsettledChannels: A channel could take neither number; it stays parked.
    """
    entries = {
        e.previous_number: e
        for e in (*diff.unchanged, *diff.renumbered)
        if e.previous_number is not None
    }
    planned = {c.number: c for c in numbered.numbering.channels}
    by_key = {r.key: r for r in results}
    stuck: list[str] = []
    for parked in ai.parked(ledger_id):
        entry = entries.get(parked.previous_number)
        channel = planned.get(entry.number) if entry and entry.number is not None else None
        result = by_key.get(channel.key) if channel is not None else None
        if result is not None and result.status == "created":
            ai.drop_parked(parked.channel_id)
            continue
        numbers = [n for n in (channel.number if channel else None, parked.previous_number) if n]
        package_id = packages.ids.get(channel.package_key) if channel is not None else None
        reason = (
            "its rebuild has no result"
            if result is None
            else f"its rebuild was {result.status} because {result.reason or 'no reason given'}"
        )
        if ai.restore_parked(parked, list(dict.fromkeys(numbers)), package_id, reason) is None:
            stuck.append(f"{parked.previous_number} ({parked.name})")
    if stuck:
        raise UnsettledChannels(
            "the approved diff kept these channels and their rebuild did not commit, but every "
            f"number they could take back is held now: {', '.join(stuck)}. Free one and resume "
            "the run; until then they stay off air (parked)."
        )
    return [
        KeptChannel(number=number, previous_number=previous, name=name, reason=note)
        for number, previous, name, note in ai.restored(ledger_id)
    ]


def assemble_report(
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    packages: CreatedPackages,
    results: list[ChannelBuildResult],
    ai: AiStore,
    kept_old: list[KeptChannel] | None = None,
    approval_wait_seconds: float = 0.0,
) -> LineupReport:
    """Remove AI packages left without channels, then report builds and the ledger's spend.

    Spend counts every model call of the lineup (planner, retries and failed attempts included),
    read from the ledger rather than from the results, which only know their own attempt.
    `kept_old` are the channels `settle_parked` put back (before this, so their package is not
    removed as empty). The duration is working time: the wall time since the analysis less
    `approval_wait_seconds`, the time the plan waited for a person (reported beside it).
    """
    settings = analyzed.settings
    removed = set(ai.remove_empty_ai_packages([packages.ids[k] for k in packages.created]))
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
        for package in planned.sanitized.plan.packages
    ]
    report = build_report(
        source_id=settings.source_id,
        provider=settings.provider,
        packages=summaries,
        results=results,
        channels_planned=planned.sanitized.channel_count,
        usage_by_model=ai.usage_by_model(settings.ledger_id),
        prices=settings.prices,
        dropped=planned.sanitized.dropped_channels,
        budget_usd=settings.budget_usd,
        duration_seconds=max(
            (datetime.now(UTC) - settings.started_at).total_seconds() - approval_wait_seconds, 0.0
        ),
        approval_wait_seconds=approval_wait_seconds,
        quality=measure_built_lineup(
            media_items(ai, settings.source_id), results, offered=planned.offered
        ),
    )
    report = report.model_copy(update={"kept_old": tuple(kept_old or ())})
    return _priced_per_call(report, ai.cost_by_model(settings.ledger_id))


def approval_wait(interrupt: Interrupt | None) -> float:
    """Seconds between the gate asking and a person answering (0 when it never asked)."""
    if interrupt is None or interrupt.resolved_at is None:
        return 0.0
    return max((interrupt.resolved_at - interrupt.created_at).total_seconds(), 0.0)


def _priced_per_call(report: LineupReport, costs: dict[str, float | None]) -> LineupReport:
    """The report's spend as the ledger charged it: each call at its own (tiered) price.

    `build_report` prices summed usage, which would put a run of small calls into a
    long-context tier; the ledger's per-call costs are the truth.
    """
    spend = tuple(s.model_copy(update={"usd": costs.get(s.model)}) for s in report.spend)
    unpriced = tuple(s.model for s in spend if s.usd is None)
    total = sum(s.usd for s in spend if s.usd is not None)
    return report.model_copy(
        update={"spend": spend, "unpriced_models": unpriced, "total_usd": round(total, 6)}
    )


def _channels_table(report: LineupReport) -> dg.TableMetadataValue:
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("number", "int"),
            dg.TableColumn("channel", "string"),
            dg.TableColumn("package", "string"),
            dg.TableColumn("status", "string"),
            dg.TableColumn("items", "int", description="items in the verified pool"),
            dg.TableColumn("hours", "float", description="runtime of the verified pool"),
            dg.TableColumn("model_calls", "int"),
            dg.TableColumn("note", "string"),
        ]
    )
    rows = sorted((*report.built, *report.skipped, *report.failed), key=lambda r: r.number)
    records = [
        dg.TableRecord(
            {
                "number": r.number,
                "channel": r.name,
                "package": r.package_key,
                "status": r.status,
                "items": r.pool_items,
                "hours": None if r.pool_hours is None else round(r.pool_hours, 1),
                "model_calls": r.model_calls,
                "note": r.reason or "",
            }
        )
        for r in rows
    ]
    return dg.MetadataValue.table(records=records, schema=schema)


def _spend_table(report: LineupReport) -> dg.TableMetadataValue:
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("model", "string"),
            dg.TableColumn("calls", "int"),
            dg.TableColumn("input", "int"),
            dg.TableColumn("output", "int"),
            dg.TableColumn("cache_read", "int"),
            dg.TableColumn("cache_write", "int"),
            dg.TableColumn("usd", "float", description="empty: the model has no price"),
        ]
    )
    records = [
        dg.TableRecord(
            {
                "model": row.model,
                "calls": row.usage.calls,
                "input": row.usage.input_tokens,
                "output": row.usage.output_tokens,
                "cache_read": row.usage.cache_read_tokens,
                "cache_write": row.usage.cache_write_tokens,
                "usd": row.usd,
            }
        )
        for row in report.spend
    ]
    return dg.MetadataValue.table(records=records, schema=schema)


def report_metadata(report: LineupReport) -> dict[str, Any]:
    """The report as the run page and the `ai_lineup` asset show it: counts, then tables."""
    return {
        "channels_planned": report.channels_planned,
        "channels_built": report.channels_built,
        "channels_skipped": len(report.skipped),
        "channels_failed": len(report.failed),
        "channels_kept_old": len(report.kept_old),
        "total_usd": report.total_usd,
        "cache_read_ratio": report.cache_read_ratio,
        **report.quality_metadata(),
        "channels": _channels_table(report),
        "spend": _spend_table(report),
    }
