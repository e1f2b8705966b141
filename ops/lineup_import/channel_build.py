"""Building one imported channel: claim its number, resolve its pool, commit, schedule.

Plain Python over the stores and the Plex resource (no Dagster context), so the op that calls it
stays a thin adapter and the logic can be read and tested on its own.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airwave_dagster import failpoints, tracing
from airwave_dagster.domain.filters import plex_sort
from airwave_dagster.domain.import_plan import PlannedChannel
from airwave_dagster.domain.schedule import (
    INITIAL_WINDOW_SECONDS,
    build_schedule,
    channel_seed,
)
from ops.lineup_import.checkpoints import ChannelResult, ChannelTask
from resources.plex import ListedItem, PlexResource
from resources.stores import Stores
from resources.stores.claims import Claimant
from resources.stores.library import apply_library_switches


class BuildError(RuntimeError):
    """The build cannot proceed with the task it was given (the op reports it as a failure)."""


@dataclass(frozen=True)
class BuildStep:
    """Who is building (the claim holder) and where its trace rows and log lines go."""

    claimant: Claimant
    trace: Callable[..., None]
    log: Callable[[str], None]
    warn: Callable[[str], None]


def filter_definitions(
    planned: PlannedChannel,
) -> list[tuple[str, dict[str, Any] | None, str | None]]:
    """The channel's definitions as the Plex client takes them: (mode, filter, library key)."""
    return [(d.mode, d.plex_filter, d.plex_library_key) for d in planned.definitions]


def channel_sort(planned: PlannedChannel) -> str:
    """The channel's Plex sort."""
    return plex_sort(planned.ordering, planned.sort_field, planned.sort_dir)


def list_pool(plex: PlexResource, planned: PlannedChannel) -> list[ListedItem]:
    """The channel's pool as Plex's searches list it (INCLUDE adds, EXCLUDE removes), in order.

    Keys, durations and order are the pool's own; the items a schedule plays are completed from
    their metadata before they are written (`PlexClient.complete`).
    """
    if not planned.definitions:
        return []
    return plex.get_client().list_pool(filter_definitions(planned), sort=channel_sort(planned))


def vocabulary_gaps(plex: PlexResource, planned: PlannedChannel) -> list[str]:
    """What the channel's filters and sort ask that this Plex server does not offer."""
    if not planned.definitions:
        return []
    return plex.get_client().vocabulary_gaps(
        filter_definitions(planned), sort=channel_sort(planned)
    )


