"""The offline provider: a deterministic, rule-based planner and channel builder (no model calls).

`offline_plan(profile, vocabulary, existing_packages)` designs a lineup from the profile alone, in
layers that are near-partitions of one medium each (see `offline_plan`): genre channels for
movies and for series kept apart (kids and family titles first, under their rating ceiling,
which an EXCLUDE definition enforces (`lineup_checks.ceiling_exclusion`); then
every genre from the smallest up, each excluding what an earlier genre channel claimed), movie
eras (small old decades folded into one classic channel), networks ranked by runtime, a few
studios ranked by runtime, and technical picks last. Names say the medium ("Crime Series",
"Saturday Morning Cartoons"), callsigns are made to be read (`make_callsign`: never the name cut
short, unique in the lineup), descriptions only claim what the filter guarantees. Tag values are
used only as the vocabulary spells them, and at most `MAX_OFFLINE_CHANNELS` channels are planned.

`build_channel_offline(channel, toolbox, guard=...)` drives the very same tools as the Anthropic
worker through a `ToolSession`: preview the planned filter, widen it step by step when the pool is
too small or too short (looser numeric windows, fewer AND conditions; both media types only for a
channel whose name and description name no medium), revise a kids/family channel whose pool goes
above its rating ceiling (add the ceiling's EXCLUDE definition), skip variants the lineup guard
refuses (too close to a channel already kept), commit when a preview passes, and give up with the
reasons when no variant passes. Same inputs, same calls, same outcome. `offline_guard()` is the
guard the offline builder keeps a lineup with (stricter than the shared default: Jaccard below
0.35).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airwave_dagster.domain.ai.lineup_checks import (
    CEILINGS,
    Audience,
    LineupGuard,
    LineupRules,
    ceiling_exclusion,
    compact,
    is_cut_short,
)
from airwave_dagster.domain.ai.plan import (
    ExistingPackage,
    LineupPlan,
    PlanCondition,
    PlanGroup,
    PlanInnerGroup,
    PlannedChannel,
    PlannedPackage,
    number_text,
    slugify,
    unique_key,
)
from airwave_dagster.domain.ai.profile import LibraryProfile, NameCount
from airwave_dagster.domain.ai.tools import (
    ChannelCheck,
    ChannelOutcome,
    ChannelToolbox,
    PoolRules,
    ToolSession,
    verify_pool,
)
from airwave_dagster.domain.filters import FIELDS, Condition, FilterNode, Group
from airwave_dagster.domain.library import MEDIA_TYPES, MediaType

MAX_OFFLINE_CHANNELS = 50
MAX_STUDIO_CHANNELS = 3
MAX_NETWORK_CHANNELS = 8
MIN_TITLES = 8
"""A studio or decade needs this many titles (movies + shows) for its own channel."""
MIN_GENRE_TITLES = 3
"""A genre with this many titles is planned (per medium); the builder skips what is too small."""
MIN_DECADE_SHARE = 0.05
"""A decade with less than this share of the titles is folded into the classic channel."""
MIN_NETWORK_SHOWS = 2
MIN_NETWORK_HOURS = 10.0
MIN_PREMIUM_ITEMS = 10
MAX_PREVIEWS = 8
"""Previews one offline build may make before it gives up."""

OFFLINE_LINEUP_RULES = LineupRules(max_jaccard=0.35, max_containment=0.9)
"""The offline builder keeps channels more distinct than the shared default requires."""

_MEDIUM_WORDS = re.compile(
    r"\b(movies?|films?|cinema|series|shows?|episodes?|sitcoms?|cartoons?)\b", re.IGNORECASE
)

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


def _number(value: float) -> str:
    return number_text(round(value, 2))


@dataclass
class _Draft:
    name: str
    description: str
    filter: _Node
    media_types: tuple[MediaType, ...] = MEDIA_TYPES
    exclude: _Node | None = None
    """The EXCLUDE definition's filter (a kids or family channel's rating ceiling)."""
    ordering: str = "SHUFFLE"
    icon: str = "lucide:Tv"
    target: int = 0
    token: str | None = None
    """A curated callsign (see `make_callsign`)."""
    theme: str = ""


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

    The lineup is built in layers, each a near-partition of one medium, so channels are
    distinct by construction and every item is on about two channels:

    1. genres, movies and series apart: the kids/family claims first (with their rating
       ceiling), then every genre from the smallest to the largest, each excluding the titles an
       earlier genre channel already claimed — so every genre gets a channel of its own titles
       and no channel repeats another;
    2. eras for movies (each big decade, the small old ones folded into one classic channel) and
       networks for series (ranked by runtime);
    3. a few studios (by runtime) and technical picks (4K, critics' favourites, epics), last.

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
        _genre_package(profile, spelling, "movie"),
        _genre_package(profile, spelling, "show"),
        _era_package(profile, spelling),
        _network_package(profile, spelling),
        _studio_package(profile, spelling),
        _picks_package(profile, spelling),
    ]
    budget = MAX_OFFLINE_CHANNELS
    packages: list[PlannedPackage] = []
    package_keys: set[str] = set()
    channel_keys: set[str] = set()
    callsigns: set[str] = set()
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
            callsign = make_callsign(channel.name, channel.token, callsigns)
            callsigns.add(callsign)
            planned_channels.append(_planned_channel(channel_key, channel, callsign))
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


_SKIP_WORDS = frozenset({"THE", "OF", "AND", "A", "AN", "MOVIES", "SERIES", "FILMS", "TV"})
_VOWELS = frozenset("AEIOU")


def _skeleton(word: str) -> str:
    """A word's first letter and its consonants: `DOCUVERSE` → `DCVRS` (readable, not cut)."""
    consonants = "".join(ch for ch in word[1:] if ch not in _VOWELS)
    return (word[0] + consonants)[:5]


