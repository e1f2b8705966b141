"""Tests for schedule generation: seeds, per-pass orders, the build loop, bumpers, cursors."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airwave_dagster.domain.library import MediaItem
from airwave_dagster.domain.schedule import (
    DEFAULT_HORIZON_SECONDS,
    EXTEND_THRESHOLD_SECONDS,
    HISTORY_KEPT_SECONDS,
    INITIAL_WINDOW_SECONDS,
    MAX_ENTRIES,
    BumperPlan,
    Mulberry32,
    Ordering,
    ScheduleBuild,
    ScheduleCursor,
    ScheduleEntry,
    base_seed,
    build_schedule,
    channel_seed,
    cursor_from_storage,
    cursor_to_storage,
    extend_needed,
    fnv1a_32,
    imul,
    item_seconds,
    mix,
    pass_order,
    resolve_bumper_plan,
    to_signed32,
    to_unsigned32,
)

NEW_YEAR = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW_START = datetime(2026, 7, 19, 12, tzinfo=UTC)
HOUR_MS = 3_600_000
MAX_ITEM_MS = 10_800_000
MAX_BUMPER_SECONDS = BumperPlan().after_movie_seconds


def item(
    rating_key: str,
    *,
    ms: int = HOUR_MS,
    type: str = "movie",
    show: str | None = None,
) -> MediaItem:
    return MediaItem.model_validate(
        {
            "rating_key": rating_key,
            "type": type,
            "title": f"Item {rating_key}",
            "duration_ms": ms,
            "show_rating_key": show,
        }
    )


def episode(rating_key: str, *, minutes: float, show: str | None = "show-1") -> MediaItem:
    return item(rating_key, ms=int(minutes * 60_000), type="episode", show=show)


def keys(build: ScheduleBuild) -> list[str]:
    """Rating keys of the programs, in order (bumpers carry none)."""
    return [entry.rating_key for entry in build.entries if entry.rating_key is not None]


def reference_shuffle(ordered: list[str], seed: int, pass_index: int) -> list[str]:
    """Fisher-Yates exactly as docs/reference/domain.md §5.3 words it.

    It checks the sort that precedes it.
    """
    out = list(ordered)
    draw = Mulberry32(mix(seed, pass_index)).draw
    for i in range(len(out) - 1, 0, -1):
        j = int(draw() * (i + 1))
        out[i], out[j] = out[j], out[i]
    return out


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(12345, 0, 3114234965), (12345, 1, 1065844447), (-12345 & 0xFFFFFFFF, 7, mix(-12345, 7))],
)
def test_mix_matches_spec_vectors(a: int, b: int, expected: int) -> None:
    assert mix(a, b) == expected


def test_mulberry32_first_draws_match_spec() -> None:
    draw = Mulberry32(12345).draw
    assert [draw(), draw(), draw()] == [0.9797282677609473, 0.3067522644996643, 0.484205421525985]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(3, 4, 12), (0xFFFFFFFF, 0xFFFFFFFF, 1), (-1, 5, 2**32 - 5), (0x10000, 0x10000, 0)],
)
def test_imul_keeps_the_low_32_bits(a: int, b: int, expected: int) -> None:
    assert imul(a, b) == expected


@pytest.mark.parametrize(
    ("unsigned", "signed"),
    [(0, 0), (2**31 - 1, 2**31 - 1), (2**31, -(2**31)), (2**32 - 1, -1), (3181013372, -1113953924)],
)
def test_signed_and_unsigned_32_bit_round_trip(unsigned: int, signed: int) -> None:
    assert to_signed32(unsigned) == signed
    assert to_unsigned32(signed) == unsigned


def test_channel_seed_is_fnv1a_stored_signed() -> None:
    assert channel_seed("clx0abc123") == -2115039550
    assert fnv1a_32("clx0abc123") == to_unsigned32(-2115039550)


def test_fnv1a_hashes_utf16_code_units() -> None:
    # Outside the BMP a character is two surrogate units; the original hashes both.
    expected = 2166136261
    for unit in (0xD83D, 0xDCFA):
        expected = ((expected ^ unit) * 16777619) & 0xFFFFFFFF
    assert fnv1a_32("\U0001f4fa") == expected


def test_base_seed_matches_spec_vector() -> None:
    assert base_seed(12345, NEW_YEAR) == 3181013372


def test_base_seed_floors_to_whole_seconds_and_ignores_the_zone() -> None:
    later_in_the_second = NEW_YEAR + timedelta(microseconds=999_999)
    same_instant_elsewhere = NEW_YEAR.astimezone(timezone(timedelta(hours=-5)))
    assert base_seed(12345, later_in_the_second) == 3181013372
    assert base_seed(12345, same_instant_elsewhere) == 3181013372


def test_base_seed_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        base_seed(12345, datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("duration_ms", "seconds"),
    [(1, 1), (499, 1), (500, 1), (1_499, 1), (1_500, 2), (2_500, 3), (1_350_000, 1_350)],
)
def test_item_seconds_rounds_half_up_with_a_floor_of_one(duration_ms: int, seconds: int) -> None:
    assert item_seconds(duration_ms) == seconds


@pytest.mark.parametrize(
    ("pass_index", "expected"),
    [
        (0, ["4", "5", "2", "8", "10", "7", "9", "6", "3", "1"]),
        (1, ["1", "9", "6", "2", "10", "8", "3", "4", "7", "5"]),
    ],
)
def test_shuffle_pass_orders_match_spec(pass_index: int, expected: list[str]) -> None:
    pool = [item(str(key)) for key in range(1, 11)]
    # Plex order must not matter: the shuffle starts from a numeric-aware sort.
    random.Random(pass_index).shuffle(pool)
    order = pass_order(pool, ordering="SHUFFLE", base_seed=3181013372, pass_index=pass_index)
    assert [entry.rating_key for entry in order] == expected


def test_shuffle_sorts_mixed_rating_keys_numerically_before_shuffling() -> None:
    natural = ["1", "2", "007", "7", "9", "10", "a2", "A3", "a10", "b1"]
    pool = [item(key) for key in reversed(natural)]
    order = pass_order(pool, ordering="SHUFFLE", base_seed=99, pass_index=3)
    assert [entry.rating_key for entry in order] == reference_shuffle(natural, 99, 3)


@pytest.mark.parametrize("ordering", ["IN_ORDER", "BY_AIR_DATE"])
def test_fixed_orderings_keep_the_pool_order_every_pass(ordering: Ordering) -> None:
    pool = [item("30"), item("4", ms=0), item("100"), item("2")]
    for pass_index in (0, 1, 7):
        order = pass_order(pool, ordering=ordering, base_seed=5, pass_index=pass_index)
        assert [entry.rating_key for entry in order] == ["30", "100", "2"]


def test_unknown_ordering_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown ordering"):
        build_schedule(
            [item("1")],
            ordering="RANDOM",  # type: ignore[arg-type] - the bad value is the point
            channel_seed=1,
            start_at=NEW_YEAR,
        )


def test_windowed_build_matches_spec_vector() -> None:
    pool = [item(str(key)) for key in range(1000, 1004)]
    build = build_schedule(
        pool, ordering="SHUFFLE", channel_seed=77, start_at=WINDOW_START, window_seconds=3 * 3600
    )
    assert keys(build) == ["1003", "1002", "1000"]
    assert build.cursor == ScheduleCursor(pass_seed=860237825, pass_index=0, pos=3)
    assert build.passes == 0
    assert build.covered_seconds == 3 * 3600
    assert build.pool_seconds == 4 * 3600
    assert build.starts_at == WINDOW_START
    assert build.ends_at == WINDOW_START + timedelta(hours=3)


def test_resumed_build_continues_across_the_pass_seam() -> None:
    pool = [item(str(key)) for key in range(1000, 1004)]
    build = build_schedule(
        pool,
        ordering="SHUFFLE",
        channel_seed=77,
        start_at=WINDOW_START + timedelta(hours=3),
        window_seconds=3 * 3600,
        cursor=ScheduleCursor(pass_seed=860237825, pass_index=0, pos=3),
    )
    assert keys(build) == ["1001", "1001", "1002"]
    assert build.cursor == ScheduleCursor(pass_seed=860237825, pass_index=1, pos=2)
    assert build.passes == 1


def test_unwindowed_build_lays_whole_passes_until_seven_days() -> None:
    pool = [item(str(key)) for key in range(1000, 1004)]
    build = build_schedule(pool, ordering="SHUFFLE", channel_seed=77, start_at=WINDOW_START)
    assert len(build.entries) == 168
    assert build.passes == 42
    assert build.cursor == ScheduleCursor(pass_seed=860237825, pass_index=42, pos=0)
    assert build.covered_seconds == DEFAULT_HORIZON_SECONDS


def test_in_order_window_stops_mid_pass() -> None:
    pool = [episode(f"e{number}", minutes=22.5) for number in range(1, 6)]
    build = build_schedule(
        pool, ordering="IN_ORDER", channel_seed=1, start_at=WINDOW_START, window_seconds=3600
    )
    assert keys(build) == ["e1", "e2", "e3"]
    assert build.covered_seconds == 4_050
    assert build.cursor.pass_index == 0
    assert build.cursor.pos == 3


def test_in_order_resume_continues_at_the_next_item() -> None:
    pool = [episode(f"e{number}", minutes=22.5) for number in range(1, 6)]
    first = build_schedule(
        pool, ordering="IN_ORDER", channel_seed=1, start_at=WINDOW_START, window_seconds=3600
    )
    second = build_schedule(
        pool,
        ordering="IN_ORDER",
        channel_seed=1,
        start_at=first.ends_at or WINDOW_START,
        window_seconds=3600,
        cursor=first.cursor,
    )
    assert keys(second) == ["e4", "e5", "e1"]
    assert second.cursor == ScheduleCursor(pass_seed=first.cursor.pass_seed, pass_index=1, pos=1)


@pytest.mark.parametrize("pool", [[], [item("1", ms=0), item("2", ms=-5)]])
def test_empty_usable_pool_lays_nothing(pool: list[MediaItem]) -> None:
    build = build_schedule(pool, ordering="SHUFFLE", channel_seed=12345, start_at=NEW_YEAR)
    assert build.entries == ()
    assert (build.passes, build.pool_seconds, build.covered_seconds, build.bumper_count) == (
        0,
        0,
        0,
        0,
    )
    assert build.cursor == ScheduleCursor(pass_seed=3181013372, pass_index=0, pos=0)
    assert build.starts_at is None
    assert build.ends_at is None
    assert build.program_count == 0


def test_empty_pool_keeps_a_resumed_cursors_seed_but_resets_its_position() -> None:
    cursor = ScheduleCursor(pass_seed=42, pass_index=5, pos=3)
    build = build_schedule(
        [], ordering="IN_ORDER", channel_seed=1, start_at=NEW_YEAR, cursor=cursor
    )
    assert build.cursor == ScheduleCursor(pass_seed=42, pass_index=0, pos=0)


def test_zero_length_items_are_dropped_and_lengths_rounded() -> None:
    pool = [item("1", ms=0), item("2", ms=2_500), item("3", ms=400)]
    build = build_schedule(
        pool, ordering="IN_ORDER", channel_seed=1, start_at=NEW_YEAR, min_duration_seconds=1
    )
    assert [(entry.rating_key, entry.duration_seconds) for entry in build.entries] == [
        ("2", 3),
        ("3", 1),
    ]
    assert build.pool_seconds == 4


def test_start_is_floored_to_whole_seconds() -> None:
    build = build_schedule(
        [item("1")],
        ordering="IN_ORDER",
        channel_seed=1,
        start_at=NEW_YEAR + timedelta(milliseconds=900),
        window_seconds=1,
    )
    assert build.entries[0].starts_at == NEW_YEAR
    assert build.entries[0].starts_at.tzinfo is UTC


def test_stale_cursor_rolls_to_the_next_pass() -> None:
    pool = [item(str(key)) for key in range(1, 6)]
    build = build_schedule(
        pool,
        ordering="SHUFFLE",
        channel_seed=1,
        start_at=NEW_YEAR,
        window_seconds=7200,
        cursor=ScheduleCursor(pass_seed=4242, pass_index=3, pos=999),
    )
    next_pass = pass_order(pool, ordering="SHUFFLE", base_seed=4242, pass_index=4)
    assert keys(build) == [entry.rating_key for entry in next_pass[:2]]
    assert build.cursor == ScheduleCursor(pass_seed=4242, pass_index=4, pos=2)
    assert build.passes == 0


def test_negative_pos_is_clamped_to_the_start_of_the_pass() -> None:
    pool = [item(str(key)) for key in range(1, 6)]

    def resumed(pos: int) -> ScheduleBuild:
        return build_schedule(
            pool,
            ordering="SHUFFLE",
            channel_seed=1,
            start_at=NEW_YEAR,
            window_seconds=7200,
            cursor=ScheduleCursor(pass_seed=4242, pass_index=2, pos=pos),
        )

    assert resumed(-3) == resumed(0)


def test_entry_cap_stops_a_tiny_pool() -> None:
    pool = [item("1", ms=1_000), item("2", ms=1_000)]
    build = build_schedule(pool, ordering="IN_ORDER", channel_seed=1, start_at=NEW_YEAR)
    assert len(build.entries) == MAX_ENTRIES
    assert build.cursor.pass_index == MAX_ENTRIES // 2
    assert build.cursor.pos == 0


def test_entry_cap_is_tested_per_program_so_a_bumper_can_pass_it_by_one() -> None:
    pool = [item("1", ms=1_000), item("2", ms=1_000)]
    # One-second breaks keep 20,000 rows well short of the 7-day minimum, so the cap decides.
    plan = BumperPlan(
        interstitial_seconds=1, after_movie_seconds=1, after_episode_seconds=1, quick_seconds=1
    )
    build = build_schedule(
        pool, ordering="IN_ORDER", channel_seed=1, start_at=NEW_YEAR, bumpers=plan
    )
    assert len(build.entries) == MAX_ENTRIES + 1
    assert build.entries[-1].kind == "PROGRAM"


QUICK, AFTER_MOVIE, AFTER_EPISODE, DEFAULT = 10, 120, 30, 15


@pytest.mark.parametrize(
    ("previous", "following", "seconds"),
    [
        (episode("a", minutes=45), episode("b", minutes=45), QUICK),
        (episode("a", minutes=45, show="s1"), episode("b", minutes=45, show="s2"), AFTER_EPISODE),
        (episode("a", minutes=45, show=None), episode("b", minutes=45, show=None), AFTER_EPISODE),
        (item("m", ms=5 * 60_000), episode("b", minutes=10), AFTER_MOVIE),
        (item("m"), item("n"), AFTER_MOVIE),
        (item("x", ms=75 * 60_000, type="show"), item("n"), AFTER_MOVIE),
        (item("x", ms=75 * 60_000 - 1, type="show"), item("n"), DEFAULT),
        (item("x", ms=30 * 60_000, type="show"), episode("b", minutes=20), QUICK),
        (episode("a", minutes=45, show="s1"), episode("b", minutes=20, show="s2"), QUICK),
        (
            episode("a", minutes=45, show="s1"),
            episode("b", minutes=20.01, show="s2"),
            AFTER_EPISODE,
        ),
        (episode("a", minutes=45), item("m"), AFTER_EPISODE),
        (episode("a", minutes=45), item("m", ms=0, type="show"), AFTER_EPISODE),
    ],
)
def test_break_length_takes_the_first_rule_that_applies(
    previous: MediaItem, following: MediaItem, seconds: int
) -> None:
    assert BumperPlan().break_seconds(previous, following) == seconds


def test_break_length_uses_the_plan_and_never_drops_below_one_second() -> None:
    plan = BumperPlan(
        interstitial_seconds=0,
        after_movie_seconds=200,
        after_episode_seconds=40,
        quick_seconds=5,
        short_episode_minutes=30,
    )
    assert plan.break_seconds(item("m"), item("n")) == 200
    assert plan.break_seconds(episode("a", minutes=45, show="1"), episode("b", minutes=25)) == 5
    assert plan.break_seconds(item("x", ms=60_000, type="show"), item("n")) == 1


@pytest.mark.parametrize(
    ("mode", "enabled", "has_plan"),
    [
        ("INHERIT", True, True),
        ("FULL", True, True),
        ("INTERSTITIAL_ONLY", True, True),
        ("OFF", True, False),
        ("FULL", False, False),
    ],
)
def test_bumper_plan_is_none_when_off_or_disabled(mode: str, enabled: bool, has_plan: bool) -> None:
    config = BumperPlan(quick_seconds=7)
    plan = resolve_bumper_plan(mode, enabled=enabled, config=config)
    assert plan == (config if has_plan else None)
    assert resolve_bumper_plan(mode, enabled=enabled) == (BumperPlan() if has_plan else None)


def test_bumpers_sit_between_programs_and_introduce_the_next_one() -> None:
    pool = [item("m1"), episode("e1", minutes=45), episode("e2", minutes=45)]
    build = build_schedule(
        pool,
        ordering="IN_ORDER",
        channel_seed=1,
        start_at=NEW_YEAR,
        window_seconds=12_600,
        bumpers=BumperPlan(),
    )
    assert [(entry.kind, entry.rating_key, entry.target_rating_key) for entry in build.entries] == [
        ("PROGRAM", "m1", None),
        ("BUMPER", None, "e1"),
        ("PROGRAM", "e1", None),
        ("BUMPER", None, "e2"),
        ("PROGRAM", "e2", None),
        ("BUMPER", None, "m1"),
        ("PROGRAM", "m1", None),
    ]
    assert [entry.duration_seconds for entry in build.entries if entry.kind == "BUMPER"] == [
        AFTER_MOVIE,
        QUICK,
        AFTER_EPISODE,
    ]
    assert {entry.bumper_kind for entry in build.entries if entry.kind == "BUMPER"} == {
        "interstitial"
    }
    assert build.bumper_count == 3
    assert build.program_count == 4
    assert build.covered_seconds == 3600 + 120 + 2700 + 10 + 2700 + 30 + 3600


def test_a_resumed_build_does_not_start_with_a_bumper() -> None:
    pool = [item("1"), item("2"), item("3")]
    first = build_schedule(
        pool,
        ordering="IN_ORDER",
        channel_seed=1,
        start_at=NEW_YEAR,
        window_seconds=3600,
        bumpers=BumperPlan(),
    )
    second = build_schedule(
        pool,
        ordering="IN_ORDER",
        channel_seed=1,
        start_at=first.ends_at or NEW_YEAR,
        window_seconds=3600,
        cursor=first.cursor,
        bumpers=BumperPlan(),
    )
    assert [entry.kind for entry in second.entries] == ["PROGRAM"]
    assert second.entries[0].rating_key == "2"


def test_built_entries_equal_validated_ones_and_round_trip_through_json() -> None:
    pool = [item("1"), episode("2", minutes=30), episode("3", minutes=30)]
    build = build_schedule(
        pool,
        ordering="SHUFFLE",
        channel_seed=3,
        start_at=NEW_YEAR,
        window_seconds=6 * 3600,
        bumpers=BumperPlan(),
    )
    for entry in build.entries:
        validated = ScheduleEntry.model_validate(entry.model_dump())
        assert entry == validated
        assert entry.model_fields_set == validated.model_fields_set
        assert hash(entry) == hash(validated)
    assert ScheduleBuild.model_validate_json(build.model_dump_json()) == build


def test_copying_one_entry_leaves_the_others_alone() -> None:
    build = build_schedule(
        [item("1"), item("2")],
        ordering="IN_ORDER",
        channel_seed=1,
        start_at=NEW_YEAR,
        window_seconds=7200,
    )
    first, second = build.entries
    # The builder shares one fields-set between entries; an update naming something new must
    # land on the copy's own set, not on every entry.
    moved = first.model_copy(update={"duration_seconds": 5, "note": "moved"})
    assert moved.duration_seconds == 5
    assert "note" in moved.model_fields_set
    assert first.duration_seconds == 3600
    assert first.model_fields_set == set(ScheduleEntry.model_fields)
    assert second.model_fields_set == set(ScheduleEntry.model_fields)


def test_cursor_storage_keeps_the_seed_signed() -> None:
    cursor = ScheduleCursor(pass_seed=3181013372, pass_index=4, pos=17)
    stored = cursor_to_storage(cursor)
    assert stored == (-1113953924, 4, 17)
    assert cursor_from_storage(*stored) == cursor


@pytest.mark.parametrize(
    ("seed", "pass_index", "pos"),
    [(-1113953924, 0, 0), (None, 3, 2), (None, None, None), (17, None, None)],
)
def test_cursor_from_storage_reads_no_cursor(
    seed: int | None, pass_index: int | None, pos: int | None
) -> None:
    assert cursor_from_storage(seed, pass_index, pos) is None


def test_cursor_from_storage_accepts_a_mid_first_pass_cursor() -> None:
    assert cursor_from_storage(860237825, 0, 3) == ScheduleCursor(
        pass_seed=860237825, pass_index=0, pos=3
    )


@pytest.mark.parametrize(
    ("runway", "due"),
    [
        (timedelta(days=2), True),
        (timedelta(days=2, seconds=1), False),
        (timedelta(hours=12), True),
        (timedelta(hours=-3), True),
    ],
)
def test_extend_is_due_once_the_runway_is_at_most_two_days(runway: timedelta, due: bool) -> None:
    assert extend_needed(NEW_YEAR + runway, NEW_YEAR) is due


def test_constants_match_the_spec() -> None:
    assert INITIAL_WINDOW_SECONDS == 12 * 3600
    assert DEFAULT_HORIZON_SECONDS == 7 * 86_400
    assert EXTEND_THRESHOLD_SECONDS == 2 * 86_400
    assert HISTORY_KEPT_SECONDS == 6 * 3600
    assert MAX_ENTRIES == 20_000


durations = st.one_of(st.just(0), st.integers(300_000, MAX_ITEM_MS))


@st.composite
def pools(draw: st.DrawFn, min_size: int = 0) -> list[MediaItem]:
    count = draw(st.integers(min_size, 12))
    rating_keys = draw(
        st.lists(st.integers(1, 99_999), min_size=count, max_size=count, unique=True)
    )
    return [
        MediaItem(
            rating_key=str(key),
            type=draw(st.sampled_from(["movie", "episode", "show"])),
            title=str(key),
            duration_ms=draw(durations),
            show_rating_key=draw(st.sampled_from([None, "s1", "s2"])),
        )
        for key in rating_keys
    ]


orderings = st.sampled_from(["SHUFFLE", "IN_ORDER", "BY_AIR_DATE"])
# Hypothesis takes naive bounds and attaches the zone itself.
starts = st.datetimes(
    min_value=datetime(2020, 1, 1),
    max_value=datetime(2035, 1, 1),
    timezones=st.just(UTC),
)
seeds = st.integers(-(2**31), 2**31 - 1)
windows = st.integers(0, 2 * 86_400)
plans = st.sampled_from([None, BumperPlan()])
fast = settings(max_examples=60, deadline=None)


def usable_count(pool: list[MediaItem]) -> int:
    return sum(1 for entry in pool if entry.duration_ms > 0)


def assert_gapless_from(build: ScheduleBuild, start_at: datetime) -> None:
    if not build.entries:
        return
    assert build.entries[0].starts_at == start_at.replace(microsecond=0)
    for earlier, later in zip(build.entries, build.entries[1:], strict=False):
        assert later.starts_at == earlier.ends_at
    assert build.covered_seconds == sum(entry.duration_seconds for entry in build.entries)
    assert build.bumper_count == sum(1 for entry in build.entries if entry.kind == "BUMPER")


def assert_bumpers_introduce_programs(build: ScheduleBuild) -> None:
    if build.entries:
        assert build.entries[0].kind == "PROGRAM"
    for current, following in zip(build.entries, build.entries[1:], strict=False):
        if current.kind == "BUMPER":
            assert following.kind == "PROGRAM"
            assert current.target_rating_key == following.rating_key


@fast
@given(pools(), orderings, seeds, starts, windows, plans)
def test_windowed_build_is_gapless_and_covers_the_window_with_one_item_of_overshoot(
    pool: list[MediaItem],
    ordering: Ordering,
    seed: int,
    start_at: datetime,
    window: int,
    bumpers: BumperPlan | None,
) -> None:
    build = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=seed,
        start_at=start_at,
        window_seconds=window,
        bumpers=bumpers,
    )
    assert_gapless_from(build, start_at)
    assert_bumpers_introduce_programs(build)
    if usable_count(pool) == 0 or window == 0:
        assert build.entries == ()
        return
    assert build.covered_seconds >= window
    last_item = build.entries[-1].duration_seconds
    if len(build.entries) > 1 and build.entries[-2].kind == "BUMPER":
        last_item += build.entries[-2].duration_seconds
    assert build.covered_seconds - last_item < window


@fast
@given(pools(), orderings, seeds, starts, windows, plans)
def test_full_build_lays_whole_passes_until_the_minimum(
    pool: list[MediaItem],
    ordering: Ordering,
    seed: int,
    start_at: datetime,
    minimum: int,
    bumpers: BumperPlan | None,
) -> None:
    build = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=seed,
        start_at=start_at,
        min_duration_seconds=minimum,
        bumpers=bumpers,
    )
    assert_gapless_from(build, start_at)
    assert_bumpers_introduce_programs(build)
    size = usable_count(pool)
    if size == 0 or minimum == 0:
        assert build.entries == ()
        return
    assert build.covered_seconds >= minimum
    assert build.cursor.pos == 0
    assert build.cursor.pass_index == build.passes
    assert build.program_count == build.passes * size
    usable_keys = sorted(entry.rating_key for entry in pool if entry.duration_ms > 0)
    played = keys(build)
    for start in range(0, len(played), size):
        assert sorted(played[start : start + size]) == usable_keys


@fast
@given(pools(), orderings, seeds, starts, windows, plans)
def test_same_inputs_give_the_same_schedule(
    pool: list[MediaItem],
    ordering: Ordering,
    seed: int,
    start_at: datetime,
    window: int,
    bumpers: BumperPlan | None,
) -> None:
    def build() -> ScheduleBuild:
        return build_schedule(
            pool,
            ordering=ordering,
            channel_seed=seed,
            start_at=start_at,
            window_seconds=window,
            bumpers=bumpers,
        )

    assert build() == build()


@fast
@given(pools(), seeds, starts, windows, st.randoms(use_true_random=False))
def test_shuffle_ignores_the_order_plex_returned(
    pool: list[MediaItem], seed: int, start_at: datetime, window: int, rng: random.Random
) -> None:
    shuffled = list(pool)
    rng.shuffle(shuffled)
    first, second = (
        build_schedule(
            candidate,
            ordering="SHUFFLE",
            channel_seed=seed,
            start_at=start_at,
            window_seconds=window,
        )
        for candidate in (pool, shuffled)
    )
    assert first == second


@fast
@given(pools(), orderings, seeds, starts, windows, windows, plans)
def test_windowed_build_plus_resumed_extension_matches_one_uncapped_build(
    pool: list[MediaItem],
    ordering: Ordering,
    seed: int,
    start_at: datetime,
    first_window: int,
    second_window: int,
    bumpers: BumperPlan | None,
) -> None:
    first = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=seed,
        start_at=start_at,
        window_seconds=first_window,
        bumpers=bumpers,
    )
    extension = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=seed,
        start_at=first.ends_at or start_at,
        window_seconds=second_window,
        cursor=first.cursor,
        bumpers=bumpers,
    )
    # Enough horizon that the uncapped build lays at least every program of both builds.
    slack = 3 * (MAX_ITEM_MS // 1000 + MAX_BUMPER_SECONDS)
    uncapped = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=seed,
        start_at=start_at,
        min_duration_seconds=first_window + second_window + slack,
        bumpers=bumpers,
    )
    assert extension.cursor.pass_seed == first.cursor.pass_seed
    assert_bumpers_introduce_programs(extension)
    joined = keys(first) + keys(extension)
    assert keys(uncapped)[: len(joined)] == joined
    if bumpers is None:
        # Without bumpers the seam adds nothing, so the rows themselves line up too.
        assert uncapped.entries[: len(joined)] == first.entries + extension.entries


@fast
@given(pools(min_size=1), orderings, seeds, starts, st.integers(0, 50), st.integers(1, 86_400))
def test_stale_cursor_still_yields_entries_with_the_pass_advanced(
    pool: list[MediaItem],
    ordering: Ordering,
    seed: int,
    start_at: datetime,
    pass_index: int,
    window: int,
) -> None:
    size = usable_count(pool)
    cursor = ScheduleCursor(pass_seed=to_unsigned32(seed), pass_index=pass_index, pos=size + 3)
    build = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=seed,
        start_at=start_at,
        window_seconds=window,
        cursor=cursor,
    )
    if size == 0:
        assert build.entries == ()
        return
    assert build.entries
    assert build.cursor.pass_index >= pass_index + 1
    expected_first = pass_order(
        pool, ordering=ordering, base_seed=cursor.pass_seed, pass_index=pass_index + 1
    )[0]
    assert build.entries[0].rating_key == expected_first.rating_key
