"""Combining the resolved items of a channel's definitions into one candidate pool.

Reference: docs/reference/domain.md §2.6.
"""

from __future__ import annotations

from collections.abc import Sequence

from airwave_dagster.domain.library import Item


def combine_pools(parts: Sequence[tuple[str, Sequence[Item]]]) -> list[Item]:
    """Combine the resolved items of a channel's definitions, in definition order (§2.6).

    An `INCLUDE` part adds its items, an `EXCLUDE` part removes its items from what earlier parts
    added. Items are unique by rating key and keep the order in which they were first included.
    Both the dry-run pool size and the real schedule build use this, so they always agree (the
    reference built from the first definition only).

    Args:
        parts: `(mode, items)` for each definition, already sorted by the definition's sort
            index; mode is `"INCLUDE"` or `"EXCLUDE"` (anything else counts as INCLUDE).

    Returns:
        The pool.
    """
    pool: dict[str, Item] = {}
    for mode, items in parts:
        if mode == "EXCLUDE":
            for item in items:
                pool.pop(item.rating_key, None)
        else:
            for item in items:
                pool.setdefault(item.rating_key, item)
    return list(pool.values())