def make_callsign(name: str, token: str | None, taken: Collection[str]) -> str:
    """A readable, unique callsign (≤ 6 letters/digits) that is never the name cut short.

    A curated token wins (`LAFF` for comedy, `90S` for the 1990s); otherwise a short whole word,
    the initials of several words, or a consonant skeleton. Series channels say `TV`. A clash
    takes the first free digit suffix.

    Args:
        name: The channel's name.
        token: A curated token (already including any medium suffix), or None.
        taken: Callsigns already given in this lineup.

    Returns:
        The callsign.
    """
    words = [w for w in re.findall(r"[A-Z0-9]+", name.upper()) if w not in _SKIP_WORDS]
    candidates: list[str] = []
    if token:
        candidates.append(token)
    if len(words) == 1 and len(words[0]) <= 6:
        candidates.append(words[0])
    if len(words) >= 2:
        candidates.append("".join(w[0] for w in words)[:4])
    if words:
        candidates.append(_skeleton(words[0]))
    candidates.append("AIR")
    for candidate in candidates:
        sign = compact(candidate)[:6]
        if sign and not is_cut_short(sign, name) and sign not in taken:
            return sign
    base = next((compact(c)[:5] for c in candidates if not is_cut_short(compact(c), name)), "AIR")
    for digit in range(2, 10):
        if f"{base}{digit}" not in taken:
            return f"{base}{digit}"
    return base


def _planned_channel(key: str, draft: _Draft, callsign: str) -> PlannedChannel:
    return PlannedChannel.model_validate(
        {
            "key": key,
            "name": draft.name,
            "description": draft.description,
            "theme": draft.theme or draft.description,
            "target_pool_size": draft.target,
            "ordering": draft.ordering,
            "callsign": callsign,
            "icon": draft.icon,
            "media_types": list(draft.media_types),
            "filter": draft.filter,
            "exclude": draft.exclude,
        }
    )


