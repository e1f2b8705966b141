"""The library snapshot: every playable Plex item, mirrored privately and into Airwave's rows.

Standalone mode is its own metadata sync (Airwave's 03:00 job, docs/reference/airwave-database.md
§4.4): each refresh keeps the full items in the private snapshot (`airwave_dagster.library_item`,
complete tag lists, what filters and the AI profile read) and upserts Airwave's `media_item` rows
the way Airwave's sync does: shows, then episodes linked to their show (`parentId`) and movies,
metadata overwritten, marked available; rows of the source that Plex no longer lists are marked
unavailable.

Attached mode mirrors nothing: Airwave's own metadata sync owns `media_item`, and only the private
snapshot is refreshed (from the libraries Airwave has enabled).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from airwave_dagster.domain.guide_meta import show_items
from airwave_dagster.domain.library import MediaItem
from resources import tables as t
from resources.plex import PlexClient, PlexError
from resources.stores.channels import AirwaveStore
from resources.stores.rows import media_item_row

WRITE_BATCH = 1000
"""Rows per upsert statement: large enough to amortise round trips, small enough to stay cheap."""

_T = TypeVar("_T")

VOLATILE_FIELDS = frozenset({"view_count"})
"""Item fields that change whenever someone watches; a change in them alone is not news."""


class EmptyLibraryError(PlexError):
    """Plex listed no playable item while the snapshot holds some: refused as a probable outage."""


@dataclass(frozen=True)
class LibrarySyncResult:
    """What one refresh changed in the snapshot.

    Attributes:
        source_id: The media source row the items belong to.
        libraries: Library sections Plex listed.
        items: Playable items Plex listed (all now marked available).
        added: Rating keys new to the snapshot, or available again after being gone.
        removed: Rating keys that were available and are no longer in Plex (marked unavailable).
        updated: Rating keys whose metadata changed (view counts aside).
    """

    source_id: str
    libraries: int
    items: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    updated: tuple[str, ...]

    @property
    def changed(self) -> bool:
        """Whether anything a channel could notice changed."""
        return bool(self.added or self.removed or self.updated)


def apply_library_switches(plex: PlexClient, store: AirwaveStore, source_id: str | None) -> None:
    """Limit `plex` to the libraries the media source enables (`media_library.enabled`).

    Every op that resolves pools, tag values or vocabulary calls this on its client first, so
    a library an admin turned off in Airwave feeds nothing, as in Airwave (§3.7).
    """
    plex.use_library_switches(
        store.library_switches(source_id), unknown_enabled=not store.deployment.attached
    )


def sync_library(
    store: AirwaveStore, plex: PlexClient, *, allow_empty: bool = False
) -> LibrarySyncResult:
    """Refresh the snapshot of every movie and episode of every Plex library.

    Signature: `sync_library(store: AirwaveStore, plex: PlexClient, *, allow_empty=False) ->
    LibrarySyncResult`. Callable from any op or asset that has a store and a Plex client.

    Everything is read from Plex (paged, `resources.plex.PAGE_SIZE` per request) before the first
    write, so an outage fails the refresh with the adapter's error and changes nothing: no item
    is ever marked unavailable because Plex could not be asked. The writes then happen in one
    transaction: items are upserted by (source, rating key) and marked available, and items of
    this source that Plex no longer lists are marked unavailable (their rows stay, so schedule
    rows keep their links and repair can find them).

    Args:
        store: The application database.
        plex: A client of the server to mirror; its base URL names the media source.
        allow_empty: Accept an answer with no playable item even though the snapshot has some.
            Off by default because a server whose disks are unmounted answers exactly that.

    Returns:
        The counts and the rating keys added, removed and updated.

    Raises:
        PlexError: Plex is unreachable, refuses the token, or fails (nothing was written).
        EmptyLibraryError: Plex listed nothing while the snapshot has available items.
    """
    libraries = plex.libraries()
    source_id = store.find_source(plex.base_url)
    apply_library_switches(plex, store, source_id)
    items = plex.resolve(None)
    if not items and not allow_empty and source_id is not None and _available(store, source_id):
        raise EmptyLibraryError(
            f"Plex at {plex.base_url} listed no playable item while the snapshot has some; "
            "refusing to mark the whole library unavailable (a probable outage). "
            "Refresh with allow_empty once the library really is empty."
        )
    source_id = store.sync_source(plex.base_url, libraries)
    with store.transaction() as conn:
        before = _snapshot(conn, source_id)
        seen: set[str] = set()
        added: list[str] = []
        updated: list[str] = []
        for item in items:
            seen.add(item.rating_key)
            previous = before.get(item.rating_key)
            if previous is None or not previous[0]:
                added.append(item.rating_key)
            elif _news(previous[1]) != _news(_dump(item)):
                updated.append(item.rating_key)
        removed = [key for key, (available, _) in before.items() if available and key not in seen]
        for batch in _batches(items, WRITE_BATCH):
            conn.execute(
                _snapshot_upsert(),
                [
                    {"media_source_id": source_id, "rating_key": i.rating_key, "item": _dump(i)}
                    for i in batch
                ],
            )
        if not store.deployment.attached:
            _mirror_airwave_rows(conn, source_id, items)
        li, m = t.library_item.c, t.media_item.c
        for keys in _batches(removed, WRITE_BATCH):
            conn.execute(
                t.library_item.update()
                .where(li.media_source_id == source_id, li.rating_key.in_(keys))
                .values(available=False, synced_at=sa.func.now())
            )
        listed = set(seen) | {item.show_rating_key for item in items if item.show_rating_key}
        gone: list[str] = (
            []
            if store.deployment.attached
            else list(
                conn.execute(
                    sa.select(m.id).where(
                        m.media_source_id == source_id,
                        m.available.is_(True),
                        m.rating_key.not_in(listed),
                    )
                ).scalars()
            )
        )
        for ids in _batches(gone, WRITE_BATCH):
            conn.execute(
                t.media_item.update()
                .where(m.id.in_(ids))
                .values(available=False, last_synced_at=t.utc_now())
            )
        conn.execute(
            pg_insert(t.source_state)
            .values(media_source_id=source_id, library_synced_at=sa.func.now())
            .on_conflict_do_update(
                index_elements=[t.source_state.c.media_source_id],
                set_={t.source_state.c.library_synced_at: sa.func.now()},
            )
        )
    return LibrarySyncResult(
        source_id=source_id,
        libraries=len(libraries),
        items=len(items),
        added=tuple(added),
        removed=tuple(removed),
        updated=tuple(updated),
    )


def _mirror_airwave_rows(conn: sa.Connection, source_id: str, items: Sequence[MediaItem]) -> None:
    """Upsert Airwave's `media_item` rows as Airwave's metadata sync does (shows first)."""
    m = t.media_item.c
    shows = show_items(items)
    for batch in _batches(shows, WRITE_BATCH):
        conn.execute(_airwave_upsert(), [media_item_row(source_id, show) for show in batch])
    parents = dict(
        conn.execute(
            sa.select(m.rating_key, m.id).where(m.media_source_id == source_id, m.type == "show")
        )
        .tuples()
        .all()
    )
    playable = [item for item in items if item.type != "show"]
    for batch in _batches(playable, WRITE_BATCH):
        conn.execute(
            _airwave_upsert(),
            [
                {
                    **media_item_row(source_id, item),
                    "parent_id": parents.get(item.show_rating_key or ""),
                }
                for item in batch
            ],
        )


def library_synced(store: AirwaveStore, source_id: str) -> bool:
    """Whether a complete snapshot of the source's library has been taken."""
    with store.engine.connect() as conn:
        return (
            conn.execute(
                sa.select(t.source_state.c.library_synced_at).where(
                    t.source_state.c.media_source_id == source_id
                )
            ).scalar_one_or_none()
            is not None
        )


