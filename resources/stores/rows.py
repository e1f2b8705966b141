"""Row shapes more than one store writes: ids, capped JSON payloads, media items."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from airwave_dagster.domain.library import MediaItem

STORE_LOG = logging.getLogger("dagster.builtin.airwave_stores")
"""Where stores report what they swallow. It is the logger `dagster.get_dagster_logger` would
hand out under that name, so an op's event log captures it, without the stores importing Dagster
(the CLI loads them before it needs Dagster, and answers faster without it)."""

TRACE_JSON_LIMIT = 200_000
"""Trace payloads whose JSON exceeds this many characters are replaced by a truncation note."""


def new_id() -> str:
    """An opaque, collision-resistant row id."""
    return uuid.uuid4().hex


def cap_json(value: object) -> object:
    """Normalise a payload through JSON and cap it at TRACE_JSON_LIMIT characters."""
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return {"unserializable": True}
    if len(text) > TRACE_JSON_LIMIT:
        return {"truncated": True, "chars": len(text), "preview": text[:2000]}
    return json.loads(text)


def media_guide(item: MediaItem) -> dict[str, Any]:
    """What a media item row keeps of the item for the guide (every known field)."""
    return item.model_dump(mode="json", exclude_none=True)


def media_item_row(source_id: str, item: MediaItem) -> dict[str, Any]:
    """The `airwave.media_item` row of an item, available, as every writer stores it."""
    return {
        "media_source_id": source_id,
        "rating_key": item.rating_key,
        "type": item.type,
        "title": item.title,
        "duration_ms": item.duration_ms,
        "year": item.year,
        "air_date": item.originally_available_at,
        "parent_rating_key": item.show_rating_key,
        "guide": media_guide(item),
        "available": True,
    }
