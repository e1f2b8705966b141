"""Schedule maintenance decisions: pass seams, repair points, pool fingerprints, run summaries."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from airwave_dagster.domain.library import MediaItem
from airwave_dagster.domain.schedule import (
    HISTORY_KEPT_SECONDS,
    REPAIR_BUFFER_SECONDS,
    ScheduleBuild,
    ScheduleCursor,
)

MaintenanceKind = Literal["backfill", "extend", "repair", "follow"]
"""What a mapped maintenance step does to each of its channels."""

ChannelStatus = Literal[
    "backfilled",
    "extended",
    "repaired",
    "relaid",
    "not-due",
    "empty",
    "empty-pool",
    "unchanged",
    "failed",
]
"""Outcome of one channel's maintenance."""

BACKFILL_BATCH = 25
"""Channels a backfill tick lays at most (oldest first), as the reference job does."""

REPAIR_BATCH = 10
"""Channels a repair tick repairs at most."""


class PassMark(BaseModel):
    """Where a pass begins in a channel's laid timeline: the seam a changed pool may re-lay from.

    The instant is the end of the previous pass's last program, which is where the bumper that
    introduces the pass starts, so a build resumed there begins with a program and no gap.
    """

    model_config = ConfigDict(frozen=True)

    pass_seed: int = Field(ge=0, le=0xFFFFFFFF, description="The build's base seed, unsigned.")
    pass_index: int = Field(ge=0)
    starts_at: datetime

    def cursor(self) -> ScheduleCursor:
        """The cursor a build resumed at this seam starts from: this pass, first position."""
        return ScheduleCursor(pass_seed=self.pass_seed, pass_index=self.pass_index, pos=0)


class RowRef(BaseModel):
    """An upcoming schedule row as repair sees it: when, what kind, and whether it is playable."""

    model_config = ConfigDict(frozen=True)

    starts_at: datetime
    kind: Literal["PROGRAM", "BUMPER"]
    playable: bool = Field(description="False when its item (or a bumper's target) is gone.")


class ChannelOutcome(BaseModel):
    """What maintenance did to one channel."""

    channel_id: str
    number: int
    status: ChannelStatus
    rows_added: int = 0
    rows_removed: int = 0
    runway_seconds: int | None = Field(
        default=None, description="End of the last row minus now, after the step; None if no rows."
    )
    detail: str | None = None


class MaintenanceSummary(BaseModel):
    """The run-level tally written as Dagster metadata (issue 5, item 4)."""

    kind: str
    checked: int = 0
    backfilled: int = 0
    extended: int = 0
    repaired: int = 0
    relaid: int = 0
    failed: int = 0
    empty_pool: int = 0
    rows_added: int = 0
    rows_pruned: int = 0
    earliest_runway_seconds: int | None = None
    failures: list[str] = Field(default_factory=list, description="'<number>: <error>' lines.")


def summarize(kind: str, outcomes: Sequence[ChannelOutcome]) -> MaintenanceSummary:
    """Tally channel outcomes into the run summary.

    Args:
        kind: The maintenance job's kind, shown in the summary.
        outcomes: Every channel's outcome, in any order.

    Returns:
        Counts per status, rows added and removed, and the shortest runway left on any channel
        that has rows (the number an operator watches to know no channel is about to go dark).
    """
    summary = MaintenanceSummary(kind=kind, checked=len(outcomes))
    runways: list[int] = []
    for outcome in sorted(outcomes, key=lambda o: o.number):
        summary.rows_added += outcome.rows_added
        summary.rows_pruned += outcome.rows_removed
        if outcome.runway_seconds is not None:
            runways.append(outcome.runway_seconds)
        if outcome.status == "failed":
            summary.failed += 1
            summary.failures.append(f"{outcome.number}: {outcome.detail or 'failed'}")
        elif outcome.status == "empty-pool":
            summary.empty_pool += 1
        elif outcome.status in ("backfilled", "extended", "repaired", "relaid"):
            field = outcome.status
            setattr(summary, field, getattr(summary, field) + 1)
    summary.earliest_runway_seconds = min(runways) if runways else None
    return summary


