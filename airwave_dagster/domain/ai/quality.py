"""Lineup quality: the measures that say whether a built lineup is one a viewer would keep.

`lineup_quality(library, channels)` takes the library's playable items and every built channel
with its resolved pool, and measures (issue 10): channel sizes, whole-library / whole-type
channels, pairwise overlap (median and max Jaccard, strict-subset pairs), how many channels an
item is on, the library runtime on some channel, audience violations (items above the ceiling on
a channel named for kids or a family), mixed-audience and mixed-media channels, genres with
enough content but no channel, callsigns that are the name cut short, and descriptions that say
something about the media the pool contradicts.

Every measure is recomputed from the pools, never from the build's own claims, so a benchmark
can resolve each channel's filter independently and a test can assert the targets.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from pydantic import BaseModel, ConfigDict, Field

from airwave_dagster.domain.ai.lineup_checks import (
    KIDS_RATINGS,
    MATURE_RATINGS,
    above_ceiling,
    audience_of,
    is_cut_short,
    overlap,
    rating_counts,
)
from airwave_dagster.domain.library import MediaItem

GENRE_CHANNEL_HOURS = 20.0
"""A genre with this much content should have a channel."""

GENRE_CHANNEL_SHARE = 0.5
"""A channel is "about" a genre when this share of its runtime carries the genre."""

_MOVIE_WORDS = re.compile(r"\b(movies?|films?|cinema|features?|matinee)\b", re.IGNORECASE)
_SERIES_WORDS = re.compile(r"\b(series|shows?|episodes?|sitcoms?|tv|cartoons)\b", re.IGNORECASE)


@dataclass(frozen=True)
class BuiltChannel:
    """A built channel and its pool, as the quality measures read it."""

    name: str
    pool: Sequence[MediaItem]
    callsign: str | None = None
    description: str = ""


class PairOverlap(BaseModel):
    """Two channels and how much they share."""

    model_config = ConfigDict(frozen=True)

    a: str
    b: str
    jaccard: float


class LineupQuality(BaseModel):
    """The lineup's measures (see the module docstring); counts are of built channels."""

    model_config = ConfigDict(frozen=True)

    channels: int
    channels_sized: int = Field(description="Channels with at least the minimum items and hours.")
    whole_library_channels: int = Field(
        description="Channels whose pool is every movie, every episode or every item."
    )
    median_jaccard: float
    max_jaccard: float
    worst_pairs: tuple[PairOverlap, ...] = ()
    strict_subset_pairs: int
    subset_examples: tuple[str, ...] = ()
    mean_channels_per_item: float = Field(description="Pool entries per library item.")
    items_per_channel_median: float
    runtime_covered: float = Field(description="Share of the library's runtime on some channel.")
    audience_violations: int = Field(
        description="Items above the rating ceiling on channels named for kids or a family."
    )
    mixed_audience_channels: int = Field(description="Channels with kids- and mature-rated items.")
    mixed_media_channels: int = Field(description="Channels with both movies and episodes.")
    genres_without_channel: tuple[str, ...] = ()
    cut_short_callsigns: tuple[str, ...] = ()
    untrue_descriptions: tuple[str, ...] = ()
    unmeasured: tuple[str, ...] = Field(
        default=(),
        description="Built channels left out: their filter uses a field the snapshot lacks.",
    )

    def lines(self) -> list[str]:
        """The measures as short text lines (CLI and report)."""
        worst = ", ".join(f"{p.a} / {p.b} {p.jaccard:.2f}" for p in self.worst_pairs) or "none"
        left_out = (
            f"; {len(self.unmeasured)} built channel(s) not measured, their filters use a field "
            f"the library snapshot cannot answer: {', '.join(self.unmeasured)}"
            if self.unmeasured
            else ""
        )
        return [
            f"channels: {self.channels} measured ({self.channels_sized} with enough items and "
            f"hours; {self.whole_library_channels} whole-library or whole-type){left_out}",
            f"overlap: median Jaccard {self.median_jaccard:.2f}, max {self.max_jaccard:.2f} "
            f"({worst}); strict-subset pairs {self.strict_subset_pairs}",
            f"coverage: {self.runtime_covered:.1%} of the library's runtime on some channel; "
            f"{self.mean_channels_per_item:.2f} channels per item; median "
            f"{self.items_per_channel_median:g} items per channel",
            f"audience: {self.audience_violations} items above the ceiling on kids/family "
            f"channels; {self.mixed_audience_channels} mixed-audience channels; "
            f"{self.mixed_media_channels} channels mix movies and episodes",
            "genres without a channel: " + (", ".join(self.genres_without_channel) or "none"),
            "callsigns cut short: " + (", ".join(self.cut_short_callsigns) or "none"),
            "descriptions untrue of the pool: " + (", ".join(self.untrue_descriptions) or "none"),
        ]


def _hours(items: Sequence[MediaItem]) -> float:
    return sum(item.duration_ms for item in items) / 3_600_000


