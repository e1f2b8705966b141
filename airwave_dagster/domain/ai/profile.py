"""The library profile: a small, deterministic statistical summary the planner designs from.

`build_profile(items)` condenses a media source's available items (docs/reference/ai-lineup.md §3).
Genre, studio, content-rating, decade and score statistics count **titles** — each movie once
and each show once — never episodes, so one long show cannot dominate. Snapshots usually hold
movies and episodes only, so shows are derived from their episodes (grouped by show rating key,
falling back to the show title): a show's genres/studio/rating are its episodes' show-level facts,
its year is the earliest episode year, and its scores are the median of its episodes' scores.
`MediaItem`s of type `show` are used as the show's facts when present.

Deliberate differences from the reference:
- ties are broken by name so the profile (and the cached prefix built from it) is stable;
- names are trimmed and blank ones dropped; genres of one title are counted once each;
- shows are keyed by rating key, so two different shows sharing a title are not merged;
- networks are each show's `network` (an episode carries its show's), or `show_networks` where
  a caller names them (it wins);
- studios and networks carry their runtime hours and are ranked by it (then titles, then name),
  because a channel is as big as its hours, not its title count (issue 10);
- totals include runtime hours, which is how channel size should be judged;
- `show_genres` counts genres over shows alone (not rendered), so a planner can tell a genre of
  films from a genre of series;
- `decades` keeps the newest 12 decades, newest first, as the reference did.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from airwave_dagster.domain.library import MediaItem

MAX_GENRES = 40
MAX_STUDIOS = 30
MAX_NETWORKS = 30
MAX_CONTENT_RATINGS = 15
MAX_DECADES = 12
MAX_TOP_SHOWS = 40
MIN_SHOW_EPISODES = 5
"""A show needs this many available episodes to be listed among the biggest shows."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class NameCount(_Frozen):
    """A value, how many titles (movies + shows) carry it and their runtime in hours."""

    name: str
    count: int
    hours: float = 0.0


class DecadeCount(_Frozen):
    """A decade (e.g. 1990) and how many titles fall in it."""

    decade: int
    count: int


class ShowSize(_Frozen):
    """A show with many available episodes: raw material for a show-centric channel."""

    title: str
    episodes: int
    hours: float


class Distribution(_Frozen):
    """Percentiles of a numeric attribute (continuous, rounded to 1 decimal)."""

    count: int
    p10: float
    p25: float
    p50: float
    p75: float
    p90: float


class ProfileTotals(_Frozen):
    """How big the library is, by type, in titles and hours."""

    movies: int = 0
    shows: int = 0
    episodes: int = 0
    movie_hours: float = 0.0
    episode_hours: float = 0.0


class ProfileFlags(_Frozen):
    """Counts of premium video, per playable type."""

    hdr_movies: int = 0
    hdr_episodes: int = 0
    four_k_movies: int = 0
    four_k_episodes: int = 0


class LibraryProfile(_Frozen):
    """The distilled library (§3): small enough for a cached prompt prefix."""

    source_id: str = ""
    totals: ProfileTotals = Field(default_factory=ProfileTotals)
    genres: tuple[NameCount, ...] = ()
    show_genres: tuple[NameCount, ...] = Field(
        default=(), description="Genres counted over shows only (the rest of a count is movies)."
    )
    studios: tuple[NameCount, ...] = ()
    networks: tuple[NameCount, ...] = ()
    content_ratings: tuple[NameCount, ...] = ()
    decades: tuple[DecadeCount, ...] = Field(default=(), description="Newest first.")
    top_shows: tuple[ShowSize, ...] = ()
    audience_rating: Distribution | None = None
    critic_rating: Distribution | None = None
    movie_duration_minutes: Distribution | None = None
    flags: ProfileFlags = Field(default_factory=ProfileFlags)

    def render_text(self) -> str:
        """The profile as the terse text block of the shared context (byte-stable)."""
        return render_profile(self)


@dataclass
class _Title:
    """One movie or one show, with its title-level facts."""

    key: str
    title: str
    genres: tuple[str, ...] = ()
    studio: str | None = None
    network: str | None = None
    content_rating: str | None = None
    years: list[int] = field(default_factory=list[int])
    audience: list[float] = field(default_factory=list[float])
    critic: list[float] = field(default_factory=list[float])
    episodes: int = 0
    episode_ms: int = 0
    runtime_ms: int = 0
    explicit: bool = False