_GENRE_STYLE: dict[str, tuple[str, str, str]] = {
    # genre (folded) → (label in names, callsign token, icon)
    "action": ("Action", "ACTN", "lucide:Flame"),
    "adventure": ("Adventure", "TREK", "lucide:Compass"),
    "animation": ("Animated", "TOON", "lucide:Palette"),
    "comedy": ("Comedy", "LAFF", "lucide:Laugh"),
    "crime": ("Crime", "NOIR", "lucide:Siren"),
    "documentary": ("Documentary", "DOCS", "lucide:Camera"),
    "drama": ("Drama", "DRMA", "lucide:Drama"),
    "family": ("Family", "FMLY", "lucide:House"),
    "fantasy": ("Fantasy", "MYTH", "lucide:Wand"),
    "horror": ("Horror", "FEAR", "lucide:Skull"),
    "music": ("Music", "TUNE", "lucide:Music"),
    "mystery": ("Mystery", "CLUE", "lucide:Search"),
    "romance": ("Romance", "LOVE", "lucide:Heart"),
    "science fiction": ("Sci-Fi", "SF", "lucide:Rocket"),
    "thriller": ("Thriller", "EDGE", "lucide:Zap"),
    "war": ("War", "WAR", "lucide:Shield"),
    "western": ("Western", "WSTN", "lucide:Sunset"),
}

_FLAVOUR: dict[str, str] = {
    "action": "chases, fights and explosions",
    "adventure": "quests and far-off places",
    "comedy": "laughs",
    "crime": "cops, crooks and capers",
    "documentary": "true stories",
    "drama": "stories of people under pressure",
    "fantasy": "magic and other worlds",
    "horror": "scares",
    "music": "music on screen",
    "mystery": "whodunits",
    "romance": "love stories",
    "science fiction": "the future and the stars",
    "thriller": "suspense",
    "war": "soldiers and battles",
    "western": "the frontier",
}


def _style(genre: str) -> tuple[str, str, str]:
    found = _GENRE_STYLE.get(genre.casefold())
    if found is not None:
        return found
    words = re.findall(r"[A-Za-z0-9]+", genre.upper())
    return genre, _skeleton(words[0]) if words else "AIR", "lucide:Film"


def _medium(kind: MediaType) -> tuple[str, str, str]:
    """Noun for names, noun for descriptions and callsign suffix of a medium."""
    return ("Movies", "movies", "") if kind == "movie" else ("Series", "series", "TV")


def _exclusive(claim: FilterNode, exclusions: Sequence[FilterNode]) -> _Node:
    """`claim` AND every exclusion (what earlier channels of the layer claimed, negated)."""
    parts = [claim, *exclusions]
    node: FilterNode = parts[0] if len(parts) == 1 else Group(combinator="and", children=parts)
    return _to_plan(node)


def _not_claimed(genre: str, allowed: Sequence[str] | None, ratings: Sequence[str]) -> FilterNode:
    """The negation of "genre is `genre` (rated one of `allowed`)", one group deep.

    The plan's filter language nests one group inside the top one, so the negated rating
    ceiling is spelled as the library's other ratings rather than as a group of `isNot`s. An
    unrated title of the genre is therefore neither on the kids channel nor on a later one.
    """
    not_genre = Condition(field="genre", op="isNot", value=genre)
    if allowed is None:
        return not_genre
    folded = {r.casefold() for r in allowed}
    others = [Condition(field="contentRating", op="is", value=r) for r in ratings]
    others = [c for c in others if c.value.casefold() not in folded]
    if not others:
        return not_genre
    return Group(combinator="or", children=[not_genre, *others])


def plan_filter(node: FilterNode | None) -> _Node:
    """A filter as the plan spells it (a condition, or a group holding conditions and groups of
    conditions).

    Raises:
        ValueError: The filter is empty or nests deeper than the plan's filter language allows.
    """
    if node is None:
        raise ValueError("a planned channel needs a filter")
    return _to_plan(node)


