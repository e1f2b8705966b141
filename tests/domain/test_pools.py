"""Tests for combining INCLUDE and EXCLUDE definition results into one pool."""

from __future__ import annotations

import pytest

from airwave_dagster.domain.library import MediaItem
from airwave_dagster.domain.pools import combine_pools


def items(*keys: str) -> list[MediaItem]:
    return [MediaItem(rating_key=key, type="movie", title=f"Title {key}") for key in keys]


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([], []),
        ([("INCLUDE", items("1", "2"))], ["1", "2"]),
        ([("INCLUDE", items("1", "2", "1"))], ["1", "2"]),
        ([("INCLUDE", items("3", "1")), ("INCLUDE", items("2", "1"))], ["3", "1", "2"]),
        ([("INCLUDE", items("1", "2", "3")), ("EXCLUDE", items("2", "9"))], ["1", "3"]),
        # An EXCLUDE only removes what earlier definitions added.
        ([("EXCLUDE", items("1")), ("INCLUDE", items("1", "2"))], ["1", "2"]),
        (
            [("INCLUDE", items("1", "2")), ("EXCLUDE", items("1")), ("INCLUDE", items("1"))],
            ["2", "1"],
        ),
    ],
)
def test_combine_pools(parts: list[tuple[str, list[MediaItem]]], expected: list[str]) -> None:
    assert [item.rating_key for item in combine_pools(parts)] == expected


def test_combine_pools_keeps_the_first_included_value() -> None:
    first = MediaItem(rating_key="1", type="movie", title="First")
    later = MediaItem(rating_key="1", type="movie", title="Later")
    assert combine_pools([("INCLUDE", [first]), ("INCLUDE", [later])]) == [first]
