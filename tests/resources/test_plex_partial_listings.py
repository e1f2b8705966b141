"""Pools under partial listings: evaluating a filter over the snapshot equals asking Plex.

Real servers send only the first few tags of each kind in a listing (`/library/sections/{id}/all`
carries about 2 genres, 1 director and 3 roles per item; the full lists come from
`/library/metadata/{id}`). python-plexapi's `PlexPartialObject` documents the same split: objects
built from a listing are partial and reload their full metadata on demand. The emulator does this
by default, so these tests fail if the product ever reads tags from a listing again.

Reference: docs/reference/plex-emulator.md (the gotchas "GN" cited below).
"""

from __future__ import annotations

from tests.support.plex import condition, envelope  # first: isolates plexapi's config (G17)

# isort: split

import statistics
from collections import Counter
from typing import Any

import pytest

from airwave_dagster.domain.filters import (
    ALLOWED_OPS,
    FIELDS,
    FilterEnvelope,
    OfferedFields,
    evaluate,
)
from airwave_dagster.domain.library import MediaItem
from airwave_dagster.emulators.plex import start_emulator
from airwave_dagster.emulators.plex.render import LISTING_TAG_LIMITS
from resources.plex import PlexClient

pytestmark = pytest.mark.plex

LOCAL_TAG_READERS = {
    "genre": lambda item: item.genres,
    "director": lambda item: item.directors,
    "actor": lambda item: item.cast,
    "studio": lambda item: (item.studio,),
    "contentRating": lambda item: (item.content_rating,),
    "resolution": lambda item: (item.resolution,),
}
"""How each local tag field reads a snapshot item (restated, not imported from the domain)."""

LISTING_LIMITS = {"genre": "Genre", "director": "Director", "actor": "Role"}

EPISODE_LACKS = frozenset({"director", "dovi"})
"""Local fields real servers do not offer on episodes (no `episode.director`/`episode.dovi`)."""


@pytest.fixture(scope="module")
def emulator():
    with start_emulator(items=600, seed=5) as handle:
        yield handle


@pytest.fixture(scope="module")
def client(emulator) -> PlexClient:
    return PlexClient(emulator.url, emulator.token)


@pytest.fixture(scope="module")
def snapshot(client) -> list[MediaItem]:
    """What the library refresh stores: every movie and episode, as `sync_library` reads it."""
    return client.resolve(None)


