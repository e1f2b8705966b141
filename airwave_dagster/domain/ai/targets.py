"""The lineup's quality targets: pass or fail per target, judged from a `LineupQuality`.

The report step measures a built lineup (`quality.lineup_quality`); these targets turn those
measures into verdicts, which the `ai_lineup` asset carries as asset checks. One target is
blocking: items above the rating ceiling on a kids or family channel. The others are targets a
good lineup meets (the offline builder meets all of them: `tests/domain/ai/
test_lineup_quality.py`), whose miss is worth a warning rather than a verdict on the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from airwave_dagster.domain.ai.lineup_checks import LineupRules
from airwave_dagster.domain.ai.quality import LineupQuality

MAX_JACCARD = LineupRules().max_jaccard
"""The overlap bound: the pairwise Jaccard at which every build's guard refuses a channel."""

MAX_CHANNELS_PER_ITEM = 2.5
"""Pool entries per library item a lineup should stay within."""


@dataclass(frozen=True)
class Target:
    """One quality target of a lineup."""

    name: str
    description: str
    blocking: bool
    judge: Callable[[LineupQuality], tuple[bool, str]]
    """Whether the measures meet the target, and a short line saying why."""


@dataclass(frozen=True)
class Verdict:
    """How a lineup fared against one target."""

    name: str
    passed: bool
    blocking: bool
    summary: str


def _no_strict_subsets(q: LineupQuality) -> tuple[bool, str]:
    if not q.strict_subset_pairs:
        return True, "no channel's pool is inside another's"
    return False, f"{q.strict_subset_pairs} strict-subset pair(s): " + "; ".join(q.subset_examples)


def _overlap_bound(q: LineupQuality) -> tuple[bool, str]:
    worst = ", ".join(f"{p.a} / {p.b} {p.jaccard:.2f}" for p in q.worst_pairs) or "no pairs"
    verdict = "below" if q.max_jaccard < MAX_JACCARD else "at or above"
    return (
        q.max_jaccard < MAX_JACCARD,
        f"max Jaccard {q.max_jaccard:.2f} is {verdict} {MAX_JACCARD:.2f} ({worst})",
    )


def _channels_per_item(q: LineupQuality) -> tuple[bool, str]:
    passed = q.mean_channels_per_item <= MAX_CHANNELS_PER_ITEM
    return passed, (
        f"{q.mean_channels_per_item:.2f} channels per item "
        f"({'within' if passed else 'above'} {MAX_CHANNELS_PER_ITEM:g})"
    )


def _audience_ceiling(q: LineupQuality) -> tuple[bool, str]:
    if not q.audience_violations:
        return True, "no item above the ceiling on a kids or family channel"
    return False, f"{q.audience_violations} item(s) above the ceiling on kids/family channels"


def _channels_verified(q: LineupQuality) -> tuple[bool, str]:
    short = q.channels - q.channels_sized
    unmeasured = f"; {len(q.unmeasured)} not measured" if q.unmeasured else ""
    if not short:
        return True, f"all {q.channels} measured channels have ≥ 3 items and ≥ 10 h{unmeasured}"
    return False, f"{short} of {q.channels} channels under 3 items or 10 h{unmeasured}"


def _genres_covered(q: LineupQuality) -> tuple[bool, str]:
    if not q.genres_without_channel:
        return True, "every genre with ≥ 20 h has a channel"
    return False, "genres with ≥ 20 h and no channel: " + ", ".join(q.genres_without_channel)


TARGETS: tuple[Target, ...] = (
    Target(
        "audience_ceiling",
        "No item above the rating ceiling on a channel named for kids (G, TV-Y, TV-Y7, TV-G) "
        "or a family (up to PG, TV-PG); unrated items count as above.",
        blocking=True,
        judge=_audience_ceiling,
    ),
    Target(
        "no_strict_subsets",
        "No channel's pool is a strict subset of another channel's.",
        blocking=False,
        judge=_no_strict_subsets,
    ),
    Target(
        "overlap_bound",
        f"Every pair of channels is less than {MAX_JACCARD:g} Jaccard-similar (the bound each "
        "build's guard holds).",
        blocking=False,
        judge=_overlap_bound,
    ),
    Target(
        "channels_per_item",
        f"On average an item is on at most {MAX_CHANNELS_PER_ITEM:g} channels.",
        blocking=False,
        judge=_channels_per_item,
    ),
    Target(
        "channels_verified",
        "Every measured channel has at least 3 items and 10 hours.",
        blocking=False,
        judge=_channels_verified,
    ),
    Target(
        "genres_covered",
        "Every genre with at least 20 hours of content has a channel about it.",
        blocking=False,
        judge=_genres_covered,
    ),
)


def judge_lineup(quality: LineupQuality) -> tuple[Verdict, ...]:
    """The lineup's verdict on every target, in `TARGETS` order."""
    verdicts: list[Verdict] = []
    for target in TARGETS:
        passed, summary = target.judge(quality)
        verdicts.append(Verdict(target.name, passed, target.blocking, summary))
    return tuple(verdicts)
