"""The library snapshot: every playable Plex item mirrored into `airwave.media_item`, paged."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from resources import tables as t
from resources.plex import PlexClient, PlexError
from resources.stores.channels import AirwaveStore
from resources.stores.rows import media_guide, media_item_row

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
    items = plex.resolve(None)
    source_id = store.find_source(plex.base_url)
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
            elif _news(previous[1]) != _news(media_guide(item)):
                updated.append(item.rating_key)
        removed = [key for key, (available, _) in before.items() if available and key not in seen]
        for batch in _batches(items, WRITE_BATCH):
            conn.execute(_upsert(), [media_item_row(source_id, item) for item in batch])
        for keys in _batches(removed, WRITE_BATCH):
            conn.execute(
                t.media_item.update()
                .where(
                    t.media_item.c.media_source_id == source_id,
                    t.media_item.c.rating_key.in_(keys),
                )
                .values(available=False, last_synced_at=sa.func.now())
            )
        conn.execute(
            t.media_source.update()
            .where(t.media_source.c.id == source_id)
            .values(library_synced_at=sa.func.now())
        )
    return LibrarySyncResult(
        source_id=source_id,
        libraries=len(libraries),
        items=len(items),
        added=tuple(added),
        removed=tuple(removed),
        updated=tuple(updated),
    )


def library_synced(store: AirwaveStore, source_id: str) -> bool:
    """Whether a complete snapshot of the source's library has been taken."""
    with store.engine.connect() as conn:
        return (
            conn.execute(
                sa.select(t.media_source.c.library_synced_at).where(
                    t.media_source.c.id == source_id
                )
            ).scalar_one_or_none()
            is not None
        )


def _available(store: AirwaveStore, source_id: str) -> bool:
    with store.engine.connect() as conn:
        return bool(
            conn.execute(
                sa.select(
                    sa.exists().where(
                        t.media_item.c.media_source_id == source_id, t.media_item.c.available
                    )
                )
            ).scalar_one()
        )


def _snapshot(conn: sa.Connection, source_id: str) -> dict[str, tuple[bool, dict[str, Any]]]:
    rows = conn.execute(
        sa.select(t.media_item.c.rating_key, t.media_item.c.available, t.media_item.c.guide).where(
            t.media_item.c.media_source_id == source_id
        )
    )
    return {row.rating_key: (row.available, row.guide or {}) for row in rows}


def _news(guide: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in guide.items() if key not in VOLATILE_FIELDS}


def _upsert() -> Any:
    stmt = pg_insert(t.media_item)
    return stmt.on_conflict_do_update(
        constraint="media_item_source_rating_key",
        set_={
            "type": stmt.excluded.type,
            "title": stmt.excluded.title,
            "duration_ms": stmt.excluded.duration_ms,
            "year": stmt.excluded.year,
            "air_date": stmt.excluded.air_date,
            "parent_rating_key": stmt.excluded.parent_rating_key,
            "guide": stmt.excluded.guide,
            "available": True,
            "last_synced_at": sa.func.now(),
        },
    )


def _batches(values: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
