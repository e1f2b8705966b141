"""The synthetic library: deterministic, realistic, and convertible to domain items."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from airwave_dagster.emulators.plex.dataset import (
    ADDED_SPAN_SECONDS,
    GENRES,
    MOVIE_CONTENT_RATINGS,
    SHOW_CONTENT_RATINGS,
    build_library,
)


@pytest.fixture(scope="module")
def library():
    return build_library(3000, 5)


def test_same_seed_builds_the_same_library() -> None:
    first = build_library(400, 42, anchor=1_700_000_000)
    second = build_library(400, 42, anchor=1_700_000_000)

    assert first.media_items() == second.media_items()
    assert [c.title for c in first.collections.values()] == [
        c.title for c in second.collections.values()
    ]


def test_another_seed_builds_another_library() -> None:
    first = build_library(400, 1, anchor=1_700_000_000)
    second = build_library(400, 2, anchor=1_700_000_000)

    assert [m.title for m in first.media_items()] != [m.title for m in second.media_items()]


@pytest.mark.parametrize("items", [2, 30, 777])
def test_items_counts_movies_plus_episodes(items: int) -> None:
    library = build_library(items, 9)

    assert len(library.movies()) + len(library.episodes()) == items
    assert len(library.movies()) == max(1, round(items * 0.4))
    assert library.shows()


def test_sections_are_movies_and_tv(library) -> None:
    assert [(s.key, s.title, s.type) for s in library.sections] == [
        (1, "Movies", "movie"),
        (2, "TV Shows", "show"),
    ]


def test_vocabulary_is_realistic(library) -> None:
    movies, shows, episodes = library.movies(), library.shows(), library.episodes()

    assert {g for m in movies for g in m.genres} >= set(GENRES) - {"Music", "War", "Western"}
    assert {m.content_rating for m in movies} == set(MOVIE_CONTENT_RATINGS)
    assert {s.content_rating for s in shows} <= set(SHOW_CONTENT_RATINGS)
    assert all(1930 <= m.year <= 2026 for m in movies)
    assert len({m.decade for m in movies}) >= 6
    assert all(75 * 60_000 <= m.duration_ms <= 180 * 60_000 for m in movies)
    assert all(11 * 60_000 <= e.duration_ms <= 60 * 60_000 for e in episodes)
    assert {m.resolution for m in movies} == {"sd", "720", "1080", "4k"}
    assert {m.hdr for m in movies} == {None, "HDR10", "Dolby Vision", "HLG"}
    assert all(s.network for s in shows)
    assert any(m.view_count for m in movies) and any(not m.view_count for m in movies)
    ratings = [m.rating for m in movies if m.rating is not None]
    assert all(1.0 <= r <= 10.0 and round(r, 1) == r for r in ratings)
    assert len(ratings) < len(movies)
    assert any(not m.title.isascii() for m in movies)


def test_added_dates_span_the_last_three_years(library) -> None:
    added = [item.added_at for item in library.playable()]

    assert max(added) <= library.anchor
    assert min(added) >= library.anchor - ADDED_SPAN_SECONDS
    assert max(added) - min(added) > ADDED_SPAN_SECONDS * 0.9


def test_episodes_hang_off_seasons_and_shows(library) -> None:
    for show in library.shows():
        seasons = [library.items[k] for k in library.children[show.rating_key]]
        episodes = [library.items[k] for k in library.leaves[show.rating_key]]
        assert [s.index for s in seasons] == list(range(1, len(seasons) + 1))
        assert show.leaf_count == len(episodes) == sum(s.leaf_count for s in seasons)
        assert all(e.show_rating_key == show.rating_key for e in episodes)


def test_episodes_inherit_show_genres_and_studio_as_domain_items(library) -> None:
    episode = library.episodes()[0]
    show = library.show_of(episode)

    item = library.media_item(episode.rating_key)

    assert item.type == "episode"
    assert item.genres == show.genres
    assert item.studio == show.studio
    assert item.show_title == show.title
    assert item.show_rating_key == str(show.rating_key)
    assert (item.season, item.episode) == (episode.parent_index, episode.index)
    assert item.added_at == datetime.fromtimestamp(episode.added_at, tz=UTC).isoformat()


def test_shows_are_not_playable(library) -> None:
    with pytest.raises(ValueError, match="not a playable item"):
        library.media_item(library.shows()[0].rating_key)


def test_a_hundred_thousand_items_build_in_seconds() -> None:
    started = time.monotonic()
    library = build_library(100_000, 7)
    elapsed = time.monotonic() - started

    assert len(library.movies()) + len(library.episodes()) == 100_000
    assert len(library.shows()) > 500
    assert elapsed < 15
