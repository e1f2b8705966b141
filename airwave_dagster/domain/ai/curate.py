"""Lineup curation on the library snapshot: the offline lineup checked as a whole before builds.

The job builds channels concurrently, so no build can see which of its siblings will be kept.
The offline planner's lineup is therefore replayed once, in plan order, against the snapshot's
items in memory (`MemoryToolbox`: the domain's own filter evaluator, plus the show-level
`network` field when the shows' networks are known) with the offline builder and its lineup
guard — exactly the calls a build makes. `curate_lineup` returns the plan with each channel's filter
and exclusion replaced by the ones the replay committed (a kids channel given the EXCLUDE definition
of its rating ceiling, a window widened) and without the channels the replay could not keep (too
small, or too close to a channel kept before it), with the reasons. Channels whose filters use
fields the snapshot cannot answer are kept as planned: Plex decides them at build time.
`lineup_guard_for` gives one build of a concurrent run its guard: the channels planned before it,
resolved on the snapshot, so the Anthropic worker's commits are judged by the same checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from airwave_dagster.domain.ai.lineup_checks import LineupGuard, LineupRules
from airwave_dagster.domain.ai.offline import build_channel_offline, offline_guard, plan_filter
from airwave_dagster.domain.ai.plan import LineupPlan, PlannedChannel
from airwave_dagster.domain.ai.tools import (
    CommittedChannel,
    FilterPreview,
    PoolRules,
    PreviewDetail,
    summarise_pool,
)
from airwave_dagster.domain.filters import (
    FIELDS,
    Condition,
    FilterEnvelope,
    FilterNode,
    Group,
    OfferedFields,
    evaluate,
)
from airwave_dagster.domain.library import MediaItem, MediaType


def _playable(kinds: Sequence[MediaType]) -> set[str]:
    return {"movie" if kind == "movie" else "episode" for kind in kinds}


def matches(
    node: FilterNode | None,
    item: MediaItem,
    show_networks: Mapping[str, str],
    offered: OfferedFields | None = None,
) -> bool:
    """`filters.evaluate`, plus the show-level `network` field from `show_networks`.

    `offered` is the server's filter vocabulary: a field the item's library does not offer
    matches nothing, as on Plex (`filters.evaluate`).
    """
    if node is None:
        return True
    if isinstance(node, Group):
        found = (matches(child, item, show_networks, offered) for child in node.children)
        return any(found) if node.combinator == "or" else all(found)
    if node.field == "network":
        if item.type != "episode" or node.op not in ("is", "isNot"):
            return False
        if offered is not None and not offered.offers("network", item):
            return False
        network = show_networks.get(item.show_rating_key or "") or show_networks.get(
            item.show_title or ""
        )
        same = (network or "").casefold() == node.value.casefold()
        return same if node.op == "is" else not same
    return evaluate(node, item, offered)


def answerable(
    node: FilterNode | None, *, networks: bool, exclude: FilterNode | None = None
) -> bool:
    """Whether every field of the filter (and of its exclusion) can be judged in memory."""
    if exclude is not None and not answerable(exclude, networks=networks):
        return False
    if node is None:
        return True
    if isinstance(node, Group):
        return all(answerable(child, networks=networks) for child in node.children)
    assert isinstance(node, Condition)
    if node.field == "network":
        return networks
    spec = FIELDS.get(node.field)
    return spec is not None and spec.local


def resolve(
    envelope: FilterEnvelope,
    items: Sequence[MediaItem],
    show_networks: Mapping[str, str] | None = None,
    exclude: FilterNode | None = None,
    offered: OfferedFields | None = None,
) -> list[MediaItem]:
    """The complete pool of a filter envelope over in-memory items, minus its exclusion.

    `exclude` is the channel's EXCLUDE definition (over the same media types): an item it
    matches leaves the pool, as `pools.combine_pools` does for definitions resolved by Plex.
    `offered` is the server's filter vocabulary (see `matches`); None judges every field.
    """
    wanted = _playable(envelope.effective_media_types)
    networks = show_networks or {}
    return [
        item
        for item in items
        if item.type in wanted
        and matches(envelope.filter, item, networks, offered)
        and not (exclude is not None and matches(exclude, item, networks, offered))
    ]


@dataclass
class MemoryToolbox:
    """A `ChannelToolbox` over in-memory items; commits and give-ups are only recorded."""

    items: Sequence[MediaItem]
    show_networks: Mapping[str, str] = field(default_factory=dict[str, str])
    offered: OfferedFields | None = None
    committed: list[FilterEnvelope] = field(default_factory=list[FilterEnvelope])

    def discover_field_values(self, field: str, media_types: tuple[MediaType, ...]) -> list[str]:
        """Tag values are not needed by the offline builder."""
        return []

    def preview_filter(
        self, envelope: FilterEnvelope, detail: PreviewDetail, exclude: FilterNode | None = None
    ) -> FilterPreview:
        """Resolve in memory and summarise."""
        wanted = _playable(envelope.effective_media_types)
        library = sum(1 for item in self.items if item.type in wanted)
        pool = resolve(envelope, self.items, self.show_networks, exclude, self.offered)
        return summarise_pool(pool, detail=detail, library_items=library)

    def commit_channel(
        self, envelope: FilterEnvelope, pool: FilterPreview, exclude: FilterNode | None = None
    ) -> CommittedChannel:
        """Record the commit."""
        self.committed.append(envelope)
        return CommittedChannel(channel_id="memory", number=0)

    def give_up(self, reason: str) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class CuratedLineup:
    """The curated plan, the channels left out with why, and the ones kept unverified."""

    plan: LineupPlan
    removed: tuple[tuple[str, str], ...] = ()
    unverified: tuple[str, ...] = ()


def curate_lineup(
    plan: LineupPlan,
    items: Sequence[MediaItem],
    *,
    show_networks: Mapping[str, str] | None = None,
    rules: PoolRules | None = None,
    guard: LineupGuard | None = None,
    offered: OfferedFields | None = None,
) -> CuratedLineup:
    """Replay the lineup's builds in plan order in memory and keep what the checks keep.

    Args:
        plan: The (sanitised) plan.
        items: The library snapshot's available items.
        show_networks: Network per show rating key (or title), if known.
        rules: Pool rules of the run.
        guard: The lineup guard (default: `offline_guard()`).
        offered: The server's filter vocabulary, so each pool is the one Plex would return
            (a field a library lacks matches nothing there); None judges every field.

    Returns:
        The curated lineup; packages left without channels are dropped.
    """
    lineup = guard or offline_guard()
    toolbox = MemoryToolbox(items, dict(show_networks or {}), offered)
    removed: list[tuple[str, str]] = []
    unverified: list[str] = []
    packages = []
    for package in plan.packages:
        kept: list[PlannedChannel] = []
        for channel in package.channels:
            envelope = channel.envelope()
            networks = bool(show_networks)
            if not answerable(envelope.filter, networks=networks, exclude=channel.exclude_node()):
                unverified.append(channel.key)
                kept.append(channel)
                continue
            outcome = build_channel_offline(channel, toolbox, rules=rules, guard=lineup)
            if outcome.status != "created" or outcome.envelope is None:
                removed.append((channel.key, outcome.reason or outcome.status))
                continue
            committed = outcome.envelope
            try:
                revised = plan_filter(committed.filter)
                exclude = None if outcome.exclude is None else plan_filter(outcome.exclude)
            except ValueError as error:
                removed.append((channel.key, str(error)))
                continue
            kept.append(
                channel.model_copy(
                    update={
                        "media_types": list(committed.effective_media_types),
                        "filter": revised,
                        "exclude": exclude,
                    }
                )
            )
        if kept:
            packages.append(package.model_copy(update={"channels": kept}))
    return CuratedLineup(
        plan=LineupPlan(packages=packages), removed=tuple(removed), unverified=tuple(unverified)
    )


def lineup_guard_for(
    earlier: Sequence[PlannedChannel],
    items: Sequence[MediaItem],
    *,
    show_networks: Mapping[str, str] | None = None,
    rules: LineupRules | None = None,
    offered: OfferedFields | None = None,
) -> LineupGuard:
    """The guard of one build of a concurrent run: the channels planned before it, resolved.

    Builds run side by side, so a build cannot wait for its siblings' commits; it is judged
    against the channels ahead of it in plan order instead, each resolved on the snapshot
    (channels the snapshot cannot answer are left out). The first channel of a plan is judged
    on its audience alone.

    Args:
        earlier: The plan's channels before this one, in plan order.
        items: The library snapshot's available items.
        show_networks: Network per show rating key, if known.
        rules: Overlap rules (the shared default when None).
        offered: The server's filter vocabulary (see `resolve`).

    Returns:
        The guard.
    """
    guard = LineupGuard(rules=rules or LineupRules())
    networks = bool(show_networks)
    for channel in earlier:
        envelope, exclude = channel.envelope(), channel.exclude_node()
        if answerable(envelope.filter, networks=networks, exclude=exclude):
            pool = resolve(envelope, items, show_networks, exclude, offered)
            guard.keep(channel.name, frozenset(i.rating_key for i in pool), envelope.filter)
    return guard
