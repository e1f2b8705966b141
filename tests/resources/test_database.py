"""The repository against a real Postgres: idempotent writes, conflicts, schedules, traces."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from airwave_dagster.domain.import_plan import InstanceState, plan_import
from airwave_dagster.domain.library import Library, MediaItem
from airwave_dagster.domain.lineup_file import parse_lineup
from airwave_dagster.domain.schedule import build_schedule
from resources import tables as t
from resources.stores.claims import Claimant
from resources.stores.rows import TRACE_JSON_LIMIT
from tests.support import lineups
from tests.support.channels import create_channel

pytestmark = pytest.mark.postgres

LIBRARIES = (
    Library(key="1", title="Movies", type="movie"),
    Library(key="2", title="TV", type="show"),
)


def _plan(store, data: dict):
    lineup = parse_lineup(json.dumps(data).encode(), source="test.json")
    return plan_import(lineup, store.instance_state(LIBRARIES))


def _source(store) -> str:
    return store.sync_source("http://plex.test:32400", LIBRARIES)


def test_instance_signatures_equal_the_planners(store, stores) -> None:
    source = _source(store)
    plan = _plan(store, lineups.genre_lineup(3))
    ids = store.ensure_packages(plan.packages).ids
    for planned in plan.creates():
        create_channel(
            stores, planned, source_id=source, package_id=ids[planned.package_key], run_id="r1"
        )

    again = _plan(store, lineups.genre_lineup(3))

    assert [c.action for c in again.channels] == ["skip-duplicate"] * 3
    # The existing package of the skipped channels is listed as reused (the report counts it).
    assert [(p.key, p.action) for p in again.packages] == [("genres", "reuse")]


def test_a_channel_another_import_is_building_counts_as_that_channel(store, stores) -> None:
    """Two imports of one channel at once: while the first holds the claim (its row written,
    its definitions not yet), the second's plan sees that channel, not "another channel" on
    its number that would push it to a second, reassigned copy."""
    source = _source(store)
    (planned,) = _plan(store, lineups.genre_lineup(1)).creates()
    building = Claimant(run_id="r1", step_key="build_channel[ch_101]", attempt=1)
    outcome = stores.claims.claim(
        number=planned.assigned_number,
        claimant=building,
        signature=planned.signature,
        values=store.channel_values(planned, source_id=source, package_id=None),
    )
    assert outcome.kind == "claimed"

    during = _plan(store, lineups.genre_lineup(1))

    assert [c.action for c in during.channels] == ["skip-duplicate"]
    assert during.creates() == ()
    # A different channel on that number is still "another channel": reassigned, not skipped.
    other = lineups.genre_lineup(1)
    other["channels"][0]["name"] = "Something else"
    (moved,) = _plan(store, other).creates()
    assert moved.number_reassigned and moved.assigned_number != planned.assigned_number


def test_packages_are_upserted_by_key(store) -> None:
    plan = _plan(store, lineups.genre_lineup(1))

    first = store.ensure_packages(plan.packages)
    second = store.ensure_packages(plan.packages)

    assert first.created == ("genres",) and first.reused == ()
    assert second.created == () and second.reused == ("genres",)
    assert first.ids == second.ids


def test_a_taken_number_is_adopted_only_for_the_same_channel(store, stores) -> None:
    source = _source(store)
    plan = _plan(store, lineups.genre_lineup(2))
    first, second = plan.creates()
    created = create_channel(stores, first, source_id=source, package_id=None, run_id="r1")

    retry = create_channel(stores, first, source_id=source, package_id=None, run_id="r1")
    other = second.model_copy(update={"assigned_number": first.assigned_number})
    clash = create_channel(stores, other, source_id=source, package_id=None, run_id="r2")

    assert created.status == "created"
    assert (retry.status, retry.channel_id) == ("existing", created.channel_id)
    assert clash.status == "conflict" and clash.channel_id is None
    assert str(first.assigned_number) in (clash.detail or "")
    assert store.counts()["channels"] == 1


def test_schedule_write_replaces_rows_and_stores_the_cursor(store, stores) -> None:
    source = _source(store)
    planned = _plan(store, lineups.genre_lineup(1)).creates()[0]
    channel_id = create_channel(
        stores, planned, source_id=source, package_id=None, run_id="r1"
    ).channel_id
    pool = [
        MediaItem(rating_key=str(k), type="movie", title=f"Film {k}", duration_ms=5_400_000)
        for k in range(1, 30)
    ]
    start = datetime(2026, 11, 30, 12, tzinfo=UTC)
    build = build_schedule(
        pool, ordering="SHUFFLE", channel_seed=7, start_at=start, window_seconds=43_200
    )

    assert store.write_schedule(
        channel_id, source_id=source, shuffle_seed=7, build=build, pool=pool, bumper_rev=0
    ) == len(build.entries)
    rows = store.write_schedule(
        channel_id, source_id=source, shuffle_seed=7, build=build, pool=pool, bumper_rev=0
    )

    with store.engine.connect() as conn:
        stored = conn.execute(
            sa.select(t.schedule_item.c.rating_key, t.schedule_item.c.media_item_id)
            .where(t.schedule_item.c.channel_id == channel_id)
            .order_by(t.schedule_item.c.starts_at)
        ).all()
    assert len(stored) == rows == len(build.entries)
    assert [r.rating_key for r in stored] == [e.rating_key for e in build.entries]
    assert all(r.media_item_id is not None for r in stored)
    assert store.counts()["media_items"] == len({e.rating_key for e in build.entries})
    # The cursor survives its signed 32-bit storage, so an extension continues this pass.
    assert store.schedule_cursor(channel_id) == build.cursor


def test_trace_payloads_are_capped_and_failures_swallowed(store) -> None:
    store.record_trace(
        run_id="r1",
        step_name="report",
        phase="report",
        status="ok",
        output={"big": "x" * (TRACE_JSON_LIMIT + 1)},
    )
    # A broken row (unknown column) must not raise: tracing never fails a step.
    store.record_trace(run_id="r1", step_name="report", phase="report", status="ok", nope=1)

    (row,) = store.traces("r1")
    assert row["output"]["truncated"] is True
    assert row["output"]["chars"] > TRACE_JSON_LIMIT
    assert len(row["output"]["preview"]) == 2000


def test_instance_state_reads_numbers_and_keys(store, stores) -> None:
    source = _source(store)
    plan = _plan(store, lineups.genre_lineup(2, first_number=700, package="p"))
    store.ensure_packages(plan.packages)
    for planned in plan.creates():
        create_channel(stores, planned, source_id=source, package_id=None, run_id="r")

    state = store.instance_state(LIBRARIES)

    assert isinstance(state, InstanceState)
    assert state.channel_numbers == frozenset({700, 701})
    assert state.package_keys == frozenset({"p"})
    assert len(state.channel_signatures) == 2


def test_schedule_gap_fill_is_create_only_and_links_episodes_to_existing_shows(store) -> None:
    """docs/reference/airwave-database.md §5.4 step 3: rows already there are Airwave's metadata.

    A movie row written earlier (by Airwave's metadata sync, with artwork the project's listing
    lacks) keeps its id and guide; a new episode row points at its show's existing row, and a
    show without one gets a row first; the new rows' guides are camelCase GuideMeta without
    null or empty values.
    """
    source = _source(store)
    m = t.media_item.c
    with store.engine.begin() as conn:
        conn.execute(
            t.media_item.insert(),
            [
                {
                    "id": "airwave-movie",
                    "media_source_id": source,
                    "rating_key": "11",
                    "type": "movie",
                    "title": "Synced by Airwave",
                    "duration_ms": 1,
                    "guide": {"title": "Synced by Airwave", "durationMs": 1, "art": "/a/1"},
                },
                {
                    "id": "airwave-show",
                    "media_source_id": source,
                    "rating_key": "500",
                    "type": "show",
                    "title": "The Show",
                    "duration_ms": 0,
                    "guide": {"title": "The Show", "durationMs": 0, "genres": ["Drama"]},
                },
            ],
        )
    pool = [
        MediaItem(rating_key="11", type="movie", title="Film", duration_ms=5_400_000),
        MediaItem(
            rating_key="12",
            type="episode",
            title="Pilot",
            duration_ms=1_800_000,
            show_title="The Show",
            show_rating_key="500",
            season=1,
            episode=1,
            genres=(),
        ),
        MediaItem(
            rating_key="13",
            type="episode",
            title="Cold Open",
            duration_ms=1_500_000,
            show_title="Rowless",
            show_rating_key="600",
            genres=("Comedy",),
        ),
    ]
    with store.engine.begin() as conn:
        ids = store.media_item_ids(conn, source, pool)

    with store.engine.connect() as conn:
        rows = {
            r.rating_key: r
            for r in conn.execute(sa.select(t.media_item).where(m.media_source_id == source))
        }
    assert ids["11"] == "airwave-movie"
    assert rows["11"].title == "Synced by Airwave" and rows["11"].guide["art"] == "/a/1"
    episode = rows["12"]
    assert ids["12"] == episode.id and episode.parent_id == "airwave-show"
    assert episode.type == "episode" and episode.duration_ms == 1_800_000
    assert episode.guide == {
        "title": "Pilot",
        "type": "episode",
        "durationMs": 1_800_000,
        "showTitle": "The Show",
        "showRatingKey": "500",
        "season": 1,
        "episode": 1,
    }
    # A show no sync stored yet gets its row from what its episodes carry, create-only.
    assert rows["600"].type == "show" and rows["600"].title == "Rowless"
    assert rows["600"].guide == {
        "title": "Rowless",
        "type": "show",
        "durationMs": 0,
        "genres": ["Comedy"],
    }
    assert rows["13"].parent_id == rows["600"].id
    assert rows["500"].guide == {"title": "The Show", "durationMs": 0, "genres": ["Drama"]}
