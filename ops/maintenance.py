"""Schedule maintenance jobs: backfill, extend, repair, follow the library, prune; and their crons.

Each per-channel job plans a list of channels, fans them out in batches (one mapped step per
batch, at most `MAINTENANCE_CONCURRENCY` at once) and tallies the outcomes into run metadata. A
channel whose maintenance fails is reported and never stops the others in its batch or the run.
"""

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from pydantic import BaseModel, Field

from airwave_dagster.domain.maintenance import (
    BACKFILL_BATCH,
    REPAIR_BATCH,
    ChannelOutcome,
    MaintenanceKind,
    MaintenanceSummary,
    summarize,
)
from airwave_dagster.domain.schedule import extend_needed
from airwave_dagster.run_tags import ATTACHED_MAINTENANCE_OFF, JOB_TAG
from ops.steps import fan_out_executor, versioned_op
from resources.database import DatabaseResource
from resources.plex import PlexClient, PlexResource
from resources.stores.maintenance import MaintenanceStore

MAINTENANCE_CONCURRENCY = 4
"""At most this many batches are maintained at once (each resolves pools against Plex)."""

OP_VERSION = "maintenance-v1"
"""Code version of every op here; bump it when an op's behaviour or output type changes."""

CRONS: dict[str, tuple[str, str]] = {
    "backfill_schedules": ("backfill_schedule", "*/10 * * * *"),
    "extend_schedules": ("extend_schedule", "0 * * * *"),
    "repair_schedules": ("repair_schedule", "30 * * * *"),
    "prune_schedules": ("prune_schedule", "0 2 * * *"),
}
"""Schedule name and cron of each maintenance job, in UTC (docs/reference/domain.md §5.7)."""


class MaintenanceConfig(dg.Config):
    """How a maintenance run splits its channels."""

    batch_size: int = Field(
        default=10, ge=1, le=500, description="Channels per mapped step (a failure stays local)."
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description="Visit at most this many channels (backfill defaults to 25, repair to 10).",
    )


class MaintenanceBatch(BaseModel):
    """One mapped step's work: channels to maintain, all with the same kind of maintenance."""

    kind: MaintenanceKind
    channel_ids: list[str]


class BatchOutcomes(BaseModel):
    """Every channel's outcome in one batch."""

    outcomes: list[ChannelOutcome] = Field(default_factory=list)


def _channels(store: MaintenanceStore, kind: MaintenanceKind, limit: int | None) -> list[str]:
    now = datetime.now(UTC)
    if kind == "backfill":
        return store.channels_to_backfill(limit or BACKFILL_BATCH)
    if kind == "repair":
        return store.channels_to_repair(now, limit or REPAIR_BATCH)
    channels = store.channels_with_rows()
    return channels[:limit] if limit is not None else channels


def _plan_op(kind: MaintenanceKind) -> dg.OpDefinition:
    @versioned_op(OP_VERSION, name=f"plan_{kind}", out=dg.DynamicOut(MaintenanceBatch))
    def plan(
        context: dg.OpExecutionContext, config: MaintenanceConfig, database: DatabaseResource
    ) -> Iterator[dg.DynamicOutput[MaintenanceBatch]]:
        """Choose the channels this run maintains and split them into batches."""
        if database.deployment.attached:
            raise dg.Failure(description=f"{kind}: {ATTACHED_MAINTENANCE_OFF}")
        channels = _channels(database.stores().maintenance, kind, config.limit)
        context.log.info(f"{kind}: {len(channels)} channel(s) to visit")
        for start in range(0, len(channels), config.batch_size):
            yield dg.DynamicOutput(
                MaintenanceBatch(
                    kind=kind, channel_ids=channels[start : start + config.batch_size]
                ),
                mapping_key=f"batch_{start // config.batch_size}",
            )

    return plan


def _pool(client: PlexClient, store: MaintenanceStore, channel_id: str) -> tuple[Any, list[Any]]:
    plan = store.channel_plan(channel_id)
    if not plan.definitions:
        return plan, []
    return plan, client.resolve_pool(list(plan.definitions), sort=plan.sort)


