"""The library snapshot, and following it: a Plex change reaches only the channels it touches."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.domain.maintenance import next_seam
from airwave_dagster.emulators.plex import EmulatedLibrary, start_emulator
from ops.library_assets import plex_library
from ops.maintenance import follow_library
from resources import tables as t
from resources.database import DatabaseResource
from resources.io_manager import PostgresJsonIOManager
from resources.plex import PlexClient, PlexResource, PlexUnavailableError
from resources.stores.channels import AirwaveStore
from resources.stores.library import EmptyLibraryError, sync_library
from resources.stores.maintenance import MaintenanceStore
from tests.support.maintenance import (
    add_channel,
    assert_gapless,
    changed_library,
    now_utc,
    rows_of,
    show_filter,
)

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]

NEW_KEY = 990_001


class Server:
    """The emulator at one address, restartable with another library (Plex after a scan)."""

    def __init__(self, library: EmulatedLibrary) -> None:
        self.handle = start_emulator(library=library)
        self.url = self.handle.url
        self.token = self.handle.token

    def restart(self, library: EmulatedLibrary) -> None:
        port = self.handle.port
        self.handle.stop()
        self.handle = start_emulator(library=library, port=port)

    def client(self) -> PlexClient:
        return PlexClient(self.url, self.token)

    def resource(self) -> PlexResource:
        return PlexResource(base_url=self.url, token=self.token)


@pytest.fixture
def server(small_library: EmulatedLibrary) -> Iterator[Server]:
    running = Server(small_library)
    yield running
    running.handle.stop()


def _items(store: AirwaveStore) -> dict[str, bool]:
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(t.media_item.c.rating_key, t.media_item.c.available))
        return {row.rating_key: row.available for row in rows}


def _show(library: EmulatedLibrary, title: str) -> tuple[str, list[int]]:
    show = next(s for s in library.shows() if s.title == title)
    return show.title, list(library.leaves[show.rating_key])


def _resources(database_url: str, server: Server) -> dict[str, Any]:
    database = DatabaseResource(url=database_url)
    return {
        "database": database,
        "plex": server.resource(),
        "io_manager": PostgresJsonIOManager(database=database),
    }


def _scheduled(maintenance: MaintenanceStore, client: PlexClient, channel: str) -> None:
    plan = maintenance.channel_plan(channel)
    pool = client.resolve_pool(list(plan.definitions), sort=plan.sort)
    now = now_utc()
    assert maintenance.backfill(plan, pool, now).status == "backfilled"
    assert maintenance.extend(plan, pool, now).status == "extended"


def test_sync_mirrors_the_library_and_an_outage_changes_nothing(store, server) -> None:
    first = sync_library(store, server.client())
    assert first.items == 120 and len(first.added) == 120 and first.changed
    again = sync_library(store, server.client())
    assert not again.changed and again.items == 120
    snapshot = _items(store)

    server.handle.stop()
    with pytest.raises(PlexUnavailableError, match="PLEX_URL"):
        sync_library(store, server.client())
    assert _items(store) == snapshot

    server.restart(server.handle.library)
    server.handle.configure(fail_all=True)
    with pytest.raises(PlexUnavailableError):
        sync_library(store, server.client())
    assert _items(store) == snapshot
    assert all(snapshot.values())


def test_an_empty_answer_is_refused_unless_allowed(store, server, small_library) -> None:
    sync_library(store, server.client())
    empty = dataclasses.replace(
        small_library, by_section_type={key: [] for key in small_library.by_section_type}
    )
    server.restart(empty)
    with pytest.raises(EmptyLibraryError, match="probable outage"):
        sync_library(store, server.client())
    assert all(_items(store).values())
    result = sync_library(store, server.client(), allow_empty=True)
    assert len(result.removed) == 120 and not any(_items(store).values())


def test_the_asset_materializes_and_fails_cleanly_when_plex_is_down(
    clean_db, store, server, dagster_instance
):
    result = dg.materialize(
        [plex_library], resources=_resources(clean_db, server), instance=dagster_instance
    )
    assert result.success
    metadata = result.asset_materializations_for_node("plex_library")[0].metadata
    assert metadata["changed"].value is True and metadata["items"].value == 120
    snapshot = _items(store)

    server.handle.configure(fail_all=True)
    failed = dg.materialize(
        [plex_library],
        resources=_resources(clean_db, server),
        raise_on_error=False,
        instance=dagster_instance,
    )
    assert not failed.success
    failure = next(e for e in failed.all_events if e.event_type_value == "STEP_FAILURE")
    assert "changed nothing" in str(failure.event_specific_data.error)
    assert server.token not in str(failure.event_specific_data.error)
    assert _items(store) == snapshot


def test_a_library_change_reaches_only_the_channels_whose_pool_changed(
    clean_db, store, server, small_library, dagster_instance
) -> None:
    maintenance = MaintenanceStore(store)
    sync_library(store, server.client())
    source = store.find_source(server.url)
    assert source is not None
    # Two shows of the seed-11 library (renamed when the dataset became correlated, issue 10).
    followed, episodes = _show(small_library, "Fischer & Nováková")
    other, _ = _show(small_library, "The Fallen Pilgrim Gang")
    channel = add_channel(store, source, 201, show_filter(followed))
    bystander = add_channel(store, source, 202, show_filter(other), bumper_mode="INHERIT")
    for each in (channel, bystander):
        _scheduled(maintenance, server.client(), each)
    bystander_rows = rows_of(store, bystander)
    before = rows_of(store, channel)

    # 1. A new episode of the followed show: the current pass plays out, the next one has it.
    added = changed_library(
        small_library, remove=[], add_like=[(episodes[0], NEW_KEY, "Brand New Episode")]
    )
    server.restart(added)
    assert sync_library(store, server.client()).added == (str(NEW_KEY),)
    seam = next_seam(maintenance.pass_marks(channel), now_utc() + timedelta(minutes=5))
    assert seam is not None

    run = follow_library.execute_in_process(
        resources=_resources(clean_db, server), instance=dagster_instance
    )

    assert run.success
    summary = run.output_for_node("summarize_follow")
    assert (summary.relaid, summary.failed, summary.checked) == (1, 0, 2)
    after = rows_of(store, channel)
    kept = [r for r in before if r.starts_at < seam.starts_at]
    assert [(r.starts_at, r.rating_key) for r in after[: len(kept)]] == [
        (r.starts_at, r.rating_key) for r in kept
    ]
    assert str(NEW_KEY) not in {r.rating_key for r in kept}
    next_pass = [r.rating_key for r in after[len(kept) :]][: len(episodes) + 1]
    assert sorted(next_pass) == sorted([*map(str, episodes), str(NEW_KEY)])
    assert_gapless(after)
    assert rows_of(store, bystander) == bystander_rows

    # 2. An episode deleted from Plex: unavailable in the snapshot, gone from upcoming rows.
    gone = episodes[1]
    removed = changed_library(added, remove=[gone], add_like=[])
    server.restart(removed)
    assert sync_library(store, server.client()).removed == (str(gone),)
    assert _items(store)[str(gone)] is False

    run = follow_library.execute_in_process(
        resources=_resources(clean_db, server), instance=dagster_instance
    )

    assert run.success
    assert run.output_for_node("summarize_follow").repaired == 1
    upcoming = [
        r for r in rows_of(store, channel) if r.starts_at >= now_utc() + timedelta(minutes=5)
    ]
    assert upcoming and str(gone) not in {r.rating_key for r in upcoming}
    assert str(NEW_KEY) in {r.rating_key for r in upcoming}
    assert_gapless(rows_of(store, channel))
    assert rows_of(store, bystander) == bystander_rows

    # 3. Nothing changed: following again touches nobody.
    run = follow_library.execute_in_process(
        resources=_resources(clean_db, server), instance=dagster_instance
    )
    summary = run.output_for_node("summarize_follow")
    assert (summary.relaid, summary.repaired, summary.rows_added) == (0, 0, 0)
