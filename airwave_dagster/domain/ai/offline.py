"""The offline provider: a deterministic, rule-based planner and channel builder (no model calls).

`offline_plan(profile, vocabulary, existing_packages)` designs a lineup from the profile alone —
genres, decades (older ones folded into one channel), studios, networks, marathons of the biggest
shows, content-rating bands, score windows, movie runtime bands and premium video — using tag
values only as the vocabulary spells them (a value the library does not have is never planned),
and at most `MAX_OFFLINE_CHANNELS` channels. Every filter selects something (no channel is
"everything"); existing packages whose key or name matches a planned package are reused.

`build_channel_offline(channel, toolbox)` drives the very same tools as the Anthropic worker
through a `ToolSession`: preview the planned filter, widen it step by step when the pool is too
small or too short (both media types where every field allows it, looser numeric windows, fewer
AND conditions), commit when a preview passes `verify_pool` (the commit re-verifies), and give up
with the reasons when no variant passes. Same inputs, same calls, same outcome.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airwave_dagster.domain.ai.plan import (
    ExistingPackage,
    LineupPlan,
    PlanCondition,
    PlanGroup,
    PlannedChannel,
    PlannedPackage,
    number_text,
    slugify,
    unique_key,
)
from airwave_dagster.domain.ai.profile import Distribution, LibraryProfile
from airwave_dagster.domain.ai.tools import (
    ChannelOutcome,
    ChannelToolbox,
    PoolRules,
    ToolSession,
    verify_pool,
)
from airwave_dagster.domain.filters import FIELDS, Condition, FilterNode, Group
from airwave_dagster.domain.library import MEDIA_TYPES, MediaType

MAX_OFFLINE_CHANNELS = 50
MAX_GENRE_CHANNELS = 10
MAX_STUDIO_CHANNELS = 6
MAX_NETWORK_CHANNELS = 6
MAX_MARATHONS = 6
MIN_TITLES = 8
"""A genre/studio/decade needs this many titles (movies + shows) for its own channel."""
MIN_NETWORK_SHOWS = 2
MIN_MARATHON_EPISODES = 20
MIN_PREMIUM_ITEMS = 10
MAX_PREVIEWS = 6
"""Previews one offline build may make before it gives up."""

_FAMILY_RATINGS = ("G", "PG", "TV-Y", "TV-Y7", "TV-G", "TV-PG")
_TEEN_RATINGS = ("PG-13", "TV-14")
_MATURE_RATINGS = ("R", "NC-17", "TV-MA")

_WIDEN_STEP = {
    "audienceRating": 0.5,
    "criticRating": 0.5,
    "userRating": 0.5,
    "duration": 15.0,
    "year": 5.0,
    "episodeYear": 5.0,
}

_Node = PlanCondition | PlanGroup


def _cond(field_name: str, op: str, value: str) -> PlanCondition:
    return PlanCondition(type="condition", field=field_name, op=op, value=value)


def _any_of(field_name: str, values: Sequence[str]) -> _Node:
    if len(values) == 1:
        return _cond(field_name, "is", values[0])
    return PlanGroup(
        type="group", combinator="or", children=[_cond(field_name, "is", v) for v in values]
    )


def _all_of(*conditions: PlanCondition) -> _Node:
    if len(conditions) == 1:
        return conditions[0]
    return PlanGroup(type="group", combinator="and", children=list(conditions))


def _number(value: float) -> str:
    return number_text(round(value, 2))


@dataclass
class _Draft:
    name: str
    description: str
    filter: _Node
    media_types: tuple[MediaType, ...] = MEDIA_TYPES
    ordering: str = "SHUFFLE"
    icon: str = "lucide:Tv"
    target: int = 0


@dataclass
class _PackageDraft:
    name: str
    description: str
    icon: str
    accent: str
    channels: list[_Draft] = field(default_factory=list[_Draft])


class _Spelling:
    """Spells tag values the way the library's vocabulary does (case-insensitive lookup)."""

    def __init__(self, vocabulary: Mapping[str, Sequence[str]]) -> None:
        self._known: dict[str, dict[str, str]] = {}
        for name, values in vocabulary.items():
            folded: dict[str, str] = {}
            for value in sorted(v for v in values if v.strip()):
                folded.setdefault(value.strip().casefold(), value.strip())
            if folded:
                self._known[name] = folded

    def has_field(self, field_name: str) -> bool:
        return field_name in self._known

    def spell(self, field_name: str, value: str) -> str | None:
        """The vocabulary's spelling, the value itself when the field was not fetched, or None."""
        known = self._known.get(field_name)
        if known is None:
            return value
        return known.get(value.strip().casefold())

    def values(self, field_name: str) -> list[str]:
        return sorted(self._known.get(field_name, {}).values(), key=lambda v: (v.casefold(), v))


