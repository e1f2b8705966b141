"""Tests for the planner's output: schema, parsing, sanitising, package keys."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airwave_dagster.domain.ai.plan import (
    ExistingPackage,
    LineupPlan,
    coerce_accent,
    number_text,
    package_slug,
    parse_plan,
    plan_input_schema,
    render_existing_packages,
    sanitize_plan,
    slugify,
)
from airwave_dagster.domain.errors import PlanSchemaError
from airwave_dagster.domain.filters import FIELDS, OPS, Condition, Group


def cond(field: str, op: str, value: Any) -> dict[str, Any]:
    return {"type": "condition", "field": field, "op": op, "value": value}


def group(combinator: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"type": "group", "combinator": combinator, "children": list(children)}


def channel(key: str, filter_: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "key": key,
        "name": extra.pop("name", key.replace("-", " ").title()),
        "description": "A channel.",
        "theme": "Something specific.",
        "targetPoolSize": 40,
        "mediaTypes": extra.pop("mediaTypes", ["movie", "show"]),
        "filter": filter_,
        **extra,
    }


def package(key: str, *channels: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "key": key,
        "name": extra.pop("name", key.title()),
        "description": "A package.",
        "icon": "lucide:Tv",
        "accent": extra.pop("accent", "blue"),
        "channels": list(channels),
        **extra,
    }


def raw_plan(*packages: dict[str, Any]) -> dict[str, Any]:
    return {"packages": list(packages)}


GOOD = raw_plan(
    package(
        "movies",
        channel("noir", group("and", cond("genre", "is", "Crime"), cond("decade", "is", "1940"))),
        channel("epics", cond("duration", "gte", "150"), mediaTypes=["movie"]),
    ),
    package(
        "series",
        channel(
            "sitcoms",
            group(
                "or",
                cond("title", "contains", "Friends"),
                group("and", cond("genre", "is", "Comedy"), cond("network", "is", "NBC")),
            ),
            mediaTypes=["show"],
        ),
    ),
)


def test_a_valid_plan_parses_with_camel_case_keys() -> None:
    plan = parse_plan(GOOD)
    assert [p.key for p in plan.packages] == ["movies", "series"]
    epics = plan.channel("epics")
    assert epics.media_types == ["movie"]
    assert epics.target_pool_size == 40
    assert epics.ordering == "SHUFFLE"
    node = epics.filter_node()
    assert node == Condition(field="duration", op="gte", value="150")
    sitcoms = plan.channel("sitcoms").filter_node()
    assert isinstance(sitcoms, Group) and sitcoms.combinator == "or"
    assert isinstance(sitcoms.children[1], Group)


def test_the_plan_round_trips_through_json_by_field_name_and_by_alias() -> None:
    plan = parse_plan(GOOD)
    by_name = LineupPlan.model_validate_json(plan.model_dump_json())
    by_alias = LineupPlan.model_validate(json.loads(plan.model_dump_json(by_alias=True)))
    assert by_name == plan == by_alias


def test_schema_violations_are_all_listed_with_json_paths() -> None:
    bad = copy.deepcopy(GOOD)
    del bad["packages"][0]["channels"][0]["name"]
    bad["packages"][1]["channels"][0]["mediaTypes"] = []
    bad["packages"][0]["channels"][1]["filter"] = {"type": "group", "children": []}
    bad["packages"][0]["surprise"] = True
    with pytest.raises(PlanSchemaError) as caught:
        parse_plan(bad)
    paths = {issue.path for issue in caught.value.issues}
    assert "$.packages[0].channels[0].name" in paths
    assert "$.packages[1].channels[0].mediaTypes" in paths
    assert "$.packages[0].surprise" in paths
    assert any(p.startswith("$.packages[0].channels[1].filter") for p in paths)
    assert "$.packages[0].channels[0].name" in str(caught.value)


@pytest.mark.parametrize("raw", [None, [], "plan", {"packages": []}, {}])
def test_plans_without_packages_are_refused(raw: object) -> None:
    with pytest.raises(PlanSchemaError):
        parse_plan(raw)


def test_filters_nested_deeper_than_one_level_break_the_schema() -> None:
    deep = group("and", group("or", group("and", cond("genre", "is", "Drama"))))
    with pytest.raises(PlanSchemaError):
        parse_plan(raw_plan(package("p", channel("c", deep))))


def test_parsing_is_lenient_where_the_intent_is_clear() -> None:
    plan = parse_plan(
        raw_plan(
            package(
                "p",
                channel(
                    "c",
                    group("and", cond("year", "gte", 1990), cond("hdr", "is", True)),
                    ordering="in_order",
                    mediaTypes=["Movies", "movie", "tv"],
                ),
                accent="emerald",
            )
        )
    )
    built = plan.channel("c")
    assert built.ordering == "IN_ORDER"
    assert built.media_types == ["movie", "show"]
    assert plan.packages[0].accent == "mint"
    node = built.filter_node()
    assert isinstance(node, Group)
    assert [c.value for c in node.children if isinstance(c, Condition)] == ["1990", "true"]


def test_the_input_schema_is_generated_from_the_models_without_titles() -> None:
    schema = plan_input_schema()
    text = json.dumps(schema)
    assert schema["type"] == "object" and schema["required"] == ["packages"]
    channel_schema = schema["$defs"]["PlannedChannel"]
    assert {"key", "name", "mediaTypes", "filter"} <= set(channel_schema["required"])
    assert channel_schema["additionalProperties"] is False
    assert '"title": "' not in text
    assert channel_schema["properties"]["mediaTypes"]["minItems"] == 1
    assert schema["$defs"]["PlanCondition"]["properties"]["op"]["enum"] == list(OPS)


def test_sanitising_a_clean_plan_changes_nothing() -> None:
    result = sanitize_plan(GOOD)
    assert result.changes == ()
    assert result.plan == parse_plan(GOOD)
    assert result.channel_count == 3


def test_unknown_fields_bad_operators_and_type_mismatches_are_removed_and_recorded() -> None:
    raw = raw_plan(
        package(
            "p",
            channel(
                "mixed",
                group(
                    "and",
                    cond("genre", "is", "Drama"),
                    cond("mood", "is", "Sad"),
                    cond("genre", "gte", "Drama"),
                    cond("network", "is", "HBO"),
                    cond("duration", "lte", "90"),
                    cond("year", "is", "nineties"),
                ),
            ),
        )
    )
    result = sanitize_plan(raw)
    node = result.plan.channel("mixed").filter_node()
    assert node == Group(children=[Condition(field="genre", op="is", value="Drama")])
    removed = {c.path: c.reason for c in result.changes if c.action == "removed-condition"}
    base = "$.packages[0].channels[0].filter.children"
    assert set(removed) == {f"{base}[{i}]" for i in (1, 2, 3, 4, 5)}
    assert "unknown field 'mood'" in removed[f"{base}[1]"]
    assert "'gte' is not allowed" in removed[f"{base}[2]"]
    assert "movie libraries" in removed[f"{base}[3]"]  # network is show-only
    assert "show libraries" in removed[f"{base}[4]"]  # duration is movie-only
    assert "number" in removed[f"{base}[5]"]
    assert all(c.channel_key == "mixed" and c.package_key == "p" for c in result.changes)


def test_a_channel_whose_filter_is_emptied_is_dropped_never_left_to_match_everything() -> None:
    raw = raw_plan(
        package(
            "p",
            channel("keeps", cond("genre", "is", "Drama")),
            channel("empties", group("or", cond("mood", "is", "x"), cond("vibe", "is", "y"))),
        ),
        package("q", channel("gone", cond("network", "is", "HBO"), mediaTypes=["movie"])),
    )
    result = sanitize_plan(raw)
    assert [key for _, c in result.plan.channels() for key in [c.key]] == ["keeps"]
    assert [d.channel_key for d in result.dropped_channels] == ["empties", "gone"]
    assert "whole library" in result.dropped_channels[0].reason
    actions = [c.action for c in result.changes]
    assert actions.count("dropped-channel") == 2
    assert "removed-group" in actions
    assert "dropped-package" in actions  # q lost its only channel
    assert [p.key for p in result.plan.packages] == ["p"]


def test_a_filter_left_with_exclusions_only_is_dropped() -> None:
    raw = raw_plan(
        package(
            "p",
            channel("ok", cond("genre", "is", "Drama")),
            channel(
                "minus",
                group("and", cond("mood", "is", "Happy"), cond("title", "notContains", "Saw")),
            ),
            channel(
                "or-all",
                group("or", cond("genre", "is", "Drama"), cond("genre", "isNot", "Drama")),
            ),
        )
    )
    result = sanitize_plan(raw)
    assert {d.channel_key for d in result.dropped_channels} == {"minus", "or-all"}
    assert all("nearly the whole library" in d.reason for d in result.dropped_channels)


def test_a_plan_with_nothing_usable_left_is_refused() -> None:
    raw = raw_plan(package("p", channel("c", cond("mood", "is", "x"))))
    with pytest.raises(PlanSchemaError, match="no channel has a usable filter"):
        sanitize_plan(raw)


def test_duplicate_keys_are_made_unique_and_identical_channels_dropped() -> None:
    same = cond("genre", "is", "Drama")
    raw = raw_plan(
        package("Drama Zone", channel("drama", same), channel("drama", cond("genre", "is", "War"))),
        package("drama-zone", channel("copy", same, mediaTypes=["show", "movie"])),
        package("drama-zone", channel("other", cond("genre", "is", "Crime"))),
    )
    result = sanitize_plan(raw)
    assert [p.key for p in result.plan.packages] == ["drama-zone", "drama-zone-2"]
    keys = [c.key for _, c in result.plan.channels()]
    assert keys == ["drama", "drama-2", "other"]
    assert [d.channel_key for d in result.dropped_channels] == ["copy"]
    assert "same media types and filter as channel 'drama'" in result.dropped_channels[0].reason
    renamed = [c for c in result.changes if c.action == "renamed-key"]
    assert {c.path for c in renamed} >= {
        "$.packages[0].key",
        "$.packages[0].channels[1].key",
        "$.packages[2].key",
    }


def test_unknown_existing_keys_are_ignored_and_known_ones_kept() -> None:
    raw = raw_plan(
        package("a", channel("c1", cond("genre", "is", "Drama")), existingKey="kids"),
        package("b", channel("c2", cond("genre", "is", "War")), existingKey="ghost"),
    )
    result = sanitize_plan(raw, existing_package_keys={"kids"})
    assert [p.existing_key for p in result.plan.packages] == ["kids", None]
    ignored = [c for c in result.changes if c.action == "ignored-existing-key"]
    assert len(ignored) == 1 and ignored[0].path == "$.packages[1].existingKey"
    assert "'ghost'" in ignored[0].reason


def test_callsigns_and_sort_fields_are_normalised() -> None:
    raw = raw_plan(
        package(
            "p",
            channel(
                "c", cond("genre", "is", "Drama"), callsign="drama-tv!", sortField="popularity"
            ),
        )
    )
    result = sanitize_plan(raw)
    built = result.plan.channel("c")
    assert built.callsign == "DRAMAT"
    assert built.sort_field is None
    assert {c.path for c in result.changes} == {
        "$.packages[0].channels[0].callsign",
        "$.packages[0].channels[0].sortField",
    }


def test_the_sanitised_plan_converts_into_filter_envelopes() -> None:
    result = sanitize_plan(GOOD)
    envelope = result.plan.channel("noir").envelope()
    assert envelope.media_types == ["movie", "show"]
    assert isinstance(envelope.filter, Group)


def test_helpers_for_package_keys_and_accents() -> None:
    assert slugify("  Kids & Family!! ") == "kids-family"
    assert slugify("***") == "package"
    assert package_slug("Kids & Family", {"kids-family", "kids-family-2"}) == "kids-family-3"
    assert coerce_accent("Gray") == "slate"
    assert coerce_accent("lime") == "green"
    assert coerce_accent("teal") == "teal"
    assert coerce_accent("chartreuse") == "slate"
    assert coerce_accent(None) == "slate"


def test_existing_packages_render_one_line_each() -> None:
    assert "first lineup" in render_existing_packages([])
    text = render_existing_packages(
        [
            ExistingPackage(key="kids", name="Kids", origin="preset", channel_count=1),
            ExistingPackage(key="news", name="News", description="Headlines", channel_count=3),
        ]
    )
    assert text.splitlines() == [
        'kids — "Kids" (preset, 1 channel)',
        'news — "News" (manual, 3 channels): Headlines',
    ]


_FIELD_NAMES = [*FIELDS, "mood", "rating"]
_conditions = st.builds(
    cond,
    st.sampled_from(_FIELD_NAMES),
    st.sampled_from([*OPS, "between", "="]),
    st.one_of(st.sampled_from(["Drama", "1990", "true", "2001-01-01", "x", "30"]), st.integers()),
)
_inner = st.builds(
    lambda comb, kids: group(comb, *kids),
    st.sampled_from(["and", "or"]),
    st.lists(_conditions, min_size=1, max_size=4),
)
_filters = st.one_of(
    _conditions,
    st.builds(
        lambda comb, kids: group(comb, *kids),
        st.sampled_from(["and", "or"]),
        st.lists(st.one_of(_conditions, _inner), min_size=1, max_size=4),
    ),
)
_media = st.sampled_from([["movie"], ["show"], ["movie", "show"]])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_filters, _media), min_size=1, max_size=6))
def test_the_sanitiser_never_yields_an_empty_or_invalid_filter(
    specs: list[tuple[dict[str, Any], list[str]]],
) -> None:
    raw = raw_plan(
        package("p", *[channel(f"c{i}", f, mediaTypes=m) for i, (f, m) in enumerate(specs)])
    )
    try:
        result = sanitize_plan(raw)
    except PlanSchemaError:
        return  # nothing usable: refused as a whole, never emptied
    kept = len(list(result.plan.channels()))
    assert kept + len(result.dropped_channels) == len(specs)
    for _, planned in result.plan.channels():
        node = planned.filter_node()
        assert node is not None
        _assert_usable(node, set(planned.media_types))


def _assert_usable(node: Condition | Group, media: set[str]) -> None:
    if isinstance(node, Group):
        assert node.children, "a group left without children"
        for child in node.children:
            _assert_usable(child, media)
        return
    spec = FIELDS[node.field]
    assert media <= spec.applies


@pytest.mark.parametrize(
    ("number", "text"),
    [(1990, "1990"), (1990.0, "1990"), (7.5, "7.5"), (1e-7, "0.0000001"), (2e21, "2" + "0" * 21)],
)
def test_numbers_become_plain_filter_values(number: float, text: str) -> None:
    assert number_text(number) == text
    plan = parse_plan(raw_plan(package("p", channel("c", cond("year", "gte", number)))))
    assert plan.channel("c").filter_node() == Condition(field="year", op="gte", value=text)
