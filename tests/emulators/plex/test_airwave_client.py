"""Airwave's own TypeScript Plex client, request for request, against the emulator over HTTP.

Airwave (github.com/Quixomatic/Airwave) talks to the media server from
`packages/api/src/services/plex/client.ts`. Every request there sends `Accept: application/json`
and the token as an `X-Plex-Token` header (`pmsHeaders`), never in the query; these tests do the
same, build each query the way that file does, and assert the JSON fields Airwave reads.

Plex references: the community OpenAPI description of the server (LukeHagar/plex-api-spec,
`plex-api-spec.yaml`: the `LibrarySection`, `Metadata`, `Media`, `Part`, `Stream` and `Tag`
schemas with their JSON types, and the `X-Plex-Container-Start` / `X-Plex-Container-Size` paging
parameters) and Plex's published API notes (developer.plex.tv/pms).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree

import pytest

from airwave_dagster.emulators.plex import start_emulator
from airwave_dagster.emulators.plex.dataset import Item, audio_of, dovi_profile_of

PAGE_SIZE = 500
"""`getAllSectionItems` pages by 500."""
RECENT_LIMIT = 50
"""`syncRecentlyAdded` (media/sync-recent.ts) asks for the 50 newest of each type."""
POOL_LIMIT = 800
"""`getSectionItemsRaw`'s default `X-Plex-Container-Size`."""
HDR_TRANSFER = {"HDR10": "smpte2084", "HLG": "arib-std-b67", "Dolby Vision": "smpte2084"}


@pytest.fixture(scope="module")
def emulator():
    with start_emulator(items=200, seed=8) as handle:
        yield handle


@pytest.fixture(scope="module")
def large_emulator():
    # 780 episodes: more than one of Airwave's 500-item pages.
    with start_emulator(items=1300, seed=8) as handle:
        yield handle


