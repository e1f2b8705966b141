"""Tests for the library profile and the byte-identical shared context."""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airwave_dagster.domain.ai.context import (
    CATALOG_EXCLUDED,
    CATALOG_HEADER,
    NO_VOCABULARY,
    VOCABULARY_HEADER,
    catalog_fields,
    render_field_catalog,
    render_shared_context,
)
from airwave_dagster.domain.ai.profile import (
    MAX_DECADES,
    LibraryProfile,
    build_profile,
)
from airwave_dagster.domain.filters import FIELDS, LibraryFields, OfferedFields
from airwave_dagster.domain.library import MediaItem
from tests.domain.ai.conftest import Demo


def movie(key: str, **extra: Any) -> MediaItem:
    return MediaItem(rating_key=key, type="movie", title=f"Movie {key}", **extra)


def episode(key: str, show: str, **extra: Any) -> MediaItem:
    return MediaItem(
        rating_key=key,
        type="episode",
        title=f"Episode {key}",
        show_title=show,
        show_rating_key=f"s-{show}",
        **extra,
    )


def test_a_long_show_counts_once_for_genres_ratings_and_decades() -> None:
    items = [
        movie("m1", genres=("Drama",), studio="A24", content_rating="R", year=1999),
        movie("m2", genres=("Comedy", "Drama"), studio="A24", content_rating="PG", year=2004),
        *[
            episode(
                f"e{i}",
                "Long Show",
                genres=("Comedy",),
                studio="NBC",
                content_rating="TV-PG",
                year=2005 + i // 10,
                duration_ms=1_800_000,
            )
            for i in range(50)
        ],
    ]
    profile = build_profile(items, source_id="src", show_networks={"s-Long Show": "NBC"})
    assert profile.totals.movies == 2 and profile.totals.shows == 1
    assert profile.totals.episodes == 50 and profile.totals.episode_hours == 25.0
    assert [(g.name, g.count) for g in profile.genres] == [("Comedy", 2), ("Drama", 2)]
    # Studios and networks are ranked by runtime (issue 10): one 25 h show outweighs two films.
    assert [(s.name, s.count) for s in profile.studios] == [("NBC", 1), ("A24", 2)]
    assert profile.studios[0].hours == 25.0 and profile.studios[1].hours < 25.0
    assert [(n.name, n.count, n.hours) for n in profile.networks] == [("NBC", 1, 25.0)]
    # The show's decade is its first season's, counted once.
    assert [(d.decade, d.count) for d in profile.decades] == [(2000, 2), (1990, 1)]
    assert [(s.title, s.episodes, s.hours) for s in profile.top_shows] == [("Long Show", 50, 25.0)]


def test_networks_come_from_the_episodes_unless_the_caller_names_them() -> None:
    items = [
        *[episode(f"a{i}", "Big", network="Harbor", duration_ms=3_600_000) for i in range(3)],
        episode("b1", "Small", network="Summit", duration_ms=1_800_000),
        episode("c1", "Unknown", duration_ms=1_800_000),
        movie("m1", duration_ms=7_200_000),
    ]
    profile = build_profile(items)
    # Ranked by runtime; a show with no network and the movie count for none.
    assert [(n.name, n.count, n.hours) for n in profile.networks] == [
        ("Harbor", 1, 3.0),
        ("Summit", 1, 0.5),
    ]
    named = build_profile(items, show_networks={"s-Small": "Lighthouse", "s-Unknown": "Summit"})
    assert [(n.name, n.hours) for n in named.networks] == [
        ("Harbor", 3.0),
        ("Lighthouse", 0.5),
        ("Summit", 0.5),
    ]


def test_shows_sharing_a_title_are_not_merged_and_small_shows_are_not_big() -> None:
    items = [episode(f"a{i}", "Twin") for i in range(5)] + [
        MediaItem(
            rating_key=f"b{i}",
            type="episode",
            title="x",
            show_title="Twin",
            show_rating_key="other",
        )
        for i in range(4)
    ]
    profile = build_profile(items)
    assert profile.totals.shows == 2
    assert [(s.title, s.episodes) for s in profile.top_shows] == [("Twin", 5)]


