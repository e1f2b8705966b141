"""The emulator end to end with the real plexapi client, checked against the dataset.

Reference: docs/reference/plex-emulator.md (the gotchas "GN" cited below).
"""

from __future__ import annotations

import http.client
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import date

from tests.support.plex import sort_records  # first: isolates plexapi's config (G17)

# isort: split

import pytest
from plexapi.exceptions import BadRequest, NotFound, Unauthorized
from plexapi.server import PlexServer

from airwave_dagster.emulators.plex import start_emulator

pytestmark = pytest.mark.plex


@pytest.fixture(scope="module")
def emulator():
    with start_emulator(items=600, seed=3) as handle:
        yield handle


@pytest.fixture(scope="module")
def plex(emulator):
    return PlexServer(emulator.url, emulator.token)


@pytest.fixture(scope="module")
def movies(plex):
    return plex.library.section("Movies")


@pytest.fixture(scope="module")
def tv(plex):
    return plex.library.section("TV Shows")


@pytest.fixture
def small():
    with start_emulator(items=40, seed=8) as handle:
        yield handle


def keys(results) -> list[int]:
    return [r.ratingKey for r in results]


def record_keys(records) -> list[int]:
    return [r.rating_key for r in records]


def get(url: str, token: str | None, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    if token is not None:
        request.add_header("X-Plex-Token", token)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def local_midnight(day: str) -> int:
    return int(time.mktime(date.fromisoformat(day).timetuple()))


def test_connect_reads_the_server(plex) -> None:
    assert plex.friendlyName == "Plex Emulator"
    assert plex.version.startswith("1.")
    assert plex.machineIdentifier


def test_wrong_token_is_unauthorized(emulator) -> None:
    with pytest.raises(Unauthorized):
        PlexServer(emulator.url, "not-the-token")


def test_token_is_also_accepted_in_the_query_string(emulator) -> None:
    status, _, _ = get(f"{emulator.url}/library/sections?X-Plex-Token={emulator.token}", None)

    assert status == 200


def test_responses_are_utf8_xml_with_a_length(emulator) -> None:
    status, headers, body = get(f"{emulator.url}/library/sections", emulator.token)

    assert status == 200
    assert headers["Content-Type"] == "text/xml;charset=utf-8"
    assert int(headers["Content-Length"]) == len(body)
    assert body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<MediaContainer')


def test_connections_are_kept_alive(emulator) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", emulator.port, timeout=10)
    try:
        for _ in range(3):
            connection.request("GET", "/identity", headers={"X-Plex-Token": emulator.token})
            response = connection.getresponse()
            response.read()
            assert response.status == 200
            assert not response.will_close
    finally:
        connection.close()


@pytest.mark.parametrize("method", ["PUT", "POST", "DELETE"])
def test_writes_are_refused(emulator, method: str) -> None:
    status, _, _ = get(f"{emulator.url}/library/sections/1/refresh", emulator.token, method)

    assert status == 405


def test_unknown_paths_are_not_found(plex) -> None:
    with pytest.raises(NotFound):
        plex.query("/no/such/endpoint")


def test_sections_and_counts(emulator, movies, tv) -> None:
    library = emulator.library

    assert (movies.key, movies.type, tv.key, tv.type) == (1, "movie", 2, "show")
    assert movies.locations == ["/data/movies"]
    assert movies.totalSize == len(library.movies())
    assert tv.totalSize == len(library.shows())
    assert tv.totalViewSize(libtype="episode") == len(library.episodes())
    assert tv.totalViewSize(libtype="season") == len(library.of_type(2, "season"))


def test_default_order_is_title_order(emulator, movies) -> None:
    assert keys(movies.all()) == record_keys(emulator.library.movies())


def test_paging_fetches_every_page(emulator, movies) -> None:
    expected = record_keys(emulator.library.movies())
    emulator.reset_stats()

    results = movies.search(container_size=25)

    assert keys(results) == expected
    assert emulator.stats()["by_kind"]["search"] == math.ceil(len(expected) / 25)


def test_maxresults_and_container_start(emulator, movies) -> None:
    expected = record_keys(emulator.library.movies())

    assert keys(movies.search(maxresults=5, container_size=2)) == expected[:5]
    assert keys(movies.search(container_start=15, maxresults=3)) == expected[15:18]


def test_size_zero_counts_without_items(emulator) -> None:
    url = f"{emulator.url}/library/sections/1/all?X-Plex-Container-Size=0&X-Plex-Container-Start=0"
    _, _, body = get(url, emulator.token)

    assert f'size="0" totalSize="{len(emulator.library.movies())}"'.encode() in body
    assert b"<Video" not in body


def test_limit_caps_before_paging(emulator, movies) -> None:
    expected = sort_records(emulator.library.movies(), "year:desc")

    results = movies.search(limit=4, sort="year:desc", container_size=3)

    assert keys(results) == record_keys(expected[:4])


STUDIO = "Northwind Films"

MOVIE_FILTERS = [
    ({"genre": "Comedy"}, lambda m: "Comedy" in m.genres),
    ({"genre": ["Action", "Comedy"]}, lambda m: {"Action", "Comedy"} & set(m.genres)),
    ({"genre&": ["Action", "Drama"]}, lambda m: {"Action", "Drama"} <= set(m.genres)),
    ({"genre!": "Drama"}, lambda m: "Drama" not in m.genres),
    ({"year>>": 1994, "year<<": 2010}, lambda m: 1994 < m.year < 2010),
    ({"decade": 1990}, lambda m: 1990 <= m.year <= 1999),
    ({"studio=": STUDIO}, lambda m: m.studio == STUDIO),
    ({"studio": "pictures"}, lambda m: "pictures" in m.studio.lower()),
    ({"studio!": "films"}, lambda m: "films" not in m.studio.lower()),
    ({"contentRating": ["PG", "PG-13"]}, lambda m: m.content_rating in ("PG", "PG-13")),
    ({"contentRating!": "R"}, lambda m: m.content_rating != "R"),
    ({"addedAt>>": "2025-06-01"}, lambda m: m.added_at > local_midnight("2025-06-01")),
    ({"originallyAvailableAt<<": "2000-01-01"}, lambda m: m.originally_available_at < "2000"),
    ({"unwatched": True}, lambda m: m.view_count == 0),
    ({"unwatched": False}, lambda m: m.view_count > 0),
    ({"inProgress": True}, lambda m: m.view_offset > 0),
    ({"hdr": True}, lambda m: m.hdr is not None),
    ({"duration>>": 7_200_000}, lambda m: m.duration_ms > 7_200_000),
    ({"audienceRating>>": 7.5}, lambda m: m.audience_rating > 7.5),
    ({"resolution": "4k"}, lambda m: m.resolution == "4k"),
    ({"title": "the"}, lambda m: "the" in m.title.lower()),
    ({"collection": "Emu Classics"}, lambda m: "Emu Classics" in m.collections),
    ({"audioLanguage": "jpn"}, lambda m: "jpn" in m.audio_languages),
    (
        {
            "and": [
                {"or": [{"genre": "Action"}, {"genre": "Comedy"}]},
                {"year>>": 1995},
                {"contentRating": ["PG", "PG-13", "R"]},
            ]
        },
        lambda m: (
            {"Action", "Comedy"} & set(m.genres)
            and m.year > 1995
            and m.content_rating in ("PG", "PG-13", "R")
        ),
    ),
    (
        {
            "or": [
                {"and": [{"genre": "Drama"}, {"year<<": 2000}]},
                {"and": [{"studio=": STUDIO}, {"unwatched": True}]},
            ]
        },
        lambda m: (
            ("Drama" in m.genres and m.year < 2000) or (m.studio == STUDIO and m.view_count == 0)
        ),
    ),
]


@pytest.mark.parametrize(
    ("filters", "oracle"), MOVIE_FILTERS, ids=[json.dumps(f) for f, _ in MOVIE_FILTERS]
)
def test_movie_filters_match_the_dataset(emulator, movies, filters, oracle) -> None:
    expected = [m for m in emulator.library.movies() if oracle(m)]

    results = movies.search(filters=filters)

    assert expected, "the oracle should select something at this size"
    assert keys(results) == record_keys(expected)


def test_tag_filters_accept_people(emulator, movies) -> None:
    someone = emulator.library.movies()[0]
    actor, director = someone.actors[0], someone.directors[0]

    by_actor = movies.search(actor=actor)
    by_director = movies.search(director=director)

    assert keys(by_actor) == [m.rating_key for m in emulator.library.movies() if actor in m.actors]
    assert keys(by_director) == [
        m.rating_key for m in emulator.library.movies() if director in m.directors
    ]


def test_relative_dates_count_back_from_now(emulator, movies) -> None:
    before = time.time()
    results = set(keys(movies.search(filters={"addedAt>>": "30d"})))
    after = time.time()

    def added_since(moment: float) -> set[int]:
        cutoff = moment - 30 * 86400
        return {m.rating_key for m in emulator.library.movies() if m.added_at > cutoff}

    assert added_since(after) <= results <= added_since(before)
    assert results


def test_show_fields_filter_episodes(emulator, tv) -> None:
    library = emulator.library
    expected = [e for e in library.episodes() if "Comedy" in library.show_of(e).genres]

    prefixed = tv.search(libtype="episode", filters={"show.genre": "Comedy"})
    fallback = tv.search(libtype="episode", genre="Comedy")

    assert keys(prefixed) == keys(fallback) == record_keys(expected)


def test_episode_fields_filter_shows(emulator, tv) -> None:
    library = emulator.library

    def episodes(show):
        return [library.items[k] for k in library.leaves[show.rating_key]]

    with_unwatched = tv.search(unwatched=True)
    none_in_2020 = tv.search(filters={"episode.year!": 2020})

    assert keys(with_unwatched) == [
        s.rating_key for s in library.shows() if any(e.view_count == 0 for e in episodes(s))
    ]
    assert keys(none_in_2020) == [
        s.rating_key for s in library.shows() if all(e.year != 2020 for e in episodes(s))
    ]


@pytest.mark.parametrize(
    "sort", ["year:desc", "titleSort:desc", "rating:desc", "duration", "year:desc,titleSort"]
)
def test_movie_sorts(emulator, movies, sort: str) -> None:
    expected = sort_records(emulator.library.movies(), sort.replace("duration", "duration:asc"))

    assert keys(movies.search(sort=sort)) == record_keys(expected)


def test_rating_sort_puts_unrated_last(emulator, movies) -> None:
    expected = sort_records(emulator.library.movies(), "rating:asc")

    results = movies.search(sort="rating:asc")

    assert keys(results) == record_keys(expected)
    assert expected[-1].rating is None
    assert expected[0].rating == min(m.rating for m in expected if m.rating is not None)


def test_episode_sorts(emulator, tv) -> None:
    episodes = emulator.library.episodes()

    by_air_date = tv.search(libtype="episode", sort="originallyAvailableAt:desc")
    by_title = tv.search(libtype="episode", sort="titleSort")

    assert keys(by_air_date) == record_keys(sort_records(episodes, "originallyAvailableAt:desc"))
    assert keys(by_title) == record_keys(sort_records(episodes, "titleSort:asc"))


def test_show_navigation(emulator, plex) -> None:
    library = emulator.library
    record = library.shows()[0]
    season_keys = library.children[record.rating_key]

    show = plex.fetchItem(record.rating_key)
    first_episode = show.episodes()[0]

    assert keys(show.seasons()) == season_keys
    assert keys(show.episodes()) == library.leaves[record.rating_key]
    assert keys(show.seasons()[0].episodes()) == library.children[season_keys[0]]
    assert show.episode(season=1, episode=1).ratingKey == library.leaves[record.rating_key][0]
    assert first_episode.show().ratingKey == record.rating_key
    assert first_episode.season().index == 1
    assert first_episode.seasonEpisode == "s01e01"


def test_collections(emulator, movies) -> None:
    records = emulator.library.collections_in(1)

    collections = movies.collections()
    classics = next(c for c in collections if c.title == "Emu Classics")
    record = next(r for r in records if r.title == "Emu Classics")

    assert [c.title for c in collections] == [r.title for r in records]
    assert sorted(keys(classics.items())) == sorted(record.members)
    assert sorted(keys(movies.search(collection="Emu Classics"))) == sorted(record.members)


def test_playlists(emulator, plex) -> None:
    records = sorted(emulator.library.playlists.values(), key=lambda p: p.title)

    playlists = plex.playlists()

    assert [p.title for p in playlists] == [p.title for p in records]
    assert keys(plex.playlist("Friday Night").items()) == list(
        next(p for p in records if p.title == "Friday Night").items
    )


def test_non_ascii_titles_survive(emulator, movies) -> None:
    found = movies.search(title="Amélie")
    tokyo = movies.search(filters={"title": "東京"})

    assert [m.title for m in found] == ["Amélie's Garden"]
    assert [m.title for m in tokyo] == ["東京 Drift"]


def test_filter_choices(emulator, movies, tv) -> None:
    library = emulator.library
    movie_genres = sorted({g for m in library.movies() for g in m.genres}, key=str.casefold)
    show_networks = sorted({s.network for s in library.shows()}, key=str.casefold)

    genre_choices = movies.listFilterChoices("genre")

    assert [c.title for c in genre_choices] == movie_genres
    assert all(c.key == str(library.tags.id_of("genre", c.title)) for c in genre_choices)
    assert [c.title for c in tv.listFilterChoices("network")] == show_networks
    assert {c.key for c in movies.listFilterChoices("contentRating")} == {
        m.content_rating for m in library.movies()
    }


def test_fetch_items_by_rating_key(emulator, plex) -> None:
    first, second = emulator.library.movies()[:2]

    assert plex.fetchItem(first.rating_key).title == first.title
    assert keys(plex.fetchItems([first.rating_key, second.rating_key])) == [
        first.rating_key,
        second.rating_key,
    ]
    with pytest.raises(NotFound):
        plex.fetchItem(999_999_999)


def test_listings_truncate_tags_when_asked(small) -> None:
    small.configure(truncate_tags=True)
    plex = PlexServer(small.url, small.token)
    record = max(small.library.movies(), key=lambda m: len(m.actors))

    listed = next(
        m for m in plex.library.section("Movies").all() if m.ratingKey == record.rating_key
    )
    full = plex.fetchItem(record.rating_key)
    assert full is not None

    assert len(listed.roles) == 3 < len(record.actors)
    assert [r.tag for r in full.roles] == list(record.actors)


def test_items_leave_out_the_elements_and_fields_a_request_excludes(emulator, plex) -> None:
    """`excludeElements` and `excludeFields`, as python-plexapi sends them for partial reloads."""
    excluded = "excludeElements=Media,Genre,Role&excludeFields=summary,tagline"
    movie = next(m for m in emulator.library.movies() if m.genres and m.actors and m.summary)
    episode = next(e for e in emulator.library.episodes() if e.resolution)
    for path in (
        f"/library/sections/1/all?type=1&{excluded}",
        f"/library/metadata/{movie.rating_key},{episode.rating_key}?{excluded}",
        f"/library/sections/2/all?type=4&{excluded}",
    ):
        items = [e for e in plex.query(path) if "ratingKey" in e.attrib]
        assert items, path
        for element in items:
            assert not {"Media", "Genre", "Role"} & {child.tag for child in element}, path
            assert not {"summary", "tagline"} & set(element.attrib), path
            assert {"ratingKey", "type", "title", "duration"} <= set(element.attrib), path
    # Without the options the same items carry all of it.
    full = plex.query(f"/library/metadata/{movie.rating_key}")[0]
    assert {"Media", "Genre", "Role"} <= {child.tag for child in full}
    assert full.attrib["summary"] == movie.summary


def test_total_duration_from_media_providers(emulator, movies) -> None:
    assert movies.totalDuration == sum(m.duration_ms for m in emulator.library.movies())


def test_request_accounting_in_process_and_over_http(emulator, plex) -> None:
    emulator.reset_stats()
    plex.query("/identity")
    plex.query("/library/sections/1/genre")

    _, _, body = get(f"{emulator.url}/__emulator/stats", None)
    over_http = json.loads(body)
    reset_status, _, _ = get(f"{emulator.url}/__emulator/stats/reset", None, "POST")

    assert over_http == {
        "total": 2,
        "by_kind": {"choices": 1, "identity": 1},
        "by_status": {"200": 2},
    }
    assert reset_status == 200
    assert emulator.stats()["total"] == 0


def test_bad_queries_are_rejected(emulator, plex) -> None:
    with pytest.raises(BadRequest):
        plex.query("/library/sections/1/all?push=1&genre=101")
    with pytest.raises(BadRequest):
        plex.query("/library/sections/1/all?nonsense=1")


def test_fail_rate_one_fails_every_request(small) -> None:
    small.configure(fail_rate=1.0)

    with pytest.raises(BadRequest, match=r"\(500\)"):
        PlexServer(small.url, small.token)
    assert small.stats()["by_kind"] == {"fault": 1}


def test_failures_repeat_for_a_seed() -> None:
    def pattern() -> list[int]:
        with start_emulator(items=20, seed=4, fail_rate=0.5) as handle:
            return [get(f"{handle.url}/identity", handle.token)[0] for _ in range(20)]

    first = pattern()

    assert first == pattern()
    assert {200, 500} == set(first)


def test_fail_all_switch(small) -> None:
    plex = PlexServer(small.url, small.token)
    small.configure(fail_all=True)

    with pytest.raises(BadRequest):
        plex.library.sections()

    small.configure(fail_all=False)
    assert len(plex.library.sections()) == 2


def test_latency_is_added_to_each_request(small) -> None:
    small.configure(latency_ms=60)
    started = time.monotonic()

    get(f"{small.url}/identity", small.token)

    assert time.monotonic() - started >= 0.06


def test_stopped_emulator_refuses_connections() -> None:
    handle = start_emulator(items=10, seed=1)
    handle.stop()

    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", handle.port), timeout=2).close()


def test_module_entry_point_serves_until_sigterm() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "airwave_dagster.emulators.plex", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--items", "30", "--seed", "2", "--token", "t0k"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, _, _ = get(f"http://127.0.0.1:{port}/identity", "t0k")
                break
            except OSError:
                assert time.monotonic() < deadline, "the emulator did not start"
                time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()

    assert status == 200
    assert process.returncode == 0
    assert f"http://127.0.0.1:{port}".encode() in output
