"""Schedule generation: seeded per-pass orders laid into a gapless timeline.

Reference: docs/reference/domain.md §5 (the bare "§N" below are its sections).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal, NamedTuple

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from airwave_dagster.domain.library import PoolItem

Ordering = Literal["SHUFFLE", "IN_ORDER", "BY_AIR_DATE"]
"""How a channel orders each pass of its pool (the OrderingStrategy enum, §1.1)."""

EntryKind = Literal["PROGRAM", "BUMPER"]
"""The ScheduleItemKind enum of a schedule row."""

INITIAL_WINDOW_SECONDS = 43_200
"""Runway laid when a channel is created or backfilled (12 h)."""

DEFAULT_HORIZON_SECONDS = 604_800
"""Minimum coverage of a full build and the target of an extension (7 days)."""

EXTEND_THRESHOLD_SECONDS = 172_800
"""An extension is due once the runway left is at most this long (2 days)."""

HISTORY_KEPT_SECONDS = 21_600
"""An extension deletes rows that started longer ago than this (6 h)."""

REPAIR_BUFFER_SECONDS = 300
"""A repair never touches rows starting within this long of now (5 min)."""

MIN_ITEM_SECONDS = 1
"""Shortest length any schedule row may have."""

MAX_ENTRIES = 20_000
"""Cap on rows (programs and bumpers) laid by one build."""

BUMPER_KIND_INTERSTITIAL = "interstitial"
"""The `bumper_kind` of every bumper the builder lays."""

_MASK32 = 0xFFFFFFFF
_TWO_POW_32 = 4_294_967_296
_FNV_OFFSET_BASIS = 2_166_136_261
_FNV_PRIME = 16_777_619
_MIX_GOLDEN = 0x9E3779B9
_MIX_MULTIPLIER = 0x85EBCA6B
_MULBERRY_INCREMENT = 0x6D2B79F5
_MOVIE_LIKE_MS = 75 * 60_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_SECOND = timedelta(seconds=1)
_DIGIT_RUNS = re.compile(r"([0-9]+)")


def to_unsigned32(value: int) -> int:
    """Reduce an integer modulo 2^32.

    Args:
        value: Any integer, e.g. a seed stored as signed 32-bit.

    Returns:
        The value in [0, 2^32).
    """
    return value & _MASK32


def to_signed32(value: int) -> int:
    """Reinterpret the low 32 bits of an integer as a two's-complement signed value.

    Args:
        value: Any integer.

    Returns:
        The value in [-2^31, 2^31), as the store keeps seeds.
    """
    value &= _MASK32
    return value - _TWO_POW_32 if value >= 0x80000000 else value


def imul(a: int, b: int) -> int:
    """Multiply modulo 2^32, like JavaScript's `Math.imul` read as unsigned.

    Args:
        a: First factor (any integer; only its low 32 bits matter).
        b: Second factor (any integer; only its low 32 bits matter).

    Returns:
        The low 32 bits of the product, unsigned.
    """
    return ((a & _MASK32) * (b & _MASK32)) & _MASK32


def mix(a: int, b: int) -> int:
    """Combine two 32-bit values into a derived seed (docs/reference/domain.md §5.2).

    Args:
        a: The parent seed (signed or unsigned; reduced modulo 2^32).
        b: The value mixed in, e.g. a pass index or a start time in seconds.

    Returns:
        The derived seed, unsigned 32-bit.
    """
    h = (a & _MASK32) ^ _MIX_GOLDEN
    h = imul(h ^ (b & _MASK32), _MIX_MULTIPLIER)
    return h ^ (h >> 13)


class Mulberry32:
    """The Mulberry32 PRNG: a 32-bit state that yields floats in [0, 1) (§5.2)."""

    __slots__ = ("_state",)

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK32

    def draw(self) -> float:
        """Advance the state and return the next value.

        Returns:
            A float in [0, 1) with 32 bits of randomness.
        """
        a = (self._state + _MULBERRY_INCREMENT) & _MASK32
        self._state = a
        t = ((a ^ (a >> 15)) * (a | 1)) & _MASK32
        t = ((t + (((t ^ (t >> 7)) * (t | 61)) & _MASK32)) & _MASK32) ^ t
        return (t ^ (t >> 14)) / _TWO_POW_32


def fnv1a_32(text: str) -> int:
    """Hash a string with 32-bit FNV-1a over its UTF-16 code units.

    UTF-16 rather than UTF-8 because the seeds already stored were computed that way, and
    characters outside the BMP must hash as their two surrogate units to match.

    Args:
        text: The string to hash.

    Returns:
        The hash, unsigned 32-bit.
    """
    data = text.encode("utf-16-le", "surrogatepass")
    h = _FNV_OFFSET_BASIS
    for index in range(0, len(data), 2):
        h ^= data[index] | (data[index + 1] << 8)
        h = (h * _FNV_PRIME) & _MASK32
    return h


def channel_seed(channel_id: str) -> int:
    """Derive the shuffle seed of a channel that has none yet (docs/reference/domain.md §5.2).

    Args:
        channel_id: The channel's id.

    Returns:
        The seed as stored in `channel.shuffleSeed`: signed 32-bit.
    """
    return to_signed32(fnv1a_32(channel_id))


def epoch_seconds(moment: datetime) -> int:
    """Whole seconds since the Unix epoch, rounded down.

    Args:
        moment: A timezone-aware datetime.

    Returns:
        floor(moment in seconds), the builder's clock at that moment.

    Raises:
        ValueError: If `moment` is naive, since its instant would be a guess.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"schedule times must be timezone-aware, got {moment!r}")
    return (moment - _EPOCH) // _ONE_SECOND