def _to_plan(node: FilterNode) -> _Node:
    if isinstance(node, Condition):
        return _cond(node.field, node.op, node.value)
    children: list[PlanCondition | PlanInnerGroup] = []
    for child in node.children:
        if isinstance(child, Condition):
            children.append(_cond(child.field, child.op, child.value))
            continue
        inner: list[PlanCondition] = []
        for leaf in child.children:
            if not isinstance(leaf, Condition):
                raise ValueError("the filter nests groups deeper than a plan can hold")
            inner.append(_cond(leaf.field, leaf.op, leaf.value))
        children.append(PlanInnerGroup(type="group", combinator=child.combinator, children=inner))
    return PlanGroup(type="group", combinator=node.combinator, children=children)


def _genre_package(profile: LibraryProfile, spelling: _Spelling, kind: MediaType) -> _PackageDraft:
    noun, lower, suffix = _medium(kind)
    package = _PackageDraft(
        f"{'Movie' if kind == 'movie' else 'Series'} Genres",
        f"Every genre of the library's {lower}, each on its own channel.",
        "lucide:Clapperboard" if kind == "movie" else "lucide:Tv",
        "blue" if kind == "movie" else "teal",
    )
    ratings = spelling.values("contentRating") if spelling.has_field("contentRating") else None
    claims: list[FilterNode] = []
    """The exclusions a later channel of the layer carries (earlier claims, negated)."""
    claimed_genres: set[str] = set()
    ordering = "SHUFFLE" if kind == "movie" else "IN_ORDER"
    # Kids first: their titles are claimed with the ceiling, so the rest of the layer keeps what
    # is above it (a grown-up animated film plays on its other genre's channel).
    audience: Audience = "family" if kind == "movie" else "kids"
    name = "Family Movies" if kind == "movie" else "Saturday Morning Cartoons"
    token = "FAMFLX" if kind == "movie" else "TOONS"
    spelled = [spelling.spell("genre", g) for g in ("animation", "family")]
    present = [g for g in spelled if g is not None and _has_genre(profile, g, kind)]
    if present:
        ceiling = " or ".join(CEILINGS[audience][:2] if kind == "movie" else CEILINGS[audience])
        package.channels.append(
            _Draft(
                name=name,
                description=(
                    f"{' and '.join(present)} {lower} for the whole family, rated {ceiling}."
                    if kind == "movie"
                    else f"{' and '.join(present)} series for kids, each show in order."
                ),
                filter=_to_plan(_genre_node(present)),
                exclude=_to_plan(ceiling_exclusion(audience, ratings)),
                media_types=(kind,),
                ordering=ordering,
                icon="lucide:Baby",
                token=token,
                target=sum(_genre_count(profile, g, kind) for g in present),
            )
        )
        claims.extend(_not_claimed(g, CEILINGS[audience], ratings or []) for g in present)
        claimed_genres.update(g.casefold() for g in present)
    all_ages = spelling.spell("contentRating", "G") if kind == "movie" else None
    if all_ages is not None and ratings:
        # G-rated films of every other genre get their own channel, so no genre channel mixes
        # kids' titles with R-rated ones (a mixed-audience channel, issue 10).
        package.channels.append(
            _Draft(
                name="All-Ages Movies",
                description=f"Movies rated {all_ages} from every genre.",
                filter=_exclusive(
                    Condition(field="contentRating", op="is", value=all_ages), claims
                ),
                media_types=(kind,),
                ordering=ordering,
                icon="lucide:Smile",
                token="4ALL",
            )
        )
        claims.append(_no_all_ages(spelling))
    for genre in _genres_of(profile, kind):
        value = spelling.spell("genre", genre.name)
        if value is None or genre.count < MIN_GENRE_TITLES:
            continue
        if value.casefold() in claimed_genres:
            continue
        label, genre_token, icon = _style(value)
        claim = Condition(field="genre", op="is", value=value)
        flavour = _FLAVOUR.get(value.casefold(), value.lower())
        package.channels.append(
            _Draft(
                name=f"{label} {noun}",
                description=f"{value} {lower}: {flavour}"
                + (", each show in order." if kind == "show" else ".")
                + (" Titles of a smaller genre play on that genre's channel." if claims else ""),
                filter=_exclusive(claim, claims),
                media_types=(kind,),
                ordering=ordering,
                icon=icon,
                token=genre_token + suffix,
                target=genre.count,
            )
        )
        claims.append(_not_claimed(value, None, ()))
    return package