def _maintain_one(
    kind: MaintenanceKind, store: MaintenanceStore, client: PlexClient, channel_id: str
) -> ChannelOutcome:
    if kind == "extend":
        # Most hourly visits find plenty of runway: decide that before asking Plex anything.
        tail = store.tail_end(channel_id)
        now = datetime.now(UTC)
        if tail is None or not extend_needed(tail, now):
            plan = store.channel_plan(channel_id)
            return ChannelOutcome(
                channel_id=channel_id,
                number=plan.number,
                status="empty" if tail is None else "not-due",
                runway_seconds=None if tail is None else int((tail - now).total_seconds()),
            )
    plan, pool = _pool(client, store, channel_id)
    action: Callable[..., ChannelOutcome] = getattr(store, kind)
    return action(plan, pool, datetime.now(UTC))


@versioned_op(OP_VERSION, retry_policy=dg.RetryPolicy(max_retries=1, delay=2.0))
def maintain_channels(
    context: dg.OpExecutionContext,
    batch: MaintenanceBatch,
    database: DatabaseResource,
    plex: PlexResource,
) -> BatchOutcomes:
    """Maintain each channel of the batch in its own transaction; a failure stays with its channel.

    Pools are resolved through Plex before each channel's transaction, which locks the channel
    row and re-checks what to do, so two overlapping runs never lay the same stretch twice.
    """
    store = database.stores().maintenance
    client = plex.get_client()
    outcomes: list[ChannelOutcome] = []
    for channel_id in batch.channel_ids:
        try:
            outcome = _maintain_one(batch.kind, store, client, channel_id)
        except Exception as error:
            # Reported per channel in the run summary, so one broken filter or a Plex hiccup on
            # one search cannot keep the other channels of the batch off air.
            context.log.warning(f"{batch.kind} of channel {channel_id} failed: {error}")
            outcome = ChannelOutcome(
                channel_id=channel_id,
                number=_number(store, channel_id),
                status="failed",
                detail=f"{type(error).__name__}: {error}"[:500],
            )
        outcomes.append(outcome)
    context.add_output_metadata(
        {
            "channels": len(outcomes),
            "failed": sum(1 for o in outcomes if o.status == "failed"),
            "rows_added": sum(o.rows_added for o in outcomes),
        }
    )
    return BatchOutcomes(outcomes=outcomes)


def _number(store: MaintenanceStore, channel_id: str) -> int:
    try:
        return store.channel_plan(channel_id).number
    except Exception:
        return 0


def outcome_table(outcomes: list[ChannelOutcome]) -> dg.TableMetadataValue:
    """Every visited channel's outcome, as the run page shows it (a table, by number)."""
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("number", "int"),
            dg.TableColumn("status", "string"),
            dg.TableColumn("added", "int", description="schedule rows added"),
            dg.TableColumn("removed", "int", description="schedule rows removed"),
            dg.TableColumn("runway_hours", "float", description="schedule left after the run"),
            dg.TableColumn("note", "string"),
        ]
    )
    records = [
        dg.TableRecord(
            {
                "number": o.number,
                "status": o.status,
                "added": o.rows_added,
                "removed": o.rows_removed,
                "runway_hours": None
                if o.runway_seconds is None
                else round(o.runway_seconds / 3600, 1),
                "note": o.detail or "",
            }
        )
        for o in sorted(outcomes, key=lambda o: o.number)
    ]
    return dg.MetadataValue.table(records=records, schema=schema)


def summary_metadata(summary: MaintenanceSummary) -> dict[str, Any]:
    """The run summary as Dagster metadata (counts, rows, the earliest runway left)."""
    runway = summary.earliest_runway_seconds
    return {
        "channels_checked": summary.checked,
        "channels_backfilled": summary.backfilled,
        "channels_extended": summary.extended,
        "channels_repaired": summary.repaired,
        "channels_relaid": summary.relaid,
        "channels_failed": summary.failed,
        "channels_empty_pool": summary.empty_pool,
        "rows_added": summary.rows_added,
        "rows_pruned": summary.rows_pruned,
        "earliest_runway_hours": -1.0 if runway is None else round(runway / 3600, 2),
        "failures": dg.MetadataValue.md("\n".join(f"- {f}" for f in summary.failures) or "none"),
    }


