"""Offline curation judges the snapshot with the server's filter vocabulary (issue 22)."""

from __future__ import annotations

from airwave_dagster.domain.ai.curate import MemoryToolbox, resolve
from airwave_dagster.domain.filters import FilterEnvelope, LibraryFields, OfferedFields
from airwave_dagster.domain.library import MediaItem

MOVIE = MediaItem(
    rating_key="m1", type="movie", title="Alien", library_key="1", directors=("Ridley Scott",)
)
EPISODE = MediaItem(
    rating_key="e1",
    type="episode",
    title="Pilot",
    show_title="Numb3rs",
    show_rating_key="s1",
    library_key="2",
    directors=("Ridley Scott",),
)
REAL_SERVER = OfferedFields(
    libraries={
        "1": LibraryFields(type="movie", fields=frozenset({"director", "genre"})),
        "2": LibraryFields(type="show", fields=frozenset({"genre"})),
    }
)
"""Episode-level filter fields of a real server carry no `director` (issue 22)."""

BY_DIRECTOR = FilterEnvelope.model_validate(
    {
        "mediaTypes": ["movie", "show"],
        "filter": {"type": "condition", "field": "director", "op": "is", "value": "Ridley Scott"},
    }
)


def test_a_pool_on_a_field_episodes_lack_holds_only_movies() -> None:
    """Plex resolves a director filter in a TV library to nothing: a real server advertises no
    `episode.director` filter field (issue 22; python-plexapi `LibrarySection.listFields`)."""
    assert {i.rating_key for i in resolve(BY_DIRECTOR, [MOVIE, EPISODE])} == {"m1", "e1"}
    pool = resolve(BY_DIRECTOR, [MOVIE, EPISODE], offered=REAL_SERVER)
    assert [i.rating_key for i in pool] == ["m1"]


def test_the_memory_toolbox_previews_what_plex_would_return() -> None:
    """Same rule as above, through the toolbox the offline builder calls."""
    toolbox = MemoryToolbox([MOVIE, EPISODE], offered=REAL_SERVER)
    assert toolbox.preview_filter(BY_DIRECTOR, "quick").total_items == 1


def test_network_follows_the_vocabulary_too() -> None:
    """`network` is an optional field some servers lack (issue 22's `missing_fields`)."""
    by_network = FilterEnvelope.model_validate(
        {
            "mediaTypes": ["show"],
            "filter": {"type": "condition", "field": "network", "op": "is", "value": "CBS"},
        }
    )
    networks = {"s1": "CBS"}
    assert resolve(by_network, [EPISODE], networks) == [EPISODE]
    assert resolve(by_network, [EPISODE], networks, offered=REAL_SERVER) == []
