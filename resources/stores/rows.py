"""Row shapes more than one store writes: ids, capped JSON payloads, media items."""

from __future__ import annotations

import json
import logging
from typing import Any

import sqlalchemy as sa

from airwave_dagster.domain.guide_meta import media_item_values
from airwave_dagster.domain.library import MediaItem
from resources.tables import new_id

__all__ = ["STORE_LOG", "TRACE_JSON_LIMIT", "cap_json", "keyed", "media_item_row", "new_id"]

STORE_LOG = logging.getLogger("dagster.builtin.airwave_stores")
"""Where stores report what they swallow. It is the logger `dagster.get_dagster_logger` would
hand out under that name, so an op's event log captures it, without the stores importing Dagster
(the CLI loads them before it needs Dagster, and answers faster without it)."""

TRACE_JSON_LIMIT = 200_000
"""Trace payloads whose JSON exceeds this many characters are replaced by a truncation note."""


def cap_json(value: object) -> object:
    """Normalise a payload through JSON and cap it at TRACE_JSON_LIMIT characters."""
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return {"unserializable": True}
    if len(text) > TRACE_JSON_LIMIT:
        return {"truncated": True, "chars": len(text), "preview": text[:2000]}
    return json.loads(text)


def keyed(row: sa.Row[Any], table: sa.Table) -> dict[str, Any]:
    """A row of `select(table)` as a dict by the columns' Python keys (`media_source_id`).

    `dict(row._mapping)` would use the SQL names, Airwave's camelCase ones.
    """
    mapping = row._mapping
    return {column.key: mapping[column] for column in table.c}


def media_item_row(source_id: str, item: MediaItem) -> dict[str, Any]:
    """Airwave's `media_item` row of an item (no `parentId`: that is the show row's id)."""
    return {"media_source_id": source_id, **media_item_values(item)}
