"""The emulator advertises a real server's filter vocabulary, read through plexapi.

Source for the rules: issue 22 (captures of real servers' `<Meta>` vocabularies, python-plexapi's
real-server search tests): no `episode.director`, `episode.dovi`, `location` or
`contentRatingAge` filter; no `contentRating` sort on episodes; `viewOffset`,
`unviewedLeafCount` and `episode.addedAt` sorts present. Listings are partial (first tags only);
an item's own metadata is complete (python-plexapi `PlexPartialObject`).
"""

from __future__ import annotations

from tests.support.plex import sort_records  # noqa: F401  first: isolates plexapi's config

# isort: split

import pytest
from plexapi.exceptions import BadRequest, NotFound
from plexapi.server import PlexServer

from airwave_dagster.emulators.plex import start_emulator


@pytest.fixture(scope="module")
def server():
    with start_emulator(items=120, seed=4) as handle:
        yield handle, PlexServer(handle.url, handle.token)


def _fields(section, libtype: str) -> set[str]:
    return {f.key for f in section.listFields(libtype)}


def _sorts(section, libtype: str) -> set[str]:
    return {s.key for s in section.listSorts(libtype)}


def test_fields_are_a_real_servers(server) -> None:
    _, plex = server
    movies, shows = plex.library.section("Movies"), plex.library.section("TV Shows")

    assert {"director", "dovi", "genre", "hdr"} <= _fields(movies, "movie")
    assert not {"location", "contentRatingAge"} & _fields(movies, "movie")
    episode = _fields(shows, "episode")
    assert {"episode.hdr", "episode.title", "episode.addedAt"} <= episode
    assert not {"episode.director", "episode.dovi", "episode.location", "episode.writer"} & episode
    assert "show.contentRatingAge" not in _fields(shows, "show")


def test_sorts_are_a_real_servers(server) -> None:
    _, plex = server
    movies, shows = plex.library.section("Movies"), plex.library.section("TV Shows")

    assert "contentRating" not in _sorts(shows, "episode")
    assert {"viewOffset", "addedAt"} <= _sorts(shows, "episode")
    assert {"viewOffset", "contentRating"} <= _sorts(movies, "movie")
    assert {"unviewedLeafCount", "episode.addedAt"} <= _sorts(shows, "show")
    with pytest.raises(NotFound):
        shows.search(libtype="episode", sort="contentRating:asc")


def test_a_server_lacking_optional_fields(server) -> None:
    with start_emulator(items=60, seed=4, missing_fields=("hdr", "audioLanguage")) as handle:
        plex = PlexServer(handle.url, handle.token)
        movies = plex.library.section("Movies")
        assert not {"hdr", "audioLanguage"} & _fields(movies, "movie")
        with pytest.raises((BadRequest, NotFound)):
            movies.search(filters={"hdr": True})
    with pytest.raises(ValueError, match="genre"):
        start_emulator(items=10, missing_fields=("genre",))


def test_listings_are_partial_and_metadata_complete(server) -> None:
    handle, plex = server
    movies = plex.library.section("Movies")
    record = max(handle.library.movies(), key=lambda m: len(m.genres) + len(m.actors))
    assert len(record.genres) > 2 or len(record.actors) > 3

    listed = next(m for m in movies.search(libtype="movie") if m.ratingKey == record.rating_key)
    full = plex.fetchItem(record.rating_key)

    assert [g.tag for g in listed.genres] == list(record.genres[:2])
    assert [r.tag for r in listed.roles] == list(record.actors[:3])
    assert [g.tag for g in full.genres] == list(record.genres)
    assert [r.tag for r in full.roles] == list(record.actors)
