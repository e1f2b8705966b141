"""Schedule maintenance queries: backfill, extend, repair, follow, prune, and the guide's rows.

Every method that changes a channel's timeline runs in one transaction that first locks the
channel row (`SELECT … FOR UPDATE`) and only then reads the tail, the cursor and the pass seams.
Two maintenance runs touching one channel therefore take turns, and the second one decides on
what the first one wrote: an extension that finds the runway already long enough does nothing.
Airwave's `schedule_item` has no unique (channel, start) constraint, so the lock is the only
guard here, as it is in Airwave. Pools are resolved from Plex before the transaction, so no lock
is held across a network call. This whole module is standalone mode's: attached to an Airwave
server, Airwave's own schedule jobs maintain every channel
(docs/reference/airwave-database.md §4.4, §7.4).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection

from airwave_dagster.domain.filters import plex_sort
from airwave_dagster.domain.guide_window import GuideBreak, GuideWindow
from airwave_dagster.domain.library import MediaItem
from airwave_dagster.domain.maintenance import (
    ChannelOutcome,
    PassMark,
    RowRef,
    next_seam,
    pass_marks,
    pool_fingerprint,
    prune_cutoff,
    repair_point,
    runway_seconds,
    usable_count,
)
from airwave_dagster.domain.schedule import (
    DEFAULT_HORIZON_SECONDS,
    INITIAL_WINDOW_SECONDS,
    REPAIR_BUFFER_SECONDS,
    Ordering,
    ScheduleBuild,
    ScheduleCursor,
    build_schedule,
    channel_seed,
    cursor_from_storage,
    cursor_to_storage,
    extend_needed,
)
from airwave_dagster.domain.xmltv import GuideChannel, GuideProgramme
from resources import tables as t
from resources.stores.channels import AirwaveStore, BumperSettings, schedule_rows

_ROW_END = sa.type_coerce(
    t.schedule_item.c.starts_at
    + sa.func.make_interval(0, 0, 0, 0, 0, 0, t.schedule_item.c.duration_seconds),
    t.UtcTimestamp,
)


@dataclass(frozen=True)
class ChannelPlan:
    """What maintenance needs to know about a channel to resolve its pool and build for it."""

    id: str
    number: int
    ordering: Ordering
    sort_field: str
    sort_dir: str
    bumper_mode: str
    shuffle_seed: int | None
    media_source_id: str
    definitions: tuple[tuple[str, dict[str, Any] | None, str | None], ...]

    @property
    def sort(self) -> str:
        """The Plex sort its pool is resolved with."""
        return plex_sort(self.ordering, self.sort_field, self.sort_dir)

    @property
    def seed(self) -> int:
        """Its shuffle seed, derived from its id when none is stored yet."""
        return self.shuffle_seed if self.shuffle_seed is not None else channel_seed(self.id)


class MaintenanceStore:
    """Maintenance reads and writes over Airwave's schedule tables (see the module docstring)."""

    def __init__(self, store: AirwaveStore) -> None:
        self.store = store
        self.engine = store.engine

    # -- which channels a job looks at -------------------------------------------------------

    def _eligible(self) -> sa.ColumnElement[bool]:
        # A claimed row is a build in progress (resources/stores/claims.py): never touch it.
        claimed = sa.exists().where(t.channel_claim.c.channel_id == t.channel.c.id)
        return sa.and_(t.channel.c.enabled, ~claimed)

    def channels_to_backfill(self, limit: int) -> list[str]:
        """Enabled channels without a single schedule row, oldest first, at most `limit`."""
        has_rows = sa.exists().where(t.schedule_item.c.channel_id == t.channel.c.id)
        with self.engine.connect() as conn:
            return list(
                conn.execute(
                    sa.select(t.channel.c.id)
                    .where(self._eligible(), ~has_rows)
                    .order_by(t.channel.c.created_at, t.channel.c.number)
                    .limit(limit)
                ).scalars()
            )

    def channels_with_rows(self) -> list[str]:
        """Enabled channels that have a schedule, by number (what extend and follow visit)."""
        has_rows = sa.exists().where(t.schedule_item.c.channel_id == t.channel.c.id)
        with self.engine.connect() as conn:
            return list(
                conn.execute(
                    sa.select(t.channel.c.id)
                    .where(self._eligible(), has_rows)
                    .order_by(t.channel.c.number)
                ).scalars()
            )

    def channels_to_repair(self, now: datetime, limit: int) -> list[str]:
        """Enabled channels with an upcoming row whose item is gone, by number, at most `limit`."""
        earliest = now + timedelta(seconds=REPAIR_BUFFER_SECONDS)
        bad = (
            sa.select(t.schedule_item.c.channel_id)
            .where(t.schedule_item.c.starts_at >= earliest, ~_playable())
            .distinct()
        )
        with self.engine.connect() as conn:
            return list(
                conn.execute(
                    sa.select(t.channel.c.id)
                    .where(self._eligible(), t.channel.c.id.in_(bad))
                    .order_by(t.channel.c.number)
                    .limit(limit)
                ).scalars()
            )

    def channel_plan(self, channel_id: str) -> ChannelPlan:
        """The channel's build settings and its PREDICATE definitions in evaluation order.

        Raises:
            LookupError: No channel has this id (deleted since the job planned it).
        """
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t.channel).where(t.channel.c.id == channel_id)).first()
            if row is None:
                raise LookupError(f"channel {channel_id} no longer exists")
            definitions = conn.execute(
                sa.select(
                    t.channel_definition.c.mode,
                    t.channel_definition.c.plex_filter,
                    t.channel_definition.c.plex_library_key,
                )
                .where(
                    t.channel_definition.c.channel_id == channel_id,
                    t.channel_definition.c.kind == "PREDICATE",
                )
                .order_by(t.channel_definition.c.sort_index, t.channel_definition.c.id)
            ).all()
        return ChannelPlan(
            id=row.id,
            number=row.number,
            ordering=row.ordering,
            sort_field=row.sort_field,
            sort_dir=row.sort_dir,
            bumper_mode=row.bumper_mode,
            shuffle_seed=row.shuffle_seed,
            media_source_id=row.media_source_id,
            definitions=tuple((d.mode, d.plex_filter, d.plex_library_key) for d in definitions),
        )

    def tail_end(self, channel_id: str) -> datetime | None:
        """End of the channel's last row (None without rows): a cheap pre-check before Plex."""
        with self.engine.connect() as conn:
            return _tail(conn, channel_id)

    # -- the four timeline changes --------------------------------------------------------------

    def backfill(
        self, plan: ChannelPlan, pool: Sequence[MediaItem], now: datetime
    ) -> ChannelOutcome:
        """Lay the 12-hour window of a channel that has no rows (a fresh, windowed build).

        Like Airwave's initial build, it stamps `bumperRev` with the configuration's revision.
        """
        bumpers = self.store.bumper_settings()
        with self.store.transaction() as conn:
            if not _lock(conn, plan.id):
                return _gone(plan)
            if _tail(conn, plan.id) is not None:
                return _outcome(plan, "not-due", conn=conn, now=now, detail="has rows already")
            if usable_count(pool) == 0:
                return _outcome(plan, "empty-pool", detail="the pool is empty: nothing to lay")
            build = build_schedule(
                pool,
                ordering=plan.ordering,
                channel_seed=plan.seed,
                start_at=now,
                window_seconds=INITIAL_WINDOW_SECONDS,
                bumpers=bumpers.plan_for(plan.bumper_mode),
            )
            added = self._write(
                conn, plan, pool, build, cursor=None, keep_marks_before=None, bumpers=bumpers
            )
            return _outcome(plan, "backfilled", conn=conn, now=now, added=added)

    def extend(
        self,
        plan: ChannelPlan,
        pool: Sequence[MediaItem],
        now: datetime,
        *,
        horizon_seconds: int = DEFAULT_HORIZON_SECONDS,
    ) -> ChannelOutcome:
        """Continue the channel's pass from its stored cursor until at least `horizon` ahead.

        Decides under the channel lock: nothing happens unless the runway is at most the extend
        threshold (2 days). Rows that started more than 6 hours ago are pruned in the same
        transaction. An empty pool keeps the old rows until they expire.
        """
        bumpers = self.store.bumper_settings()
        with self.store.transaction() as conn:
            cursor_row = _lock(conn, plan.id)
            if cursor_row is None:
                return _gone(plan)
            tail = _tail(conn, plan.id)
            if tail is None:
                return _outcome(plan, "empty", detail="no rows: backfill lays the first window")
            if not extend_needed(tail, now):
                return _outcome(plan, "not-due", conn=conn, now=now)
            if usable_count(pool) == 0:
                return _outcome(
                    plan, "empty-pool", conn=conn, now=now, detail="the pool is empty: rows kept"
                )
            cursor = cursor_from_storage(
                cursor_row.schedule_pass_seed,
                cursor_row.schedule_pass_index,
                cursor_row.schedule_pass_pos,
            )
            build = build_schedule(
                pool,
                ordering=plan.ordering,
                channel_seed=plan.seed,
                start_at=tail,
                min_duration_seconds=_target(tail, now, horizon_seconds),
                cursor=cursor,
                bumpers=bumpers.plan_for(plan.bumper_mode),
            )
            pruned = _prune_channel(conn, plan.id, now)
            added = self._write(conn, plan, pool, build, cursor=cursor, keep_marks_before=tail)
            return _outcome(plan, "extended", conn=conn, now=now, added=added, removed=pruned)

    def repair(self, plan: ChannelPlan, pool: Sequence[MediaItem], now: datetime) -> ChannelOutcome:
        """Replace the timeline from its first unplayable upcoming row with a fresh build."""
        bumpers = self.store.bumper_settings()
        with self.store.transaction() as conn:
            if _lock(conn, plan.id) is None:
                return _gone(plan)
            point = repair_point(_upcoming(conn, plan.id, now), now)
            if point is None:
                return _outcome(plan, "not-due", conn=conn, now=now, detail="nothing to repair")
            if usable_count(pool) == 0:
                return _outcome(
                    plan, "empty-pool", conn=conn, now=now, detail="the pool is empty: rows kept"
                )
            return self._relay_fresh(conn, plan, pool, now, point, "repaired", bumpers)

    def follow(self, plan: ChannelPlan, pool: Sequence[MediaItem], now: datetime) -> ChannelOutcome:
        """Bring a channel in line with its re-resolved pool after a library refresh.

        Nothing happens when the pool's fingerprint equals the one its rows were laid from.
        Otherwise an unplayable upcoming row is repaired (fresh build from there); failing that,
        the rows from the next pass seam on are re-laid from the same pass, now drawn from the new
        pool, so the current pass plays out unchanged and new items air from the next pass. When
        the laid rows hold no seam, the next extension lays the new pool anyway.
        """
        fingerprint = pool_fingerprint(pool)
        bumpers = self.store.bumper_settings()
        with self.store.transaction() as conn:
            if _lock(conn, plan.id) is None:
                return _gone(plan)
            stored, marks = _state(conn, plan.id)
            if stored == fingerprint:
                return _outcome(plan, "unchanged", conn=conn, now=now)
            if usable_count(pool) == 0:
                return _outcome(
                    plan, "empty-pool", conn=conn, now=now, detail="the pool is empty: rows kept"
                )
            point = repair_point(_upcoming(conn, plan.id, now), now)
            if point is not None:
                return self._relay_fresh(conn, plan, pool, now, point, "repaired", bumpers)
            earliest = now + timedelta(seconds=REPAIR_BUFFER_SECONDS)
            seam = next_seam(marks, earliest)
            tail = _tail(conn, plan.id)
            if seam is None or tail is None:
                _save_state(conn, plan.id, fingerprint, usable_count(pool), marks)
                return _outcome(
                    plan,
                    "unchanged",
                    conn=conn,
                    now=now,
                    detail="pool changed; no pass starts in the laid rows, the next extension "
                    "lays the new pool",
                )
            removed = _delete_from(conn, plan.id, seam.starts_at)
            resume = seam.cursor()
            build = build_schedule(
                pool,
                ordering=plan.ordering,
                channel_seed=plan.seed,
                start_at=seam.starts_at,
                min_duration_seconds=_cover(seam.starts_at, tail),
                cursor=resume,
                bumpers=bumpers.plan_for(plan.bumper_mode),
            )
            added = self._write(
                conn, plan, pool, build, cursor=resume, keep_marks_before=seam.starts_at
            )
            return _outcome(plan, "relaid", conn=conn, now=now, added=added, removed=removed)

    def prune(self, now: datetime) -> int:
        """Delete every row that started more than 6 hours ago and has ended; return the count."""
        with self.store.transaction() as conn:
            result = conn.execute(
                t.schedule_item.delete().where(
                    t.schedule_item.c.starts_at < prune_cutoff(now), _ROW_END <= now
                )
            )
            return int(result.rowcount or 0)

    def pass_marks(self, channel_id: str) -> list[PassMark]:
        """The stored pass seams of a channel."""
        with self.engine.connect() as conn:
            return _state(conn, channel_id)[1]

    # -- the guide ------------------------------------------------------------------------------

    def guide(
        self, start: datetime, end: datetime
    ) -> tuple[list[GuideChannel], list[GuideProgramme]]:
        """Enabled channels and the programmes airing on them between `start` and `end`.

        A programme that began before `start` but is still on is included, as guides expect.
        Bumpers are left out: they are breaks, not programmes.
        """
        with self.engine.connect() as conn:
            channels = conn.execute(
                sa.select(t.channel.c.number, t.channel.c.name, t.channel.c.callsign)
                .where(self._eligible())
                .order_by(t.channel.c.number)
            ).all()
            parent = t.media_item.alias("parent")
            rows = conn.execute(
                sa.select(
                    t.channel.c.number,
                    t.schedule_item.c.starts_at,
                    t.schedule_item.c.duration_seconds,
                    t.schedule_item.c.rating_key,
                    t.media_item.c.title,
                    t.media_item.c.type,
                    t.media_item.c.year,
                    t.media_item.c.guide,
                    parent.c.guide.label("parent_guide"),
                )
                .select_from(
                    t.schedule_item.join(t.channel, t.channel.c.id == t.schedule_item.c.channel_id)
                    .outerjoin(t.media_item, t.media_item.c.id == t.schedule_item.c.media_item_id)
                    .outerjoin(parent, parent.c.id == t.media_item.c.parent_id)
                )
                .where(
                    self._eligible(),
                    t.schedule_item.c.kind == "PROGRAM",
                    t.schedule_item.c.starts_at < end,
                    _ROW_END > start,
                )
                .order_by(t.channel.c.number, t.schedule_item.c.starts_at)
            ).all()
        return (
            [GuideChannel(number=c.number, name=c.name, callsign=c.callsign) for c in channels],
            [_programme(row) for row in rows],
        )

    def guide_window(self, start: datetime, end: datetime) -> GuideWindow:
        """What `guide` lists, plus the bumpers between programmes, as one guide window.

        The bumpers are what tells a break from a stretch with nothing stored, and where a
        channel's stored schedule really stops (`GuideWindow.covered_until`).
        """
        channels, programmes = self.guide(start, end)
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    t.channel.c.number,
                    t.schedule_item.c.starts_at,
                    t.schedule_item.c.duration_seconds,
                )
                .select_from(
                    t.schedule_item.join(t.channel, t.channel.c.id == t.schedule_item.c.channel_id)
                )
                .where(
                    self._eligible(),
                    t.schedule_item.c.kind == "BUMPER",
                    t.schedule_item.c.starts_at < end,
                    _ROW_END > start,
                )
                .order_by(t.channel.c.number, t.schedule_item.c.starts_at)
            ).all()
        listed = {channel.number for channel in channels}
        breaks = [
            GuideBreak(
                channel_number=row.number,
                start=row.starts_at,
                stop=row.starts_at + timedelta(seconds=row.duration_seconds),
            )
            for row in rows
            # Each statement reads its own snapshot: a channel enabled between them has rows
            # here but is not among the channels, and a guide lists no rows of unlisted channels.
            if row.number in listed
        ]
        return GuideWindow(
            start=start,
            end=end,
            channels=tuple(channels),
            programmes=tuple(p for p in programmes if p.channel_number in listed),
            breaks=tuple(breaks),
        )

    # -- shared write path ----------------------------------------------------------------------

    def _relay_fresh(
        self,
        conn: Connection,
        plan: ChannelPlan,
        pool: Sequence[MediaItem],
        now: datetime,
        point: datetime,
        status: str,
        bumpers: BumperSettings,
    ) -> ChannelOutcome:
        tail = _tail(conn, plan.id)
        removed = _delete_from(conn, plan.id, point)
        build = build_schedule(
            pool,
            ordering=plan.ordering,
            channel_seed=plan.seed,
            start_at=point,
            min_duration_seconds=_cover(point, tail),
            bumpers=bumpers.plan_for(plan.bumper_mode),
        )
        added = self._write(conn, plan, pool, build, cursor=None, keep_marks_before=point)
        return _outcome(plan, status, conn=conn, now=now, added=added, removed=removed)

    def _write(
        self,
        conn: Connection,
        plan: ChannelPlan,
        pool: Sequence[MediaItem],
        build: ScheduleBuild,
        *,
        cursor: ScheduleCursor | None,
        keep_marks_before: datetime | None,
        bumpers: BumperSettings | None = None,
    ) -> int:
        """Insert a build's rows, store its cursor, seams and the pool's fingerprint.

        `bumpers` is given for a fresh initial window only: the channel's `bumperRev` is then
        stamped, as Airwave's initial build does; continuations leave it as it is.
        """
        used = build.played_keys
        items = [item for item in pool if item.rating_key in used]
        ids = self._item_ids(conn, plan.media_source_id, items)
        if build.entries:
            _copy_rows(conn, schedule_rows(plan.id, build, ids))
        seed, index, pos = cursor_to_storage(build.cursor)
        stamp = {} if bumpers is None else {"bumper_rev": bumpers.rev}
        conn.execute(
            t.channel.update()
            .where(t.channel.c.id == plan.id)
            .values(
                shuffle_seed=plan.seed,
                schedule_pass_seed=seed,
                schedule_pass_index=index,
                schedule_pass_pos=pos,
                **stamp,
            )
        )
        _, old_marks = _state(conn, plan.id)
        first = conn.execute(
            sa.select(sa.func.min(t.schedule_item.c.starts_at)).where(
                t.schedule_item.c.channel_id == plan.id
            )
        ).scalar_one()
        # Seams of rows already pruned are history; seams past the replaced point are gone.
        kept = [
            m
            for m in old_marks
            if keep_marks_before is not None
            and first is not None
            and first <= m.starts_at < keep_marks_before
        ]
        marks = kept + pass_marks(build, cursor, usable_count(pool))
        _save_state(conn, plan.id, pool_fingerprint(pool), usable_count(pool), marks)
        return len(build.entries)

    def _item_ids(
        self, conn: Connection, source_id: str, items: Sequence[MediaItem]
    ) -> dict[str, str]:
        """Media item ids by rating key, creating only the rows that do not exist yet.

        After a library refresh every item is there already, and rewriting ten thousand rows of
        metadata on every extension would be most of its cost. Items Plex has just resolved are
        playable, so any the snapshot had marked unavailable are marked available again.
        """
        if not items:
            return {}
        m = t.media_item.c
        keys = sa.bindparam("keys", [item.rating_key for item in items], type_=pg.ARRAY(sa.Text))
        conn.execute(
            t.media_item.update()
            .where(m.media_source_id == source_id, m.rating_key == sa.any_(keys))
            .where(m.available.is_(False))
            .values(available=True, last_synced_at=t.utc_now())
        )
        # The repository's create-only gap-fill, so new rows look the same whoever wrote them.
        return self.store.media_item_ids(conn, source_id, items)


