"""PlexClient against the emulator through real plexapi: pools equal the dataset's answers.

Reference: docs/reference/plex-emulator.md (the gotchas "GN" cited below).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from xml.etree.ElementTree import fromstring

from tests.support.plex import (  # first: isolates plexapi's config (G17)
    condition,
    envelope,
    expected_pool,
    group,
)

# isort: split

import pytest

from airwave_dagster.domain.library import MediaItem
from airwave_dagster.emulators.plex import Item, start_emulator
from airwave_dagster.emulators.plex.vocabulary import local_midnight
from resources import plex as plex_resource
from resources.plex import (
    ListedItem,
    PlexAuthError,
    PlexClient,
    PlexResource,
    PlexUnavailableError,
)

pytestmark = pytest.mark.plex


@pytest.fixture(scope="module")
def emulator():
    with start_emulator(items=400, seed=11) as handle:
        yield handle


@pytest.fixture(scope="module")
def client(emulator) -> PlexClient:
    return PlexClient(emulator.url, emulator.token)


@pytest.fixture
def small():
    with start_emulator(items=30, seed=2) as handle:
        yield handle


def c(field: str, op: str, value: str) -> dict[str, Any]:
    return condition(field, op, value)


LOCAL_FILTERS: list[tuple[str, dict[str, Any] | None]] = [
    ("everything", None),
    ("no filter key", envelope(None)),
    ("movies only", envelope(None, ["movie"])),
    ("shows only", envelope(None, ["show"])),
    ("genre is", envelope(c("genre", "is", "Comedy"))),
    ("genre is, any case", envelope(c("genre", "is", "cOMEDY"))),
    ("genre is not", envelope(c("genre", "isNot", "Drama"))),
    ("genre absent", envelope(c("genre", "is", "Polka"))),
    ("genre is not absent", envelope(c("genre", "isNot", "Polka"))),
    ("studio is", envelope(c("studio", "is", "northwind films"))),
    ("studio is not", envelope(c("studio", "isNot", "Northwind Films"))),
    ("content rating", envelope(c("contentRating", "is", "TV-14"))),
    ("content rating is not", envelope(c("contentRating", "isNot", "R"))),
    ("resolution", envelope(c("resolution", "is", "4k"))),
    ("resolution is not", envelope(c("resolution", "isNot", "1080"))),
    ("year from", envelope(c("year", "gte", "2010"))),
    ("year until", envelope(c("year", "lte", "1985"))),
    ("year is", envelope(c("year", "is", "2019"))),
    ("episode year", envelope(c("episodeYear", "gte", "2015"))),
    ("decade is", envelope(c("decade", "is", "1990"))),
    ("decade is not round", envelope(c("decade", "is", "1995"))),
    ("decade from", envelope(c("decade", "gte", "1995"))),
    ("decade until", envelope(c("decade", "lte", "1979"))),
    ("audience rating", envelope(c("audienceRating", "gte", "7.5"))),
    ("critic rating", envelope(c("criticRating", "lte", "5"))),
    ("critic rating is", envelope(c("criticRating", "is", "7"))),
    ("duration from", envelope(c("duration", "gte", "120"))),
    ("duration until", envelope(c("duration", "lte", "90"))),
    ("released from", envelope(c("releaseDate", "gte", "2020-01-01"))),
    ("released until", envelope(c("releaseDate", "lte", "1999-12-31"))),
    ("hdr", envelope(c("hdr", "is", "true"))),
    ("not hdr", envelope(c("hdr", "is", "false"))),
    # Real servers offer `dovi` on movies only (no `episode.dovi`; see test_vocabulary_gaps).
    ("dolby vision", envelope(c("dovi", "is", "true"), ["movie"])),
    ("title contains", envelope(c("title", "contains", "the"))),
    ("title lacks", envelope(c("title", "notContains", "the"))),
    ("episode title", envelope(c("episodeTitle", "contains", "pilot"))),
    ("unknown field", envelope(c("mood", "is", "Happy"))),
    ("op not allowed", envelope(c("year", "contains", "19"))),
    ("not a number", envelope(c("year", "gte", "soon"))),
    ("empty and", envelope(group("and"))),
    ("empty or", envelope(group("or"))),
    (
        "nested",
        envelope(
            group(
                "and",
                group("or", c("genre", "is", "Action"), c("genre", "is", "Comedy")),
                c("year", "gte", "1990"),
                c("title", "notContains", "x"),
            )
        ),
    ),
    (
        "or across fields",
        envelope(group("or", c("decade", "is", "1980"), c("hdr", "is", "true"))),
    ),
    (
        "or with an inapplicable branch",
        envelope(group("or", c("duration", "lte", "100"), c("episodeTitle", "contains", "the"))),
    ),
    (
        "and with an inapplicable branch",
        envelope(group("and", c("duration", "lte", "100"), c("genre", "is", "Comedy"))),
    ),
]


@pytest.mark.parametrize(("name", "plex_filter"), LOCAL_FILTERS, ids=[n for n, _ in LOCAL_FILTERS])
def test_pools_equal_local_evaluation(emulator, client, name, plex_filter) -> None:
    expected = expected_pool(emulator.library, plex_filter)

    assert client.resolve(plex_filter) == expected


def test_people_fields(emulator, client) -> None:
    library = emulator.library
    episode = library.episodes()[5]
    director, actor = episode.directors[0], library.movies()[0].actors[0]

    # Real servers offer no `episode.director`: on TV the condition matches nothing (and the
    # import says so, test_vocabulary_gaps), so the directors are compared on movies.
    director = library.movies()[5].directors[0]
    assert client.resolve(envelope(c("director", "is", episode.directors[0]), ["show"])) == []
    for plex_filter in (
        envelope(c("director", "is", director), ["movie"]),
        envelope(c("actor", "is", actor)),
        envelope(c("actor", "isNot", actor)),
    ):
        assert client.resolve(plex_filter) == expected_pool(library, plex_filter)
    producer = next(p for m in library.movies() for p in m.producers)
    produced = envelope(c("producer", "is", producer))
    assert client.resolve(produced) == expected_pool(
        library, produced, records=lambda item, show: producer in item.producers
    )


def _show_or_item(read: Callable[[Item], Any]) -> Callable[[Item, Item | None], Any]:
    return lambda item, show: read(show if show is not None else item)


def _days_ago(days: int) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(time.time() - days * 86400))


NON_LOCAL_FILTERS: list[tuple[str, dict[str, Any], Callable[[Item, Item | None], Any]]] = [
    (
        "label",
        envelope(c("label", "is", "Favorite")),
        _show_or_item(lambda r: "Favorite" in r.labels),
    ),
    (
        "collection",
        envelope(c("collection", "is", "Emu Classics")),
        lambda item, show: show is None and "Emu Classics" in item.collections,
    ),
    (
        "show collection",
        envelope(c("collection", "is", "emu originals")),
        lambda item, show: show is not None and "Emu Originals" in show.collections,
    ),
    (
        "network",
        envelope(c("network", "is", "Harbor Network")),
        lambda item, show: show is not None and show.network == "Harbor Network",
    ),
    (
        "country",
        envelope(c("country", "is", "Japan")),
        _show_or_item(lambda r: "Japan" in r.countries),
    ),
    (
        "producer absent",
        envelope(c("producer", "isNot", "Nobody Atall")),
        lambda item, show: True,
    ),
    (
        "audio language",
        envelope(c("audioLanguage", "is", "jpn")),
        lambda item, show: "jpn" in item.audio_languages,
    ),
    (
        "subtitle language is not",
        envelope(c("subtitleLanguage", "isNot", "eng")),
        lambda item, show: "eng" not in item.subtitle_languages,
    ),
    ("unwatched", envelope(c("unwatched", "is", "true")), lambda item, show: not item.view_count),
    ("watched", envelope(c("unwatched", "is", "false")), lambda item, show: item.view_count > 0),
    ("in progress", envelope(c("inProgress", "is", "true")), lambda item, show: item.view_offset),
    (
        "user rating",
        envelope(c("userRating", "gte", "8")),
        _show_or_item(lambda r: r.user_rating is not None and r.user_rating >= 8),
    ),
    ("plays", envelope(c("viewCount", "gte", "2")), _show_or_item(lambda r: r.view_count >= 2)),
    (
        "last viewed",
        envelope(c("lastViewedAt", "gte", "2026-01-01")),
        _show_or_item(
            lambda r: (
                r.last_viewed_at is not None and r.last_viewed_at >= local_midnight("2026-01-01")
            )
        ),
    ),
    (
        "unwatched leaves",
        envelope(c("unwatchedLeaves", "is", "true")),
        lambda item, show: show is not None and show.viewed_leaf_count < show.leaf_count,
    ),
    (
        "edition",
        envelope(c("editionTitle", "isNot", "Director's Cut")),
        lambda item, show: show is not None or item.edition_title != "Director's Cut",
    ),
    (
        "unmatched",
        envelope(c("unmatched", "is", "false")),
        _show_or_item(lambda r: not r.unmatched),
    ),
    ("duplicate", envelope(c("duplicate", "is", "true")), lambda item, show: item.duplicate),
    ("not in trash", envelope(c("trash", "is", "false")), lambda item, show: not item.trash),
]


@pytest.mark.parametrize(
    ("name", "plex_filter", "oracle"), NON_LOCAL_FILTERS, ids=[n for n, _, _ in NON_LOCAL_FILTERS]
)
def test_pools_of_server_side_fields_match_the_records(
    emulator, client, name, plex_filter, oracle
) -> None:
    expected = expected_pool(emulator.library, plex_filter, records=oracle)

    assert client.resolve(plex_filter) == expected


def test_writers_of_a_show_select_all_its_episodes(emulator, client) -> None:
    library = emulator.library
    writer = library.shows()[0].writers[0]
    plex_filter = envelope(c("writer", "is", writer))

    expected = expected_pool(
        library,
        plex_filter,
        records=lambda item, show: writer in (show.writers if show else item.writers),
    )

    assert client.resolve(plex_filter) == expected


def test_added_within_counts_days_back_from_now(emulator, client) -> None:
    plex_filter = envelope(c("addedWithin", "is", "120"))

    def added_since(moment: float) -> set[str]:
        cutoff = moment - 120 * 86400
        pool = expected_pool(
            emulator.library, plex_filter, records=lambda i, s: i.added_at > cutoff
        )
        return {item.rating_key for item in pool}

    before = time.time()
    found = {item.rating_key for item in client.resolve(plex_filter)}
    after = time.time()

    assert found
    assert added_since(after) <= found <= added_since(before)


@pytest.mark.parametrize(
    "sort",
    [
        "titleSort:desc",
        "year:desc",
        "originallyAvailableAt:desc",
        "rating:asc",
        "audienceRating:desc",
        "userRating:desc",
        "duration:asc",
        "viewCount:desc",
        "addedAt:desc",
        "lastViewedAt:desc",
        "mediaHeight:desc",
        "mediaBitrate:asc",
    ],
)
def test_each_library_is_sorted(emulator, client, sort: str) -> None:
    plex_filter = envelope(c("genre", "isNot", "Horror"))

    assert client.resolve(plex_filter, sort=sort) == expected_pool(
        emulator.library, plex_filter, sort=sort
    )


def test_ranges_are_inclusive(emulator, client) -> None:
    year = emulator.library.movies()[0].year
    day = emulator.library.movies()[1].originally_available_at
    assert year is not None and day is not None

    from_year = client.resolve(envelope(c("year", "gte", str(year)), ["movie"]))
    until_year = client.resolve(envelope(c("year", "lte", str(year)), ["movie"]))
    until_day = client.resolve(envelope(c("releaseDate", "lte", day), ["movie"]))
    from_day = client.resolve(envelope(c("releaseDate", "gte", day), ["movie"]))

    assert any(item.year == year for item in from_year)
    assert any(item.year == year for item in until_year)
    assert any(item.originally_available_at == day for item in until_day)
    assert any(item.originally_available_at == day for item in from_day)


def test_inapplicable_fields_match_nothing_in_that_library(client) -> None:
    assert client.resolve(envelope(c("duration", "gte", "1"), ["show"])) == []
    assert client.resolve(envelope(c("network", "isNot", "x"), ["movie"])) == []
    assert client.resolve(envelope(c("episodeTitle", "contains", ""), ["movie"])) == []
    assert {i.type for i in client.resolve(envelope(c("duration", "gte", "1")))} == {"movie"}


def test_library_key_is_honoured(emulator, client) -> None:
    library = emulator.library

    only_tv = client.resolve(None, library_key="2")
    unknown = client.resolve(None, library_key="99")
    wrong_type = client.resolve(envelope(None, ["show"]), library_key="1")

    assert only_tv == expected_pool(library, None, library_key="2")
    assert {i.type for i in only_tv} == {"episode"}
    assert unknown == expected_pool(library, None)
    assert wrong_type == []


def test_include_and_exclude_combine_in_order(emulator, client) -> None:
    library = emulator.library
    comedy = envelope(c("genre", "is", "Comedy"))
    old = envelope(c("year", "lte", "1999"))
    horror = envelope(c("genre", "is", "Horror"), ["movie"])

    pool = client.resolve_pool(
        [("INCLUDE", comedy, None), ("EXCLUDE", old, None), ("INCLUDE", horror, "1")],
        sort="titleSort:asc",
    )

    removed = {item.rating_key for item in expected_pool(library, old)}
    expected: dict[str, MediaItem] = {}
    for item in expected_pool(library, comedy):
        if item.rating_key not in removed:
            expected[item.rating_key] = item
    for item in expected_pool(library, horror):
        expected.setdefault(item.rating_key, item)
    assert pool == list(expected.values())
    assert pool


def test_exclude_removes_only_earlier_inclusions(emulator, client) -> None:
    comedy = envelope(c("genre", "is", "Comedy"))

    pool = client.resolve_pool([("EXCLUDE", comedy, None), ("INCLUDE", comedy, None)], sort="year")

    assert pool == expected_pool(emulator.library, comedy, sort="year")


def test_requests_per_resolution_are_few(emulator) -> None:
    client = PlexClient(emulator.url, emulator.token)
    comedy = envelope(c("genre", "is", "Comedy"))
    emulator.reset_stats()

    client.resolve(comedy)
    cold = emulator.stats()
    emulator.reset_stats()
    client.resolve(comedy)
    warm = emulator.stats()
    emulator.reset_stats()
    client.resolve(envelope(group("and", c("director", "isNot", "x"), c("decade", "is", "1990"))))
    new_field = emulator.stats()

    # Connect (3), per library: vocabulary (2), genre choices (1), one search page; then one
    # metadata batch for the items found (full tags and streams: listings are partial) and the
    # shows their episodes' listings name, in the same request: 12. Afterwards a resolution is
    # one search per library and one batch.
    assert cold["total"] <= 12
    assert cold["by_kind"]["metadata"] == 1
    assert warm == {
        "total": 3,
        "by_kind": {"search": 2, "metadata": 1},
        "by_status": {"200": 3},
    }
    assert new_field["total"] <= 6


def test_a_listed_pool_is_the_pool_read_from_its_searches_alone(emulator, client) -> None:
    definitions = [
        ("INCLUDE", envelope(c("genre", "is", "Comedy")), None),
        ("INCLUDE", envelope(c("year", "gte", "2005")), None),
        ("EXCLUDE", envelope(c("genre", "is", "Drama")), None),
    ]
    complete = client.resolve_pool(definitions, sort="year:desc")
    emulator.reset_stats()

    listed = client.list_pool(definitions, sort="year:desc")
    requests = emulator.stats()

    def essentials(item: MediaItem | ListedItem) -> tuple[object, ...]:
        return (
            item.rating_key,
            item.type,
            item.title,
            item.duration_ms,
            item.library_key,
            item.show_rating_key,
        )

    assert [essentials(i) for i in listed] == [essentials(i) for i in complete]
    assert requests["by_kind"] == {"search": 6}  # three definitions, two libraries each
    assert any(i.type == "episode" for i in listed)
    # The listings were asked to leave out what a pool does not need (LISTING_EXCLUDES).
    for item in listed:
        assert not item.element.findall("*"), "no tags or media in a listing"
        assert "summary" not in item.element.attrib and "tagline" not in item.element.attrib
    assert any(i.genres and i.summary and i.resolution for i in complete)
    emulator.reset_stats()
    assert client.complete(listed[:5]) == complete[:5]
    assert emulator.stats()["by_kind"]["metadata"] == 1


def test_episodes_and_their_unread_shows_are_completed_in_one_request(emulator) -> None:
    client = PlexClient(emulator.url, emulator.token)
    definitions = [("INCLUDE", envelope(c("genre", "is", "Comedy")), None)]
    listed = client.list_pool(definitions, sort="titleSort:asc")
    episodes = [item for item in listed if item.type == "episode"][:40]
    shows = {item.show_rating_key for item in episodes}
    assert len(episodes) >= 10 and len(shows) >= 2  # shows this client has not read yet
    emulator.reset_stats()

    completed = client.complete(episodes)

    assert emulator.stats()["by_kind"] == {"metadata": 1}
    # What a second client reads by itself, item by item with its shows, is the same.
    reference = PlexClient(emulator.url, emulator.token)
    assert completed == [reference.complete([item])[0] for item in episodes]
    assert all(item.studio or item.network or item.genres for item in completed)
    emulator.reset_stats()
    client.complete(episodes[:3])
    assert emulator.stats()["by_kind"] == {"metadata": 1}  # the shows are remembered


def test_an_item_gone_before_it_is_completed_is_what_its_listing_said(emulator, client) -> None:
    definitions = [("INCLUDE", envelope(c("genre", "is", "Comedy")), None)]
    listed = client.list_pool(definitions, sort="titleSort:asc")
    gone = ListedItem.of(
        fromstring(
            '<Video ratingKey="987654" type="movie" title="Deleted meanwhile" duration="5400000" '
            'year="1999" addedAt="946684800"/>'
        ),
        listed[0].library_key,
    )
    completed = client.complete([gone, listed[0]])
    assert completed[0] == MediaItem(
        rating_key="987654",
        type="movie",
        title="Deleted meanwhile",
        duration_ms=5_400_000,
        year=1999,
        added_at="2000-01-01T00:00:00+00:00",
        library_key=listed[0].library_key,
    )
    assert completed[1].genres, "the other item is read in full"


def test_pools_larger_than_800_are_complete() -> None:
    with start_emulator(items=5000, seed=13) as big:
        client = PlexClient(big.url, big.token)
        plex_filter = envelope(c("genre", "isNot", "Action"))

        pool = client.resolve(plex_filter)
        big.reset_stats()
        everything = client.resolve(None)
        pages = big.stats()["by_kind"]["search"]

        assert pool == expected_pool(big.library, plex_filter)
        assert everything == expected_pool(big.library, None)
    assert len(everything) == 5000
    assert sum(1 for i in pool if i.type == "movie") > 800
    assert pages == 3  # 2000 movies in one page, 3000 episodes in two


def test_episodes_carry_their_shows_network(emulator, client) -> None:
    # Plex keeps the network on the show; the snapshot and the AI profile need it per episode.
    networks = {str(show.rating_key): show.network for show in emulator.library.shows()}
    episodes = [item for item in client.resolve(None) if item.type == "episode"]
    assert episodes and all(item.show_rating_key in networks for item in episodes)
    assert all(item.network == networks[item.show_rating_key] for item in episodes)
    assert {item.network for item in episodes} - {None}, "the emulator's shows have networks"
    assert all(item.network is None for item in client.resolve(None) if item.type == "movie")


def test_tag_values(emulator, client) -> None:
    library = emulator.library

    def folded(values) -> list[str]:
        return sorted(set(values), key=str.casefold)

    assert client.tag_values("genre", ["movie"]) == folded(
        g for m in library.movies() for g in m.genres
    )
    assert client.tag_values("genre", []) == folded(
        [g for m in library.movies() for g in m.genres]
        + [g for s in library.shows() for g in s.genres]
    )
    assert client.tag_values("network", ["movie"]) == []
    assert client.tag_values("network", ["show"]) == folded(s.network for s in library.shows())
    assert client.tag_values("resolution", ["movie"]) == folded(
        m.resolution for m in library.movies()
    )
    assert client.tag_values("studio", ["movie", "show"]) == folded(
        [m.studio for m in library.movies()] + [s.studio for s in library.shows()]
    )
    with pytest.raises(ValueError, match="not a tag field"):
        client.tag_values("year", ["movie"])


def test_libraries(client) -> None:
    libraries = client.libraries()

    assert [(lib.key, lib.title, lib.type) for lib in libraries] == [
        ("1", "Movies", "movie"),
        ("2", "TV Shows", "show"),
    ]


def test_resource_builds_a_client(emulator) -> None:
    resource = PlexResource(base_url=emulator.url, token=emulator.token)

    client = resource.get_client()

    assert isinstance(client, PlexClient)
    assert [lib.key for lib in client.libraries()] == ["1", "2"]


def test_wrong_token_is_an_auth_error(emulator) -> None:
    client = PlexClient(emulator.url, "wrong-secret-value")

    with pytest.raises(PlexAuthError) as caught:
        client.libraries()

    message = str(caught.value)
    assert "PLEX_TOKEN" in message and "PLEX_URL" in message
    assert "wrong-secret-value" not in message


def test_unreachable_server_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = PlexClient(f"http://127.0.0.1:{port}", "secret-token-value", timeout=5)

    with pytest.raises(PlexUnavailableError) as caught:
        client.resolve(None)

    message = str(caught.value)
    assert "PLEX_URL" in message and f"127.0.0.1:{port}" in message
    assert "secret-token-value" not in message


def test_server_errors_are_unavailable(small) -> None:
    client = PlexClient(small.url, small.token)
    client.libraries()
    small.configure(fail_all=True)

    with pytest.raises(PlexUnavailableError, match="HTTP 500"):
        client.resolve(None)


def test_timeouts_are_unavailable(small) -> None:
    small.configure(latency_ms=1000)
    client = PlexClient(small.url, small.token, timeout=0.2)

    with pytest.raises(PlexUnavailableError):
        client.libraries()


def test_a_sort_no_server_offers_is_title_order(client) -> None:
    assert client.resolve(None, sort="nonsense:asc") == client.resolve(None)
    assert client.vocabulary_gaps([("INCLUDE", None, None)], sort="nonsense:asc") == [
        "sort 'nonsense' is not offered by library 'Movies': ordered by title there",
        "sort 'nonsense' is not offered by library 'TV Shows': ordered by title there",
    ]


def test_vocabulary_gaps_name_what_the_server_lacks(emulator, client) -> None:
    """Real servers advertise no `episode.director`, `episode.dovi`, `location` or
    `contentRatingAge`, and no `contentRating` sort on episodes (issue 22)."""
    definitions = [
        ("INCLUDE", envelope(c("director", "is", "x")), None),
        ("INCLUDE", envelope(group("or", c("dovi", "is", "true"), c("location", "is", "/"))), None),
        ("EXCLUDE", envelope(c("contentRatingAge", "gte", "14"), ["movie"]), None),
    ]

    gaps = client.vocabulary_gaps(definitions, sort="contentRating:asc")

    assert len(gaps) == 6
    assert set(gaps) == {
        "filter field 'director' (episode.director) is not offered by library 'TV Shows': "
        "it matches nothing there",
        "filter field 'dovi' (episode.dovi) is not offered by library 'TV Shows': "
        "it matches nothing there",
        "filter field 'location' (location) is not offered by library 'Movies': "
        "it matches nothing there",
        "filter field 'location' (episode.location) is not offered by library 'TV Shows': "
        "it matches nothing there",
        "sort 'contentRating' is not offered by library 'TV Shows': ordered by title there",
        "filter field 'contentRatingAge' (contentRatingAge) is not offered by library 'Movies': "
        "it matches nothing there",
    }
    assert (
        client.vocabulary_gaps(
            [("INCLUDE", envelope(c("genre", "is", "Drama")), None)], sort="titleSort:asc"
        )
        == []
    )


def test_a_sort_the_server_lacks_falls_back_to_title_order(emulator, client) -> None:
    plex_filter = envelope(c("genre", "is", "Comedy"), ["show"])

    by_rating = client.resolve(plex_filter, sort="contentRating:asc")

    assert by_rating == client.resolve(plex_filter, sort="titleSort:asc")


def test_a_client_given_another_s_vocabulary_asks_plex_only_for_pools_and_items(emulator) -> None:
    definitions = [
        ("INCLUDE", envelope(c("genre", "is", "Comedy")), None),
        ("INCLUDE", envelope(c("resolution", "isNot", "1080")), None),
    ]
    planner = PlexClient(emulator.url, emulator.token)
    planner.prepare(definitions, sort="year:desc")
    vocabulary = planner.vocabulary()
    assert not any(emulator.token in text for text in vocabulary.values())
    builder = PlexClient(emulator.url, emulator.token)
    builder.use_vocabulary(vocabulary)
    emulator.reset_stats()

    pool = builder.resolve_pool(definitions, sort="year:desc")
    requests = emulator.stats()["by_kind"]

    assert set(requests) == {"search", "metadata"}, requests
    assert requests["search"] == 4  # two definitions, two libraries each
    assert pool == planner.resolve_pool(definitions, sort="year:desc")


@pytest.mark.parametrize(
    "text",
    [
        "2024-02-29",
        "2023-02-29",
        "2024-13-01",
        "2024-00-10",
        "1999-1-5",
        "1999-01-5",
        "0999-01-01",
        "abcd-ef-gh",
        "2024-02-3x",
        "20240203",
        "",
        "\uff11\uff19\uff19\uff19-01-01",  # fullwidth digits
    ],
)
def test_a_release_day_is_read_as_strptime_reads_it(text: str) -> None:
    """The fast path for the usual form agrees with plexapi's `strptime("%Y-%m-%d")`."""
    try:
        expected: str | None = datetime.strptime(text, "%Y-%m-%d").strftime("%Y-%m-%d")
    except ValueError:
        expected = None
    assert plex_resource._release_day(text) == expected
