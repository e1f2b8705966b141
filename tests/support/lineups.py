"""Lineup files built in code for job tests, using the Plex emulator's vocabulary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GENRES = ("Action", "Comedy", "Drama", "Horror", "Science Fiction", "Animation", "Family")


def condition(field: str, op: str, value: str) -> dict[str, Any]:
    """One filter condition."""
    return {"type": "condition", "field": field, "op": op, "value": value}


def predicate(
    media_types: list[str], node: dict[str, Any] | None, mode: str = "INCLUDE"
) -> dict[str, Any]:
    """A PREDICATE definition with the given filter envelope."""
    return {
        "kind": "PREDICATE",
        "mode": mode,
        "plexFilter": {"mediaTypes": media_types, "filter": node},
        "plexLibraryTitle": None,
    }


def channel(
    number: int,
    name: str,
    definitions: list[dict[str, Any]],
    package_key: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One channel object of a lineup file."""
    return {
        "number": number,
        "name": name,
        "packageKey": package_key,
        "definitions": definitions,
        **extra,
    }


def lineup(channels: list[dict[str, Any]], packages: list[dict[str, Any]] | None = None) -> dict:
    """A v1 lineup file."""
    return {"version": 1, "packages": packages or [], "channels": channels}


def genre_lineup(count: int, *, first_number: int = 100, package: str = "genres") -> dict:
    """`count` channels, each a genre (cycled) with a distinct year bound so none are identical."""
    channels = []
    for i in range(count):
        genre = GENRES[i % len(GENRES)]
        channels.append(
            channel(
                first_number + i,
                f"{genre} {i}",
                [
                    predicate(
                        ["movie", "show"],
                        {
                            "type": "group",
                            "combinator": "and",
                            "children": [
                                condition("genre", "is", genre),
                                condition("year", "gte", str(1930 + i)),
                            ],
                        },
                    )
                ],
                package_key=package,
            )
        )
    return lineup(channels, [{"key": package, "name": package.title()}])


def write(tmp_path: Path, data: dict | str | bytes, name: str = "lineup.json") -> Path:
    """Write a lineup (dict, text or raw bytes) to a file and return its path."""
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return path