def _available(store: AirwaveStore, source_id: str) -> bool:
    li = t.library_item.c
    with store.engine.connect() as conn:
        return bool(
            conn.execute(
                sa.select(sa.exists().where(li.media_source_id == source_id, li.available))
            ).scalar_one()
        )


def _dump(item: MediaItem) -> dict[str, Any]:
    """The private snapshot's JSON of an item: every field the project knows."""
    return item.model_dump(mode="json", exclude_none=True)


def _snapshot(conn: sa.Connection, source_id: str) -> dict[str, tuple[bool, dict[str, Any]]]:
    li = t.library_item.c
    rows = conn.execute(
        sa.select(li.rating_key, li.available, li.item).where(li.media_source_id == source_id)
    )
    return {row.rating_key: (row.available, row.item or {}) for row in rows}


def _news(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in VOLATILE_FIELDS}


def _snapshot_upsert() -> Any:
    li = t.library_item.c
    stmt = pg_insert(t.library_item)
    return stmt.on_conflict_do_update(
        index_elements=[li.media_source_id, li.rating_key],
        set_={li.item: stmt.excluded.item, li.available: True, li.synced_at: sa.func.now()},
    )


def _airwave_upsert() -> Any:
    m = t.media_item.c
    stmt = pg_insert(t.media_item)
    now = t.utc_now()
    return stmt.on_conflict_do_update(
        index_elements=[m.media_source_id, m.rating_key],
        set_={
            m.type: stmt.excluded.type,
            m.title: stmt.excluded.title,
            m.duration_ms: stmt.excluded.duration_ms,
            m.year: stmt.excluded.year,
            m.air_date: stmt.excluded.air_date,
            m.parent_id: stmt.excluded.parent_id,
            m.guide: stmt.excluded.guide,
            m.available: True,
            m.last_synced_at: now,
            m.updated_at: now,
        },
    )


def _batches(values: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
