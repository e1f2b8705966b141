"""Plex test helpers: plexapi isolated from the developer's config, and dataset oracles.

Import this module before plexapi. plexapi reads its config file and page size once, at import
(docs/reference/plex-emulator.md G17), so the developer's own `~/.config/plexapi/config.ini` or
`PLEXAPI_*` variables would otherwise leak into the tests.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import Any

for _name in [name for name in os.environ if name.startswith("PLEXAPI_")]:
    del os.environ[_name]
_EMPTY_CONFIG = tempfile.NamedTemporaryFile(prefix="plexapi-", suffix=".ini", delete=False)
_EMPTY_CONFIG.close()
os.environ["PLEXAPI_CONFIG_PATH"] = _EMPTY_CONFIG.name

from airwave_dagster.domain.filters import FilterEnvelope, evaluate  # noqa: E402
from airwave_dagster.domain.library import MediaItem  # noqa: E402
from airwave_dagster.emulators.plex import EmulatedLibrary, Item  # noqa: E402

RecordTest = Callable[[Item, Item | None], bool]
"""An oracle over dataset records: (item, its show or None) → whether it belongs in the pool."""

SORT_KEYS: dict[str, Callable[[Item], Any]] = {
    "titleSort": lambda i: i.sort_title,
    "year": lambda i: i.year,
    "originallyAvailableAt": lambda i: i.originally_available_at,
    "rating": lambda i: i.rating,
    "audienceRating": lambda i: i.audience_rating,
    "userRating": lambda i: i.user_rating,
    "contentRating": lambda i: None if i.content_rating is None else i.content_rating.casefold(),
    "duration": lambda i: i.duration_ms,
    "viewCount": lambda i: i.view_count,
    "addedAt": lambda i: i.added_at,
    "lastViewedAt": lambda i: i.last_viewed_at,
    "mediaHeight": lambda i: i.height,
    "mediaBitrate": lambda i: i.bitrate,
}
"""The emulator's sort keys, restated from the records so tests do not trust its code."""


def sort_records(records: Iterable[Item], sort: str) -> list[Item]:
    """Order records as a Plex `sort` does: stable over the default order, nulls last."""
    ordered = list(records)
    for part in reversed(sort.split(",")):
        key, _, direction = part.partition(":")
        read = SORT_KEYS[key]
        present = [r for r in ordered if read(r) is not None]
        present.sort(key=read, reverse=direction == "desc")
        ordered = present + [r for r in ordered if read(r) is None]
    return ordered


def expected_pool(
    library: EmulatedLibrary,
    plex_filter: dict[str, Any] | None,
    *,
    sort: str = "titleSort:asc",
    library_key: str | None = None,
    records: RecordTest | None = None,
) -> list[MediaItem]:
    """What resolving a filter must return, computed from the dataset alone.

    Items are judged by the domain's local `evaluate` on the domain records, or by `records`
    for fields the local evaluator does not support. Libraries come in section order, each
    sorted by `sort`.
    """
    envelope = (
        FilterEnvelope() if plex_filter is None else FilterEnvelope.model_validate(plex_filter)
    )
    media_types = envelope.effective_media_types
    sections = [s for s in library.sections if s.type in media_types]
    if library_key is not None and any(str(s.key) == library_key for s in library.sections):
        sections = [s for s in sections if str(s.key) == library_key]
    pool: list[MediaItem] = []
    for section in sections:
        playable = "movie" if section.type == "movie" else "episode"
        chosen = []
        for record in library.of_type(section.key, playable):
            if records is not None:
                keep = records(record, library.show_of(record))
            else:
                keep = evaluate(envelope.filter, library.media_item(record.rating_key))
            if keep:
                chosen.append(record)
        pool.extend(library.media_item(r.rating_key) for r in sort_records(chosen, sort))
    return pool


def condition(field: str, op: str, value: str) -> dict[str, Any]:
    """A condition node as the lineup file writes it."""
    return {"type": "condition", "field": field, "op": op, "value": value}


def group(combinator: str, *children: dict[str, Any]) -> dict[str, Any]:
    """A group node as the lineup file writes it."""
    return {"type": "group", "combinator": combinator, "children": list(children)}


def envelope(node: dict[str, Any] | None, media_types: Sequence[str] = ()) -> dict[str, Any]:
    """A `plexFilter` envelope around a node."""
    raw: dict[str, Any] = {"mediaTypes": list(media_types)}
    if node is not None:
        raw["filter"] = node
    return raw
