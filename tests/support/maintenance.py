"""Fixtures for schedule maintenance: channels written straight to the database, small libraries."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from airwave_dagster.domain.schedule import ScheduleBuild, build_schedule, channel_seed
from airwave_dagster.emulators.plex import EmulatedLibrary, build_library, start_emulator
from resources import tables as t
from resources.stores.channels import AirwaveStore
from resources.stores.rows import new_id

SMALL_LIBRARY_ITEMS = 120
SMALL_LIBRARY_SEED = 11


def show_filter(show_title: str) -> dict[str, Any]:
    """A filter envelope matching the episodes of one show (title contains, on TV libraries)."""
    return {
        "mediaTypes": ["show"],
        "filter": {"type": "condition", "field": "title", "op": "contains", "value": show_title},
    }


def genre_filter(genre: str) -> dict[str, Any]:
    """A filter envelope matching movies of one genre."""
    return {
        "mediaTypes": ["movie"],
        "filter": {"type": "condition", "field": "genre", "op": "is", "value": genre},
    }


def add_channel(
    store: AirwaveStore,
    source_id: str,
    number: int,
    plex_filter: dict[str, Any] | None,
    *,
    ordering: str = "SHUFFLE",
    bumper_mode: str = "OFF",
    enabled: bool = True,
    created_at: datetime | None = None,
) -> str:
    """Insert a channel with one PREDICATE definition, as an import would leave it."""
    channel_id = new_id()
    with store.transaction() as conn:
        conn.execute(
            t.channel.insert().values(
                id=channel_id,
                number=number,
                name=f"Channel {number}",
                callsign=f"AW{number}",
                enabled=enabled,
                ordering=ordering,
                bumper_mode=bumper_mode,
                media_source_id=source_id,
                **({"created_at": created_at} if created_at else {}),
            )
        )
        if plex_filter is not None:
            conn.execute(
                t.channel_definition.insert().values(
                    id=new_id(),
                    channel_id=channel_id,
                    kind="PREDICATE",
                    mode="INCLUDE",
                    plex_filter=plex_filter,
                )
            )
    return channel_id


def lay_window(
    store: AirwaveStore,
    source_id: str,
    channel_id: str,
    pool: list[Any],
    start: datetime,
    *,
    window_seconds: int = 43_200,
    ordering: str = "SHUFFLE",
    bumpers: Any = None,
) -> ScheduleBuild:
    """Lay a channel's first windowed build with the importer's own write path."""
    seed = channel_seed(channel_id)
    build = build_schedule(
        pool,
        ordering=ordering,  # type: ignore[arg-type]
        channel_seed=seed,
        start_at=start,
        window_seconds=window_seconds,
        bumpers=bumpers,
    )
    store.write_schedule(
        channel_id,
        source_id=source_id,
        shuffle_seed=seed,
        build=build,
        pool=pool,
        bumper_rev=store.bumper_settings().rev,
    )
    return build


def rows_of(store: AirwaveStore, channel_id: str) -> list[Any]:
    """A channel's schedule rows in start order."""
    with store.engine.connect() as conn:
        return conn.execute(
            sa.select(t.schedule_item)
            .where(t.schedule_item.c.channel_id == channel_id)
            .order_by(t.schedule_item.c.starts_at)
        ).all()


def assert_gapless(rows: list[Any]) -> None:
    """No two rows overlap, none repeats a start, and each starts where the previous ended."""
    starts = [row.starts_at for row in rows]
    assert len(starts) == len(set(starts)), "duplicate start times"
    for before, after in itertools.pairwise(rows):
        end = before.starts_at + timedelta(seconds=before.duration_seconds)
        assert end == after.starts_at, f"gap or overlap at {end.isoformat()}"


def now_utc() -> datetime:
    """The current time, whole seconds (the builder's clock resolution)."""
    return datetime.now(UTC).replace(microsecond=0)


def changed_library(
    library: EmulatedLibrary, *, remove: list[int], add_like: list[tuple[int, int, str]]
) -> EmulatedLibrary:
    """A copy of a library without some episodes and with new ones modelled on others.

    Args:
        library: The library to start from (left unchanged).
        remove: Rating keys of episodes to drop.
        add_like: (template episode key, new rating key, new title): a new episode of the
            template's show and season, numbered after the season's last one.

    Returns:
        The changed library, indexed like the builder's own.
    """
    items = dict(library.items)
    children = {key: list(value) for key, value in library.children.items()}
    leaves = {key: list(value) for key, value in library.leaves.items()}
    by_section_type = {key: list(value) for key, value in library.by_section_type.items()}
    episodes_key = next(key for key in by_section_type if key[1] == "episode")
    for key in remove:
        item = items.pop(key)
        by_section_type[episodes_key] = [e for e in by_section_type[episodes_key] if e is not item]
        for mapping in (children, leaves):
            for members in mapping.values():
                if key in members:
                    members.remove(key)
    for template_key, new_key, title in add_like:
        template = items[template_key]
        assert template.parent_rating_key is not None and template.show_rating_key is not None
        siblings = children[template.parent_rating_key]
        index = max((items[k].index or 0) for k in siblings) + 1
        new = dataclasses.replace(
            template, rating_key=new_key, title=title, title_sort=title, index=index
        )
        items[new_key] = new
        siblings.append(new_key)
        leaves[template.show_rating_key].append(new_key)
        position = by_section_type[episodes_key].index(template) + 1
        by_section_type[episodes_key].insert(position, new)
    return dataclasses.replace(
        library,
        items=items,
        children=children,
        leaves=leaves,
        by_section_type=by_section_type,
    )


@pytest.fixture(scope="module")
def small_library() -> EmulatedLibrary:
    """A 120-item library: small pools, so 7 days hold many passes (and many pass seams)."""
    return build_library(SMALL_LIBRARY_ITEMS, SMALL_LIBRARY_SEED)


@pytest.fixture
def small_plex(small_library: EmulatedLibrary) -> Iterator[Any]:
    """An emulator serving the small library, for tests that restart it with a changed one."""
    with start_emulator(library=small_library) as handle:
        yield handle