def _value_for(field: str, op: str, snapshot: list[MediaItem]) -> str:
    """A value that makes the condition discriminate, preferring tags a listing leaves out."""
    if field in LOCAL_TAG_READERS:
        read = LOCAL_TAG_READERS[field]
        limit = LISTING_TAG_LIMITS.get(LISTING_LIMITS.get(field, ""), 0)
        hidden = Counter(tag for item in snapshot for tag in read(item)[limit:] if tag)
        every = Counter(tag for item in snapshot for tag in read(item) if tag)
        return (hidden or every).most_common(1)[0][0]
    kind = FIELDS[field].kind
    if kind == "text":
        return "the"
    if kind == "bool":
        return "true"
    if kind == "date":
        days = sorted(i.originally_available_at for i in snapshot if i.originally_available_at)
        return days[len(days) // 2]
    numbers = {
        "year": [i.year for i in snapshot],
        "episodeYear": [i.year for i in snapshot if i.type == "episode"],
        "decade": [i.year // 10 * 10 for i in snapshot if i.year],
        "audienceRating": [i.audience_rating for i in snapshot],
        "criticRating": [i.critic_rating for i in snapshot],
        "duration": [round(i.duration_ms / 60000) for i in snapshot if i.type == "movie"],
    }[field]
    middle = statistics.median_low([n for n in numbers if n is not None])
    return str(int(middle)) if op != "is" or field != "duration" else "0"


CASES = [
    (name, op)
    for name, spec in FIELDS.items()
    if spec.local
    for op in sorted(ALLOWED_OPS[spec.kind])
]


def test_listings_are_partial_by_default(emulator, client, snapshot) -> None:
    """Real servers cut listings (issue 22: ~2 genres, 3 roles, 1-2 directors per item)."""
    fuller = [
        item
        for item in snapshot
        if len(item.genres) > LISTING_TAG_LIMITS["Genre"]
        or len(item.cast) > LISTING_TAG_LIMITS["Role"]
        or len(item.directors) > LISTING_TAG_LIMITS["Director"]
    ]
    # The snapshot carries tags no listing shows: it read each item's own metadata.
    assert len(fuller) > 50
    movies = client._all_sections()[0]
    listed = movies.search(libtype="movie", container_size=2000)
    assert max(len(video._data.findall("Genre")) for video in listed) == 2
    assert max(len(video._data.findall("Role")) for video in listed) == 3


@pytest.fixture(scope="module")
def offered(client) -> OfferedFields:
    return client.offered_fields()


@pytest.mark.parametrize(("field", "op"), CASES, ids=[f"{f}-{o}" for f, o in CASES])
def test_snapshot_evaluation_equals_plex_side_filtering(
    client, snapshot, offered, field, op
) -> None:
    """For every locally evaluated field and operator: the in-memory pool is Plex's pool.

    Every item is judged, episodes included: given the server's advertised vocabulary, the
    in-memory evaluator matches nothing on a field a library lacks, exactly as Plex does. Real
    servers list no `director` or `dovi` among an episode's filter fields (the `<Meta>` of a
    section search; python-plexapi's `LibrarySection.listFields('episode')`), so on episodes
    those conditions match nothing whatever their operator (docs/reference/plex-emulator.md).
    """
    value = _value_for(field, op, snapshot)
    plex_filter: dict[str, Any] = envelope(condition(field, op, value))
    node = FilterEnvelope.model_validate(plex_filter).filter
    gaps = client.vocabulary_gaps([("INCLUDE", plex_filter, None)], sort="titleSort:asc")
    lacking_tv = any("library 'TV Shows'" in gap for gap in gaps)
    assert lacking_tv == (field in EPISODE_LACKS)
    assert not any("library 'Movies'" in gap for gap in gaps)

    in_memory = [item.rating_key for item in snapshot if evaluate(node, item, offered)]
    from_plex = [item.rating_key for item in client.resolve(plex_filter)]

    assert sorted(in_memory) == sorted(from_plex)
    assert 0 < len(from_plex) < len(snapshot) or (field, op) == ("duration", "is")
    if field in EPISODE_LACKS:
        # The field discriminates among episodes in memory, so the vocabulary is what decides.
        episodes = [i for i in snapshot if i.type == "episode"]
        assert any(evaluate(node, item) for item in episodes)
        assert not any(evaluate(node, item, offered) for item in episodes)


def test_offered_fields_follow_the_advertised_vocabulary(offered) -> None:
    """Fields per library as the server advertises them (issue 22; plex-emulator.md G-notes)."""
    by_type = {library.type: library.fields for library in offered.libraries.values()}
    assert {"director", "dovi", "hdr", "genre"} <= by_type["movie"]
    assert not EPISODE_LACKS & by_type["show"]
    assert {"hdr", "genre", "network", "year"} <= by_type["show"]


@pytest.mark.parametrize("field", ["hdr", "dovi"])
def test_evaluation_follows_a_server_missing_an_optional_field(field) -> None:
    """A server without an optional field (older releases, libraries without media analysis,
    issue 22) matches nothing on it; in-memory evaluation with its vocabulary agrees."""
    with start_emulator(items=200, seed=5, missing_fields=[field]) as handle:
        lacking = PlexClient(handle.url, handle.token)
        offered = lacking.offered_fields()
        assert all(field not in library.fields for library in offered.libraries.values())
        items = lacking.resolve(None)
        plex_filter: dict[str, Any] = envelope(condition(field, "is", "true"))
        node = FilterEnvelope.model_validate(plex_filter).filter
        assert lacking.resolve(plex_filter) == []
        assert any(evaluate(node, item) for item in items)  # the snapshot alone would match
        assert not any(evaluate(node, item, offered) for item in items)


def test_every_local_field_is_covered() -> None:
    assert {field for field, _ in CASES} == {n for n, s in FIELDS.items() if s.local}


@pytest.mark.parametrize("op", ["is", "isNot"])
@pytest.mark.parametrize("title", ["4K", "1080p", "720p", "SD"])
def test_resolution_titles_evaluate_as_plex_filters_them(
    client, snapshot, offered, title, op
) -> None:
    """A resolution written as Plex titles it ('1080p', the lineup files' spelling) is the key.

    Plex lists resolutions as key/title pairs (`1080`/`1080p`, `4k`/`4K`, `sd`/`SD`) and items
    carry the key; a condition matches the choice by either, so the in-memory evaluator must too.
    """
    plex_filter: dict[str, Any] = envelope(condition("resolution", op, title))
    node = FilterEnvelope.model_validate(plex_filter).filter

    in_memory = [item.rating_key for item in snapshot if evaluate(node, item, offered)]
    from_plex = [item.rating_key for item in client.resolve(plex_filter)]

    assert sorted(in_memory) == sorted(from_plex)
    assert 0 < len(from_plex) < len(snapshot)