def test_show_records_win_over_their_episodes() -> None:
    show = MediaItem(
        rating_key="s-Cop",
        type="show",
        title="Cop",
        genres=("Crime",),
        year=1990,
        audience_rating=8.0,
    )
    items = [show, *[episode(f"e{i}", "Cop", genres=("Drama",), year=2001) for i in range(6)]]
    profile = build_profile(items)
    assert [g.name for g in profile.genres] == ["Crime"]
    assert [d.decade for d in profile.decades] == [1990]
    assert profile.audience_rating is not None and profile.audience_rating.p50 == 8.0


def test_distributions_use_continuous_percentiles_and_skip_missing_values() -> None:
    items = [movie(f"m{i}", audience_rating=float(i), duration_ms=i * 600_000) for i in range(11)]
    items.append(movie("none"))
    profile = build_profile(items)
    dist = profile.audience_rating
    assert dist is not None
    assert (dist.count, dist.p10, dist.p25, dist.p50, dist.p75, dist.p90) == (
        11,
        1.0,
        2.5,
        5.0,
        7.5,
        9.0,
    )
    assert profile.critic_rating is None
    runtime = profile.movie_duration_minutes
    assert runtime is not None and runtime.count == 10  # zero-length movies are left out


def test_blank_names_are_dropped_and_ties_broken_by_name() -> None:
    items = [
        movie("1", genres=("  ", "Zed"), studio=" "),
        movie("2", genres=("alpha",)),
        movie("3", genres=("Beta",)),
    ]
    profile = build_profile(items)
    assert [g.name for g in profile.genres] == ["alpha", "Beta", "Zed"]
    assert profile.studios == ()


def test_only_the_newest_decades_are_kept() -> None:
    items = [movie(str(year), year=year) for year in range(1880, 2030, 10)]
    profile = build_profile(items)
    assert len(profile.decades) == MAX_DECADES
    assert profile.decades[0].decade == 2020
    assert profile.decades[-1].decade == 2020 - 10 * (MAX_DECADES - 1)


def test_premium_flags_count_movies_and_episodes_separately() -> None:
    items = [
        movie("1", hdr="HDR10", resolution="4k"),
        movie("2", resolution="4K"),
        episode("3", "S", hdr="Dolby Vision", resolution="1080"),
    ]
    flags = build_profile(items).flags
    assert (flags.hdr_movies, flags.four_k_movies, flags.hdr_episodes, flags.four_k_episodes) == (
        1,
        2,
        1,
        0,
    )


def test_the_profile_ignores_input_order_and_duplicates(demo: Demo) -> None:
    shuffled = list(demo.items)
    random.Random(3).shuffle(shuffled)
    again = build_profile(
        shuffled + shuffled[:100], source_id="demo", show_networks=demo.show_networks
    )
    assert again == demo.profile
    assert again.render_text() == demo.profile.render_text()


def test_the_demo_profile_is_small_and_complete(demo: Demo) -> None:
    profile = demo.profile
    assert profile.totals.movies > 0 and profile.totals.shows > 0
    assert profile.genres and profile.studios and profile.networks and profile.top_shows
    text = profile.render_text()
    assert "Networks (shows): " in text and "not recorded" not in text
    assert len(text) < 6000
    assert LibraryProfile.model_validate_json(profile.model_dump_json()) == profile


def test_an_empty_library_renders_placeholders() -> None:
    text = build_profile([]).render_text()
    assert "Genres (titles): none recorded" in text
    assert "Biggest shows: none" in text
    assert "Audience rating (0-10): not recorded in this library" in text


def test_the_catalog_has_33_fields_and_says_where_values_are() -> None:
    fields = catalog_fields()
    assert len(fields) == 33
    assert not {f.name for f in fields} & set(CATALOG_EXCLUDED)
    text = render_field_catalog(["genre", "audioLanguage"])
    lines = {line.split(" ")[1]: line for line in text.splitlines()}
    assert lines["genre"].endswith("values listed below")
    assert lines["audioLanguage"].endswith("values listed below")
    assert lines["subtitleLanguage"].endswith("use discover_field_values")
    assert lines["actor"].endswith("use discover_field_values")
    assert "[movie only]" in lines["duration"] and "[show only]" in lines["network"]
    assert "(int; is, gte, lte)" in lines["year"]