def _no_all_ages(spelling: _Spelling) -> FilterNode:
    """`contentRating isNot G`: what keeps a grown-up movie channel from mixing audiences."""
    return Condition(field="contentRating", op="isNot", value=spelling.spell("contentRating", "G"))


def _grown_up(node: PlanCondition, spelling: _Spelling) -> _Node:
    """A movie channel's condition without the G-rated films (they play on All-Ages Movies)."""
    if spelling.spell("contentRating", "G") is None:
        return node
    return _exclusive(
        Condition(field=node.field, op=node.op, value=node.value), [_no_all_ages(spelling)]
    )


def _genre_node(genres: Sequence[str]) -> FilterNode:
    conditions = [Condition(field="genre", op="is", value=g) for g in genres]
    return conditions[0] if len(conditions) == 1 else Group(combinator="or", children=conditions)


def _genres_of(profile: LibraryProfile, kind: MediaType) -> list[NameCount]:
    """Genres with their title counts for one medium, smallest first (then by name).

    A profile without `show_genres` (an older one) counts every title for both media.
    """
    if not profile.show_genres:
        counts = {g.name: g.count for g in profile.genres}
    elif kind == "show":
        counts = {g.name: g.count for g in profile.show_genres}
    else:
        shows = {g.name: g.count for g in profile.show_genres}
        counts = {g.name: g.count - shows.get(g.name, 0) for g in profile.genres}
    ranked = sorted(counts.items(), key=lambda pair: (pair[1], pair[0].casefold()))
    return [NameCount(name=name, count=count) for name, count in ranked]


def _has_genre(profile: LibraryProfile, genre: str, kind: MediaType) -> bool:
    return _genre_count(profile, genre, kind) >= MIN_GENRE_TITLES


def _genre_count(profile: LibraryProfile, genre: str, kind: MediaType) -> int:
    found = (g.count for g in _genres_of(profile, kind) if g.name.casefold() == genre.casefold())
    return next(found, 0)


def _era_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "Movie Eras", "The library's movies decade by decade.", "lucide:Clock", "amber"
    )
    total = sum(d.count for d in profile.decades)
    threshold = max(MIN_TITLES, math.ceil(total * MIN_DECADE_SHARE))
    kept = []
    for decade in profile.decades:  # newest first
        if decade.count < threshold:
            break
        kept.append(decade)
    older = profile.decades[len(kept) :]
    if not kept or (len(kept) < 2 and not older):
        # One channel of every movie is no era channel at all.
        return package
    for decade in kept:
        package.channels.append(
            _Draft(
                name=f"{decade.decade}s Movies",
                description=f"Movies released from {decade.decade} to {decade.decade + 9}.",
                filter=_grown_up(_cond("decade", "is", str(decade.decade)), spelling),
                media_types=("movie",),
                icon="lucide:CalendarDays",
                token=f"{str(decade.decade)[2:]}S",
                target=decade.count,
            )
        )
    if older:
        cutoff = kept[-1].decade - 1
        package.channels.append(
            _Draft(
                name="Classic Movies",
                description=f"Movies made up to {cutoff}.",
                filter=_grown_up(_cond("year", "lte", str(cutoff)), spelling),
                media_types=("movie",),
                icon="lucide:Hourglass",
                token="GOLDEN",
                target=sum(d.count for d in older),
            )
        )
    return package


