"""Tests for the offline provider on the emulator's demo library."""

from __future__ import annotations

from collections import Counter

import pytest

from airwave_dagster.domain.ai.lineup_checks import (
    above_ceiling,
    audience_of,
    ceiling_exclusion,
    rating_counts,
)
from airwave_dagster.domain.ai.numbering import assign_numbers
from airwave_dagster.domain.ai.offline import (
    MAX_OFFLINE_CHANNELS,
    build_channel_offline,
    offline_plan,
)
from airwave_dagster.domain.ai.plan import (
    ExistingPackage,
    PlannedChannel,
    parse_plan,
    sanitize_plan,
)
from airwave_dagster.domain.ai.profile import build_profile
from airwave_dagster.domain.ai.tools import PoolRules, verify_pool
from airwave_dagster.domain.filters import Condition, evaluate
from airwave_dagster.domain.library import MediaItem
from airwave_dagster.emulators.plex.dataset import build_library
from tests.domain.ai.conftest import DEMO_ANCHOR, Demo, LocalToolbox, demo_vocabulary, local_match


def test_the_offline_plan_is_a_sensible_lineup(demo: Demo) -> None:
    plan = offline_plan(demo.profile, demo.vocabulary)
    channels = plan.channels()
    assert 30 <= len(channels) <= MAX_OFFLINE_CHANNELS
    keys = [p.key for p in plan.packages]
    # Genres first (movies and series apart), then eras, networks, studios, picks (issue 10).
    assert keys == [
        "movie-genres",
        "series-genres",
        "movie-eras",
        "networks",
        "studio-spotlight",
        "movie-picks",
    ]
    # Every channel is about one medium and says so in its name.
    for _, channel in channels:
        assert len(channel.media_types) == 1, channel.key
        medium = "Movie" if channel.media_types == ["movie"] else ("Series", "Cartoons")
        assert any(word in channel.name for word in medium), channel.name
    # Sanitising an offline plan changes nothing: it only uses known fields and values.
    sanitized = sanitize_plan(plan)
    assert sanitized.changes == () and sanitized.plan == plan
    fields = Counter(
        condition.field
        for _, channel in channels
        for condition in _conditions(channel.filter_node())
    )
    assert {"genre", "decade", "year", "studio", "network", "contentRating"} <= set(fields)
    assert {"criticRating"} <= set(fields)


def _conditions(node: object) -> list[object]:
    children = getattr(node, "children", None)
    if children is None:
        return [node]
    return [c for child in children for c in _conditions(child)]


def test_kids_and_family_channels_carry_their_ceiling_as_an_exclude_definition(
    demo: Demo,
) -> None:
    plan = offline_plan(demo.profile, demo.vocabulary)
    ratings = demo.vocabulary["contentRating"]
    young = [(c, audience_of(c.name, c.description)) for _, c in plan.channels()]
    young = [(c, a) for c, a in young if a is not None]
    assert {c.name for c, _ in young} == {"Family Movies", "Saturday Morning Cartoons"}
    for channel, audience in young:
        assert channel.exclude_node() == ceiling_exclusion(audience, ratings), channel.name
        # The filter says what the channel is about; the ceiling is only in the exclusion.
        assert "contentRating" not in {c.field for c in _conditions(channel.filter_node())}
        toolbox = LocalToolbox(demo.items, demo.show_networks)
        pool = toolbox.pool(channel.envelope(), channel.exclude_node())
        assert not above_ceiling(rating_counts(i.content_rating for i in pool), audience)
        if channel.name == "Family Movies":
            # The genres alone carry PG-13 films: the exclusion is what keeps them off.
            included = rating_counts(i.content_rating for i in toolbox.pool(channel.envelope()))
            assert above_ceiling(included, audience) and len(pool) >= 3
    others = [c for _, c in plan.channels() if audience_of(c.name, c.description) is None]
    assert others and all(c.exclude is None for c in others)


def test_the_offline_plan_is_deterministic_and_schema_valid(demo: Demo) -> None:
    first = offline_plan(demo.profile, demo.vocabulary)
    second = offline_plan(demo.profile, dict(reversed(list(demo.vocabulary.items()))))
    assert first == second
    assert parse_plan(first.model_dump(mode="json", by_alias=True)) == first


def test_no_planned_channel_matches_every_item(demo: Demo) -> None:
    plan = offline_plan(demo.profile, demo.vocabulary)
    for _, channel in plan.channels():
        envelope = channel.envelope()
        node = envelope.filter
        assert node is not None
        matched = sum(1 for item in demo.items if local_match(node, item, demo.show_networks))
        assert 0 < matched < len(demo.items), channel.key
        # The plain local evaluator (no network support) never claims every item either.
        assert not all(evaluate(node, item) for item in demo.items), channel.key


def test_values_outside_the_vocabulary_are_never_planned(demo: Demo) -> None:
    # The network with the most hours (networks are ranked by runtime, not alphabetically).
    top = demo.profile.networks[0].name
    assert demo.profile.networks[0].hours == max(n.hours for n in demo.profile.networks)
    vocabulary = {**demo.vocabulary, "genre": ["Drama"], "network": [top]}
    plan = offline_plan(demo.profile, vocabulary)
    genre_package = next(p for p in plan.packages if p.key == "movie-genres")
    assert [c.name for c in genre_package.channels] == ["All-Ages Movies", "Drama Movies"]
    network_package = next(p for p in plan.packages if p.key == "networks")
    assert [c.name for c in network_package.channels] == [f"{top} Series"]


def test_matching_existing_packages_are_reused(demo: Demo) -> None:
    existing = [
        ExistingPackage(key="networks", name="Broadcast", origin="manual"),
        ExistingPackage(key="classics", name="Movie Eras", origin="preset"),
    ]
    plan = offline_plan(demo.profile, demo.vocabulary, existing)
    reused = {p.key: p.existing_key for p in plan.packages if p.existing_key}
    assert reused == {"networks": "networks", "movie-eras": "classics"}