def description_is_true(description: str, pool: Sequence[MediaItem]) -> bool:
    """Whether what the description says about the media (movies, series) holds for the pool.

    A description naming only movies must have no episodes, one naming only series no movies,
    and every medium it names must be present.
    """
    has_movies = any(item.type == "movie" for item in pool)
    has_episodes = any(item.type == "episode" for item in pool)
    says_movies = bool(_MOVIE_WORDS.search(description))
    says_series = bool(_SERIES_WORDS.search(description))
    if says_movies and not has_movies:
        return False
    if says_series and not has_episodes:
        return False
    if says_movies and not says_series and has_episodes:
        return False
    return not (says_series and not says_movies and has_movies)


def lineup_quality(
    library: Sequence[MediaItem],
    channels: Sequence[BuiltChannel],
    *,
    min_items: int = 3,
    min_hours: float = 10.0,
) -> LineupQuality:
    """Measure a built lineup against its library.

    Args:
        library: Every playable item (movies and episodes) of the library.
        channels: The built channels with their resolved pools.
        min_items: Fewest items a channel should have.
        min_hours: Least runtime a channel should have.

    Returns:
        The measures.
    """
    playable = {item.rating_key: item for item in library if item.type in ("movie", "episode")}
    everything = frozenset(playable)
    by_type = {
        kind: frozenset(k for k, item in playable.items() if item.type == kind)
        for kind in ("movie", "episode")
    }
    pools = [frozenset(item.rating_key for item in channel.pool) for channel in channels]
    pairs: list[PairOverlap] = []
    subsets: list[str] = []
    for (i, a), (j, b) in combinations(enumerate(pools), 2):
        jaccard, _ = overlap(a, b)
        pairs.append(PairOverlap(a=channels[i].name, b=channels[j].name, jaccard=round(jaccard, 3)))
        if a and b and a != b and (a < b or b < a):
            inner, outer = (i, j) if a < b else (j, i)
            subsets.append(f"{channels[inner].name} ⊂ {channels[outer].name}")
    jaccards = [pair.jaccard for pair in pairs]
    worst = sorted(pairs, key=lambda p: (-p.jaccard, p.a, p.b))[:3]
    covered = frozenset().union(*pools) if pools else frozenset()
    library_ms = sum(item.duration_ms for item in playable.values())
    covered_ms = sum(playable[key].duration_ms for key in covered if key in playable)
    violations = 0
    mixed_audience = 0
    mixed_media = 0
    cut_short: list[str] = []
    untrue: list[str] = []
    for channel in channels:
        ratings = rating_counts(item.content_rating for item in channel.pool)
        audience = audience_of(channel.name, channel.description)
        if audience is not None:
            violations += sum(above_ceiling(ratings, audience).values())
        kids = any(ratings.get(r, 0) for r in KIDS_RATINGS)
        mature = any(ratings.get(r, 0) for r in MATURE_RATINGS)
        mixed_audience += kids and mature
        types = {item.type for item in channel.pool}
        mixed_media += types == {"movie", "episode"}
        if channel.callsign and is_cut_short(channel.callsign, channel.name):
            cut_short.append(f"{channel.callsign} ({channel.name})")
        if not description_is_true(channel.description, channel.pool):
            untrue.append(channel.name)
    return LineupQuality(
        channels=len(channels),
        channels_sized=sum(
            1 for c in channels if len(c.pool) >= min_items and _hours(c.pool) >= min_hours
        ),
        whole_library_channels=sum(
            1 for pool in pools if pool and pool in (everything, *by_type.values())
        ),
        median_jaccard=round(statistics.median(jaccards), 3) if jaccards else 0.0,
        max_jaccard=max(jaccards, default=0.0),
        worst_pairs=tuple(worst),
        strict_subset_pairs=len(subsets),
        subset_examples=tuple(subsets[:5]),
        mean_channels_per_item=round(sum(len(p) for p in pools) / len(playable), 3)
        if playable
        else 0.0,
        items_per_channel_median=statistics.median(len(p) for p in pools) if pools else 0,
        runtime_covered=round(covered_ms / library_ms, 4) if library_ms else 0.0,
        audience_violations=violations,
        mixed_audience_channels=mixed_audience,
        mixed_media_channels=mixed_media,
        genres_without_channel=_genres_without_channel(list(playable.values()), channels),
        cut_short_callsigns=tuple(cut_short),
        untrue_descriptions=tuple(untrue),
    )


def _genres_without_channel(
    library: Sequence[MediaItem], channels: Sequence[BuiltChannel]
) -> tuple[str, ...]:
    """Genres with `GENRE_CHANNEL_HOURS` of content that no channel is about."""
    genre_ms: dict[str, int] = {}
    for item in library:
        for genre in set(item.genres):
            genre_ms[genre] = genre_ms.get(genre, 0) + item.duration_ms
    about: set[str] = set()
    for channel in channels:
        total = sum(item.duration_ms for item in channel.pool)
        if not total:
            continue
        share: dict[str, int] = {}
        for item in channel.pool:
            for genre in set(item.genres):
                share[genre] = share.get(genre, 0) + item.duration_ms
        about.update(g for g, ms in share.items() if ms / total >= GENRE_CHANNEL_SHARE)
    return tuple(
        sorted(
            genre
            for genre, ms in genre_ms.items()
            if ms / 3_600_000 >= GENRE_CHANNEL_HOURS and genre not in about
        )
    )
