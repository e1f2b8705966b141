"""Lineup quality benchmark: build the offline lineup of an emulator library, measure it.

    .venv/bin/python -m bench.lineup_quality --items 3000 --seed 7
    .venv/bin/python -m bench.lineup_quality --items 20000 --seed 7 --json

Everything runs in memory, without Plex or Postgres: the emulator's dataset is generated, profiled
like the `library_profile` asset does, planned by `offline_plan`, sanitised like the job does, and
every channel is built by `build_channel_offline` against an in-memory toolbox (the domain's own
evaluator, plus the show-level `network` field from the dataset's show records), in plan order,
with the lineup guard when the code has one. Then each **committed** filter is resolved again,
independently of the build, and `domain.ai.quality.lineup_quality` measures the lineup from
those pools. The line "pools match the build" says for how many channels the independent pool
size equals the size the build's commit verified.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from airwave_dagster.domain.ai.offline import build_channel_offline, offline_plan
from airwave_dagster.domain.ai.plan import sanitize_plan
from airwave_dagster.domain.ai.profile import build_profile
from airwave_dagster.domain.ai.quality import BuiltChannel, lineup_quality
from airwave_dagster.domain.ai.tools import (
    CommittedChannel,
    FilterPreview,
    PreviewDetail,
    summarise_pool,
)
from airwave_dagster.domain.filters import Condition, FilterEnvelope, FilterNode, Group, evaluate
from airwave_dagster.domain.library import MediaItem, MediaType
from airwave_dagster.emulators.plex.dataset import build_library

ANCHOR = 1_780_000_000
"""A fixed "now", so the dataset (and every figure) is the same on every day."""

VOCABULARY = ("genre", "studio", "network", "contentRating", "resolution")


def _matches(node: FilterNode | None, item: MediaItem, networks: dict[str, str]) -> bool:
    if node is None:
        return True
    if isinstance(node, Group):
        found = (_matches(child, item, networks) for child in node.children)
        return any(found) if node.combinator == "or" else all(found)
    if isinstance(node, Condition) and node.field == "network":
        if item.type != "episode":
            return False
        same = networks.get(item.show_rating_key or "", "").casefold() == node.value.casefold()
        return same if node.op == "is" else not same
    return evaluate(node, item)


def resolve(
    envelope: FilterEnvelope, items: Sequence[MediaItem], networks: dict[str, str]
) -> list[MediaItem]:
    """The complete pool of a filter envelope over the library."""
    wanted = {"movie" if t == "movie" else "episode" for t in envelope.effective_media_types}
    return [
        item for item in items if item.type in wanted and _matches(envelope.filter, item, networks)
    ]


@dataclass
class MemoryToolbox:
    """A `ChannelToolbox` over the in-memory library."""

    items: Sequence[MediaItem]
    networks: dict[str, str]
    number: int = 1000
    committed: list[FilterEnvelope] = field(default_factory=list[FilterEnvelope])

    def discover_field_values(self, field: str, media_types: tuple[MediaType, ...]) -> list[str]:
        return []

    def preview_filter(self, envelope: FilterEnvelope, detail: PreviewDetail) -> FilterPreview:
        wanted = {"movie" if t == "movie" else "episode" for t in envelope.effective_media_types}
        library = sum(1 for item in self.items if item.type in wanted)
        pool = resolve(envelope, self.items, self.networks)
        return summarise_pool(pool, detail=detail, library_items=library)

    def commit_channel(self, envelope: FilterEnvelope, pool: FilterPreview) -> CommittedChannel:
        self.committed.append(envelope)
        return CommittedChannel(channel_id=f"ch-{self.number}", number=self.number)

    def give_up(self, reason: str) -> None:
        """Nothing to release in memory."""


def measure(items_count: int, seed: int, *, profile_networks: bool = True) -> dict[str, object]:
    """Build the offline lineup of one emulator library and measure it.

    Args:
        items_count: Playable items of the emulator library.
        seed: The dataset's seed.
        profile_networks: Give `build_profile` the shows' networks (the job does since issue 10;
            before, it did not, so the "before" figures are taken without).
    """
    library = build_library(items_count, seed, anchor=ANCHOR)
    items = [item for item in library.media_items() if item.type in ("movie", "episode")]
    networks = {str(show.rating_key): show.network for show in library.shows() if show.network}
    values: dict[str, set[str]] = {name: set() for name in VOCABULARY}
    for item in items:
        values["genre"].update(item.genres)
        for name, value in (
            ("studio", item.studio),
            ("contentRating", item.content_rating),
            ("resolution", item.resolution),
        ):
            if value:
                values[name].add(value)
    values["network"].update(networks.values())
    vocabulary = {name: sorted(found) for name, found in values.items() if found}
    profile = build_profile(
        items, source_id="bench", show_networks=networks if profile_networks else None
    )
    plan = sanitize_plan(offline_plan(profile, vocabulary)).plan
    extra: dict[str, object] = {}
    try:  # the lineup guard exists from issue 10 on; the "before" code has none
        from airwave_dagster.domain.ai.offline import offline_guard  # type: ignore[attr-defined]

        if "guard" in inspect.signature(build_channel_offline).parameters:
            extra["guard"] = offline_guard()
    except ImportError:
        pass
    built: list[BuiltChannel] = []
    matched = 0
    skipped: list[str] = []
    for number, channel in enumerate((c for p in plan.packages for c in p.channels), 1000):
        toolbox = MemoryToolbox(items, networks, number=number)
        outcome = build_channel_offline(channel, toolbox, **extra)  # type: ignore[arg-type]
        if outcome.status != "created" or outcome.envelope is None:
            skipped.append(f"{channel.name}: {outcome.reason}")
            continue
        pool = resolve(outcome.envelope, items, networks)
        matched += outcome.pool is not None and outcome.pool.total_items == len(pool)
        built.append(
            BuiltChannel(
                name=channel.name,
                pool=pool,
                callsign=channel.callsign,
                description=channel.description,
            )
        )
    quality = lineup_quality(items, built)
    return {
        "items": len(items),
        "seed": seed,
        "planned": sum(len(p.channels) for p in plan.packages),
        "built": len(built),
        "pools_match_build": matched,
        "skipped": skipped,
        "channels": [f"{c.callsign or '-'} {c.name} ({len(c.pool)})" for c in built],
        "quality": quality.model_dump(mode="json"),
        "lines": quality.lines(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000, help="playable items (default 3000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the measures as JSON")
    parser.add_argument(
        "--no-profile-networks",
        action="store_true",
        help="profile without the shows' networks, as the job did before issue 10",
    )
    parser.add_argument("--channels", action="store_true", help="list the built channels")
    args = parser.parse_args(argv)
    result = measure(args.items, args.seed, profile_networks=not args.no_profile_networks)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    print(
        f"library: {result['items']} items (seed {result['seed']}); planned {result['planned']}, "
        f"built {result['built']}; pools match the build for {result['pools_match_build']} of "
        f"{result['built']}"
    )
    for line in result["lines"]:  # type: ignore[attr-defined]
        print("  " + line)
    if args.channels:
        for line in result["channels"]:  # type: ignore[attr-defined]
            print("    " + line)
        for line in result["skipped"]:  # type: ignore[attr-defined]
            print("    skipped: " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
