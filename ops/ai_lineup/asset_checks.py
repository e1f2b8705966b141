"""The `ai_lineup` asset's checks: the lineup's quality targets, as the catalog shows them.

The report step of the `ai_lineup` job measures the built lineup once and logs, beside the
`ai_lineup` materialisation, one evaluation per target (`lineup_check_evaluations`). The same
checks are declared here (`check_ai_lineup`) so the catalog lists them; run from the catalog,
they judge the measures the latest materialisation stored (its `quality` metadata) rather than
measuring again, so both ways agree on the same lineup.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from airwave_dagster.domain.ai.quality import LineupQuality
from airwave_dagster.domain.ai.targets import TARGETS, Verdict, judge_lineup
from ops.library_assets import AI_LINEUP_KEY

QUALITY_METADATA_KEY = "quality"
"""The materialisation metadata entry holding the measures (JSON of `LineupQuality`)."""

LINEUP_CHECK_SPECS = [
    dg.AssetCheckSpec(
        target.name,
        asset=AI_LINEUP_KEY,
        description=target.description,
        blocking=target.blocking,
    )
    for target in TARGETS
]


def _severity(verdict: Verdict) -> dg.AssetCheckSeverity:
    return dg.AssetCheckSeverity.ERROR if verdict.blocking else dg.AssetCheckSeverity.WARN


def quality_metadata_entry(quality: LineupQuality) -> dict[str, Any]:
    """The measures as one JSON metadata entry of the materialisation (the checks read it)."""
    return {QUALITY_METADATA_KEY: dg.MetadataValue.json(quality.model_dump(mode="json"))}


def lineup_check_evaluations(quality: LineupQuality) -> list[dg.AssetCheckEvaluation]:
    """One evaluation per target for the report step to log (ERROR if blocking, else WARN)."""
    return [
        dg.AssetCheckEvaluation(
            asset_key=AI_LINEUP_KEY,
            check_name=verdict.name,
            passed=verdict.passed,
            severity=_severity(verdict),
            description=verdict.summary,
            blocking=verdict.blocking,
        )
        for verdict in judge_lineup(quality)
    ]


@dg.multi_asset_check(
    specs=LINEUP_CHECK_SPECS,
    name="check_ai_lineup",
    description="Judge the latest ai_lineup materialisation's measures against the targets.",
)
def check_ai_lineup(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
    """Judge the measures the latest `ai_lineup` materialisation stored; nothing is measured.

    The `ai_lineup` job's report step evaluates these checks in its own run; this is the same
    verdict on demand (from the catalog), e.g. after the targets changed.
    """
    event = context.instance.get_latest_materialization_event(AI_LINEUP_KEY)
    materialization = event.asset_materialization if event is not None else None
    stored = materialization.metadata.get(QUALITY_METADATA_KEY) if materialization else None
    if not isinstance(stored, dg.JsonMetadataValue):
        raise dg.Failure(
            description="the latest ai_lineup materialisation carries no quality measures: "
            "run the ai_lineup job"
        )
    quality = LineupQuality.model_validate(stored.value)
    for verdict in judge_lineup(quality):
        yield dg.AssetCheckResult(
            asset_key=AI_LINEUP_KEY,
            check_name=verdict.name,
            passed=verdict.passed,
            severity=_severity(verdict),
            description=verdict.summary,
        )
