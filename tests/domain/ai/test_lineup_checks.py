"""Tests for the lineup-level checks the shared tools apply at commit time (issue 10)."""

from __future__ import annotations

import json

import pytest

from airwave_dagster.domain.ai.lineup_checks import (
    KIDS_RATINGS,
    LineupGuard,
    LineupRules,
    audience_of,
    ceiling_exclusion,
    ceiling_group,
    is_cut_short,
    negate,
    rating_of,
)
from airwave_dagster.domain.ai.offline import build_channel_offline, make_callsign
from airwave_dagster.domain.ai.plan import parse_plan
from airwave_dagster.domain.ai.tools import ChannelCheck, ToolSession
from airwave_dagster.domain.filters import Condition, FilterNode, Group, evaluate
from airwave_dagster.domain.library import MediaItem
from tests.domain.ai.conftest import Demo, LocalToolbox


def _movie(key: str, genre: str, rating: str | None, minutes: int = 120) -> MediaItem:
    return MediaItem(
        rating_key=key,
        type="movie",
        title=f"Film {key}",
        duration_ms=minutes * 60_000,
        genres=(genre,),
        content_rating=rating,
        year=2000,
    )


def _library() -> list[MediaItem]:
    cartoons = [_movie(f"a{i}", "Animation", "G" if i % 3 else "R") for i in range(12)]
    dramas = [_movie(f"d{i}", "Drama", "PG-13") for i in range(12)]
    return cartoons + dramas


def _filter(field: str, value: str) -> dict[str, str]:
    return {"type": "condition", "field": field, "op": "is", "value": value}


def test_a_pool_close_to_a_kept_channel_is_refused_with_its_name() -> None:
    guard = LineupGuard()
    guard.keep("Cartoon Movies", frozenset(f"a{i}" for i in range(10)))
    # 9 of 10 inside a kept channel: refused (containment 0.9) though Jaccard is only 0.82.
    reasons = guard.check(frozenset(f"a{i}" for i in range(1, 10)), {}, audience=None)
    assert len(reasons) == 1 and "'Cartoon Movies'" in reasons[0]
    assert "Jaccard 0.90" in reasons[0]
    # Half overlapping, half not: Jaccard 0.33, containment 0.5: kept.
    assert guard.check(frozenset(f"a{i}" for i in range(5, 15)), {}, audience=None) == []
    strict = LineupGuard(LineupRules(max_jaccard=0.3))
    strict.keep("Cartoon Movies", frozenset(f"a{i}" for i in range(10)))
    assert strict.check(frozenset(f"a{i}" for i in range(5, 15)), {}, audience=None) != []


def test_kids_and_family_channels_have_a_rating_ceiling() -> None:
    assert audience_of("Saturday Morning Cartoons") == "kids"
    assert audience_of("Family Movies") == "family"
    assert audience_of("Crime Series", "Cops and crooks.") is None
    guard = LineupGuard()
    reasons = guard.check(frozenset({"x"}), {"G": 3, "PG": 2, "R": 1}, audience="family")
    assert reasons and "1 items are above that ceiling (R 1)" in reasons[0]
    kids = guard.check(frozenset({"x"}), {"G": 3, "PG": 2, "unrated": 1}, audience="kids")
    assert kids and "(PG 2, unrated 1)" in kids[0]
    assert guard.check(frozenset({"x"}), {"G": 3, "TV-PG": 2}, audience="family") == []


def test_the_commit_tool_refuses_overlap_and_wrong_audience_then_keeps_the_fix() -> None:
    items = _library()
    toolbox = LocalToolbox(items)
    guard = LineupGuard()
    first = ToolSession(toolbox, check=ChannelCheck.of(guard, "Drama Movies"))
    ok = first.call(
        "commit_channel", {"mediaTypes": ["movie"], "filter": _filter("genre", "Drama")}
    )
    assert ok.terminal == "committed" and len(guard.kept) == 1
    # The same pool under another name repeats the kept channel.
    again = ToolSession(toolbox, check=ChannelCheck.of(guard, "Serious Films"))
    refused = again.call(
        "commit_channel", {"mediaTypes": ["movie"], "filter": _filter("contentRating", "PG-13")}
    )
    assert (
        refused.is_error
        and "repeats channel 'Drama Movies'" in json.loads(refused.content)["error"]
    )
    # A kids channel with R-rated cartoons is refused, and told which EXCLUDE definition keeps
    # it under its ceiling; the same filter with that exclusion is kept.
    kids = ToolSession(toolbox, check=ChannelCheck.of(guard, "Kids Cartoons"))
    animation = _filter("genre", "Animation")
    wrong = kids.call("commit_channel", {"mediaTypes": ["movie"], "filter": animation})
    assert wrong.is_error and "above that ceiling (R 4)" in (wrong.reason or "")
    named = (wrong.reason or "").split("pass exclude=")[1].removesuffix(" with it")
    exclusion = ceiling_exclusion("kids")
    assert json.loads(named) == exclusion.model_dump(mode="json", exclude_none=True)
    fixed = kids.call(
        "commit_channel",
        {"mediaTypes": ["movie"], "filter": animation, "exclude": json.loads(named)},
    )
    assert fixed.terminal == "committed" and fixed.preview is not None
    assert fixed.preview.content_ratings == {"G": 8}
    assert fixed.exclude == exclusion and toolbox.exclusions == [None, exclusion]
    assert kids.finish().exclude == exclusion
    assert [k.name for k in guard.kept] == ["Drama Movies", "Kids Cartoons"]
    assert kids.finish().status == "created" and again.finish().status == "skipped"