def offline_plan(
    profile: LibraryProfile,
    vocabulary: Mapping[str, Sequence[str]],
    existing_packages: Sequence[ExistingPackage] = (),
) -> LineupPlan:
    """Design a lineup from the profile, deterministically.

    Args:
        profile: The library profile.
        vocabulary: Tag values per field, as the shared context lists them.
        existing_packages: Non-AI packages; one whose key or name slug matches a planned package
            is reused instead of creating a near-duplicate.

    Returns:
        The plan (run it through `sanitize_plan` like any other).

    Raises:
        ValueError: The profile gives nothing to build a single channel from.
    """
    spelling = _Spelling(vocabulary)
    drafts = [
        _genre_package(profile, spelling),
        _decade_package(profile),
        _studio_package(profile, spelling),
        _network_package(profile, spelling),
        _marathon_package(profile),
        _rating_package(profile, spelling),
        _score_package(profile),
        _movie_night_package(profile, spelling),
    ]
    budget = MAX_OFFLINE_CHANNELS
    packages: list[PlannedPackage] = []
    package_keys: set[str] = set()
    channel_keys: set[str] = set()
    for draft in drafts:
        channels = draft.channels[: max(0, budget)]
        if not channels:
            continue
        budget -= len(channels)
        key = unique_key(slugify(draft.name), package_keys)
        package_keys.add(key)
        planned_channels = []
        for channel in channels:
            channel_key = unique_key(slugify(channel.name, fallback="channel"), channel_keys)
            channel_keys.add(channel_key)
            planned_channels.append(_planned_channel(channel_key, channel))
        packages.append(
            PlannedPackage(
                key=key,
                existing_key=_reusable(key, draft.name, existing_packages),
                name=draft.name,
                description=draft.description,
                icon=draft.icon,
                accent=draft.accent,
                channels=planned_channels,
            )
        )
    if not packages:
        raise ValueError("the library profile is empty: nothing to plan a channel from")
    return LineupPlan(packages=packages)


def _reusable(key: str, name: str, existing: Sequence[ExistingPackage]) -> str | None:
    for package in existing:
        if package.key == key or slugify(package.name) == slugify(name):
            return package.key
    return None


def _callsign(name: str) -> str:
    # Callsigns are ASCII letters and digits only (docs/reference/domain.md §1.3).
    words: list[str] = re.findall(r"[A-Z0-9]+", name.upper())
    if not words:
        return "AIR"
    if len(words) == 1:
        return words[0][:5]
    initials = "".join(word[0] for word in words)
    return (initials + words[-1][1:])[:4]


def _planned_channel(key: str, draft: _Draft) -> PlannedChannel:
    return PlannedChannel.model_validate(
        {
            "key": key,
            "name": draft.name,
            "description": draft.description,
            "theme": draft.description,
            "target_pool_size": draft.target,
            "ordering": draft.ordering,
            "callsign": _callsign(draft.name),
            "icon": draft.icon,
            "media_types": list(draft.media_types),
            "filter": draft.filter,
        }
    )


def _genre_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "Genre Channels", "One channel per big genre of the library.", "lucide:Clapperboard", "blue"
    )
    for genre in profile.genres:
        if len(package.channels) >= MAX_GENRE_CHANNELS or genre.count < MIN_TITLES:
            break
        value = spelling.spell("genre", genre.name)
        if value is None:
            continue
        package.channels.append(
            _Draft(
                name=value,
                description=f"{value} movies and series, around the clock.",
                filter=_cond("genre", "is", value),
                icon="lucide:Film",
                target=genre.count,
            )
        )
    return package


