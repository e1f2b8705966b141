"""Row helpers every store shares: ids, capped JSON payloads."""

from __future__ import annotations

import json
import uuid

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
