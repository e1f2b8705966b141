"""Extend, repair, backfill, prune and the guide against PostgreSQL and the Plex emulator."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from lxml import etree

from airwave_dagster.cli.guide import guide_command, guide_xml
from airwave_dagster.domain.schedule import build_schedule, channel_seed
from resources import tables as t
from resources.plex import PlexClient
from resources.stores.channels import AirwaveStore
from resources.stores.maintenance import ChannelPlan, MaintenanceStore
from tests.domain.test_maintenance import DTD
from tests.support.maintenance import (
    add_channel,
    assert_gapless,
    genre_filter,
    lay_window,
    now_utc,
    rows_of,
    show_filter,
)

pytestmark = [pytest.mark.postgres, pytest.mark.plex]

DAY = 86_400


@pytest.fixture
def source(store: AirwaveStore, plex_client: PlexClient) -> str:
    return store.sync_source(plex_client.base_url, plex_client.libraries())


@pytest.fixture
def maintenance(store: AirwaveStore) -> MaintenanceStore:
    return MaintenanceStore(store)


def _resolve(
    maintenance: MaintenanceStore, client: PlexClient, channel_id: str
) -> tuple[ChannelPlan, list[Any]]:
    plan = maintenance.channel_plan(channel_id)
    return plan, client.resolve_pool(list(plan.definitions), sort=plan.sort)


def _programs(rows: list[Any]) -> list[str]:
    return [row.rating_key for row in rows if row.kind == "PROGRAM"]


def test_extend_continues_the_pass_across_the_seam_and_keeps_the_runway(
    store, source, maintenance, plex_client
) -> None:
    channel = add_channel(store, source, 101, genre_filter("Comedy"))
    plan, pool = _resolve(maintenance, plex_client, channel)
    now = now_utc()
    window = lay_window(store, source, channel, pool, now)
    cursor_before = store.schedule_cursor(channel)

    outcome = maintenance.extend(plan, pool, now)

    assert outcome.status == "extended"
    rows = rows_of(store, channel)
    assert_gapless(rows)
    tail = rows[-1].starts_at + timedelta(seconds=rows[-1].duration_seconds)
    assert tail - now >= timedelta(days=7)
    assert outcome.runway_seconds is not None and outcome.runway_seconds >= 2 * DAY
    # The window's rows are untouched and the extension picks up right where the cursor was.
    assert [r.starts_at for r in rows[: len(window.entries)]] == [
        e.starts_at for e in window.entries
    ]
    assert cursor_before is not None and cursor_before.pos > 0
    whole = build_schedule(
        pool,
        ordering="SHUFFLE",
        channel_seed=channel_seed(channel),
        start_at=now,
        min_duration_seconds=int((tail - now).total_seconds()),
    )
    assert _programs(rows) == [e.rating_key for e in whole.entries][: len(_programs(rows))]
    assert outcome.rows_added == len(rows) - len(window.entries)

    again = maintenance.extend(plan, pool, now)
    assert again.status == "not-due"
    assert len(rows_of(store, channel)) == len(rows)


def test_extend_prunes_history_in_the_same_transaction(
    store, source, maintenance, plex_client
) -> None:
    channel = add_channel(store, source, 102, genre_filter("Drama"))
    plan, pool = _resolve(maintenance, plex_client, channel)
    now = now_utc()
    lay_window(store, source, channel, pool, now - timedelta(hours=30), window_seconds=31 * 3600)
    before = rows_of(store, channel)

    outcome = maintenance.extend(plan, pool, now)

    rows = rows_of(store, channel)
    assert outcome.status == "extended" and outcome.rows_removed > 0
    assert len(before) - outcome.rows_removed + outcome.rows_added == len(rows)
    cutoff = now - timedelta(hours=6)
    for row in rows:
        ends = row.starts_at + timedelta(seconds=row.duration_seconds)
        assert row.starts_at >= cutoff or ends > now
    assert_gapless(rows)


def test_two_extends_at_once_write_one_extension(
    clean_db, store, source, maintenance, plex_client
) -> None:
    channel = add_channel(store, source, 103, genre_filter("Action"))
    plan, pool = _resolve(maintenance, plex_client, channel)
    now = now_utc()
    lay_window(store, source, channel, pool, now)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def extend() -> None:
        # Separate engines: two processes' worth of connections, not one shared session.
        own = MaintenanceStore(AirwaveStore(sa.create_engine(clean_db)))
        barrier.wait()
        try:
            outcomes.append(own.extend(plan, pool, now).status)
        except BaseException as error:
            errors.append(error)
        finally:
            own.engine.dispose()

    threads = [threading.Thread(target=extend) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sorted(outcomes) == ["extended", "not-due"]
    assert_gapless(rows_of(store, channel))


def test_an_empty_pool_keeps_the_old_rows(store, source, maintenance, plex_client) -> None:
    channel = add_channel(store, source, 104, genre_filter("Comedy"))
    plan, pool = _resolve(maintenance, plex_client, channel)
    now = now_utc()
    lay_window(store, source, channel, pool, now)
    before = rows_of(store, channel)

    outcome = maintenance.extend(plan, [], now)

    assert outcome.status == "empty-pool"
    assert rows_of(store, channel) == before


def test_repair_replaces_only_from_the_first_bad_upcoming_row(
    store, source, maintenance, plex_client
) -> None:
    channel = add_channel(store, source, 105, genre_filter("Drama"), bumper_mode="INHERIT")
    plan, pool = _resolve(maintenance, plex_client, channel)
    now = now_utc()
    lay_window(store, source, channel, pool, now, bumpers=None)
    maintenance.extend(plan, pool, now)
    rows = rows_of(store, channel)
    victim = next(
        r for r in rows[12:] if r.kind == "PROGRAM" and r.starts_at >= now + timedelta(minutes=5)
    )
    first_bad = next(
        i
        for i, r in enumerate(rows)
        if r.starts_at >= now + timedelta(minutes=5)
        and victim.media_item_id in (r.media_item_id, r.target_media_item_id)
    )
    # With bumpers on, the bumper introducing the victim goes first: the repair starts there.
    assert rows[first_bad].kind == "BUMPER"
    with store.transaction() as conn:
        conn.execute(
            t.media_item.update()
            .where(t.media_item.c.id == victim.media_item_id)
            .values(available=False)
        )
    assert maintenance.channels_to_repair(now, 10) == [channel]
    remaining = [item for item in pool if item.rating_key != victim.rating_key]

    outcome = maintenance.repair(plan, remaining, now)

    after = rows_of(store, channel)
    assert outcome.status == "repaired"
    keep = [(r.starts_at, r.kind, r.rating_key) for r in rows[:first_bad]]
    assert [(r.starts_at, r.kind, r.rating_key) for r in after[:first_bad]] == keep
    assert after[first_bad].starts_at == rows[first_bad].starts_at
    assert after[first_bad].kind == "PROGRAM"  # a fresh build never opens with a bumper
    assert victim.rating_key not in _programs(after[first_bad:])
    assert_gapless(after)
    assert maintenance.channels_to_repair(now, 10) == []
    assert maintenance.repair(plan, remaining, now).status == "not-due"


def test_backfill_lays_a_window_for_channels_without_rows_oldest_first(
    store, source, maintenance, plex_client
) -> None:
    now = now_utc()
    newer = add_channel(store, source, 106, genre_filter("Comedy"), created_at=now)
    older = add_channel(
        store, source, 107, genre_filter("Drama"), created_at=now - timedelta(days=1)
    )
    add_channel(store, source, 108, genre_filter("Action"), enabled=False)
    scheduled = add_channel(store, source, 109, genre_filter("Action"))
    lay_window(store, source, scheduled, _resolve(maintenance, plex_client, scheduled)[1], now)

    assert maintenance.channels_to_backfill(25) == [older, newer]
    assert maintenance.channels_to_backfill(1) == [older]
    plan, pool = _resolve(maintenance, plex_client, older)
    outcome = maintenance.backfill(plan, pool, now)

    assert outcome.status == "backfilled"
    assert outcome.runway_seconds is not None and outcome.runway_seconds >= 12 * 3600
    assert_gapless(rows_of(store, older))
    assert maintenance.backfill(plan, pool, now).status == "not-due"
    assert maintenance.channels_to_backfill(25) == [newer]


def test_prune_removes_only_finished_history(store, source, maintenance, plex_client) -> None:
    channel = add_channel(store, source, 110, genre_filter("Comedy"))
    pool = _resolve(maintenance, plex_client, channel)[1]
    now = now_utc()
    lay_window(store, source, channel, pool, now - timedelta(hours=20), window_seconds=24 * 3600)
    before = rows_of(store, channel)
    old = [r for r in before if r.starts_at < now - timedelta(hours=6)]

    assert maintenance.prune(now) == len(old)
    assert rows_of(store, channel) == [r for r in before if r not in old]
    assert maintenance.prune(now) == 0


def test_guide_lists_enabled_channels_programmes_and_validates(
    clean_db, store, source, maintenance, plex_client
) -> None:
    episodes = plex_client.resolve({"mediaTypes": ["show"]})
    show = episodes[0].show_title
    assert show
    channel = add_channel(store, source, 111, show_filter(show), bumper_mode="INHERIT")
    hidden = add_channel(store, source, 112, genre_filter("Comedy"), enabled=False)
    now = now_utc()
    pool = _resolve(maintenance, plex_client, channel)[1]
    lay_window(store, source, channel, pool, now - timedelta(hours=1), bumpers=None)
    lay_window(store, source, hidden, _resolve(maintenance, plex_client, hidden)[1], now)

    channels, programmes = maintenance.guide(now, now + timedelta(hours=6))

    assert [c.number for c in channels] == [111]
    assert programmes and {p.channel_number for p in programmes} == {111}
    assert programmes[0].start <= now < programmes[0].stop
    assert all(p.start < now + timedelta(hours=6) for p in programmes)
    assert programmes[0].title == show and programmes[0].season is not None

    document = guide_xml(clean_db, 6, now=now)
    tree = etree.fromstring(document)
    dtd = etree.DTD(str(DTD))
    assert dtd.validate(tree), dtd.error_log.filter_from_errors()
    assert len(tree.findall("programme")) == len(programmes)
    assert tree.find("programme/episode-num") is not None


def test_guide_command_refuses_bad_hours_and_missing_folders(tmp_path) -> None:
    runner = CliRunner()
    result = runner.invoke(guide_command, ["--hours", "0"])
    assert result.exit_code == 2 and "--hours" in result.output
    result = runner.invoke(
        guide_command, ["--hours", "6", "--output", str(tmp_path / "missing" / "g.xml")]
    )
    assert result.exit_code == 2 and "does not exist" in result.output
    with pytest.raises(ValueError, match="between 1 and"):
        guide_xml("postgresql+psycopg2://unused/none", 100_000)


def test_a_channel_disabled_after_planning_is_left_alone(
    store, source, maintenance, plex_client
) -> None:
    channel = add_channel(store, source, 113, genre_filter("Comedy"))
    plan, pool = _resolve(maintenance, plex_client, channel)
    now = now_utc()
    lay_window(store, source, channel, pool, now)
    before = rows_of(store, channel)
    with store.transaction() as conn:
        conn.execute(t.channel.update().where(t.channel.c.id == channel).values(enabled=False))

    outcome = maintenance.extend(plan, pool, now)

    assert outcome.status == "not-due" and "disabled" in (outcome.detail or "")
    assert rows_of(store, channel) == before
    assert maintenance.channels_with_rows() == []