def test_an_empty_profile_cannot_be_planned() -> None:
    with pytest.raises(ValueError, match="nothing to plan"):
        offline_plan(build_profile([]), {})


def test_the_offline_builder_commits_at_least_20_verified_channels(demo: Demo) -> None:
    sanitized = sanitize_plan(offline_plan(demo.profile, demo.vocabulary))
    numbering = assign_numbers(sanitized.plan, [1, 2, 3]).by_key()
    outcomes = {}
    for _, channel in sanitized.plan.channels():
        toolbox = LocalToolbox(demo.items, demo.show_networks, number=numbering[channel.key].number)
        outcome = build_channel_offline(channel, toolbox)
        outcomes[channel.key] = outcome
        assert outcome.model_calls == 0 and outcome.usage == {}
        if outcome.status == "created":
            assert outcome.number == numbering[channel.key].number
            assert toolbox.commits == [outcome.envelope]
            assert outcome.pool is not None and verify_pool(outcome.pool) == []
            assert outcome.envelope is not None
            pool = toolbox.pool(outcome.envelope, outcome.exclude)
            # The pool the commit verified is the real, complete pool, never the whole library.
            assert len(pool) == outcome.pool.total_items
            assert 3 <= len(pool) < len(demo.items)
            hours = sum(item.duration_ms for item in pool) / 3_600_000
            assert hours >= 10
    created = [k for k, o in outcomes.items() if o.status == "created"]
    assert len(created) >= 20
    hours = sum(o.pool.total_runtime_hours for o in outcomes.values() if o.pool)
    assert hours > 1000


def _items_for(n_movies: int, minutes: int) -> list[MediaItem]:
    return [
        MediaItem(
            rating_key=f"m{i}",
            type="movie",
            title=f"Movie {i}",
            duration_ms=minutes * 60_000,
            genres=("Drama",),
            critic_rating=6.0 + (i % 10) / 5,
            year=1990 + i,
        )
        for i in range(n_movies)
    ]


def _channel(filter_: dict[str, object], media: list[str]) -> PlannedChannel:
    return (
        parse_plan(
            {
                "packages": [
                    {
                        "key": "p",
                        "name": "P",
                        "channels": [
                            {
                                "key": "c",
                                "name": "C",
                                "description": "",
                                "mediaTypes": media,
                                "filter": filter_,
                            }
                        ],
                    }
                ]
            }
        )
        .packages[0]
        .channels[0]
    )


def test_a_too_narrow_window_is_widened_until_it_passes() -> None:
    items = _items_for(40, 100)
    channel = _channel(
        {"type": "condition", "field": "criticRating", "op": "gte", "value": "7.7"}, ["movie"]
    )
    toolbox = LocalToolbox(items)
    outcome = build_channel_offline(channel, toolbox)
    assert outcome.status == "created"
    assert outcome.envelope is not None and outcome.envelope.filter is not None
    assert outcome.envelope.filter == Condition(field="criticRating", op="gte", value="7.2")
    previews = [s for s in outcome.trace if s.kind == "call" and s.tool == "preview_filter"]
    # 7.7 on movies (4 items, 6.7 h), 7.7 on both types (no shows here), then one step wider.
    assert [p.input["mediaTypes"] for p in previews if p.input] == [
        ["movie"],
        ["movie", "show"],
        ["movie"],
    ]


def test_a_channel_the_library_cannot_support_is_given_up_with_reasons() -> None:
    items = _items_for(5, 30)
    channel = _channel(
        {"type": "condition", "field": "genre", "op": "is", "value": "Drama"}, ["movie"]
    )
    toolbox = LocalToolbox(items)
    outcome = build_channel_offline(channel, toolbox, rules=PoolRules(min_runtime_hours=10))
    assert outcome.status == "skipped"
    assert outcome.reason is not None and "only 2.5 h of programming" in outcome.reason
    assert toolbox.commits == [] and len(toolbox.gave_up) == 1


def test_a_toolbox_failure_fails_the_build_and_keeps_the_trace() -> None:
    items = _items_for(40, 100)
    channel = _channel(
        {"type": "condition", "field": "criticRating", "op": "gte", "value": "9.9"}, ["movie"]
    )
    toolbox = LocalToolbox(items, fail_previews_after=1)
    outcome = build_channel_offline(channel, toolbox)
    assert outcome.status == "failed"
    assert outcome.reason == "ConnectionError: Plex is unreachable"
    assert [s.tool for s in outcome.trace if s.kind == "call"] == ["preview_filter"] * 2
    assert toolbox.commits == []


@pytest.mark.parametrize(("size", "seed"), [(12, 1), (60, 2), (300, 3), (900, 4)])
def test_offline_lineups_of_other_libraries_are_valid_and_never_everything(
    size: int, seed: int
) -> None:
    library = build_library(size, seed, anchor=DEMO_ANCHOR)
    items = tuple(library.media_items())
    networks = {str(s.rating_key): s.network for s in library.shows() if s.network}
    vocabulary = demo_vocabulary(library, items)
    profile = build_profile(items, show_networks=networks)
    plan = offline_plan(profile, vocabulary)
    assert sanitize_plan(plan).changes == ()
    created = 0
    for _, channel in plan.channels():
        node = channel.filter_node()
        assert not all(local_match(node, item, networks) for item in items), channel.key
        outcome = build_channel_offline(channel, LocalToolbox(items, networks))
        assert outcome.status in ("created", "skipped"), outcome.reason
        created += outcome.status == "created"
    if size >= 300:
        assert created >= 20