def _fetch(emulator, path: str, accept: str = "application/json") -> tuple[int, str, bytes]:
    request = urllib.request.Request(
        f"{emulator.url}{path}", headers={"Accept": accept, "X-Plex-Token": emulator.token}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def _container(emulator, path: str) -> dict[str, Any]:
    status, content_type, body = _fetch(emulator, path)
    assert status == 200, body[:300]
    assert content_type == "application/json"
    return json.loads(body)["MediaContainer"]


def _streams(item_type: int) -> str:
    # Airwave leaves includeElements=Stream off for shows (type 2) only.
    return "" if item_type == 2 else "&includeElements=Stream"


def _all_items_page(section: int, item_type: int, start: int) -> str:
    return (
        f"/library/sections/{section}/all?type={item_type}&sort=titleSort"
        f"&X-Plex-Container-Start={start}&X-Plex-Container-Size={PAGE_SIZE}{_streams(item_type)}"
    )


def _recently_added(section: int, item_type: int) -> str:
    return (
        f"/library/sections/{section}/all?type={item_type}&sort=addedAt:desc"
        f"&X-Plex-Container-Start=0&X-Plex-Container-Size={RECENT_LIMIT}{_streams(item_type)}"
    )


def _pool(section: int, item_type: int, filters: list[str], sort: str = "titleSort") -> str:
    # encodeURIComponent on the sort; the filter params go in as built, operators literal.
    parts = [
        f"type={item_type}",
        f"sort={quote(sort, safe='')}",
        f"X-Plex-Container-Size={POOL_LIMIT}",
        *([] if item_type == 2 else ["includeElements=Stream"]),
        *filters,
    ]
    return f"/library/sections/{section}/all?{'&'.join(parts)}"


def _scan_all(emulator, section: int, item_type: int) -> tuple[list[dict[str, Any]], int]:
    """Airwave's paging loop: stop on a short page or once `totalSize` items are in."""
    found: list[dict[str, Any]] = []
    pages = 0
    for start in range(0, 1_000_000, PAGE_SIZE):
        container = _container(emulator, _all_items_page(section, item_type, start))
        pages += 1
        batch = container.get("Metadata", [])
        found.extend(batch)
        if len(batch) < PAGE_SIZE or len(found) >= container.get("totalSize", len(found)):
            break
    return found, pages


def _choice_keys(emulator, section: int, field: str) -> dict[str, str]:
    """`getFilterValues` as `resolveTag` uses it: lower-cased title -> key."""
    container = _container(emulator, f"/library/sections/{section}/{field}")
    return {d["title"].lower(): d["key"] for d in container.get("Directory", [])}


def _keys(metadata: list[dict[str, Any]]) -> set[str]:
    return {m["ratingKey"] for m in metadata}


def _expected(items: list[Item]) -> set[str]:
    return {str(i.rating_key) for i in items}


def _flatten_xml(element: ElementTree.Element, depth: int = 0) -> Iterator[tuple[int, str, str]]:
    for name, value in element.attrib.items():
        yield depth, name, value
    for child in element:
        yield from _flatten_xml(child, depth + 1)


def _flatten_json(found: dict[str, Any], depth: int = 0) -> Iterator[tuple[int, str, str]]:
    for name, value in found.items():
        if isinstance(value, bool):
            yield depth, name, "1" if value else "0"
        elif not isinstance(value, list | dict):
            yield depth, name, str(value)
    for value in found.values():
        if isinstance(value, dict):
            yield from _flatten_json(value, depth + 1)
        elif isinstance(value, list):
            for child in value:
                yield from _flatten_json(child, depth + 1)


def test_library_scan_lists_sections_with_string_keys(emulator) -> None:
    """`getLibraries` (client.ts), called by `syncLibraries` (plex/sync-libraries.ts).

    GET /library/sections; Airwave keeps `Directory[].key`, `title` and `type`, and later puts the
    key into paths. plex-api-spec: `LibrarySection.key` is a `Key` (string), `type` a string.
    """
    container = _container(emulator, "/library/sections")

    found = [(d["key"], d["title"], d["type"]) for d in container["Directory"]]
    assert found == [("1", "Movies", "movie"), ("2", "TV Shows", "show")]
    assert all(d["filters"] is True and d["allowSync"] is True for d in container["Directory"])


def test_filter_values_resolve_to_keys_the_pool_query_accepts(emulator) -> None:
    """`getSectionGenres` / `getFilterValues` (client.ts), used by `resolveTag` (plex/resolve.ts).

    GET /library/sections/{key}/{field} without `type`; Airwave maps `Directory[].title` (lower
    case) to `Directory[].key` and sends the key back as `genre={key}` for movies and, for TV at
    type=4, as `show.genre={key}` (`buildParam`, plex/filter-fields.ts). plex-api-spec: a filter
    choice's `key` is a string; filters on a related type use the `show.` / `episode.` prefix.
    """
    library = emulator.library
    movie_genres = _choice_keys(emulator, 1, "genre")
    show_genres = _choice_keys(emulator, 2, "genre")
    genre = library.movies()[0].genres[0]
    show_genre = library.shows()[0].genres[0]

    movies = _container(emulator, _pool(1, 1, [f"genre={movie_genres[genre.lower()]}"]))
    episodes = _container(emulator, _pool(2, 4, [f"show.genre={show_genres[show_genre.lower()]}"]))

    assert all(isinstance(key, str) for key in [*movie_genres.values(), *show_genres.values()])
    assert _keys(movies["Metadata"]) == _expected(
        [m for m in library.movies() if genre in m.genres]
    )
    assert _keys(episodes["Metadata"]) == _expected(
        [
            e
            for e in library.episodes()
            if show_genre in library.items[e.show_rating_key or 0].genres
        ]
    )


def test_metadata_sync_pages_through_every_episode(large_emulator) -> None:
    """`getAllSectionItems` (client.ts), called by `syncMediaItems` (media/sync-media.ts).

    GET /library/sections/{key}/all?type=N&sort=titleSort&X-Plex-Container-Start=S
    &X-Plex-Container-Size=500[&includeElements=Stream], until a short page or `totalSize`.
    Episodes link to shows through `grandparentRatingKey` matched against the shows' `ratingKey`.
    plex-api-spec: paging by `X-Plex-Container-Start` / `-Size`, `MediaContainer.totalSize`;
    `ratingKey` and `grandparentRatingKey` are strings, `parentIndex` / `index` integers.
    """
    library = large_emulator.library
    shows, show_pages = _scan_all(large_emulator, 2, 2)
    episodes, episode_pages = _scan_all(large_emulator, 2, 4)
    movies, _ = _scan_all(large_emulator, 1, 1)

    assert episode_pages == 2 and show_pages == 1
    assert len(episodes) == len(_keys(episodes)) == len(library.episodes())
    assert _keys(episodes) == _expected(library.episodes())
    assert _keys(shows) == _expected(library.shows())
    assert _keys(movies) == _expected(library.movies())
    assert {e["grandparentRatingKey"] for e in episodes} <= _keys(shows)
    for found in episodes[:50]:
        item = library.items[int(found["ratingKey"])]
        show = library.items[item.show_rating_key or 0]
        assert found["grandparentTitle"] == show.title
        assert (found["parentIndex"], found["index"]) == (item.parent_index, item.index)
        assert found["originallyAvailableAt"] == item.originally_available_at
        assert found["duration"] == item.duration_ms and found["addedAt"] == item.added_at


def test_listing_fields_the_guide_keeps(emulator) -> None:
    """`toGuideMeta` / `toPlexItem` (client.ts) over a `getAllSectionItems` page of movies.

    Airwave keeps title, type, year, contentRating, summary, tagline, studio, the first tags of
    `Director` (3), `Genre` (5) and `Role` (5), audienceRating, rating, duration, thumb, art,
    addedAt and `Media[0]` videoResolution / audioChannels / videoCodec. plex-api-spec: the
    `Metadata` and `Media` schemas (`videoResolution` is a string such as "1080"). Listings carry
    only the first tags of each kind, as real servers send (docs/plex-emulator.md).
    """
    library = emulator.library
    container = _container(emulator, _all_items_page(1, 1, 0))

    for found in container["Metadata"]:
        item = library.items[int(found["ratingKey"])]
        media = found["Media"][0]
        assert found["type"] == "movie" and found["title"] == item.title
        assert found["year"] == item.year and found["studio"] == item.studio
        assert found["contentRating"] == item.content_rating and found["tagline"]
        assert [t["tag"] for t in found.get("Genre", [])] == list(item.genres[:2])
        assert [t["tag"] for t in found.get("Role", [])] == list(item.actors[:3])
        assert [t["tag"] for t in found.get("Director", [])] == list(item.directors[:1])
        assert found["thumb"].startswith(f"/library/metadata/{item.rating_key}/thumb/")
        assert found["art"].startswith("/library/metadata/")
        assert media["videoResolution"] == item.resolution
        assert isinstance(media["videoResolution"], str)
        assert media["videoCodec"] == item.video_codec
        assert media["audioChannels"] == audio_of(item)[1]


def test_streams_carry_hdr_dolby_vision_and_object_audio(emulator) -> None:
    """`detectHdr`, `detectDovi`, `detectDynamicAudio` (client.ts), on `includeElements=Stream`.

    The video stream (`streamType` 1) of `Media[0].Part[0].Stream` gives `colorTrc` (smpte2084 =
    HDR10, arib-std-b67 = HLG) and `DOVIPresent` / `DOVIProfile` / `DOVILevel` /
    `DOVIBLCompatID`; an audio stream (`streamType` 2) whose title mentions Atmos or DTS:X marks
    object audio. plex-api-spec `Stream`: `DOVIPresent` is a boolean, the DOVI numbers integers.
    """
    library = emulator.library
    listed = [
        *_container(emulator, _all_items_page(1, 1, 0))["Metadata"],
        *_container(emulator, _all_items_page(2, 4, 0))["Metadata"],
    ]

    assert len(listed) == len(library.movies()) + len(library.episodes())
    for found in listed:
        item = library.items[int(found["ratingKey"])]
        streams = found["Media"][0]["Part"][0]["Stream"]
        video = next(s for s in streams if s["streamType"] == 1)
        audio_titles = " ".join(s["displayTitle"] for s in streams if s["streamType"] == 2)
        assert video.get("colorTrc") == HDR_TRANSFER.get(item.hdr or "")
        if item.hdr == "Dolby Vision":
            profile, compat = dovi_profile_of(item)
            assert video["DOVIPresent"] is True
            assert (video["DOVIProfile"], video["DOVIBLCompatID"]) == (profile, compat)
        else:
            assert "DOVIPresent" not in video
        assert ("Atmos" in audio_titles) == (audio_of(item)[2] == "Atmos")
        assert ("DTS:X" in audio_titles) == (audio_of(item)[2] == "DTS:X")


def test_recently_added_scan_gets_the_newest_first(emulator) -> None:
    """`getRecentlyAdded` (client.ts), called by `syncRecentlyAdded` (media/sync-recent.ts).

    GET /library/sections/{key}/all?type=4|1&sort=addedAt:desc&X-Plex-Container-Start=0
    &X-Plex-Container-Size=50&includeElements=Stream. plex-api-spec: `sort` takes `field:desc`;
    `addedAt` is epoch seconds.
    """
    library = emulator.library
    episodes = _container(emulator, _recently_added(2, 4))
    movies = _container(emulator, _recently_added(1, 1))

    newest_episodes = sorted((e.added_at for e in library.episodes()), reverse=True)
    newest_movies = sorted((m.added_at for m in library.movies()), reverse=True)
    assert [e["addedAt"] for e in episodes["Metadata"]] == newest_episodes[:RECENT_LIMIT]
    assert [m["addedAt"] for m in movies["Metadata"]] == newest_movies[:RECENT_LIMIT]
    assert episodes["size"] == RECENT_LIMIT and episodes["totalSize"] == len(library.episodes())


def test_recent_scan_backfills_a_show_from_its_metadata(emulator) -> None:
    """`getMetadata` (client.ts), called by `ensureShows` (media/sync-recent.ts).

    A new episode's `grandparentRatingKey` names a show Airwave lacks; it fetches
    GET /library/metadata/{ratingKey} and reads `Metadata[0]` like any listed item. Item metadata
    carries complete tag lists (plex-api-spec `Metadata`; python-plexapi's partial objects).
    """
    library = emulator.library
    episode = _container(emulator, _recently_added(2, 4))["Metadata"][0]
    show_key = episode["grandparentRatingKey"]

    show = _container(emulator, f"/library/metadata/{show_key}")["Metadata"][0]

    record = library.items[int(show_key)]
    assert show["ratingKey"] == show_key and show["type"] == "show"
    assert show["title"] == episode["grandparentTitle"] == record.title
    assert [t["tag"] for t in show["Genre"]] == list(record.genres)
    assert [t["tag"] for t in show["Role"]] == list(record.actors)
    assert show["thumb"].startswith(f"/library/metadata/{show_key}/thumb/")
    assert show["art"].startswith(f"/library/metadata/{show_key}/art/")


def test_schedule_pool_queries_match_the_library(emulator) -> None:
    """`getSectionItemsRaw` (client.ts), from `resolveChannel` / `resolveFilter` (plex/resolve.ts).

    One query per AND group of conditions, at type=1 for movies and type=4 with `show.` /
    `episode.` prefixes for TV, `X-Plex-Container-Size=800`, the channel's sort
    (`channelSortParam`, plex/sort-fields.ts), filter params from `buildParam`
    (plex/filter-fields.ts): `>=` / `<=` on numbers and dates, `=` as "contains" on titles, `=1`
    on booleans, `-Nd` relative dates. plex-api-spec and Plex's API notes: these operators, and
    filters on a related type by prefix.
    """
    library = emulator.library
    movies = library.movies()
    episodes = library.episodes()

    def show(e: Item) -> Item:
        return library.items[e.show_rating_key or 0]

    old = _container(emulator, _pool(1, 1, ["year<=1995", "audienceRating>=6"], "year:asc"))
    titled = _container(emulator, _pool(1, 1, ["title=the"]))
    unwatched = _container(emulator, _pool(2, 4, ["episode.unwatched=1", "show.year>=2000"]))
    rated = _container(
        emulator, _pool(2, 4, ["show.contentRating=TV-Y"], "originallyAvailableAt:desc")
    )
    since = time.time()
    recent = _container(emulator, _pool(2, 4, ["episode.addedAt>=-90d"]))

    assert _keys(old["Metadata"]) == _expected(
        [m for m in movies if (m.year or 0) <= 1995 and (m.audience_rating or 0) >= 6]
    )
    years = [m["year"] for m in old["Metadata"]]
    assert years == sorted(years)
    assert _keys(titled["Metadata"]) == _expected([m for m in movies if "the" in m.title.lower()])
    assert _keys(unwatched["Metadata"]) == _expected(
        [e for e in episodes if e.view_count == 0 and (show(e).year or 0) >= 2000]
    )
    assert _keys(rated["Metadata"]) == _expected(
        [e for e in episodes if show(e).content_rating == "TV-Y"]
    )
    aired = [m["originallyAvailableAt"] for m in rated["Metadata"]]
    assert aired == sorted(aired, reverse=True)
    window = 90 * 86400
    surely_in = _expected([e for e in episodes if e.added_at >= since - window + 60])
    maybe_in = _expected([e for e in episodes if e.added_at >= since - window - 60])
    assert surely_in <= _keys(recent["Metadata"]) <= maybe_in


def test_fields_real_servers_lack_are_refused(emulator) -> None:
    """`getSectionItemsRaw` (client.ts) throws on a non-2xx answer; the emulator answers 400.

    Airwave's filter catalog (plex/filter-fields.ts `FILTER_FIELDS`) and sort list
    (plex/sort-fields.ts `SORT_FIELDS`) offer `contentRatingAge`, `location`, `episode.dovi` and,
    for TV, a `contentRating` sort; the servers the emulator models advertise none of them in
    their `Meta` vocabulary (docs/plex-emulator.md, "A real server's vocabulary").
    """
    refused = [
        _pool(1, 1, ["contentRatingAge>=10"]),
        _pool(1, 1, ["location=1"]),
        _pool(2, 4, ["episode.dovi=1"]),
        _pool(2, 4, [], "contentRating:asc"),
    ]

    assert [_fetch(emulator, path)[0] for path in refused] == [400] * len(refused)


def test_playback_lookup_reads_the_part_and_its_streams(emulator) -> None:
    """`getPlaybackInfo` (client.ts), first request: GET /library/metadata/{ratingKey}.

    Airwave reads `Media[0]` container / videoCodec / audioCodec and `Part[0]` id, key and
    `Stream[]` (id, streamType, languageCode, displayTitle, codec, channels) to choose direct play
    or a transcode. plex-api-spec `Media`, `Part` (`id` integer, `key` string) and `Stream`.
    """
    item = emulator.library.movies()[5]

    found = _container(emulator, f"/library/metadata/{item.rating_key}")["Metadata"][0]

    media = found["Media"][0]
    part = media["Part"][0]
    audio = [s for s in part["Stream"] if s["streamType"] == 2]
    assert (media["container"], media["videoCodec"]) == ("mkv", item.video_codec)
    assert media["audioCodec"] == audio_of(item)[0]
    assert isinstance(part["id"], int) and part["key"].startswith(f"/library/parts/{part['id']}/")
    assert [s["languageCode"] for s in audio] == list(item.audio_languages)
    assert all(isinstance(s["id"], int) and s["displayTitle"] for s in audio)


@pytest.mark.parametrize(
    "path",
    [
        "/library/sections",
        "/library/sections/2/genre",
        _all_items_page(2, 2, 0),
        _all_items_page(2, 4, 100),
        _recently_added(1, 1),
        _pool(2, 4, ["show.genre=104", "episode.unwatched=1"], "addedAt:desc"),
        "/library/metadata/1109",
    ],
)
def test_json_says_what_the_xml_says(emulator, path: str) -> None:
    """Every Airwave request answers the same content in JSON as in XML.

    Plex's API notes: `Accept: application/json` selects the JSON rendering of the same
    MediaContainer. Compared attribute by attribute in document order, with JSON booleans as the
    XML's 1 / 0.
    """
    xml_status, xml_type, xml_body = _fetch(emulator, path, accept="application/xml")
    container = _container(emulator, path)

    assert xml_status == 200 and xml_type.startswith("text/xml")
    assert list(_flatten_json(container)) == list(_flatten_xml(ElementTree.fromstring(xml_body)))