def _decade_package(profile: LibraryProfile) -> _PackageDraft:
    package = _PackageDraft(
        "Through the Decades",
        "Each era of the library on its own channel.",
        "lucide:Clock",
        "amber",
    )
    kept = [d for d in profile.decades if d.count >= MIN_TITLES]
    for decade in kept:
        package.channels.append(
            _Draft(
                name=f"The {decade.decade}s",
                description=f"Movies and series from {decade.decade} to {decade.decade + 9}.",
                filter=_cond("decade", "is", str(decade.decade)),
                icon="lucide:CalendarDays",
                target=decade.count,
            )
        )
    older = [d for d in profile.decades if d.count < MIN_TITLES]
    if kept and older:
        cutoff = min(d.decade for d in kept) - 1
        older_titles = sum(d.count for d in older if d.decade <= cutoff)
        if older_titles >= 3:
            package.channels.append(
                _Draft(
                    name="Golden Oldies",
                    description=f"Everything made up to {cutoff}.",
                    filter=_cond("year", "lte", str(cutoff)),
                    icon="lucide:Hourglass",
                    target=older_titles,
                )
            )
    return package


def _studio_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "Studio Spotlight", "The studios with the deepest catalogues.", "lucide:Building2", "violet"
    )
    for studio in profile.studios:
        if len(package.channels) >= MAX_STUDIO_CHANNELS or studio.count < MIN_TITLES:
            break
        value = spelling.spell("studio", studio.name)
        if value is None:
            continue
        package.channels.append(
            _Draft(
                name=value,
                description=f"The {value} catalogue.",
                filter=_cond("studio", "is", value),
                icon="lucide:Clapperboard",
                target=studio.count,
            )
        )
    return package


def _network_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "Networks", "Series grouped by the network that aired them.", "lucide:RadioTower", "cyan"
    )
    names = [n.name for n in profile.networks if n.count >= MIN_NETWORK_SHOWS]
    if not profile.networks:
        names = spelling.values("network")
    for name in names:
        if len(package.channels) >= MAX_NETWORK_CHANNELS:
            break
        value = spelling.spell("network", name)
        if value is None:
            continue
        package.channels.append(
            _Draft(
                name=value,
                description=f"Series from {value}.",
                filter=_cond("network", "is", value),
                media_types=("show",),
                icon="lucide:Tv",
            )
        )
    return package


def _marathon_package(profile: LibraryProfile) -> _PackageDraft:
    package = _PackageDraft(
        "Marathons", "The biggest shows, episode after episode.", "lucide:Repeat", "red"
    )
    for show in profile.top_shows:
        if len(package.channels) >= MAX_MARATHONS or show.episodes < MIN_MARATHON_EPISODES:
            break
        package.channels.append(
            _Draft(
                name=f"{show.title} Marathon",
                description=f"{show.title}, in order, all day.",
                filter=_cond("title", "contains", show.title),
                media_types=("show",),
                ordering="IN_ORDER",
                icon="lucide:ListVideo",
                target=show.episodes,
            )
        )
    return package


def _rating_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "For Every Audience", "Channels by content rating.", "lucide:Users", "green"
    )
    present = {r.name.casefold(): r for r in profile.content_ratings}
    bands = (
        ("Family Room", "Programmes for everyone in the family.", _FAMILY_RATINGS, "lucide:Baby"),
        ("Teen Scene", "Programmes rated for teenagers.", _TEEN_RATINGS, "lucide:Sparkles"),
        ("After Dark", "Mature programmes for grown-ups.", _MATURE_RATINGS, "lucide:Moon"),
    )
    for name, description, ratings, icon in bands:
        values: list[str] = []
        count = 0
        for rating in ratings:
            found = present.get(rating.casefold())
            spelled = spelling.spell("contentRating", found.name) if found else None
            if found is not None and spelled is not None:
                values.append(spelled)
                count += found.count
        if values and count >= MIN_TITLES:
            package.channels.append(
                _Draft(name, description, _any_of("contentRating", values), icon=icon, target=count)
            )
    return package


