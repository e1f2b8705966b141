"""The lineup diff: removed, created, unchanged and renumbered by signature; others untouched."""

from __future__ import annotations

from airwave_dagster.domain.ai.lineup_diff import OnAirChannel, diff_lineup, signature
from airwave_dagster.domain.ai.numbering import assign_numbers
from airwave_dagster.domain.ai.plan import sanitize_plan
from tests.fakes.scripted_model import small_plan


def test_channels_are_matched_by_signature_and_numbers_decide_kept_or_renumbered() -> None:
    plan = sanitize_plan(small_plan(("Drama", "Comedy", "Horror"))).plan
    numbering = assign_numbers(plan, [7])
    numbers = {c.key: c.number for c in numbering.channels}
    drama = next(c for c in plan.packages[0].channels if c.name == "Drama TV")
    on_air = [
        OnAirChannel(number=numbers[drama.key], name="  drama   tv ", package="Old", origin="ai"),
        OnAirChannel(number=1050, name="Comedy TV", package="Old", origin="ai"),
        OnAirChannel(number=1051, name="Action TV", package="Old", origin="ai"),
        OnAirChannel(number=7, name="Mine", package=None, origin="manual"),
    ]

    diff = diff_lineup(on_air, ["Old"], plan, numbering)

    assert [(e.name, e.previous_number) for e in diff.removed] == [("Action TV", 1051)]
    assert [e.name for e in diff.created] == ["Horror TV"]
    assert [e.name for e in diff.unchanged] == ["Drama TV"]
    assert [(e.name, e.previous_number) for e in diff.renumbered] == [("Comedy TV", 1050)]
    assert [c.number for c in diff.untouched] == [7]
    assert diff.removed_packages == ("Old",)
    assert diff.removes_anything


def test_a_first_lineup_removes_nothing() -> None:
    plan = sanitize_plan(small_plan(("Drama", "Comedy"))).plan

    diff = diff_lineup([], [], plan, assign_numbers(plan, []))

    assert not diff.removes_anything and len(diff.created) == 2
    assert signature(" A  b ") == signature("a B")


def test_channels_a_limit_keeps_are_listed_kept_never_removed() -> None:
    plan = sanitize_plan(small_plan(("Drama", "Horror"))).plan
    numbering = assign_numbers(plan, [1050, 1051])
    moods = plan.packages[0].key
    on_air = [
        OnAirChannel(number=1050, name="Comedy TV", package="Moods", origin="ai"),
        OnAirChannel(number=1051, name="Action TV", package="Thrills", origin="ai"),
    ]

    diff = diff_lineup(on_air, [], plan, numbering, keep=[1050, 1051], reused_packages=[moods])

    assert diff.removed == () and not diff.removes_anything
    assert [(e.name, e.number, e.previous_number) for e in diff.kept] == [
        ("Comedy TV", 1050, 1050),
        ("Action TV", 1051, 1051),
    ]
    assert [e.name for e in diff.created] == ["Drama TV", "Horror TV"]
    assert diff.created_packages == ("Thrills",) and diff.kept_packages == ("Moods",)
