"""The published API surface a JSON client uses, against the emulator over plain HTTP.

Sources: Plex's published API notes (developer.plex.tv/pms: `Accept: application/json`, the
`X-Plex-Container-Start` / `X-Plex-Container-Size` paging headers and the
`X-Plex-Container-Total-Size` answer, `/library/sections/all`, `/library/metadata/{id}/allLeaves`,
the filter operators) and the community OpenAPI description (LukeHagar/plex-api-spec: the
`MediaContainer` / `Metadata` / `Directory` JSON shapes).
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any
from urllib.parse import quote

import pytest

from airwave_dagster.emulators.plex import start_emulator


@pytest.fixture(scope="module")
def emulator():
    with start_emulator(items=200, seed=8) as handle:
        yield handle


def _get(emulator, path: str, *, accept: str = "application/json", **headers: str):
    separator = "&" if "?" in path else "?"
    request = urllib.request.Request(
        f"{emulator.url}{path}{separator}X-Plex-Token={emulator.token}",
        headers={"Accept": accept, **headers},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, dict(response.headers.items()), response.read()


def _json(emulator, path: str, **headers: str) -> dict[str, Any]:
    status, answer_headers, body = _get(emulator, path, **headers)
    assert status == 200 and answer_headers["Content-Type"] == "application/json"
    return json.loads(body)["MediaContainer"]


def test_sections_all_answers_json(emulator) -> None:
    container = _json(emulator, "/library/sections/all")

    assert [d["title"] for d in container["Directory"]] == ["Movies", "TV Shows"]
    assert container["Directory"][0]["Location"][0]["path"]
    assert container["size"] == 2


def test_xml_and_json_say_the_same(emulator) -> None:
    _, headers, xml_body = _get(emulator, "/library/sections/1/all", accept="application/xml")
    container = _json(emulator, "/library/sections/1/all")

    assert headers["Content-Type"].startswith("text/xml")
    assert xml_body.count(b"<Video ") == len(container["Metadata"]) == container["size"]
    first = container["Metadata"][0]
    assert isinstance(first["ratingKey"], str) and isinstance(first["title"], str)
    assert first["Genre"][0]["tag"]


def test_paging_headers(emulator) -> None:
    movies = len(emulator.library.movies())
    status, headers, body = _get(
        emulator,
        "/library/sections/1/all",
        **{"X-Plex-Container-Start": "5", "X-Plex-Container-Size": "10"},
    )
    container = json.loads(body)["MediaContainer"]

    assert status == 200
    assert headers["X-Plex-Container-Start"] == "5"
    assert headers["X-Plex-Container-Total-Size"] == str(movies)
    assert container["size"] == 10 and container["offset"] == 5


def test_inclusive_and_strict_ranges(emulator) -> None:
    year = emulator.library.movies()[0].year
    years = [m.year for m in emulator.library.movies() if m.year is not None]

    def count(term: str) -> int:
        return _json(emulator, f"/library/sections/1/all?{quote(term, safe='=<>!')}")["size"]

    assert count(f"year>={year}") == sum(1 for y in years if y >= year)
    assert count(f"year>>={year}") == sum(1 for y in years if y > year)
    assert count(f"year<={year}") == sum(1 for y in years if y <= year)
    assert count(f"year<<={year}") == sum(1 for y in years if y < year)


def test_dates_equal_a_day_and_relative_dates_with_or_without_units(emulator) -> None:
    movies = emulator.library.movies()
    day = movies[0].originally_available_at
    same_day = sum(1 for m in movies if m.originally_available_at == day)
    thirty_days = sum(1 for m in movies if m.added_at > time.time() - 30 * 86400)

    assert _json(emulator, f"/library/sections/1/all?originallyAvailableAt={day}")["size"] == (
        same_day
    )
    assert _json(emulator, f"/library/sections/1/all?originallyAvailableAt!={day}")["size"] == (
        len(movies) - same_day
    )
    with_unit = _json(emulator, "/library/sections/1/all?addedAt>>=-30d")["size"]
    without = _json(emulator, f"/library/sections/1/all?addedAt>>=-{30 * 86400}")["size"]
    assert with_unit == without == thirty_days


def test_guid_filter_and_all_leaves(emulator) -> None:
    movie = emulator.library.movies()[3]
    guid = f"plex://movie/emu{movie.rating_key}"
    show = emulator.library.shows()[0]

    found = _json(emulator, f"/library/sections/1/all?guid={quote(guid)}")
    leaves = _json(emulator, f"/library/metadata/{show.rating_key}/allLeaves")

    assert [m["ratingKey"] for m in found["Metadata"]] == [str(movie.rating_key)]
    assert found["Metadata"][0]["guid"] == guid
    assert len(leaves["Metadata"]) == show.leaf_count
    assert all(m["type"] == "episode" for m in leaves["Metadata"])