def _score_package(profile: LibraryProfile) -> _PackageDraft:
    package = _PackageDraft(
        "Critics and Crowds", "Channels built from scores.", "lucide:Star", "purple"
    )
    critic = profile.critic_rating
    audience = profile.audience_rating
    if critic is not None and critic.p75 > critic.p50:
        package.channels.append(
            _Draft(
                "Critics' Picks",
                "The titles critics rate highest.",
                _cond("criticRating", "gte", _number(critic.p75)),
                icon="lucide:Award",
                target=critic.count // 4,
            )
        )
    if audience is not None and audience.p75 > audience.p50:
        package.channels.append(
            _Draft(
                "Crowd Pleasers",
                "What audiences loved most.",
                _cond("audienceRating", "gte", _number(audience.p75)),
                icon="lucide:ThumbsUp",
                target=audience.count // 4,
            )
        )
    if critic is not None and audience is not None and critic.p75 > critic.p50:
        package.channels.append(
            _Draft(
                "Hidden Gems",
                "Critically acclaimed titles audiences overlooked.",
                _all_of(
                    _cond("criticRating", "gte", _number(critic.p75)),
                    _cond("audienceRating", "lte", _number(audience.p50)),
                ),
                icon="lucide:Gem",
            )
        )
    if audience is not None and audience.p10 < audience.p50:
        package.channels.append(
            _Draft(
                "Guilty Pleasures",
                "Low scores, high fun.",
                _cond("audienceRating", "lte", _number(audience.p10)),
                icon="lucide:Popcorn",
                target=audience.count // 10,
            )
        )
    return package


def _runtime_window(dist: Distribution | None) -> tuple[float, float] | None:
    if dist is None or dist.p10 > 100 or dist.p90 < 60:
        return None
    return (60.0, 100.0)


def _movie_night_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "Movie Nights",
        "Movies by runtime, and the best picture quality.",
        "lucide:Popcorn",
        "orange",
    )
    runtime = profile.movie_duration_minutes
    window = _runtime_window(runtime)
    if window is not None:
        package.channels.append(
            _Draft(
                "Matinee",
                "Movies between one hour and a hundred minutes.",
                _all_of(
                    _cond("duration", "gte", _number(window[0])),
                    _cond("duration", "lte", _number(window[1])),
                ),
                media_types=("movie",),
                icon="lucide:Sun",
            )
        )
    if runtime is not None and runtime.p90 > runtime.p50:
        floor = 150.0 if runtime.p90 >= 150 else runtime.p90
        package.channels.append(
            _Draft(
                "Epic Cinema",
                f"Movies of {floor:g} minutes or more.",
                _cond("duration", "gte", _number(floor)),
                media_types=("movie",),
                icon="lucide:Mountain",
            )
        )
    flags = profile.flags
    four_k = spelling.spell("resolution", "4k")
    if four_k is not None and flags.four_k_movies + flags.four_k_episodes >= MIN_PREMIUM_ITEMS:
        package.channels.append(
            _Draft(
                "Ultra HD",
                "Everything in 4K.",
                _cond("resolution", "is", four_k),
                icon="lucide:MonitorPlay",
                target=flags.four_k_movies + flags.four_k_episodes,
            )
        )
    if flags.hdr_movies + flags.hdr_episodes >= MIN_PREMIUM_ITEMS:
        package.channels.append(
            _Draft(
                "HDR Showcase",
                "High dynamic range movies and episodes.",
                _cond("hdr", "is", "true"),
                icon="lucide:SunMedium",
                target=flags.hdr_movies + flags.hdr_episodes,
            )
        )
    return package