def apply_channel(
    step: BuildStep,
    task: ChannelTask,
    stores: Stores,
    plex: PlexResource,
    result: ChannelResult,
    started: datetime,
) -> None:
    """Claim, resolve, create and schedule one channel, recording the outcome on `result`.

    Reserve, don't check: the number is claimed before Plex is asked for anything, so a
    duplicate attempt (retry, resume, orphaned step process) waits for this one and adopts its
    channel instead of resolving the pool a second time. The definitions, the schedule and
    enabling the row commit in one transaction; any failure deletes the claim. A dry-run claims
    nothing and writes nothing.
    """
    planned = task.channel
    notes: list[str] = list(planned.notes)  # normalisations of the file, noted by the plan
    apply_library_switches(plex.get_client(), stores.channels, task.source_id)
    if planned.dropped_kinds:
        notes.append(f"dropped {', '.join(planned.dropped_kinds)}: only filters are portable")
    if planned.library_unmatched:
        notes.append("library title not on this server: searched every library of its types")
    if planned.disabled:
        notes.append("no portable filter: imported disabled")
    if task.dry_run:
        result.unsupported = vocabulary_gaps(plex, planned)
        notes.extend(f"this Plex server lacks it: {gap}" for gap in result.unsupported)
        pool = list_pool(plex, planned)
        result.pool_size = len(pool) if planned.definitions else None
        if planned.definitions and not pool:
            notes.append("filter matches nothing in the library: no schedule to lay")
        result.reason = "; ".join(notes) or None
        return
    if task.source_id is None:
        raise BuildError("the plan has no media source id; re-plan the import")
    store, claims, me = stores.channels, stores.claims, step.claimant
    outcome = claims.claim(
        number=planned.assigned_number,
        claimant=me,
        signature=planned.signature,
        values=store.channel_values(
            planned,
            source_id=task.source_id,
            package_id=task.package_id,
            created_by_id=store.creator_id(),
        ),
    )
    if outcome.kind == "conflict" or outcome.channel_id is None:
        result.status = "failed"
        notes.append(outcome.detail or "channel number conflict")
        result.reason = "; ".join(notes)
        return
    result.channel_id = outcome.channel_id
    if outcome.kind == "existing":
        step.log(f"channel {planned.assigned_number} was built by an earlier attempt")
        result.adopted = True
        result.schedule_slots = store.schedule_count(outcome.channel_id)
        notes.append("built by an earlier attempt: adopted, not rebuilt")
        result.reason = "; ".join(notes)
        return
    # The work ledger: one row per attempt that started the expensive part of a build, so "each
    # channel was built once" can be checked after any crash (docs/durability.md).
    step.trace(
        step_name="buildChannel",
        phase="claim",
        dry_run=False,
        status="claimed",
        reason=f"took over from {outcome.took_over.describe()}" if outcome.took_over else None,
        channel_name=planned.name,
        channel_number=planned.assigned_number,
        package_key=planned.package_key,
        started_at=started,
    )
    if outcome.took_over is not None:
        step.warn(
            f"took over channel {planned.assigned_number} from {outcome.took_over.describe()}, "
            "whose heartbeat had stopped"
        )
    enabled = planned.enabled and not planned.disabled
    number = planned.assigned_number
    try:
        failpoints.reach(failpoints.BUILD_CLAIMED, key=number)
        with claims.held(outcome.channel_id, me):
            result.unsupported = vocabulary_gaps(plex, planned)
            notes.extend(f"this Plex server lacks it: {gap}" for gap in result.unsupported)
            pool = list_pool(plex, planned)
            if planned.definitions:
                result.pool_size = len(pool)
                if not pool:
                    notes.append("filter matches nothing in the library: no schedule to lay")
            bumpers = store.bumper_settings()
            seed = channel_seed(outcome.channel_id)
            build = (
                build_schedule(
                    pool,
                    ordering=planned.ordering,
                    channel_seed=seed,
                    start_at=started,
                    window_seconds=INITIAL_WINDOW_SECONDS,
                    bumpers=bumpers.plan_for(planned.bumper_mode),
                )
                if enabled
                else None
            )
            # Only the items the window plays are written: only they need their full metadata.
            keys = frozenset() if build is None else build.played_keys
            played = (
                []
                if build is None
                else plex.get_client().complete([item for item in pool if item.rating_key in keys])
            )
            failpoints.reach(failpoints.BUILD_BEFORE_COMMIT, key=number)
            with (
                tracing.span("commit channel", {"airwave.channel.number": number}),
                store.transaction() as conn,
            ):
                store.insert_definitions(conn, outcome.channel_id, planned)
                if build is not None:
                    result.schedule_slots = store.write_schedule(
                        outcome.channel_id,
                        source_id=task.source_id,
                        shuffle_seed=seed,
                        build=build,
                        pool=played,
                        bumper_rev=bumpers.rev,
                        conn=conn,
                    )
                claims.commit(conn, outcome.channel_id, me, enabled=enabled)
                failpoints.reach(failpoints.BUILD_IN_COMMIT, key=number)
    except BaseException:
        # Failure, cancel or interrupt: give the number back so the next attempt starts clean.
        claims.release(outcome.channel_id, me)
        raise
    failpoints.reach(failpoints.BUILD_COMMITTED, key=number)
    result.reason = "; ".join(notes) or None