_COPY_COLUMNS = (
    "id",
    "channel_id",
    "kind",
    "starts_at",
    "duration_seconds",
    "start_offset_seconds",
    "rating_key",
    "bumper_kind",
    "media_item_id",
    "target_media_item_id",
)


def _copy_text(value: object) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, datetime):
        # Airwave's columns hold the UTC wall clock without a zone (§2.2).
        return value.astimezone(UTC).replace(tzinfo=None).isoformat()
    text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _copy_rows(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert schedule rows with COPY: a week of a large pool is thousands of rows per channel.

    COPY runs in the caller's transaction and still checks every constraint; a driver without
    COPY gets an ordinary multi-row insert.
    """
    raw = conn.connection.dbapi_connection
    cursor = raw.cursor() if raw is not None else None
    if cursor is None or not hasattr(cursor, "copy_expert"):
        conn.execute(t.schedule_item.insert(), list(rows))
        return
    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join(_copy_text(row[key]) for key in _COPY_COLUMNS))
        buffer.write("\n")
    buffer.seek(0)
    table = t.schedule_item
    columns = ", ".join(f'"{table.c[key].name}"' for key in _COPY_COLUMNS)
    try:
        cursor.copy_expert(f"COPY {table.schema}.{table.name} ({columns}) FROM STDIN", buffer)
    finally:
        cursor.close()


def _playable() -> sa.ColumnElement[bool]:
    """A row whose item (or, for a bumper, the program it introduces) is still in the library."""
    program = sa.exists().where(
        t.media_item.c.id == t.schedule_item.c.media_item_id, t.media_item.c.available
    )
    bumper = sa.exists().where(
        t.media_item.c.id == t.schedule_item.c.target_media_item_id, t.media_item.c.available
    )
    return sa.case((t.schedule_item.c.kind == "BUMPER", bumper), else_=program)


def _lock(conn: Connection, channel_id: str) -> Any:
    """Lock an enabled channel's row for this transaction; its stored cursor, or None if gone."""
    return conn.execute(
        sa.select(
            t.channel.c.schedule_pass_seed,
            t.channel.c.schedule_pass_index,
            t.channel.c.schedule_pass_pos,
        )
        .where(t.channel.c.id == channel_id, t.channel.c.enabled)
        .with_for_update()
    ).first()


def _tail(conn: Connection, channel_id: str) -> datetime | None:
    value: datetime | None = conn.execute(
        sa.select(sa.func.max(_ROW_END)).where(t.schedule_item.c.channel_id == channel_id)
    ).scalar_one()
    return value


def _upcoming(conn: Connection, channel_id: str, now: datetime) -> list[RowRef]:
    rows = conn.execute(
        sa.select(t.schedule_item.c.starts_at, t.schedule_item.c.kind, _playable().label("ok"))
        .where(t.schedule_item.c.channel_id == channel_id, t.schedule_item.c.starts_at >= now)
        .order_by(t.schedule_item.c.starts_at)
    )
    return [RowRef(starts_at=r.starts_at, kind=r.kind, playable=bool(r.ok)) for r in rows]


def _delete_from(conn: Connection, channel_id: str, point: datetime) -> int:
    result = conn.execute(
        t.schedule_item.delete().where(
            t.schedule_item.c.channel_id == channel_id, t.schedule_item.c.starts_at >= point
        )
    )
    return int(result.rowcount or 0)


def _prune_channel(conn: Connection, channel_id: str, now: datetime) -> int:
    result = conn.execute(
        t.schedule_item.delete().where(
            t.schedule_item.c.channel_id == channel_id,
            t.schedule_item.c.starts_at < prune_cutoff(now),
            _ROW_END <= now,
        )
    )
    return int(result.rowcount or 0)


def _state(conn: Connection, channel_id: str) -> tuple[str | None, list[PassMark]]:
    row = conn.execute(
        sa.select(
            t.channel_schedule_state.c.pool_fingerprint, t.channel_schedule_state.c.pass_marks
        ).where(t.channel_schedule_state.c.channel_id == channel_id)
    ).first()
    if row is None:
        return None, []
    return row.pool_fingerprint, [PassMark.model_validate(m) for m in row.pass_marks or []]


def _save_state(
    conn: Connection, channel_id: str, fingerprint: str, size: int, marks: Sequence[PassMark]
) -> None:
    values = {
        "pool_fingerprint": fingerprint,
        "pool_size": size,
        "pass_marks": [m.model_dump(mode="json") for m in marks],
        "updated_at": sa.func.now(),
    }
    stmt = pg_insert(t.channel_schedule_state).values(channel_id=channel_id, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=["channel_id"], set_=values))


