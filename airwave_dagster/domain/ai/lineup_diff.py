"""The lineup diff an approval gate shows: what a planned AI lineup would do to what is on air.

`diff_lineup(on_air, plan, numbering)` compares this source's AI channels and packages on air
with the numbered plan. A channel's *signature* is its name, case-folded with whitespace
collapsed: a planned channel with the signature of an AI channel on air is the same channel,
`unchanged` when it keeps its number and `renumbered` otherwise; every other planned channel is
`created`, every other AI channel on air `removed` — except those a `limit` leaves on air
(`kept`: a limited run builds a sample of the plan and removes nothing). Packages compare the
same way by name. Manual and preset channels are never touched by an AI lineup and are listed as
`untouched`.

An `unchanged` or `renumbered` channel is rebuilt when the lineup is applied; the job keeps its
old row until the rebuild commits and puts it back if the rebuild does not, so nothing the diff
does not list as `removed` leaves the air. `removes_anything` is what the
`auto_when_nothing_removed` approval policy looks at.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from airwave_dagster.domain.ai.numbering import LineupNumbering
from airwave_dagster.domain.ai.plan import LineupPlan

Origin = Literal["ai", "manual", "preset"]


class OnAirChannel(BaseModel):
    """A channel on the instance before the lineup is applied."""

    model_config = ConfigDict(frozen=True)

    number: int
    name: str
    package: str | None
    origin: Origin


class DiffEntry(BaseModel):
    """One channel of the diff; `number` is None for a removal, `previous_number` for a new one."""

    model_config = ConfigDict(frozen=True)

    name: str
    package: str | None
    number: int | None
    previous_number: int | None


class LineupDiff(BaseModel):
    """What applying the plan changes, by kind."""

    model_config = ConfigDict(frozen=True)

    removed: tuple[DiffEntry, ...]
    created: tuple[DiffEntry, ...]
    unchanged: tuple[DiffEntry, ...]
    renumbered: tuple[DiffEntry, ...]
    untouched: tuple[OnAirChannel, ...]
    kept: tuple[DiffEntry, ...] = ()
    """AI channels on air a `limit` leaves as they are (same number, not rebuilt)."""
    removed_packages: tuple[str, ...]
    created_packages: tuple[str, ...]
    kept_packages: tuple[str, ...]

    @property
    def removes_anything(self) -> bool:
        """Whether an AI channel or AI package on air would disappear."""
        return bool(self.removed or self.removed_packages)


def signature(name: str) -> str:
    """A channel's or package's identity across lineups: its name, case-folded, spaces collapsed."""
    return " ".join(name.split()).casefold()


def diff_lineup(
    on_air: Sequence[OnAirChannel],
    ai_packages: Sequence[str],
    plan: LineupPlan,
    numbering: LineupNumbering,
    *,
    keep: Collection[int] = (),
    reused_packages: Collection[str] = (),
) -> LineupDiff:
    """Compare what is on air with the numbered plan.

    Args:
        on_air: Every channel of the source before the lineup (AI, manual and preset).
        ai_packages: Names of the AI packages the wipe would delete.
        plan: The sanitised plan, restricted to the channels that will be built
            (`LineupPlan.only` with a run's `limit`).
        numbering: The plan's numbers (computed as if the wipe had happened).
        keep: Numbers of AI channels on air that stay as they are (a `limit`'s).
        reused_packages: Plan package keys filed into an AI package that stays on air.

    Returns:
        The diff; entries sorted by number (removals by their old number).
    """
    numbers = numbering.by_key()
    package_names = {p.key: p.name for p in plan.packages}
    kept = [c for c in on_air if c.origin == "ai" and c.number in keep]
    previous = {signature(c.name): c for c in on_air if c.origin == "ai" and c.number not in keep}
    planned: dict[str, DiffEntry] = {}
    for package in plan.packages:
        for channel in package.channels:
            old = previous.get(signature(channel.name))
            planned[signature(channel.name)] = DiffEntry(
                name=channel.name,
                package=package_names[package.key],
                number=numbers[channel.key].number,
                previous_number=None if old is None else old.number,
            )
    removed = [
        DiffEntry(name=c.name, package=c.package, number=None, previous_number=c.number)
        for key, c in previous.items()
        if key not in planned
    ]
    entries = sorted(planned.values(), key=lambda e: e.number or 0)
    planned_packages = {signature(p.name) for p in plan.packages}
    old_packages = {signature(name): name for name in ai_packages}
    return LineupDiff(
        removed=tuple(sorted(removed, key=lambda e: e.previous_number or 0)),
        created=tuple(e for e in entries if e.previous_number is None),
        unchanged=tuple(e for e in entries if e.previous_number == e.number),
        renumbered=tuple(
            e for e in entries if e.previous_number is not None and e.previous_number != e.number
        ),
        untouched=tuple(sorted((c for c in on_air if c.origin != "ai"), key=lambda c: c.number)),
        kept=tuple(
            DiffEntry(name=c.name, package=c.package, number=c.number, previous_number=c.number)
            for c in sorted(kept, key=lambda c: c.number)
        ),
        removed_packages=tuple(
            sorted(name for key, name in old_packages.items() if key not in planned_packages)
        ),
        created_packages=tuple(
            sorted(
                p.name
                for p in plan.packages
                if signature(p.name) not in old_packages
                and not p.existing_key
                and p.key not in reused_packages
            )
        ),
        kept_packages=tuple(
            sorted(
                p.name
                for p in plan.packages
                if signature(p.name) in old_packages or p.key in reused_packages
            )
        ),
    )