def build_profile(
    items: Iterable[MediaItem],
    *,
    source_id: str = "",
    show_networks: Mapping[str, str] | None = None,
) -> LibraryProfile:
    """Profile a library from its available items.

    Args:
        items: The source's available items (movies, episodes, optionally shows); order does
            not matter.
        source_id: The media source profiled.
        show_networks: Network of each show, keyed by show rating key (or show title when the
            episodes carry no show rating key); it wins over the items' own `network`. A show
            named in neither counts for no network.

    Returns:
        The profile.
    """
    movies: list[MediaItem] = []
    episodes: list[MediaItem] = []
    shows: dict[str, _Title] = {}
    for item in items:
        if item.type == "movie":
            movies.append(item)
        elif item.type == "episode":
            episodes.append(item)
        else:
            show = shows.setdefault(item.rating_key, _Title(key=item.rating_key, title=item.title))
            _adopt_show_record(show, item)
    seen_movies: dict[str, MediaItem] = {}
    for movie in movies:
        seen_movies.setdefault(movie.rating_key, movie)
    movies = sorted(seen_movies.values(), key=lambda m: m.rating_key)
    seen_episodes: dict[str, MediaItem] = {}
    for episode in episodes:
        seen_episodes.setdefault(episode.rating_key, episode)
    episodes = sorted(seen_episodes.values(), key=lambda e: e.rating_key)
    for episode in episodes:
        key = episode.show_rating_key or episode.show_title or f"episode:{episode.rating_key}"
        show = shows.setdefault(key, _Title(key=key, title=episode.show_title or episode.title))
        _add_episode(show, episode)
    titles = [_movie_title(movie) for movie in movies] + list(shows.values())
    return LibraryProfile(
        source_id=source_id,
        totals=ProfileTotals(
            movies=len(movies),
            shows=len(shows),
            episodes=len(episodes),
            movie_hours=_hours(sum(m.duration_ms for m in movies)),
            episode_hours=_hours(sum(e.duration_ms for e in episodes)),
        ),
        genres=_top((genre for t in titles for genre in set(_clean_all(t.genres))), MAX_GENRES),
        show_genres=_top(
            (genre for t in shows.values() for genre in set(_clean_all(t.genres))), MAX_GENRES
        ),
        studios=_by_hours(((t.studio, _title_ms(t)) for t in titles), MAX_STUDIOS),
        networks=_by_hours(_networks(shows.values(), show_networks or {}), MAX_NETWORKS),
        content_ratings=_top(_clean_all(t.content_rating for t in titles), MAX_CONTENT_RATINGS),
        decades=_decades(titles),
        top_shows=_top_shows(shows.values()),
        audience_rating=_distribution(_title_scores(titles, "audience")),
        critic_rating=_distribution(_title_scores(titles, "critic")),
        movie_duration_minutes=_distribution(
            [m.duration_ms / 60000 for m in movies if m.duration_ms > 0]
        ),
        flags=ProfileFlags(
            hdr_movies=sum(1 for m in movies if m.hdr),
            hdr_episodes=sum(1 for e in episodes if e.hdr),
            four_k_movies=sum(1 for m in movies if _is_4k(m.resolution)),
            four_k_episodes=sum(1 for e in episodes if _is_4k(e.resolution)),
        ),
    )


def _hours(ms: int) -> float:
    return round(ms / 3_600_000, 1)


def _is_4k(resolution: str | None) -> bool:
    return (resolution or "").strip().lower() == "4k"


def _clean(name: str | None) -> str | None:
    if name is None:
        return None
    stripped = " ".join(name.split())
    return stripped or None


def _clean_all(names: Iterable[str | None]) -> list[str]:
    return [cleaned for cleaned in (_clean(name) for name in names) if cleaned is not None]


def _movie_title(movie: MediaItem) -> _Title:
    return _Title(
        key=movie.rating_key,
        title=movie.title,
        genres=movie.genres,
        studio=movie.studio,
        content_rating=movie.content_rating,
        years=[movie.year] if movie.year is not None else [],
        audience=_finite([movie.audience_rating]),
        critic=_finite([movie.critic_rating]),
        runtime_ms=movie.duration_ms,
    )


def _finite(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _adopt_show_record(show: _Title, record: MediaItem) -> None:
    """A show record's own facts win over what its episodes say."""
    show.explicit = True
    show.title = record.title
    show.genres = record.genres
    show.studio = record.studio
    show.network = record.network
    show.content_rating = record.content_rating
    show.years = [record.year] if record.year is not None else []
    show.audience = _finite([record.audience_rating])
    show.critic = _finite([record.critic_rating])


def _add_episode(show: _Title, episode: MediaItem) -> None:
    show.episodes += 1
    show.episode_ms += episode.duration_ms
    if show.explicit:
        return
    # The first episode (by rating key) supplies the show-level tags; they are the show's anyway.
    if show.episodes == 1:
        show.genres = episode.genres
        show.studio = episode.studio
        show.network = episode.network
        show.content_rating = episode.content_rating
    if episode.year is not None:
        show.years.append(episode.year)
    show.audience.extend(_finite([episode.audience_rating]))
    show.critic.extend(_finite([episode.critic_rating]))


def _top(names: Iterable[str], limit: int) -> tuple[NameCount, ...]:
    counts = Counter(names)
    ranked = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0].casefold(), pair[0]))
    return tuple(NameCount(name=name, count=count) for name, count in ranked[:limit])


def _networks(
    shows: Iterable[_Title], show_networks: Mapping[str, str]
) -> list[tuple[str | None, int]]:
    return [
        (
            show_networks.get(show.key) or show_networks.get(show.title) or show.network,
            show.episode_ms,
        )
        for show in shows
    ]