def base_seed(channel_seed: int, start_at: datetime) -> int:
    """The seed pinned by a fresh build (§5.2): rebuilding at another start reshuffles.

    Args:
        channel_seed: The channel's shuffle seed (signed or unsigned).
        start_at: When the build starts (timezone-aware).

    Returns:
        mix(channel_seed, floor(start_at in seconds)), unsigned 32-bit.
    """
    return mix(channel_seed, epoch_seconds(start_at))


def item_seconds(duration_ms: int) -> int:
    """Length of a schedule row for an item, rounding halves up as the original does.

    Args:
        duration_ms: The item's duration in milliseconds (> 0 for a usable item).

    Returns:
        max(1, round(duration_ms / 1000)).
    """
    return max(MIN_ITEM_SECONDS, (duration_ms + 500) // 1000)


def _natural_key(rating_key: str) -> tuple[tuple[str | int, ...], str]:
    parts = _DIGIT_RUNS.split(rating_key)
    # The split alternates text, digits, text, ..., so equal positions always hold equal types.
    natural = tuple(int(part) if index % 2 else part.casefold() for index, part in enumerate(parts))
    # The raw key breaks ties ("7" vs "007", "a" vs "A") so the order never depends on input order.
    return natural, rating_key


class BumperPlan(BaseModel):
    """Bumper lengths of a channel with bumpers on (the BumperConfig defaults of §1.8).

    Every non-OFF bumper mode behaves the same, so a plan is either this or None.
    """

    model_config = ConfigDict(frozen=True)

    interstitial_seconds: int = Field(default=15, ge=0, description="Default break.")
    after_movie_seconds: int = Field(default=120, ge=0, description="Break after a movie.")
    after_episode_seconds: int = Field(default=30, ge=0, description="Break after an episode.")
    quick_seconds: int = Field(
        default=10, ge=0, description="Break inside a show's run, or before a short episode."
    )
    short_episode_minutes: int = Field(
        default=20, ge=0, description="Episodes at most this long get the quick break."
    )

    def break_seconds(self, previous: PoolItem, following: PoolItem) -> int:
        """Length of the bumper laid between two programs (§5.4, first rule that applies).

        Args:
            previous: The program that just ended.
            following: The program the bumper introduces.

        Returns:
            The bumper length in seconds, at least 1.
        """
        if (
            previous.type == "episode"
            and following.type == "episode"
            and previous.show_rating_key is not None
            and previous.show_rating_key == following.show_rating_key
        ):
            seconds = self.quick_seconds
        elif previous.type == "movie" or (
            # The original treats a long item without a type as a movie; "show" is the only
            # other type a pool item can carry, so it stands in for "untyped".
            previous.type != "episode" and previous.duration_ms >= _MOVIE_LIKE_MS
        ):
            seconds = self.after_movie_seconds
        elif (
            following.type == "episode"
            and following.duration_ms <= self.short_episode_minutes * 60_000
        ):
            seconds = self.quick_seconds
        elif previous.type == "episode":
            seconds = self.after_episode_seconds
        else:
            seconds = self.interstitial_seconds
        return max(MIN_ITEM_SECONDS, seconds)


def resolve_bumper_plan(
    channel_mode: str, *, enabled: bool, config: BumperPlan | None = None
) -> BumperPlan | None:
    """The bumper plan a channel builds with (docs/reference/domain.md §5.4).

    Args:
        channel_mode: The channel's BumperMode (INHERIT, OFF, INTERSTITIAL_ONLY or FULL).
        enabled: Whether the global bumper config is enabled.
        config: The global config's lengths; the defaults when None.

    Returns:
        None when bumpers are disabled globally or the channel is OFF, else the plan. Every
        other mode behaves the same today.
    """
    if not enabled or channel_mode == "OFF":
        return None
    return config if config is not None else BumperPlan()


class ScheduleCursor(BaseModel):
    """Where a build stopped: the pinned pass seed, the pass, and the next position in it."""

    model_config = ConfigDict(frozen=True)

    pass_seed: int = Field(ge=0, le=_MASK32, description="Base seed, unsigned 32-bit.")
    pass_index: int = Field(ge=0, description="Pass the next item comes from.")
    pos: int = Field(description="Index in that pass of the first item not yet laid.")


class ScheduleEntry(BaseModel):
    """One row of a channel's timeline (the schedule_item table of §1.6)."""

    model_config = ConfigDict(frozen=True)

    kind: EntryKind
    starts_at: AwareDatetime = Field(description="UTC, whole seconds.")
    duration_seconds: int = Field(ge=MIN_ITEM_SECONDS)
    rating_key: str | None = Field(default=None, description="Plex item played; None for bumpers.")
    bumper_kind: str | None = Field(default=None, description="'interstitial' for bumpers.")
    target_rating_key: str | None = Field(
        default=None, description="For a bumper, the program it introduces."
    )

    @property
    def ends_at(self) -> datetime:
        """When the row ends, which is when the next row starts."""
        return self.starts_at + timedelta(seconds=self.duration_seconds)


class ScheduleBuild(BaseModel):
    """The result of one build: the rows laid, a summary, and the cursor to resume from."""

    model_config = ConfigDict(frozen=True)

    entries: tuple[ScheduleEntry, ...]
    passes: int = Field(description="Passes completed within this build.")
    pool_seconds: int = Field(description="Program seconds of one pass of the usable pool.")
    covered_seconds: int = Field(description="Seconds laid, bumpers included.")
    bumper_count: int
    cursor: ScheduleCursor

    @property
    def program_count(self) -> int:
        """Number of PROGRAM rows."""
        return len(self.entries) - self.bumper_count

    @property
    def played_keys(self) -> frozenset[str]:
        """Rating keys of the items the rows play or introduce: the media items they link to."""
        keys = {e.rating_key for e in self.entries if e.rating_key is not None}
        return frozenset(keys | {e.target_rating_key for e in self.entries if e.target_rating_key})

    @property
    def starts_at(self) -> datetime | None:
        """Start of the first row, or None when nothing was laid."""
        return self.entries[0].starts_at if self.entries else None

    @property
    def ends_at(self) -> datetime | None:
        """End of the last row, or None when nothing was laid."""
        return self.entries[-1].ends_at if self.entries else None


_PassOrder = Callable[[int], Sequence[PoolItem]]
"""Gives the order of one pass by index; a strategy layer (§5.6) would be another one."""


def _by_rating_key(usable: Sequence[PoolItem]) -> list[PoolItem]:
    if all(_is_canonical_decimal(item.rating_key) for item in usable):
        # Plex rating keys are decimals without leading zeros. For those, distinct keys are
        # distinct numbers, so sorting on the number alone gives the general order (exact
        # duplicates stay in pool order either way), several times faster on a large pool.
        return sorted(usable, key=lambda item: int(item.rating_key))
    return sorted(usable, key=lambda item: _natural_key(item.rating_key))


def _is_canonical_decimal(text: str) -> bool:
    return text.isascii() and text.isdigit() and (text[0] != "0" or text == "0")


def _shuffle(items: list[PoolItem], seed: int) -> list[PoolItem]:
    draw = Mulberry32(seed).draw
    for i in range(len(items) - 1, 0, -1):
        j = int(draw() * (i + 1))
        items[i], items[j] = items[j], items[i]
    return items


def _plain_order(usable: Sequence[PoolItem], ordering: Ordering, seed: int) -> _PassOrder:
    if ordering == "SHUFFLE":
        # Sorting first makes the shuffle independent of the order Plex happened to return.
        ranked = _by_rating_key(usable)
        cache: dict[int, list[PoolItem]] = {}

        def shuffled(pass_index: int) -> list[PoolItem]:
            order = cache.get(pass_index)
            if order is None:
                # Only the latest pass is ever asked for again, so keep one.
                cache.clear()
                order = cache[pass_index] = _shuffle(list(ranked), mix(seed, pass_index))
            return order

        return shuffled
    if ordering in ("IN_ORDER", "BY_AIR_DATE"):
        fixed = tuple(usable)
        return lambda _pass_index: fixed
    raise ValueError(f"unknown ordering {ordering!r}")


def pass_order(
    pool: Sequence[PoolItem], *, ordering: Ordering, base_seed: int, pass_index: int
) -> list[PoolItem]:
    """The order one pass lays the usable items of a pool in (docs/reference/domain.md §5.3).

    Args:
        pool: The resolved pool; items without a positive duration are dropped.
        ordering: SHUFFLE reshuffles every pass; IN_ORDER and BY_AIR_DATE keep the pool's order.
        base_seed: The build's base seed (unsigned 32-bit).
        pass_index: Which pass.

    Returns:
        The pool's usable items in this pass's order.
    """
    usable = [item for item in pool if item.duration_ms > 0]
    return list(_plain_order(usable, ordering, base_seed)(pass_index))


def build_schedule(
    pool: Sequence[PoolItem],
    *,
    ordering: Ordering,
    channel_seed: int,
    start_at: datetime,
    window_seconds: int | None = None,
    min_duration_seconds: int = DEFAULT_HORIZON_SECONDS,
    cursor: ScheduleCursor | None = None,
    bumpers: BumperPlan | None = None,
) -> ScheduleBuild:
    """Lay a channel's timeline from `start_at` (docs/reference/domain.md §5.4).

    Without a window the build lays whole passes until it covers `min_duration_seconds`, so it
    always lays at least one complete pass. With a window it stops as soon as the window is
    covered, possibly mid-pass, overshooting by at most one program and its bumper. Either way it
    stops at `MAX_ENTRIES` rows, checked before each program, so a bumper can take it one row
    past the cap, as in the original.

    Args:
        pool: The resolved pool in the channel's sort order; zero-length items are skipped.
        ordering: How each pass is ordered.
        channel_seed: The channel's shuffle seed (signed as stored, or unsigned).
        start_at: Start of the first row (timezone-aware; fractions of a second are dropped).
        window_seconds: Stop once this much is covered (the 12 h initial window), or None.
        min_duration_seconds: Coverage a build without a window must reach.
        cursor: Resume here with the cursor's pinned seed, instead of a fresh build whose seed
            derives from `channel_seed` and `start_at`.
        bumpers: Bumper lengths, or None for a channel without bumpers.

    Returns:
        The rows laid, the summary, and the cursor the next build resumes from.

    Raises:
        ValueError: If `start_at` is naive or `ordering` is unknown.
    """
    clock = epoch_seconds(start_at)
    seed = cursor.pass_seed if cursor is not None else mix(channel_seed, clock)
    usable = [item for item in pool if item.duration_ms > 0]
    order_of = _plain_order(usable, ordering, seed)
    if not usable:
        return ScheduleBuild(
            entries=(),
            passes=0,
            pool_seconds=0,
            covered_seconds=0,
            bumper_count=0,
            cursor=ScheduleCursor(pass_seed=seed, pass_index=0, pos=0),
        )
    laid = _lay(
        order_of,
        clock=clock,
        target=window_seconds if window_seconds is not None else min_duration_seconds,
        window=window_seconds,
        pass_index=cursor.pass_index if cursor is not None else 0,
        pos=max(0, cursor.pos) if cursor is not None else 0,
        bumpers=bumpers,
    )
    # model_construct: validating the build would walk every entry again, which is the cost
    # _materialize exists to avoid.
    return ScheduleBuild.model_construct(
        entries=_materialize(laid.rows),
        passes=laid.passes,
        pool_seconds=sum(item_seconds(item.duration_ms) for item in usable),
        covered_seconds=laid.covered,
        bumper_count=laid.bumper_count,
        cursor=ScheduleCursor(pass_seed=seed, pass_index=laid.pass_index, pos=laid.pos),
    )


_Row = tuple[int, int, str | None, str | None]
"""(start second, length, rating key or None for a bumper, the bumper's target)."""


class _Laid(NamedTuple):
    rows: list[_Row]
    passes: int
    covered: int
    bumper_count: int
    pass_index: int
    pos: int


def _lay(
    order_of: _PassOrder,
    *,
    clock: int,
    target: int,
    window: int | None,
    pass_index: int,
    pos: int,
    bumpers: BumperPlan | None,
) -> _Laid:
    rows: list[_Row] = []
    append = rows.append
    covered = 0
    passes = 0
    bumper_count = 0
    previous: PoolItem | None = None
    # A float bound keeps the per-item window test a single comparison when there is no window.
    limit = float("inf") if window is None else window
    while covered < target and len(rows) < MAX_ENTRIES:
        order = order_of(pass_index)
        if pos >= len(order):
            # A stale cursor (the pool shrank) rolls to a fresh pass without counting one.
            pass_index += 1
            pos = 0
            continue
        stopped_at: int | None = None
        for index in range(pos, len(order)):
            # The cap is tested per program, not per row, so a bumper may take it one row over:
            # that is the original's behaviour, and a program never loses its bumper.
            if covered >= limit or len(rows) >= MAX_ENTRIES:
                stopped_at = index
                break
            item = order[index]
            if bumpers is not None and previous is not None:
                gap = bumpers.break_seconds(previous, item)
                append((clock, gap, None, item.rating_key))
                clock += gap
                covered += gap
                bumper_count += 1
            seconds = item_seconds(item.duration_ms)
            append((clock, seconds, item.rating_key, None))
            clock += seconds
            covered += seconds
            previous = item
        if stopped_at is not None:
            pos = stopped_at
            break
        pass_index += 1
        pos = 0
        passes += 1
    return _Laid(rows, passes, covered, bumper_count, pass_index, pos)


# Shared by every entry the builder makes: every field is always set, and pydantic copies this
# set before it ever adds to it (model_copy), so no entry can change another's.
_ENTRY_FIELDS_SET = set(ScheduleEntry.model_fields)
_new_object = object.__new__
_set_attribute = object.__setattr__
_from_timestamp = datetime.fromtimestamp


def _materialize(rows: list[_Row]) -> tuple[ScheduleEntry, ...]:
    # A full pass of a large pool is tens of thousands of rows built from the loop's own integer
    # arithmetic. Validating them, or even model_construct (which walks the fields in Python),
    # costs two to three times more than filling each instance the way model_construct does;
    # the tests compare these entries with validated ones so a pydantic upgrade cannot drift.
    entries: list[ScheduleEntry] = []
    append = entries.append
    for start, seconds, rating_key, target in rows:
        entry = _new_object(ScheduleEntry)
        _set_attribute(
            entry,
            "__dict__",
            {
                "kind": "PROGRAM" if rating_key is not None else "BUMPER",
                "starts_at": _from_timestamp(start, UTC),
                "duration_seconds": seconds,
                "rating_key": rating_key,
                "bumper_kind": None if rating_key is not None else BUMPER_KIND_INTERSTITIAL,
                "target_rating_key": target,
            },
        )
        _set_attribute(entry, "__pydantic_fields_set__", _ENTRY_FIELDS_SET)
        _set_attribute(entry, "__pydantic_extra__", None)
        _set_attribute(entry, "__pydantic_private__", None)
        append(entry)
    return tuple(entries)


def extend_needed(
    tail_end: datetime, now: datetime, threshold_seconds: int = EXTEND_THRESHOLD_SECONDS
) -> bool:
    """Whether a channel's runway is short enough for an extension (docs/reference/domain.md §5.5).

    Args:
        tail_end: End of the channel's last schedule row.
        now: The current time.
        threshold_seconds: Runway at or below which an extension is due.

    Returns:
        True when tail_end - now is at most the threshold.
    """
    return tail_end - now <= timedelta(seconds=threshold_seconds)


def cursor_to_storage(cursor: ScheduleCursor) -> tuple[int, int, int]:
    """The cursor as the channel row stores it (docs/reference/domain.md §5.5).

    Args:
        cursor: The cursor of a build.

    Returns:
        (pass seed as signed 32-bit, pass index, pos).
    """
    return to_signed32(cursor.pass_seed), cursor.pass_index, cursor.pos


def cursor_from_storage(
    seed: int | None, pass_index: int | None, pos: int | None
) -> ScheduleCursor | None:
    """Read a stored cursor back (docs/reference/domain.md §5.5).

    Args:
        seed: The stored pass seed (signed 32-bit), or None if never stored.
        pass_index: The stored pass index, or None.
        pos: The stored position, or None.

    Returns:
        The cursor, or None when there is none to resume from: nothing stored, or pass index and
        pos both 0, which is how the original marks "no cursor".
    """
    index = pass_index or 0
    position = pos or 0
    if seed is None or (index == 0 and position == 0):
        return None
    return ScheduleCursor(pass_seed=to_unsigned32(seed), pass_index=index, pos=position)