def _catalog_lines(text: str) -> dict[str, str]:
    catalog = text.split(CATALOG_HEADER + "\n", 1)[1].split(VOCABULARY_HEADER, 1)[0]
    return {line.split(" ")[1]: line for line in catalog.strip().splitlines()}


def test_the_catalog_lists_only_what_the_server_offers(demo: Demo) -> None:
    """The models are offered only fields the connected server advertises (issue 22: a real
    server has no `episode.director` or `episode.dovi` filter, and some servers lack optional
    fields such as `hdr`; python-plexapi `LibrarySection.listFields(libtype)` is what a search
    is validated against). The scope note follows what each library type offers."""
    offered = OfferedFields(
        libraries={
            "1": LibraryFields(type="movie", fields=frozenset(FIELDS) - {"hdr"}),
            "2": LibraryFields(type="show", fields=frozenset(FIELDS) - {"hdr", "director", "dovi"}),
        }
    )
    whole = _catalog_lines(render_shared_context(demo.profile, demo.vocabulary).text)
    served = _catalog_lines(render_shared_context(demo.profile, demo.vocabulary, offered).text)
    assert "hdr" in whole and "hdr" not in served
    assert set(whole) - set(served) == {"hdr"}
    assert "[movie only]" not in whole["director"] and "[movie only]" in served["director"]
    assert "[movie only]" in served["dovi"] and "[show only]" in served["network"]
    assert render_field_catalog(offered=None) == render_field_catalog()


def test_a_server_with_movies_only_needs_no_scope_notes() -> None:
    offered = OfferedFields(
        libraries={"1": LibraryFields(type="movie", fields=frozenset({"genre", "duration"}))}
    )
    assert render_field_catalog(["genre"], offered).splitlines() == [
        "- genre (tag; is, isNot) — values listed below",
        "- duration (int; is, gte, lte) — minutes",
    ]


def test_the_shared_context_is_byte_identical_and_hashed(demo: Demo) -> None:
    first = render_shared_context(demo.profile, demo.vocabulary)
    second = render_shared_context(demo.profile, demo.vocabulary)
    assert first == second
    assert first.sha256 == hashlib.sha256(first.text.encode("utf-8")).hexdigest()
    assert first.text.startswith("LIBRARY PROFILE\n")
    # Ten networks: the correlated demo library (issue 10) has no kids' show on Lighthouse Kids.
    assert "network (10): Atlas Broadcasting, Channel Nine," in first.text
    assert first.vocabulary_fields[:3] == ("genre", "studio", "network")
    assert first.approx_tokens == (first.chars + 3) // 4


def test_an_empty_vocabulary_gets_a_placeholder(demo: Demo) -> None:
    context = render_shared_context(demo.profile, {"genre": [" ", ""]})
    assert context.text.endswith(NO_VOCABULARY)
    assert context.vocabulary_fields == ()


@pytest.mark.parametrize("field", ["year", "mood"])
def test_vocabulary_for_non_tag_fields_is_refused(demo: Demo, field: str) -> None:
    with pytest.raises(ValueError, match=f"'{field}' is not a tag field"):
        render_shared_context(demo.profile, {field: ["x"]})


@settings(max_examples=50, deadline=None)
@given(st.randoms(use_true_random=False), st.lists(st.sampled_from(["x", " y ", "Y", "y"])))
def test_the_context_is_insensitive_to_input_order(
    demo: Demo, rnd: random.Random, extra: list[str]
) -> None:
    baseline = render_shared_context(demo.profile, demo.vocabulary)
    keys = list(demo.vocabulary)
    rnd.shuffle(keys)
    shuffled: dict[str, list[str]] = {}
    for key in keys:
        values = list(demo.vocabulary[key]) * 2
        rnd.shuffle(values)
        shuffled[key] = values
    assert render_shared_context(demo.profile, shuffled).text == baseline.text
    with_extra = {**demo.vocabulary, "label": extra}
    reordered = {**demo.vocabulary, "label": list(reversed(extra))}
    assert (
        render_shared_context(demo.profile, with_extra).sha256
        == render_shared_context(demo.profile, reordered).sha256
    )
