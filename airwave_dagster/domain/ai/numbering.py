"""Channel numbers and accents for a planned lineup.

Reference: docs/reference/ai-lineup.md §5.4 and docs/reference/domain.md §6.4.

AI channels live at 1000 and above, each package in hundred-blocks (`block+1 … block+99`; the
round number itself is never used). A package that already owns channels ≥ 1000 keeps its lowest
such block and fills its gaps; any other package claims the lowest free block. A package with more
channels than its block holds spills into the next free block. Numbers taken by any channel are
never reused, nothing collides within the run, and the result depends only on the inputs.

`assign_numbers` runs after the wipe, against live state; its output is the op's checkpoint, so a
resume never renumbers. `build_order` is the fan-out order under a `limit` (round-robin across
packages). `channel_accent_at(i)` reproduces the reference's accent walk bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from airwave_dagster.domain.ai.plan import LineupPlan

AI_NUMBER_BASE = 1000
PACKAGE_BLOCK_SIZE = 100
MAX_CHANNEL_NUMBER = 2**31 - 1

CHANNEL_ACCENT_CYCLE: tuple[str, ...] = (
    "blue",
    "orange",
    "green",
    "purple",
    "cyan",
    "rose",
    "yellow",
    "indigo",
    "mint",
    "red",
    "sky",
    "violet",
    "amber",
    "teal",
    "pink",
)
"""The channel accent cycle (no slate), docs/reference/domain.md §6.4a."""


class ExistingChannel(BaseModel):
    """A channel already on the instance (after the wipe)."""

    model_config = ConfigDict(frozen=True)

    number: int
    package_id: str | None = None


class NumberedChannel(BaseModel):
    """A planned channel's number and accent."""

    model_config = ConfigDict(frozen=True)

    key: str
    package_key: str = Field(description="The plan package key.")
    package_id: str | None = Field(description="The database package id, when mapped.")
    number: int
    accent: str
    position: int = Field(description="Index across the whole lineup, plan order.")


class NumberedPackage(BaseModel):
    """A planned package's first block."""

    model_config = ConfigDict(frozen=True)

    key: str
    package_id: str | None
    number_base: int


class LineupNumbering(BaseModel):
    """Numbers for every planned channel (limit or not), in plan order."""

    model_config = ConfigDict(frozen=True)

    packages: tuple[NumberedPackage, ...]
    channels: tuple[NumberedChannel, ...]

    def by_key(self) -> dict[str, NumberedChannel]:
        """Channels by their plan key."""
        return {channel.key: channel for channel in self.channels}


def _block_of(number: int) -> int:
    return number // PACKAGE_BLOCK_SIZE * PACKAGE_BLOCK_SIZE


def assign_numbers(
    plan: LineupPlan,
    taken_numbers: Iterable[int],
    *,
    package_ids: Mapping[str, str] | None = None,
    existing_channels: Sequence[ExistingChannel] = (),
) -> LineupNumbering:
    """Number every channel of the plan.

    Args:
        plan: The sanitised plan.
        taken_numbers: Every channel number in use on the instance (after the wipe).
        package_ids: Plan package key → database package id (from the packages step). Two plan
            packages mapped to one id share its blocks. Without ids each plan package is its own.
        existing_channels: Channels with their package ids, to find the blocks packages own;
            their numbers count as taken too.

    Returns:
        The numbering.

    Raises:
        ValueError: The number space above `AI_NUMBER_BASE` is exhausted.
    """
    ids = package_ids or {}
    taken = set(taken_numbers) | {c.number for c in existing_channels}
    owned: dict[str, int] = {}
    for existing in existing_channels:
        if existing.package_id is not None and existing.number >= AI_NUMBER_BASE:
            block = _block_of(existing.number)
            owned[existing.package_id] = min(block, owned.get(existing.package_id, block))
    used_blocks = set(owned.values())
    next_free = AI_NUMBER_BASE

    def claim() -> int:
        nonlocal next_free
        block = next_free
        while block in used_blocks:
            block += PACKAGE_BLOCK_SIZE
        if block + PACKAGE_BLOCK_SIZE - 1 > MAX_CHANNEL_NUMBER:
            raise ValueError("no free channel block left above 1000")
        used_blocks.add(block)
        next_free = block + PACKAGE_BLOCK_SIZE
        return block

    packages: list[NumberedPackage] = []
    channels: list[NumberedChannel] = []
    position = 0
    for package in plan.packages:
        package_id = ids.get(package.key)
        identity = package_id if package_id is not None else f"plan:{package.key}"
        if identity not in owned:
            owned[identity] = claim()
        block = owned[identity]
        packages.append(NumberedPackage(key=package.key, package_id=package_id, number_base=block))
        cursor = block + 1
        for channel in package.channels:
            while True:
                if cursor >= block + PACKAGE_BLOCK_SIZE:
                    block = claim()
                    cursor = block + 1
                elif cursor in taken:
                    cursor += 1
                else:
                    break
            taken.add(cursor)
            channels.append(
                NumberedChannel(
                    key=channel.key,
                    package_key=package.key,
                    package_id=package_id,
                    number=cursor,
                    accent=channel_accent_at(position),
                    position=position,
                )
            )
            position += 1
            cursor += 1
    return LineupNumbering(packages=tuple(packages), channels=tuple(channels))


def build_order(numbering: LineupNumbering, limit: int | None = None) -> list[NumberedChannel]:
    """The channels to build, in fan-out order.

    Without a limit (None or ≤ 0) every channel in plan order; with one, round-robin across
    packages — the first channel of each package, then the second of each, … — so a capped run
    samples every package instead of only the first.
    """
    channels = list(numbering.channels)
    if limit is None or limit <= 0 or limit >= len(channels):
        return channels
    buckets: dict[str, list[NumberedChannel]] = {}
    for channel in channels:
        buckets.setdefault(channel.package_id or f"plan:{channel.package_key}", []).append(channel)
    picked: list[NumberedChannel] = []
    depth = 0
    while len(picked) < limit:
        for bucket in buckets.values():
            if depth < len(bucket) and len(picked) < limit:
                picked.append(bucket[depth])
        depth += 1
    return picked


def _hash32(n: int) -> int:
    """The reference's integer hash, JavaScript number semantics included.

    Its first xor yields a *signed* 32-bit value (JavaScript's `^`), and the second multiply
    happens in IEEE doubles (losing the product's low bits) before `>>> 0`; both are kept so the
    accent sequence matches the reference exactly.
    """
    h = (n * 2654435761) % 2**32
    h = _int32(h ^ (h >> 15))
    product = float(h) * 2246822519.0
    h = int(math.fmod(product, 4294967296.0)) % 2**32
    return h ^ (h >> 13)


def _int32(value: int) -> int:
    value %= 2**32
    return value - 2**32 if value >= 2**31 else value


def _run_length(segment: int) -> int:
    r = _hash32(segment) % 6
    return 1 if r < 3 else 2 if r < 5 else 3


def channel_accent_at(index: int) -> str:
    """The accent of the `index`-th channel of a lineup (runs of 1 to 3 per colour).

    Raises:
        ValueError: `index` is negative.
    """
    if index < 0:
        raise ValueError("channel index must be 0 or more")
    segment = 0
    start = 0
    while True:
        length = _run_length(segment)
        if index < start + length:
            return CHANNEL_ACCENT_CYCLE[segment % len(CHANNEL_ACCENT_CYCLE)]
        start += length
        segment += 1