def _network_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "Networks", "Series by the network that aired them.", "lucide:RadioTower", "cyan"
    )
    # Ranked by runtime (the profile's order); a profile without networks plans none rather
    # than guessing from the alphabet.
    for network in profile.networks:
        if len(package.channels) >= MAX_NETWORK_CHANNELS:
            break
        if network.count < MIN_NETWORK_SHOWS or network.hours < MIN_NETWORK_HOURS:
            continue
        value = spelling.spell("network", network.name)
        if value is None:
            continue
        words = re.findall(r"[A-Z0-9]+", value.upper())
        token = "".join(w[0] for w in words)[:4] + "TV" if len(words) >= 2 else None
        package.channels.append(
            _Draft(
                name=f"{value} Series",
                description=f"Series from {value}, each show in order.",
                filter=_cond("network", "is", value),
                media_types=("show",),
                ordering="IN_ORDER",
                icon="lucide:Tv",
                token=token,
                target=network.count,
            )
        )
    return package


def _studio_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "Studio Spotlight", "The studios with the most hours of film.", "lucide:Building2", "violet"
    )
    for studio in profile.studios:  # ranked by runtime
        if len(package.channels) >= MAX_STUDIO_CHANNELS:
            break
        if studio.count < MIN_TITLES:
            continue
        value = spelling.spell("studio", studio.name)
        if value is None:
            continue
        package.channels.append(
            _Draft(
                name=f"{value} Movie Vault",
                description=f"Movies from {value}.",
                filter=_grown_up(_cond("studio", "is", value), spelling),
                media_types=("movie",),
                icon="lucide:Clapperboard",
                target=studio.count,
            )
        )
    return package


def _picks_package(profile: LibraryProfile, spelling: _Spelling) -> _PackageDraft:
    package = _PackageDraft(
        "Movie Picks", "Movies picked by score, length and picture.", "lucide:Star", "orange"
    )
    critic = profile.critic_rating
    if critic is not None and critic.p90 > critic.p50:
        package.channels.append(
            _Draft(
                "Critics' Choice Movies",
                f"Movies critics score {_number(critic.p90)} or higher.",
                _grown_up(_cond("criticRating", "gte", _number(critic.p90)), spelling),
                media_types=("movie",),
                icon="lucide:Award",
                token="RAVES",
                target=critic.count // 10,
            )
        )
    runtime = profile.movie_duration_minutes
    if runtime is not None and runtime.p90 > runtime.p50:
        floor = 150.0 if runtime.p90 >= 150 else runtime.p90
        package.channels.append(
            _Draft(
                "Epic Movies",
                f"Movies of {floor:g} minutes or more.",
                _grown_up(_cond("duration", "gte", _number(floor)), spelling),
                media_types=("movie",),
                icon="lucide:Mountain",
                token="EPICS",
            )
        )
    four_k = spelling.spell("resolution", "4k")
    if four_k is not None and profile.flags.four_k_movies >= MIN_PREMIUM_ITEMS:
        package.channels.append(
            _Draft(
                "Ultra HD Movies",
                "Movies in 4K.",
                _grown_up(_cond("resolution", "is", four_k), spelling),
                media_types=("movie",),
                icon="lucide:MonitorPlay",
                token="UHD",
                target=profile.flags.four_k_movies,
            )
        )
    return package


def offline_guard() -> LineupGuard:
    """A fresh lineup guard with the offline builder's rules (`OFFLINE_LINEUP_RULES`)."""
    return LineupGuard(rules=OFFLINE_LINEUP_RULES)


def build_channel_offline(
    channel: PlannedChannel,
    toolbox: ChannelToolbox,
    *,
    rules: PoolRules | None = None,
    guard: LineupGuard | None = None,
) -> ChannelOutcome:
    """Build one channel with the tools, without a model.

    Args:
        channel: The planned (sanitised) channel.
        toolbox: The runtime tools bound to the channel's reservation.
        rules: Pool verification rules (defaults: 3 items, 10 h).
        guard: The lineup's guard: the channels kept so far, which this one must differ from
            (and join when committed). None checks the pool alone.

    Returns:
        The outcome: `created`; `skipped` with the reasons when no variant passed; `failed`
        when a toolbox method raised something other than `ToolError` (its message is the
        reason, the trace so far is kept; the runtime then deletes the claim).
    """
    pool_rules = rules or PoolRules()
    check = (
        ChannelCheck.of(guard, channel.name, channel.description, channel.theme)
        if guard is not None
        else None
    )
    session = ToolSession(
        toolbox,
        planned=channel.envelope(),
        rules=pool_rules,
        check=check,
        planned_exclude=channel.exclude_node(),
    )
    try:
        return _build(channel, session, pool_rules, check)
    except Exception as error:  # a toolbox failure (Plex down): the build fails, trace kept
        return session.finish(error=f"{type(error).__name__}: {error}")


