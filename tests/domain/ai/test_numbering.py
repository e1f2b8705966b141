"""Tests for channel numbering, accents and the fan-out order."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airwave_dagster.domain.ai.numbering import (
    AI_NUMBER_BASE,
    CHANNEL_ACCENT_CYCLE,
    ExistingChannel,
    assign_numbers,
    build_order,
    channel_accent_at,
)
from airwave_dagster.domain.ai.plan import LineupPlan, parse_plan


def make_plan(*sizes: int, existing: dict[int, str] | None = None) -> LineupPlan:
    """A plan with one package per size, package i keyed `p{i}`, channels `p{i}-c{j}`."""
    packages: list[dict[str, Any]] = []
    for index, size in enumerate(sizes):
        packages.append(
            {
                "key": f"p{index}",
                "existingKey": (existing or {}).get(index),
                "name": f"Package {index}",
                "channels": [
                    {
                        "key": f"p{index}-c{j}",
                        "name": f"Channel {index}.{j}",
                        "description": "",
                        "mediaTypes": ["movie"],
                        "filter": {"type": "condition", "field": "year", "op": "is", "value": "1"},
                    }
                    for j in range(size)
                ],
            }
        )
    return parse_plan({"packages": packages})


def test_the_spec_example() -> None:
    # Instance: {5, 1001, 1002 in package P, 1105 ungrouped}; plan = [P reused (2), N new (3)].
    plan = make_plan(2, 3)
    result = assign_numbers(
        plan,
        [5, 1001, 1002, 1105],
        package_ids={"p0": "P", "p1": "N"},
        existing_channels=[
            ExistingChannel(number=5),
            ExistingChannel(number=1001, package_id="P"),
            ExistingChannel(number=1002, package_id="P"),
            ExistingChannel(number=1105),
        ],
    )
    assert [c.number for c in result.channels] == [1003, 1004, 1101, 1102, 1103]
    assert [p.number_base for p in result.packages] == [1000, 1100]
    assert [c.package_id for c in result.channels] == ["P", "P", "N", "N", "N"]


def test_a_reused_package_below_1000_gets_a_fresh_block() -> None:
    plan = make_plan(1)
    result = assign_numbers(
        plan,
        [],
        package_ids={"p0": "kids"},
        existing_channels=[ExistingChannel(number=101, package_id="kids")],
    )
    assert result.channels[0].number == 1001
    assert 101 not in [c.number for c in result.channels]


def test_a_package_with_more_than_99_channels_spills_into_the_next_free_block() -> None:
    plan = make_plan(101, 1)
    result = assign_numbers(
        plan, [1100], existing_channels=[ExistingChannel(number=1150, package_id="other")]
    )
    numbers = [c.number for c in result.channels]
    assert numbers[:99] == list(range(1001, 1100))
    # 1100 is owned by "other": the spill-over claims the next free block, 1200.
    assert numbers[99:101] == [1201, 1202]
    assert numbers[101] == 1301
    assert all(n % 100 != 0 for n in numbers)


def test_gaps_in_an_owned_block_are_filled_and_taken_numbers_skipped() -> None:
    plan = make_plan(4)
    owned = [ExistingChannel(number=n, package_id="P") for n in (1201, 1203)]
    result = assign_numbers(plan, [1204], package_ids={"p0": "P"}, existing_channels=owned)
    assert [c.number for c in result.channels] == [1202, 1205, 1206, 1207]
    assert result.packages[0].number_base == 1200


def test_two_plan_packages_on_one_database_package_share_its_block() -> None:
    plan = make_plan(2, 2)
    result = assign_numbers(plan, [], package_ids={"p0": "X", "p1": "X"})
    assert [c.number for c in result.channels] == [1001, 1002, 1003, 1004]


def test_accents_follow_the_reference_walk() -> None:
    expected = (
        "blue orange green green purple cyan rose rose yellow indigo mint red sky violet violet "
        "violet"
    ).split()
    assert [channel_accent_at(i) for i in range(16)] == expected
    assert {channel_accent_at(i) for i in range(200)} == set(CHANNEL_ACCENT_CYCLE)
    with pytest.raises(ValueError, match="0 or more"):
        channel_accent_at(-1)


def test_accents_run_across_the_whole_lineup() -> None:
    result = assign_numbers(make_plan(3, 3), [])
    assert [c.accent for c in result.channels] == [channel_accent_at(i) for i in range(6)]
    assert [c.position for c in result.channels] == list(range(6))


def test_build_order_without_a_limit_is_plan_order() -> None:
    numbering = assign_numbers(make_plan(3, 1), [])
    assert [c.key for c in build_order(numbering)] == ["p0-c0", "p0-c1", "p0-c2", "p1-c0"]
    assert build_order(numbering, 0) == build_order(numbering, None)


def test_a_limit_samples_round_robin_across_packages() -> None:
    numbering = assign_numbers(make_plan(3, 1, 2), [])
    picked = [c.key for c in build_order(numbering, 5)]
    assert picked == ["p0-c0", "p1-c0", "p2-c0", "p0-c1", "p2-c1"]
    assert [c.key for c in build_order(numbering, 2)] == ["p0-c0", "p1-c0"]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(
        st.one_of(st.integers(min_value=1, max_value=12), st.integers(min_value=95, max_value=110)),
        min_size=1,
        max_size=4,
    ),
    taken=st.sets(st.integers(min_value=1, max_value=1700), max_size=80),
    owners=st.lists(
        st.tuples(st.integers(min_value=1, max_value=1700), st.sampled_from(["A", "B", None])),
        max_size=30,
    ),
    mapping=st.lists(st.sampled_from(["A", "B", "C", None]), min_size=4, max_size=4),
)
def test_numbers_never_collide_and_are_deterministic(
    sizes: list[int],
    taken: set[int],
    owners: list[tuple[int, str | None]],
    mapping: list[str | None],
) -> None:
    plan = make_plan(*sizes)
    unique_owners = {number: owner for number, owner in owners if number not in taken}
    existing = [ExistingChannel(number=n, package_id=o) for n, o in unique_owners.items()]
    ids = {f"p{i}": pid for i, pid in enumerate(mapping[: len(sizes)]) if pid is not None}
    first = assign_numbers(plan, taken, package_ids=ids, existing_channels=existing)
    again = assign_numbers(
        plan, sorted(taken, reverse=True), package_ids=ids, existing_channels=existing[::-1]
    )
    numbers = [c.number for c in first.channels]
    assert first == again
    assert len(numbers) == sum(sizes) == len(set(numbers))
    in_use = taken | set(unique_owners)
    assert not set(numbers) & in_use
    assert all(n > AI_NUMBER_BASE and n % 100 != 0 for n in numbers)
