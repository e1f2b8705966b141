"""Lineup quality benchmark: build the offline lineup of an emulator library, measure it.

    .venv/bin/python -m bench.lineup_quality --items 3000 --seed 7
    .venv/bin/python -m bench.lineup_quality --items 20000 --seed 7 --json
    .venv/bin/python -m bench.lineup_quality --write    # the BENCHMARKS.md section

Everything runs in memory, without Plex or Postgres: the emulator's dataset is generated, profiled
like the `library_profile` asset does, planned by `offline_plan`, sanitised like the job does, and
every channel is built by `build_channel_offline` against an in-memory toolbox (the domain's own
evaluator, plus the show-level `network` field from the dataset's show records), in plan order, with
the lineup guard when the code has one. Then each **committed** filter (minus its EXCLUDE
definition, when the channel has one) is resolved again, independently of the build, and
`domain.ai.quality.lineup_quality` measures the lineup from those pools. The line "pools match the
build" says for how many channels the independent pool size equals the size the build's commit
verified.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

SECTION_SIZES = (2000, 3000, 20_000)
"""The libraries of the BENCHMARKS.md section: the demo (2,000), the issue's 3,000, and 20,000."""
SECTION_HEADING = "## Lineup quality: the offline builder on emulator libraries"
BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


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
    envelope: FilterEnvelope,
    items: Sequence[MediaItem],
    networks: dict[str, str],
    exclude: FilterNode | None = None,
) -> list[MediaItem]:
    """The complete pool of a filter envelope over the library, minus its EXCLUDE definition."""
    wanted = {"movie" if t == "movie" else "episode" for t in envelope.effective_media_types}
    return [
        item
        for item in items
        if item.type in wanted
        and _matches(envelope.filter, item, networks)
        and not (exclude is not None and _matches(exclude, item, networks))
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

    def preview_filter(
        self, envelope: FilterEnvelope, detail: PreviewDetail, exclude: FilterNode | None = None
    ) -> FilterPreview:
        wanted = {"movie" if t == "movie" else "episode" for t in envelope.effective_media_types}
        library = sum(1 for item in self.items if item.type in wanted)
        pool = resolve(envelope, self.items, self.networks, exclude)
        return summarise_pool(pool, detail=detail, library_items=library)

    def commit_channel(
        self, envelope: FilterEnvelope, pool: FilterPreview, exclude: FilterNode | None = None
    ) -> CommittedChannel:
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
        # The "before" code has no exclusions (its outcomes carry none).
        pool = resolve(outcome.envelope, items, networks, getattr(outcome, "exclude", None))
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


def lineup_quality_section(sizes: Sequence[int] = SECTION_SIZES, seed: int = 7) -> str:
    """The BENCHMARKS.md section: `measure` on each library size, one column per library."""
    columns: list[tuple[dict[str, Any], float]] = []
    for size in sizes:
        started = time.perf_counter()
        columns.append((measure(size, seed), time.perf_counter() - started))

    def row(label: str, cell: Callable[[dict[str, Any], dict[str, Any]], str]) -> str:
        cells = " | ".join(cell(result, result["quality"]) for result, _ in columns)
        return f"| {label} | {cells} |"

    header = " | ".join(f"{size:,} items" for size in sizes)
    lines = [
        "",
        SECTION_HEADING,
        "",
        f"Seed {seed}; everything in memory (no Plex, no Postgres): the emulator's dataset is "
        "profiled, planned by `offline_plan`, every channel built by `build_channel_offline` "
        "with the lineup guard, and each committed filter (minus its EXCLUDE definition) "
        "resolved again independently of the build. 2,000 items is the demo library. Reproduce "
        "with `python -m bench.lineup_quality --write` (this section only) or `--items N "
        f"--seed {seed}` (one library). Targets (issue 10): 0 strict-subset pairs, max Jaccard "
        "≤ 0.35, ≤ 2.5 channels per item, ≥ 95 % of the runtime covered, 0 items above the "
        "ceiling, every genre with ≥ 20 h on a channel, 0 callsigns cut short.",
        "",
        f"| measure | {header} |",
        "|---|" + "---:|" * len(sizes),
        row("channels planned / built", lambda r, q: f"{r['planned']} / {r['built']}"),
        row(
            "pools re-resolved = the build's verified pool",
            lambda r, q: f"{r['pools_match_build']} of {r['built']}",
        ),
        row(
            "channels with ≥ 3 items and ≥ 10 h; whole-library",
            lambda r, q: f"{q['channels_sized']}; {q['whole_library_channels']}",
        ),
        row(
            "max / median pairwise Jaccard",
            lambda r, q: f"{q['max_jaccard']:.2f} / {q['median_jaccard']:.2f}",
        ),
        row("strict-subset pairs", lambda r, q: str(q["strict_subset_pairs"])),
        row("channels per item", lambda r, q: f"{q['mean_channels_per_item']:.2f}"),
        row("median items per channel", lambda r, q: f"{q['items_per_channel_median']:,}"),
        row("library runtime covered", lambda r, q: f"{q['runtime_covered']:.1%}"),
        row(
            "items above the ceiling on kids/family channels",
            lambda r, q: str(q["audience_violations"]),
        ),
        row(
            "mixed-audience / mixed-media channels",
            lambda r, q: f"{q['mixed_audience_channels']} / {q['mixed_media_channels']}",
        ),
        row(
            "genres (≥ 20 h) without a channel", lambda r, q: str(len(q["genres_without_channel"]))
        ),
        row("callsigns cut short", lambda r, q: str(len(q["cut_short_callsigns"]))),
        row("descriptions untrue of the pool", lambda r, q: str(len(q["untrue_descriptions"]))),
        "| time (plan, build, measure) | "
        + " | ".join(f"{seconds:.1f} s" for _, seconds in columns)
        + " |",
        "",
    ]
    return "\n".join(lines)


def write_section(section: str, path: Path = BENCHMARKS) -> None:
    """Replace this benchmark's section of BENCHMARKS.md (append it when absent); keep the rest."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    start = next((i for i, line in enumerate(lines) if line == SECTION_HEADING), len(lines))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    parts = ["\n".join(lines[:start]).strip("\n"), section.strip("\n"), "\n".join(lines[end:])]
    path.write_text("\n\n".join(part for part in parts if part) + "\n", encoding="utf-8")


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
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"measure {', '.join(map(str, SECTION_SIZES))} items and rewrite this benchmark's "
        "section of BENCHMARKS.md (nothing else of the file)",
    )
    args = parser.parse_args(argv)
    if args.write:
        section = lineup_quality_section(seed=args.seed)
        write_section(section)
        print(section)
        return 0
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