def _target(tail: datetime, now: datetime, horizon_seconds: int) -> int:
    """Seconds to lay from the tail so the timeline reaches `horizon` past now."""
    return max(horizon_seconds, math.ceil((now - tail).total_seconds()) + horizon_seconds)


def _cover(start: datetime, old_tail: datetime | None) -> int:
    """Seconds a replacement from `start` lays: the 7-day floor, and never less than was there."""
    if old_tail is None:
        return DEFAULT_HORIZON_SECONDS
    return max(DEFAULT_HORIZON_SECONDS, math.ceil((old_tail - start).total_seconds()))


def _outcome(
    plan: ChannelPlan,
    status: Any,
    *,
    conn: Connection | None = None,
    now: datetime | None = None,
    added: int = 0,
    removed: int = 0,
    detail: str | None = None,
) -> ChannelOutcome:
    runway = None
    if conn is not None and now is not None:
        runway = runway_seconds(_tail(conn, plan.id), now)
    return ChannelOutcome(
        channel_id=plan.id,
        number=plan.number,
        status=status,
        rows_added=added,
        rows_removed=removed,
        runway_seconds=runway,
        detail=detail,
    )


def _gone(plan: ChannelPlan) -> ChannelOutcome:
    # Disabled or deleted after the run chose it: nothing to maintain, and nothing failed.
    return _outcome(plan, "not-due", detail="disabled or deleted since the run planned it")


def _programme(row: Any) -> GuideProgramme:
    # Airwave's merge (§4.2): the show's GuideMeta, then every key the item has itself.
    guide: dict[str, Any] = {**(row.parent_guide or {}), **(row.guide or {})}
    episode = row.type == "episode"
    title = row.title or row.rating_key or "Unknown"
    start: datetime = row.starts_at
    return GuideProgramme(
        channel_number=row.number,
        start=start,
        stop=start + timedelta(seconds=row.duration_seconds),
        title=(guide.get("showTitle") or title) if episode else title,
        sub_title=title if episode and guide.get("showTitle") else None,
        description=guide.get("summary"),
        year=row.year,
        season=guide.get("season") if episode else None,
        episode=guide.get("episode") if episode else None,
        categories=tuple(guide.get("genres") or ()),
        content_rating=guide.get("contentRating"),
    )