def _title_ms(title: _Title) -> int:
    return title.episode_ms if title.episodes or title.explicit else title.runtime_ms


def _by_hours(pairs: Iterable[tuple[str | None, int]], limit: int) -> tuple[NameCount, ...]:
    """Names ranked by runtime, then title count, then name; each with both."""
    counts: Counter[str] = Counter()
    runtime: Counter[str] = Counter()
    for raw, ms in pairs:
        name = _clean(raw)
        if name is not None:
            counts[name] += 1
            runtime[name] += ms
    ranked = sorted(counts, key=lambda n: (-runtime[n], -counts[n], n.casefold(), n))
    return tuple(
        NameCount(name=name, count=counts[name], hours=_hours(runtime[name]))
        for name in ranked[:limit]
    )


def _decades(titles: Sequence[_Title]) -> tuple[DecadeCount, ...]:
    counts = Counter(min(t.years) // 10 * 10 for t in titles if t.years)
    newest = sorted(counts, reverse=True)[:MAX_DECADES]
    return tuple(DecadeCount(decade=decade, count=counts[decade]) for decade in newest)


def _top_shows(shows: Iterable[_Title]) -> tuple[ShowSize, ...]:
    big = [show for show in shows if show.episodes >= MIN_SHOW_EPISODES]
    big.sort(key=lambda s: (-s.episodes, s.title.casefold(), s.key))
    return tuple(
        ShowSize(title=show.title, episodes=show.episodes, hours=_hours(show.episode_ms))
        for show in big[:MAX_TOP_SHOWS]
    )


def _median(values: Sequence[float]) -> float | None:
    return _percentile(sorted(values), 0.5) if values else None


def _title_scores(titles: Sequence[_Title], which: str) -> list[float]:
    scores: list[float] = []
    for title in titles:
        values = title.audience if which == "audience" else title.critic
        median = _median(values)
        if median is not None and 0 <= median <= 10:
            scores.append(median)
    return scores


def _percentile(ordered: Sequence[float], fraction: float) -> float:
    """Continuous percentile (linear interpolation), like PostgreSQL's percentile_cont."""
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _distribution(values: Sequence[float]) -> Distribution | None:
    if not values:
        return None
    ordered = sorted(values)

    def at(fraction: float) -> float:
        return round(_percentile(ordered, fraction) + 0.0, 1)

    return Distribution(
        count=len(ordered), p10=at(0.1), p25=at(0.25), p50=at(0.5), p75=at(0.75), p90=at(0.9)
    )


def _name_list(entries: Sequence[NameCount], empty: str) -> str:
    return ", ".join(f"{e.name} ({e.count})" for e in entries) if entries else empty


def _fmt(number: float) -> str:
    return f"{number:.1f}"


def _distribution_line(label: str, dist: Distribution | None, suffix: str = "") -> str:
    if dist is None:
        return f"{label}: not recorded in this library"
    return (
        f"{label}: {dist.count} titles; p10 {_fmt(dist.p10)}{suffix}, "
        f"p25 {_fmt(dist.p25)}{suffix}, median {_fmt(dist.p50)}{suffix}, "
        f"p75 {_fmt(dist.p75)}{suffix}, p90 {_fmt(dist.p90)}{suffix}"
    )


def render_profile(profile: LibraryProfile) -> str:
    """Render the profile as a terse block, one fact per line; same profile, same bytes."""
    totals = profile.totals
    flags = profile.flags
    decades = (
        ", ".join(f"{d.decade}s ({d.count})" for d in profile.decades)
        if profile.decades
        else "none recorded"
    )
    shows = (
        ", ".join(f"{s.title} ({s.episodes} eps, {_fmt(s.hours)} h)" for s in profile.top_shows)
        if profile.top_shows
        else "none"
    )
    lines = [
        "LIBRARY PROFILE",
        f"Totals: {totals.movies} movies ({_fmt(totals.movie_hours)} h), {totals.shows} shows, "
        f"{totals.episodes} episodes ({_fmt(totals.episode_hours)} h)",
        "Genres (titles): " + _name_list(profile.genres, "none recorded"),
        "Studios: " + _name_list(profile.studios, "none recorded"),
        "Networks (shows): " + _name_list(profile.networks, "none recorded"),
        "Content ratings: " + _name_list(profile.content_ratings, "none recorded"),
        f"Decades: {decades}",
        f"Biggest shows: {shows}",
        "Use the spreads below to pick dividing thresholds; a score window (gte and lte) makes a",
        "more distinctive channel than a bare floor.",
        _distribution_line("Audience rating (0-10)", profile.audience_rating),
        _distribution_line("Critic rating (0-10)", profile.critic_rating),
        _distribution_line("Movie runtime", profile.movie_duration_minutes, " min"),
        f"HDR: {flags.hdr_movies} movies, {flags.hdr_episodes} episodes; "
        f"4K: {flags.four_k_movies} movies, {flags.four_k_episodes} episodes",
    ]
    return "\n".join(lines)