def build_channel_offline(
    channel: PlannedChannel,
    toolbox: ChannelToolbox,
    *,
    rules: PoolRules | None = None,
) -> ChannelOutcome:
    """Build one channel with the tools, without a model.

    Args:
        channel: The planned (sanitised) channel.
        toolbox: The runtime tools bound to the channel's reservation.
        rules: Pool verification rules (defaults: 3 items, 10 h).

    Returns:
        The outcome: `created`; `skipped` with the reasons when no variant passed; `failed`
        when a toolbox method raised something other than `ToolError` (its message is the
        reason, the trace so far is kept; the runtime then deletes the claim).
    """
    pool_rules = rules or PoolRules()
    session = ToolSession(toolbox, planned=channel.envelope(), rules=pool_rules)
    try:
        return _build(channel, session, pool_rules)
    except Exception as error:  # a toolbox failure (Plex down): the build fails, trace kept
        return session.finish(error=f"{type(error).__name__}: {error}")


def _build(channel: PlannedChannel, session: ToolSession, pool_rules: PoolRules) -> ChannelOutcome:
    planned = channel.envelope()
    tried: set[str] = set()
    reasons: list[str] = []
    for media_types, node in _variants(tuple(planned.effective_media_types), planned.filter):
        if len(tried) >= MAX_PREVIEWS:
            break
        payload = _tool_filter(media_types, node)
        signature = repr(payload)
        if signature in tried:
            continue
        tried.add(signature)
        result = session.call("preview_filter", {**payload, "detail": "compact"})
        if result.is_error or result.preview is None:
            reasons = [result.content]
            continue
        reasons = verify_pool(result.preview, pool_rules.min_items, pool_rules.min_runtime_hours)
        if reasons:
            continue
        commit = session.call("commit_channel", payload)
        if commit.terminal == "committed":
            return session.finish()
        reasons = [commit.reason or commit.content]
        break
    explanation = "; ".join(reasons) if reasons else "no usable filter variant"
    session.call("give_up", {"reason": f"no variant of the filter made a channel: {explanation}"})
    return session.finish()


def _tool_filter(media_types: Collection[MediaType], node: FilterNode | None) -> dict[str, Any]:
    payload: dict[str, Any] = {"mediaTypes": list(media_types)}
    if node is not None:
        payload["filter"] = node.model_dump(mode="json", exclude_none=True)
    return payload


def _variants(
    media_types: tuple[MediaType, ...], node: FilterNode | None
) -> list[tuple[tuple[MediaType, ...], FilterNode | None]]:
    """The planned filter, then progressively wider variants, in a fixed order."""
    variants: list[tuple[tuple[MediaType, ...], FilterNode | None]] = [(media_types, node)]
    if node is None:
        return variants
    if set(media_types) != set(MEDIA_TYPES) and _fits_both(node):
        variants.append((MEDIA_TYPES, node))
    current = node
    for _ in range(3):
        wider = _loosen(current)
        if wider is None:
            break
        current = wider
        variants.append((media_types, current))
    if isinstance(node, Group) and node.combinator == "and" and len(node.children) > 1:
        for size in range(len(node.children) - 1, 0, -1):
            kept = node.children[:size]
            variants.append((media_types, kept[0] if size == 1 else Group(children=kept)))
    return variants


def _fits_both(node: FilterNode) -> bool:
    if isinstance(node, Condition):
        spec = FIELDS.get(node.field)
        return spec is not None and spec.applies == frozenset(MEDIA_TYPES)
    return all(_fits_both(child) for child in node.children)


def _loosen(node: FilterNode) -> FilterNode | None:
    """Widen every numeric threshold one step (gte lower, lte higher); None when none exists."""
    if isinstance(node, Condition):
        step = _WIDEN_STEP.get(node.field)
        if step is None or node.op not in ("gte", "lte"):
            return None
        try:
            value = float(node.value)
        except ValueError:
            return None
        moved = value - step if node.op == "gte" else value + step
        if node.field in ("audienceRating", "criticRating", "userRating"):
            moved = min(10.0, max(0.0, moved))
        if moved == value:
            return None
        return node.model_copy(update={"value": _number(moved)})
    changed = False
    children: list[FilterNode] = []
    for child in node.children:
        wider = _loosen(child)
        changed = changed or wider is not None
        children.append(wider if wider is not None else child)
    return node.model_copy(update={"children": children}) if changed else None