def runway_seconds(tail_end: datetime | None, now: datetime) -> int | None:
    """Seconds of schedule left after now (negative once a channel has gone dark).

    Args:
        tail_end: End of the channel's last row, or None when it has none.
        now: The current time.

    Returns:
        Whole seconds, or None when there are no rows.
    """
    return None if tail_end is None else int((tail_end - now).total_seconds())


def prune_cutoff(now: datetime) -> datetime:
    """Rows that started before this instant are history nobody will be shown again (6 h)."""
    return now - timedelta(seconds=HISTORY_KEPT_SECONDS)


def repair_point(rows: Sequence[RowRef], now: datetime) -> datetime | None:
    """Where a repair starts replacing a channel's timeline (docs/reference/domain.md §5.5).

    The first row starting at least five minutes from now that is not playable, moved back to the
    bumper before it when there is one, so the replacement never leaves a bumper introducing a
    program that no longer follows. Rows closer than five minutes are left alone: a player may
    already have tuned to them.

    Args:
        rows: The channel's upcoming rows in start order.
        now: The current time.

    Returns:
        The start of the first row to replace, or None when nothing needs repair.
    """
    earliest = now + timedelta(seconds=REPAIR_BUFFER_SECONDS)
    for index, row in enumerate(rows):
        if row.starts_at < earliest or row.playable:
            continue
        if index > 0 and rows[index - 1].kind == "BUMPER" and rows[index - 1].starts_at >= earliest:
            return rows[index - 1].starts_at
        return row.starts_at
    return None


def usable_count(pool: Sequence[MediaItem]) -> int:
    """Items of a pool a build can lay (a positive duration), which is one pass's length."""
    return sum(1 for item in pool if item.duration_ms > 0)


def pass_marks(build: ScheduleBuild, cursor: ScheduleCursor | None, usable: int) -> list[PassMark]:
    """The start of every pass that begins inside a build.

    A build lays programs in pass order from the cursor (or from pass 0, position 0), so counting
    programs against the pool's usable size tells where each pass starts; a stale cursor whose
    position is past the end rolls to the next pass first, as the builder does.

    Args:
        build: The build whose rows are about to be stored.
        cursor: The cursor it resumed from, or None for a fresh build.
        usable: `usable_count` of the pool it was built from.

    Returns:
        One mark per pass start, in time order.
    """
    if usable <= 0:
        return []
    pass_index = cursor.pass_index if cursor is not None else 0
    pos = max(0, cursor.pos) if cursor is not None else 0
    if pos >= usable:
        pass_index, pos = pass_index + 1, 0
    marks: list[PassMark] = []
    previous_bumper: datetime | None = None
    for entry in build.entries:
        if entry.kind == "BUMPER":
            previous_bumper = entry.starts_at
            continue
        if pos == 0:
            seam = previous_bumper if previous_bumper is not None else entry.starts_at
            marks.append(
                PassMark(pass_seed=build.cursor.pass_seed, pass_index=pass_index, starts_at=seam)
            )
        previous_bumper = None
        pos += 1
        if pos == usable:
            pass_index, pos = pass_index + 1, 0
    return marks


def next_seam(marks: Sequence[PassMark], after: datetime) -> PassMark | None:
    """The first stored pass start at or after `after`, if the laid rows reach one."""
    later = [mark for mark in marks if mark.starts_at >= after]
    return min(later, key=lambda mark: mark.starts_at) if later else None


def pool_fingerprint(pool: Sequence[MediaItem]) -> str:
    """A digest of what a build would lay from a pool: its usable items, order and lengths.

    Two resolutions with equal fingerprints lay identical schedules, so an unchanged fingerprint
    means a library refresh left the channel alone.

    Args:
        pool: The resolved pool, in the channel's sort order.

    Returns:
        A hex SHA-256 digest.
    """
    digest = hashlib.sha256()
    for item in pool:
        if item.duration_ms > 0:
            digest.update(f"{item.rating_key}\x1f{item.duration_ms}\x1e".encode())
    return digest.hexdigest()
