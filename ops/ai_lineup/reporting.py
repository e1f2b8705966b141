"""The lineup report: packages that ended up empty removed, spend from the ledger, UI tables."""

from datetime import UTC, datetime
from typing import Any

import dagster as dg

from airwave_dagster.domain.ai.report import (
    ChannelBuildResult,
    LineupReport,
    PackageSummary,
    build_report,
    measure_built_lineup,
)
from ops.ai_lineup.checkpoints import AnalyzedLibrary, CreatedPackages, PlannedLineup
from resources.stores.ai import AiStore, media_items
from resources.stores.approvals import Interrupt


def assemble_report(
    analyzed: AnalyzedLibrary,
    planned: PlannedLineup,
    packages: CreatedPackages,
    results: list[ChannelBuildResult],
    ai: AiStore,
    approval_wait_seconds: float = 0.0,
) -> LineupReport:
    """Remove AI packages left without channels, then report builds and the ledger's spend.

    Spend counts every model call of the lineup (planner, retries and failed attempts included),
    read from the ledger rather than from the results, which only know their own attempt. The
    duration is working time: the wall time since the analysis less `approval_wait_seconds`,
    the time the plan waited for a person (reported beside it).
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
        "total_usd": report.total_usd,
        "cache_read_ratio": report.cache_read_ratio,
        **report.quality_metadata(),
        "channels": _channels_table(report),
        "spend": _spend_table(report),
    }