def _summarize_op(kind: MaintenanceKind) -> dg.OpDefinition:
    @versioned_op(OP_VERSION, name=f"summarize_{kind}")
    def summarize_run(
        context: dg.OpExecutionContext, batches: list[BatchOutcomes]
    ) -> MaintenanceSummary:
        """Tally every channel's outcome: checked, changed, failed, rows, earliest runway."""
        outcomes = [o for batch in batches for o in batch.outcomes]
        summary = summarize(kind, outcomes)
        for failure in summary.failures:
            context.log.warning(f"{kind} failed for channel {failure}")
        context.add_output_metadata(
            {**summary_metadata(summary), "channels": outcome_table(outcomes)}
        )
        return summary

    return summarize_run


def maintenance_executor() -> dg.ExecutorDefinition:
    """The multiprocess executor bounding maintenance batches (forkserver, as imports use)."""
    return fan_out_executor(MAINTENANCE_CONCURRENCY)


def _maintenance_job(kind: MaintenanceKind, name: str, description: str) -> dg.JobDefinition:
    plan_op = _plan_op(kind)
    summarize_op = _summarize_op(kind)

    @dg.job(
        name=name,
        executor_def=maintenance_executor(),
        tags={JOB_TAG: name},
        description=description,
    )
    def maintenance_job() -> None:
        batches = plan_op().map(maintain_channels)
        summarize_op(batches.collect())

    return maintenance_job


backfill_schedules = _maintenance_job(
    "backfill",
    "backfill_schedules",
    "Lay the 12-hour window of enabled channels that have no schedule (25 per run, oldest first).",
)
extend_schedules = _maintenance_job(
    "extend",
    "extend_schedules",
    "Continue every channel with under 2 days of runway from its pass cursor to 7 days ahead.",
)
repair_schedules = _maintenance_job(
    "repair",
    "repair_schedules",
    "Replace upcoming rows from the first one whose media left the library (10 per run).",
)
follow_library = _maintenance_job(
    "follow",
    "follow_library",
    "Re-resolve channel pools after a library refresh; re-lay only channels whose pool changed.",
)


@versioned_op(OP_VERSION)
def prune_schedule_rows(context: dg.OpExecutionContext, database: DatabaseResource) -> int:
    """Delete schedule rows that started more than 6 hours ago and have ended."""
    if database.deployment.attached:
        raise dg.Failure(description=f"prune: {ATTACHED_MAINTENANCE_OFF}")
    pruned = database.stores().maintenance.prune(datetime.now(UTC))
    context.add_output_metadata({"rows_pruned": pruned})
    return pruned


@dg.job(tags={JOB_TAG: "prune_schedules"}, description="Delete schedule history (> 6 h).")
def prune_schedules() -> None:
    """One delete over every channel."""
    prune_schedule_rows()


MAINTENANCE_JOBS = (backfill_schedules, extend_schedules, repair_schedules, prune_schedules)
"""The jobs that run on a cron; `follow_library` runs after library refreshes instead."""


def maintenance_schedules(*, attached: bool = False) -> list[dg.ScheduleDefinition]:
    """One schedule per maintenance job, on the cadences of `CRONS`.

    Running by default; stopped by default when attached (Airwave's server maintains every
    channel itself), and a tick turned on by hand then launches a run that refuses with why.
    """
    return [
        dg.ScheduleDefinition(
            name=CRONS[job.name][0],
            job=job,
            cron_schedule=CRONS[job.name][1],
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.STOPPED
            if attached
            else dg.DefaultScheduleStatus.RUNNING,
            description=f"{job.description} Now {ATTACHED_MAINTENANCE_OFF}."
            if attached
            else job.description,
        )
        for job in MAINTENANCE_JOBS
    ]