def test_the_offline_builder_revises_a_kids_channel_under_its_ceiling() -> None:
    items = _library()
    channel = (
        parse_plan(
            {
                "packages": [
                    {
                        "key": "p",
                        "name": "P",
                        "channels": [
                            {
                                "key": "toons",
                                "name": "Kids Cartoons",
                                "description": "Cartoon movies for kids.",
                                "mediaTypes": ["movie"],
                                "filter": _filter("genre", "Animation"),
                            }
                        ],
                    }
                ]
            }
        )
        .packages[0]
        .channels[0]
    )
    toolbox = LocalToolbox(items)
    outcome = build_channel_offline(channel, toolbox, guard=LineupGuard())
    assert outcome.status == "created" and outcome.envelope is not None
    # The filter stays what was planned; the ceiling is the EXCLUDE definition.
    assert outcome.envelope.filter == Condition(field="genre", op="is", value="Animation")
    assert outcome.exclude == ceiling_exclusion("kids")
    pool = toolbox.pool(outcome.envelope, outcome.exclude)
    assert {item.content_rating for item in pool} == {"G"} and len(pool) == 8
    # Without a guard nothing is checked: the R-rated cartoons stay (the old behaviour).
    unguarded = build_channel_offline(channel, LocalToolbox(items))
    assert unguarded.pool is not None and unguarded.pool.total_items == 12


@pytest.mark.parametrize(
    "node",
    [
        Condition(field="genre", op="is", value="Drama"),
        Condition(field="title", op="contains", value="the"),
        Condition(field="hdr", op="is", value="true"),
        Condition(field="year", op="gte", value="2010"),
        Group(
            combinator="or",
            children=[
                Condition(field="genre", op="isNot", value="Comedy"),
                Condition(field="decade", op="is", value="1990"),
            ],
        ),
        ceiling_group("family"),
    ],
    ids=repr,
)
def test_negate_matches_exactly_the_other_items(demo: Demo, node: FilterNode) -> None:
    negated = negate(node)
    assert negated is not None
    for item in demo.items:
        assert evaluate(negated, item) != evaluate(node, item), (item.rating_key, node)


def test_the_ceiling_exclusion_removes_everything_above_it_unrated_items_too() -> None:
    items = [_movie(f"m{i}", "Animation", r) for i, r in enumerate(("G", "TV-Y7", "PG", "R", None))]
    exclusion = ceiling_exclusion("kids")
    removed = {item.content_rating for item in items if evaluate(exclusion, item)}
    assert removed == {"PG", "R", None}
    for item in items:
        assert evaluate(exclusion, item) == (rating_of(item.content_rating) not in KIDS_RATINGS)
    # Only the ratings the library spells are listed (as the library spells them).
    assert ceiling_exclusion("kids", ["g", "R"]) == Condition(
        field="contentRating", op="isNot", value="g"
    )


def test_a_decimal_bound_cannot_be_negated_exactly() -> None:
    assert negate(Condition(field="criticRating", op="gte", value="7.5")) is None


@pytest.mark.parametrize(
    ("callsign", "name", "cut"),
    [
        ("COMED", "Comedy", True),
        ("T202", "The 2020s", True),
        ("SFIC", "Science Fiction", True),
        ("HNET", "Harbor Network", True),
        ("GOLD", "Golden Oldies", True),
        ("ACTION", "Action Movies", False),
        ("UHD", "Ultra HD Movies", False),
        ("LAFFTV", "Comedy Series", False),
        ("DCVRS", "Docuverse Series", False),
        ("CNTV", "Channel Nine Series", False),
    ],
)
def test_callsigns_cut_short_are_recognised(callsign: str, name: str, cut: bool) -> None:
    assert is_cut_short(callsign, name) is cut


def test_made_callsigns_are_readable_and_unique() -> None:
    taken: set[str] = set()
    made = []
    for name, token in [
        ("Comedy Movies", "LAFF"),
        ("Comedy Series", "LAFFTV"),
        ("Docuverse Series", None),
        ("Kestrel+ Series", None),
        ("Nimbus Series", None),
        ("Comedy Movies", "LAFF"),
    ]:
        sign = make_callsign(name, token, taken)
        taken.add(sign)
        made.append(sign)
        assert not is_cut_short(sign, name) and len(sign) <= 6
    # A second "Comedy Movies" falls back to the whole word, never to a cut one.
    assert made == ["LAFF", "LAFFTV", "DCVRS", "KSTRL", "NIMBUS", "COMEDY"]
