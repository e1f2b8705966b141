"""Tests for import planning: signatures, dedupe, numbering, packages and the worked example."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airwave_dagster.domain.import_plan import (
    ALREADY_ON_INSTANCE,
    ImportPlan,
    InstanceState,
    PlanCounts,
    channel_signature,
    plan_import,
)
from airwave_dagster.domain.library import Library
from airwave_dagster.domain.lineup_file import LineupFile, parse_lineup

SPEC_EXAMPLE = Path(__file__).parent.parent / "data" / "lineups" / "spec_example.json"
LIBRARIES = (
    Library(key="1", title="Movies", type="movie"),
    Library(key="2", title="TV Shows", type="show"),
)
WORKED_STATE = InstanceState(
    channel_numbers=frozenset({101, 104}),
    package_keys=frozenset({"family-room"}),
    libraries=LIBRARIES,
)


def spec_lineup() -> LineupFile:
    return parse_lineup(SPEC_EXAMPLE.read_bytes(), source=SPEC_EXAMPLE.name)


def lineup(*channels: dict[str, Any], packages: list[dict[str, Any]] | None = None) -> LineupFile:
    return LineupFile.model_validate(
        {"version": 1, "packages": packages or [], "channels": list(channels)}
    )


def channel(number: int, name: str = "Chan", **extra: Any) -> dict[str, Any]:
    definitions = extra.pop("definitions", [predicate()])
    return {"number": number, "name": name, "definitions": definitions, **extra}


def predicate(value: str = "Comedy", **extra: Any) -> dict[str, Any]:
    plex_filter = {
        "mediaTypes": ["movie"],
        "filter": {"type": "condition", "field": "genre", "op": "is", "value": value},
    }
    return {"kind": "PREDICATE", "plexFilter": plex_filter, **extra}


def state_after(plan: ImportPlan, before: InstanceState) -> InstanceState:
    """The instance as a successful run of `plan` leaves it."""
    creates = plan.creates()
    return InstanceState(
        channel_numbers=before.channel_numbers | {c.assigned_number for c in creates},
        package_keys=before.package_keys | {p.key for p in plan.packages},
        libraries=before.libraries,
        channel_signatures=before.channel_signatures | {c.signature for c in creates},
    )


def test_signature_of_channel_301_matches_the_spec_exactly() -> None:
    signature = channel_signature(
        "Straight Outta the 80s",
        "time-machine",
        "SHUFFLE",
        "title",
        "asc",
        [
            {
                "mediaTypes": ["movie", "show"],
                "filter": {"type": "condition", "field": "decade", "op": "is", "value": "1980"},
            }
        ],
    )
    assert signature == (
        '["Straight Outta the 80s","time-machine","SHUFFLE","title","asc",'
        '["{\\"filter\\":{\\"field\\":\\"decade\\",\\"op\\":\\"is\\",\\"type\\":\\"condition\\",'
        '\\"value\\":\\"1980\\"},\\"mediaTypes\\":[\\"movie\\",\\"show\\"]}"]]'
    )
    planned = plan_import(spec_lineup(), WORKED_STATE).channels[6]
    assert planned.original_number == 301
    assert planned.signature == signature


def _sig(**overrides: Any) -> str:
    args: dict[str, Any] = {
        "name": "Cartoons",
        "package_key": "kids",
        "ordering": "SHUFFLE",
        "sort_field": "title",
        "sort_dir": "asc",
        "predicate_filters": [{"mediaTypes": ["show"]}, None],
    }
    args.update(overrides)
    return channel_signature(**args)


@pytest.mark.parametrize(
    ("overrides", "same"),
    [
        ({"name": " \u00a0Cartoons\ufeff\n"}, True),
        ({"predicate_filters": [None, {"mediaTypes": ["show"]}]}, True),
        ({"name": "cartoons"}, False),
        ({"package_key": None}, False),
        ({"ordering": "IN_ORDER"}, False),
        ({"sort_field": "year"}, False),
        ({"sort_dir": "desc"}, False),
        ({"predicate_filters": [{"mediaTypes": ["show"]}]}, False),
        ({"predicate_filters": [{"mediaTypes": ["show"], "filter": None}, None]}, False),
    ],
)
def test_signature_covers_exactly_the_recipe(overrides: dict[str, Any], same: bool) -> None:
    assert (_sig(**overrides) == _sig()) is same


def test_signature_of_channel_without_predicates_and_with_null_filter() -> None:
    assert channel_signature("X", None, "SHUFFLE", "title", "asc", []) == (
        '["X","","SHUFFLE","title","asc",[]]'
    )
    assert channel_signature("X", None, "SHUFFLE", "title", "asc", [None]).endswith('["null"]]')


def test_worked_example_of_the_spec() -> None:
    plan = plan_import(spec_lineup(), WORKED_STATE)
    rows = [
        (
            c.original_number,
            c.name,
            c.action,
            c.assigned_number,
            c.number_reassigned,
            c.disabled,
            c.dropped_kinds,
            c.library_unmatched,
        )
        for c in plan.channels
    ]
    assert rows == [
        (101, "Midnight Creature Features", "create", 105, True, False, (), False),
        (102, "Cult Comedy Reruns", "create", 102, False, False, (), False),
        (103, "Fresh Arrivals", "create", 103, False, False, (), False),
        (201, "Saturday Cartoons", "create", 201, False, False, (), False),
        (202, "Family Film Night", "create", 202, False, False, ("PLEX_COLLECTION",), False),
        (203, "Holiday Picks", "create", 203, False, True, ("MANUAL_ITEMS",), False),
        (301, "Straight Outta the 80s", "create", 301, False, False, (), False),
        (302, "Golden Age Sci-Fi", "create", 302, False, False, (), True),
        (101, "Classic Sitcoms", "create", 106, True, False, (), False),
    ]
    assert [(p.key, p.action) for p in plan.packages] == [
        ("late-night", "create"),
        ("family-room", "reuse"),
        ("time-machine", "create"),
    ]
    assert plan.counts == PlanCounts(to_create=9, skip_duplicate=0, disabled=1, reassigned=2)

    midnight, _, _, cartoons, _, holiday, _, golden, sitcoms = plan.channels
    assert [(d.plex_library_title, d.plex_library_key) for d in midnight.definitions] == [
        ("Movies", "1")
    ]
    assert [(d.plex_library_title, d.plex_library_key) for d in golden.definitions] == [
        ("Classics", None)
    ]
    assert [(d.mode, d.sort_index) for d in cartoons.definitions] == [
        ("INCLUDE", 0),
        ("EXCLUDE", 1),
    ]
    assert holiday.definitions == ()
    assert holiday.enabled is False
    assert sitcoms.enabled is False
    assert sitcoms.disabled is False
    assert sitcoms.package_key is None
    assert midnight.callsign == "MIDNT"
    assert midnight.definitions[0].plex_filter == (
        spec_lineup().channels[0].definitions[0].plex_filter
    )
    late_night = plan.packages[0]
    assert (late_night.name, late_night.icon, late_night.tint, late_night.sort_index) == (
        "Late Night",
        "lucide:Moon",
        "indigo",
        1,
    )
    assert [c.original_number for c in plan.creates()] == [
        101, 102, 103, 201, 202, 203, 301, 302, 101,
    ]  # fmt: skip


def test_replanning_after_a_successful_import_skips_everything() -> None:
    first = plan_import(spec_lineup(), WORKED_STATE)
    again = plan_import(spec_lineup(), state_after(first, WORKED_STATE))
    # The skipped channels' packages exist and are reused: the report must not say "reused 0".
    assert [(p.key, p.action) for p in again.packages] == [
        ("late-night", "reuse"),
        ("family-room", "reuse"),
        ("time-machine", "reuse"),
    ]
    assert again.counts == PlanCounts(to_create=0, skip_duplicate=9, disabled=0, reassigned=0)
    assert {c.skip_reason for c in again.channels} == {ALREADY_ON_INSTANCE}
    assert all(c.assigned_number == c.original_number for c in again.channels)
    assert not any(c.number_reassigned for c in again.channels)
    assert again.creates() == ()


def test_a_renamed_copy_is_created_again_and_renumbered() -> None:
    first = plan_import(spec_lineup(), WORKED_STATE)
    copy = spec_lineup().model_copy(
        update={
            "channels": [
                c.model_copy(update={"name": c.name + " (copy)"}) for c in spec_lineup().channels
            ]
        }
    )
    again = plan_import(copy, state_after(first, WORKED_STATE))
    assert again.counts.to_create == 9
    assert again.counts.reassigned == 9
    assert [(p.key, p.action) for p in again.packages] == [
        ("late-night", "reuse"),
        ("family-room", "reuse"),
        ("time-machine", "reuse"),
    ]


def test_plan_round_trips_through_json() -> None:
    plan = plan_import(spec_lineup(), WORKED_STATE)
    payload = json.loads(json.dumps(plan.model_dump(mode="json")))
    assert ImportPlan.model_validate(payload) == plan


def test_plan_is_deterministic() -> None:
    assert plan_import(spec_lineup(), WORKED_STATE) == plan_import(spec_lineup(), WORKED_STATE)


@pytest.mark.parametrize(
    ("selected", "expected"),
    [
        (None, [101, 102, 103, 201, 202, 203, 301, 302, 101]),
        ([], []),
        ([999], []),
        ([101], [101, 101]),
        ([302, 201, 201], [201, 302]),
    ],
)
def test_selected_numbers(selected: list[int] | None, expected: list[int]) -> None:
    plan = plan_import(spec_lineup(), WORKED_STATE, selected_numbers=selected)
    assert [c.original_number for c in plan.channels] == expected


def test_selecting_only_the_101s_plans_their_packages_only() -> None:
    plan = plan_import(spec_lineup(), WORKED_STATE, selected_numbers=[101])
    assert [(c.assigned_number, c.number_reassigned) for c in plan.channels] == [
        (102, True),
        (103, True),
    ]
    assert [p.key for p in plan.packages] == ["late-night"]


def test_nothing_selected_plans_nothing() -> None:
    plan = plan_import(spec_lineup(), WORKED_STATE, selected_numbers=[])
    assert plan == ImportPlan(
        packages=(),
        channels=(),
        counts=PlanCounts(to_create=0, skip_duplicate=0, disabled=0, reassigned=0),
    )


def test_identical_channels_within_one_file_are_imported_once() -> None:
    plan = plan_import(
        lineup(channel(5), channel(6, "Other"), channel(7), channel(5)),
        InstanceState(channel_numbers=frozenset({6})),
    )
    assert [(c.original_number, c.action, c.assigned_number) for c in plan.channels] == [
        (5, "create", 5),
        (6, "create", 7),
        (7, "skip-duplicate", 7),
        (5, "skip-duplicate", 5),
    ]
    assert plan.channels[2].skip_reason == "identical to channel 5 earlier in this file"
    assert plan.channels[3].skip_reason == "identical to channel 5 earlier in this file"
    assert plan.counts == PlanCounts(to_create=2, skip_duplicate=2, disabled=0, reassigned=1)


def test_an_unselected_twin_does_not_block_the_selected_one() -> None:
    plan = plan_import(lineup(channel(5), channel(7)), InstanceState(), selected_numbers=[7])
    assert [(c.original_number, c.action) for c in plan.channels] == [(7, "create")]


def test_duplicates_of_the_instance_are_skipped_and_consume_no_number() -> None:
    existing = channel_signature(
        "Chan", None, "SHUFFLE", "title", "asc", [predicate()["plexFilter"]]
    )
    plan = plan_import(
        lineup(channel(5), channel(5, "New")),
        InstanceState(channel_numbers=frozenset({9}), channel_signatures=frozenset({existing})),
    )
    skipped, created = plan.channels
    assert (skipped.action, skipped.skip_reason, skipped.assigned_number) == (
        "skip-duplicate",
        ALREADY_ON_INSTANCE,
        5,
    )
    assert (created.action, created.assigned_number, created.number_reassigned) == (
        "create",
        5,
        False,
    )


def test_same_name_with_a_different_recipe_is_not_a_duplicate() -> None:
    existing = channel_signature(
        "Chan", None, "SHUFFLE", "title", "asc", [predicate()["plexFilter"]]
    )
    plan = plan_import(
        lineup(channel(5, definitions=[predicate("Drama")]), channel(6, ordering="IN_ORDER")),
        InstanceState(channel_numbers=frozenset({5}), channel_signatures=frozenset({existing})),
    )
    assert [(c.action, c.assigned_number) for c in plan.channels] == [
        ("create", 7),
        ("create", 6),
    ]


def test_numbering_keeps_free_numbers_before_probing() -> None:
    # 10 collides; 11 and 12 are kept in pass 1, so 10 probes past them and past taken 13.
    plan = plan_import(
        lineup(channel(12, "c"), channel(10, "a"), channel(11, "b"), channel(10, "d")),
        InstanceState(channel_numbers=frozenset({10, 13})),
    )
    assert [(c.name, c.assigned_number, c.number_reassigned) for c in plan.channels] == [
        ("c", 12, False),
        ("a", 14, True),
        ("b", 11, False),
        ("d", 15, True),
    ]
    assert plan.counts.reassigned == 2


def test_disabled_channels_consume_numbers() -> None:
    plan = plan_import(lineup(channel(1, "x", definitions=[]), channel(1, "y")), InstanceState())
    assert [(c.assigned_number, c.disabled, c.enabled) for c in plan.channels] == [
        (1, True, False),
        (2, False, True),
    ]
    assert plan.counts.disabled == 1


def test_definitions_keep_predicates_only_sorted_by_sort_index() -> None:
    plan = plan_import(
        lineup(
            channel(
                1,
                definitions=[
                    {"kind": "MANUAL_ITEMS", "manualItemKeys": ["1"]},
                    predicate("A", mode="EXCLUDE"),
                    {"kind": "PLEX_PLAYLIST"},
                    predicate("B", sortIndex=-1),
                    {"kind": "MANUAL_ITEMS"},
                    predicate("C"),
                ],
            )
        ),
        InstanceState(),
    )
    (planned,) = plan.channels
    assert planned.dropped_kinds == ("MANUAL_ITEMS", "PLEX_PLAYLIST")
    assert [
        (d.plex_filter["filter"]["value"] if d.plex_filter else None, d.mode, d.sort_index)
        for d in planned.definitions
    ] == [("B", "INCLUDE", -1), ("A", "EXCLUDE", 0), ("C", "INCLUDE", 2)]
    assert planned.disabled is False


@pytest.mark.parametrize(
    ("title", "key", "unmatched"),
    [
        (None, None, False),
        ("movies", "1", False),
        ("TV SHOWS", "2", False),
        ("Kids", "4", False),
        ("Classics", None, True),
    ],
)
def test_library_remap_by_title(title: str | None, key: str | None, unmatched: bool) -> None:
    libraries = (
        *LIBRARIES,
        Library(key="3", title="Kids", type="show"),
        # On duplicate titles the last library wins, as in the reference.
        Library(key="4", title="kids", type="movie"),
    )
    plan = plan_import(
        lineup(channel(1, definitions=[predicate(plexLibraryTitle=title)])),
        InstanceState(libraries=libraries),
    )
    (planned,) = plan.channels
    assert planned.definitions[0].plex_library_key == key
    assert planned.library_unmatched is unmatched


def test_packages_follow_first_use_in_number_order() -> None:
    packages = [
        {"key": "a", "name": "A"},
        {"key": "b", "name": "B", "sortIndex": 4, "tint": "teal"},
        {"key": "unused", "name": "Unused"},
        {"key": "dupe-only", "name": "Dupe only"},
    ]
    existing = channel_signature("Dup", "dupe-only", "SHUFFLE", "title", "asc", [
        predicate()["plexFilter"]
    ])  # fmt: skip
    plan = plan_import(
        lineup(
            channel(30, "x", packageKey="a"),
            channel(20, "y", packageKey="b"),
            channel(10, "Dup", packageKey="dupe-only"),
            channel(40, "z", packageKey="a"),
            channel(50, "w"),
            packages=packages,
        ),
        InstanceState(package_keys=frozenset({"a"}), channel_signatures=frozenset({existing})),
    )
    assert [(p.key, p.name, p.action, p.sort_index, p.tint) for p in plan.packages] == [
        ("b", "B", "create", 4, "teal"),
        ("a", "A", "reuse", None, None),
    ]


def test_a_package_missing_from_a_hand_built_lineup_gets_a_stub() -> None:
    plan = plan_import(lineup(channel(1, packageKey="ghost")), InstanceState())
    (package,) = plan.packages
    assert (package.key, package.name, package.action, package.sort_index) == (
        "ghost",
        "ghost",
        "create",
        None,
    )


def test_a_renumbered_channel_says_why() -> None:
    # Issue 27.11: the report showed "105 (was 101)" with an empty note.
    plan = plan_import(
        lineup(channel(5, "First"), channel(5, "Second"), channel(6, "Third"), channel(0, "Zero")),
        InstanceState(channel_numbers=frozenset({6})),
    )
    reasons = {c.name: (c.assigned_number, c.renumber_reason) for c in plan.channels}
    assert reasons == {
        "First": (5, None),
        "Second": (7, '5 is kept by "First", earlier in this file; 7 was the next free number'),
        "Third": (8, "6 is taken by a channel already on this server; 8 was the next free number"),
        "Zero": (1, "0 is not a channel number; 1 was the next free number"),
    }