def _build(
    channel: PlannedChannel,
    session: ToolSession,
    pool_rules: PoolRules,
    check: ChannelCheck | None,
) -> ChannelOutcome:
    planned = channel.envelope()
    exclude = channel.exclude_node()
    names_medium = bool(_MEDIUM_WORDS.search(f"{channel.name} {channel.description}"))
    variants = _variants(tuple(planned.effective_media_types), planned.filter, names_medium)
    tried: set[str] = set()
    reasons: list[str] = []
    audience = check.audience if check is not None else None
    while variants and len(tried) < MAX_PREVIEWS:
        media_types, node = variants.pop(0)
        payload = _tool_filter(media_types, node, exclude)
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
        if check is not None:
            reasons = check.reasons(result.preview)
            if reasons:
                # Too close to a kept channel: another variant may differ; above the ceiling:
                # the same filter with the ceiling's EXCLUDE definition is tried next, and the
                # exclusion stays for every wider variant.
                keys = frozenset(result.preview.item_keys)
                revised = _with_ceiling(exclude, audience, result.preview.content_ratings)
                if revised is not None and not check.guard.conflicts(keys):
                    exclude = revised
                    variants.insert(0, (media_types, node))
                continue
        commit = session.call("commit_channel", payload)
        if commit.terminal == "committed":
            return session.finish()
        reasons = [commit.reason or commit.content]
        break
    explanation = "; ".join(reasons) if reasons else "no usable filter variant"
    session.call("give_up", {"reason": f"no variant of the filter made a channel: {explanation}"})
    return session.finish()


def _with_ceiling(
    exclude: FilterNode | None, audience: Audience | None, ratings: Mapping[str, int]
) -> FilterNode | None:
    """The exclusion with the audience's ceiling added, when the pool goes above it.

    The whole ceiling is listed (the builder does not know which ratings the library spells;
    an `isNot` of a value Plex lacks keeps everything). None when there is no audience, or the
    exclusion already holds the ceiling and the pool is still above it (nothing to revise).
    """
    if audience is None or not ratings:
        return None
    ceiling = ceiling_exclusion(audience)
    if exclude is None:
        return ceiling
    if exclude == ceiling:
        return None
    if isinstance(exclude, Group) and exclude.combinator == "or":
        if ceiling in exclude.children:
            return None
        return exclude.model_copy(update={"children": [*exclude.children, ceiling]})
    return Group(combinator="or", children=[exclude, ceiling])


def _tool_filter(
    media_types: Collection[MediaType], node: FilterNode | None, exclude: FilterNode | None = None
) -> dict[str, Any]:
    payload: dict[str, Any] = {"mediaTypes": list(media_types)}
    if node is not None:
        payload["filter"] = node.model_dump(mode="json", exclude_none=True)
    if exclude is not None:
        payload["exclude"] = exclude.model_dump(mode="json", exclude_none=True)
    return payload


def _variants(
    media_types: tuple[MediaType, ...], node: FilterNode | None, names_medium: bool = False
) -> list[tuple[tuple[MediaType, ...], FilterNode | None]]:
    """The planned filter, then progressively wider variants, in a fixed order.

    Both media types are tried only for a channel that names no medium: widening "Crime
    Series" to movies would make its name and description untrue.
    """
    variants: list[tuple[tuple[MediaType, ...], FilterNode | None]] = [(media_types, node)]
    if node is None:
        return variants
    if not names_medium and set(media_types) != set(MEDIA_TYPES) and _fits_both(node):
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
