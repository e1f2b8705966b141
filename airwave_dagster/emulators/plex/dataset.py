"""A deterministic synthetic Plex library: movies, shows, episodes, collections, playlists.

Attributes are correlated the way real libraries are (issue 10): animation and family films are
rated G/PG and never also horror or crime; horror, crime, thriller and war films are mostly R;
studios make their own genres within their era (`STUDIO_PROFILES`); networks air one kind of
show (`NETWORKS_BY_KIND`); show kinds keep their genres, ratings and season shapes.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from airwave_dagster.domain.library import MediaItem

MOVIES_SECTION_KEY = 1
SHOWS_SECTION_KEY = 2
SECTION_PATHS = {MOVIES_SECTION_KEY: "/data/movies", SHOWS_SECTION_KEY: "/data/tv"}

MOVIE_SHARE = 0.4
"""Fraction of the playable items that are movies; the rest are episodes."""

ADDED_SPAN_SECONDS = 3 * 365 * 86400
"""Items were added to the library over roughly the last three years."""

FIRST_TAG_ID = 101

GENRES = (
    "Action",
    "Adventure",
    "Animation",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Family",
    "Fantasy",
    "Horror",
    "Mystery",
    "Romance",
    "Science Fiction",
    "Thriller",
    "Western",
    "War",
    "Music",
)
MOVIE_GENRE_WEIGHTS = (9, 6, 4, 10, 6, 3, 12, 4, 4, 5, 4, 5, 5, 7, 2, 2, 2)

STUDIOS = (
    "Northwind Films",
    "Pixelforge Animation",
    "Blue Harbor Pictures",
    "Silver Lantern Studios",
    "Red Canyon Entertainment",
    "Meridian Pictures",
    "Copperline Studios",
    "Starfall Media",
    "Oakhurst Films",
    "Lumen & Vale",
    "Granite Peak Pictures",
    "Harborlight Productions",
    "Foxglove Films",
    "Ironbridge Studios",
    "Tidewater Pictures",
    "Kestrel Films",
    "Bramblewood Studios",
    "Polaris Entertainment",
    "Cinder Street Films",
    "Ondine Pictures",
)

NETWORKS = (
    "Channel Nine",
    "Harbor Network",
    "Sunset TV",
    "Atlas Broadcasting",
    "Kestrel+",
    "Nimbus",
    "Orbit One",
    "Greenway TV",
    "Metro Central",
    "Lighthouse Kids",
    "Docuverse",
    "Prime Coast",
)

STUDIO_PROFILES: dict[str, tuple[tuple[str, ...], int, int]] = {
    # studio: (the genres it makes, first year, last year) — studios have a line and an era.
    "Northwind Films": (("Drama", "Romance", "War"), 1930, 2026),
    "Pixelforge Animation": (("Animation", "Family", "Adventure", "Comedy"), 1995, 2026),
    "Blue Harbor Pictures": (("Comedy", "Romance", "Family"), 1950, 2026),
    "Silver Lantern Studios": (("Horror", "Thriller", "Mystery"), 1960, 2026),
    "Red Canyon Entertainment": (("Western", "Action", "Adventure"), 1930, 1995),
    "Meridian Pictures": (("Drama", "Crime", "Thriller"), 1970, 2026),
    "Copperline Studios": (("Action", "Science Fiction", "Adventure"), 1980, 2026),
    "Starfall Media": (("Science Fiction", "Fantasy", "Adventure"), 1990, 2026),
    "Oakhurst Films": (("Drama", "Music", "Romance"), 1930, 1990),
    "Lumen & Vale": (("Documentary", "Music", "Drama"), 1985, 2026),
    "Granite Peak Pictures": (("War", "Action", "Drama"), 1940, 2010),
    "Harborlight Productions": (("Comedy", "Family", "Music"), 1930, 1985),
    "Foxglove Films": (("Romance", "Comedy", "Drama"), 1990, 2026),
    "Ironbridge Studios": (("Crime", "Thriller", "Action"), 1960, 2026),
    "Tidewater Pictures": (("Mystery", "Crime", "Drama"), 1930, 1980),
    "Kestrel Films": (("Fantasy", "Adventure", "Family"), 1975, 2026),
    "Bramblewood Studios": (("Family", "Animation", "Comedy"), 1930, 2026),
    "Polaris Entertainment": (("Science Fiction", "Action", "Thriller"), 2000, 2026),
    "Cinder Street Films": (("Horror", "Crime", "Mystery"), 1975, 2026),
    "Ondine Pictures": (("Documentary", "Drama", "War"), 1950, 2026),
}

NETWORKS_BY_KIND: dict[str, tuple[tuple[str, int], ...]] = {
    # show kind: (network, weight) — a network airs one kind of programming, mostly.
    "sitcom": (("Channel Nine", 5), ("Sunset TV", 4), ("Metro Central", 3), ("Harbor Network", 2)),
    "drama": (
        ("Atlas Broadcasting", 5),
        ("Kestrel+", 4),
        ("Nimbus", 4),
        ("Orbit One", 3),
        ("Prime Coast", 3),
        ("Harbor Network", 2),
    ),
    "kids": (("Lighthouse Kids", 8), ("Greenway TV", 2)),
    "docs": (("Docuverse", 6), ("Greenway TV", 3)),
}

KIDS_GENRES = frozenset({"Animation", "Family"})
MATURE_GENRES = frozenset({"Horror", "Crime", "Thriller", "War"})

MOVIE_CONTENT_RATINGS = ("G", "PG", "PG-13", "R", "NR")
MOVIE_CONTENT_RATING_WEIGHTS = (10, 20, 30, 30, 10)
KIDS_MOVIE_RATINGS = (("G", "PG", "PG-13"), (45, 45, 10))
"""Animation and family films are rated G or PG, a few PG-13."""
MATURE_MOVIE_RATINGS = (("PG-13", "R", "NR"), (25, 65, 10))
"""Horror, crime, thriller and war films are mostly R."""
SHOW_CONTENT_RATINGS = ("TV-Y", "TV-Y7", "TV-G", "TV-PG", "TV-14", "TV-MA")
CONTENT_RATING_AGES = {
    "G": 0,
    "PG": 10,
    "PG-13": 13,
    "R": 17,
    "TV-Y": 0,
    "TV-Y7": 7,
    "TV-G": 0,
    "TV-PG": 10,
    "TV-14": 14,
    "TV-MA": 17,
}

COUNTRIES = (
    "United States of America",
    "United Kingdom",
    "France",
    "Germany",
    "Japan",
    "Canada",
    "Italy",
    "Spain",
    "South Korea",
    "India",
    "Australia",
    "Mexico",
    "Brazil",
    "Sweden",
    "Denmark",
)
COUNTRY_WEIGHTS = (40, 10, 6, 5, 6, 5, 3, 3, 4, 3, 3, 2, 2, 2, 2)

LABELS = ("Favorite", "Criterion", "Holiday", "Cult Classic", "Family Night", "Remastered")

EDITIONS = ("Director's Cut", "Extended Edition", "Theatrical Cut", "Remastered")

RESOLUTIONS = ("sd", "720", "1080", "4k")
RESOLUTION_WEIGHTS = (10, 20, 50, 20)
RESOLUTION_SIZES = {"sd": (720, 480), "720": (1280, 720), "1080": (1920, 1080), "4k": (3840, 2160)}
HDR_FORMATS = ("HDR10", "Dolby Vision", "HLG")
HDR_WEIGHTS = (50, 35, 15)

AUDIO_LANGUAGES = ("fra", "spa", "jpn", "deu", "ita", "kor")

FIRST_NAMES = (
    "Ada",
    "Ben",
    "Clara",
    "Dev",
    "Elena",
    "Felix",
    "Grace",
    "Hugo",
    "Iris",
    "Jonah",
    "Kira",
    "Liam",
    "Maya",
    "Nico",
    "Olive",
    "Pavel",
    "Quinn",
    "Rosa",
    "Sam",
    "Tess",
    "Uma",
    "Victor",
    "Wren",
    "Xavier",
    "Yara",
    "Zane",
    "José",
    "Zoë",
    "Björn",
    "Renée",
    "François",
    "Łukasz",
    "Søren",
    "Chloé",
    "Aiko",
    "Ravi",
    "Noor",
    "Tomás",
    "Ingrid",
    "Mateo",
)
LAST_NAMES = (
    "Abbott",
    "Barnes",
    "Castillo",
    "Dalton",
    "Ellis",
    "Fischer",
    "Garner",
    "Holt",
    "Ibarra",
    "Jensen",
    "Keller",
    "Lindqvist",
    "Morrow",
    "Nakamura",
    "Okafor",
    "Price",
    "Quintero",
    "Reyes",
    "Sato",
    "Thorne",
    "Underwood",
    "Vance",
    "Whitaker",
    "Xu",
    "Young",
    "Zimmer",
    "Muñoz",
    "Öztürk",
    "Nováková",
    "Brontë",
    "Ashford",
    "Bellamy",
    "Crane",
    "Dumont",
    "Everly",
    "Fairbanks",
    "Grady",
    "Hartley",
    "Iverson",
    "Kowalski",
)

ADJECTIVES = (
    "Silent",
    "Crimson",
    "Hidden",
    "Broken",
    "Golden",
    "Last",
    "Midnight",
    "Electric",
    "Frozen",
    "Burning",
    "Distant",
    "Wild",
    "Quiet",
    "Hollow",
    "Iron",
    "Velvet",
    "Savage",
    "Lucky",
    "Lonely",
    "Secret",
    "Forgotten",
    "Bright",
    "Dark",
    "Endless",
    "Final",
    "Restless",
    "Wandering",
    "Shattered",
    "Silver",
    "Scarlet",
    "Northern",
    "Fallen",
    "Rising",
    "Lost",
    "Sudden",
    "Gentle",
    "Copper",
    "Neon",
    "Paper",
    "Glass",
    "Stolen",
    "Twisted",
    "Brave",
    "Little",
    "Great",
    "Long",
    "Cold",
    "Sweet",
    "Bitter",
    "Blue",
)
NOUNS = (
    "Harbor",
    "Protocol",
    "Garden",
    "Horizon",
    "Kingdom",
    "River",
    "Signal",
    "Empire",
    "Orchard",
    "Frontier",
    "Machine",
    "Promise",
    "Shadow",
    "Voyage",
    "Summer",
    "Winter",
    "Letter",
    "Station",
    "Island",
    "Circus",
    "Detective",
    "Engine",
    "Mirror",
    "Canyon",
    "Tide",
    "Lantern",
    "Witness",
    "Highway",
    "Theory",
    "Planet",
    "Carnival",
    "Fortress",
    "Melody",
    "Heist",
    "Outpost",
    "Dynasty",
    "Valley",
    "Pilgrim",
    "Alibi",
    "Comet",
    "Meadow",
    "Tower",
    "Ransom",
    "Harvest",
    "Legacy",
    "Paradox",
    "Sanctuary",
    "Labyrinth",
    "Serenade",
    "Countdown",
)

NON_ASCII_MOVIE_TITLES = (
    "Amélie's Garden",
    "Café Müller",
    "Smörgåsbord Stories",
    "Señor Fantástico",
    "Łódź Express",
    "東京 Drift",
)
NON_ASCII_SHOW_TITLE = "Crème Brûlée Club"

ARTICLES = ("The ", "A ", "An ")

ROMAN = ("II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X")


@dataclass(frozen=True, slots=True)
class ShowKind:
    """How a family of shows is shaped: runtime, season length, genres and ratings."""

    name: str
    minutes: tuple[int, int]
    episodes_per_season: tuple[int, int]
    genres: tuple[str, ...]
    ratings: tuple[str, ...]
    weight: int


SHOW_KINDS = (
    ShowKind("sitcom", (20, 24), (10, 24), ("Comedy", "Family", "Romance"), ("TV-PG", "TV-14"), 4),
    ShowKind(
        "drama",
        (42, 60),
        (8, 13),
        ("Drama", "Crime", "Mystery", "Thriller", "Science Fiction", "Fantasy", "Western"),
        ("TV-14", "TV-MA"),
        4,
    ),
    ShowKind(
        "kids",
        (11, 23),
        (13, 26),
        ("Animation", "Family", "Adventure", "Comedy"),
        ("TV-Y", "TV-Y7", "TV-G"),
        2,
    ),
    ShowKind("docs", (44, 58), (4, 10), ("Documentary", "Music", "War"), ("TV-G", "TV-PG"), 1),
)


@dataclass(frozen=True, slots=True)
class Section:
    """One library section (Plex calls them libraries in its UI)."""

    key: int
    title: str
    type: str
    path: str
    uuid: str


@dataclass(slots=True, eq=False)
class Item:
    """One metadata record: a movie, show, season or episode.

    Tag tuples hold tag titles; their ids live in the library's `TagRegistry`. Seasons and shows
    carry aggregates (leaf counts, the union of their episodes' directors) so show-level filters
    can be answered without walking the episodes.
    """

    rating_key: int
    type: str
    section_key: int
    title: str
    title_sort: str
    year: int | None = None
    originally_available_at: str | None = None
    added_at: int = 0
    updated_at: int = 0
    summary: str = ""
    studio: str | None = None
    network: str | None = None
    content_rating: str | None = None
    audience_rating: float | None = None
    rating: float | None = None
    user_rating: float | None = None
    duration_ms: int = 0
    view_count: int = 0
    last_viewed_at: int | None = None
    view_offset: int = 0
    edition_title: str | None = None
    resolution: str | None = None
    hdr: str | None = None
    video_codec: str | None = None
    bitrate: int | None = None
    audio_languages: tuple[str, ...] = ()
    subtitle_languages: tuple[str, ...] = ()
    genres: tuple[str, ...] = ()
    directors: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()
    producers: tuple[str, ...] = ()
    actors: tuple[str, ...] = ()
    countries: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()
    unmatched: bool = False
    duplicate: bool = False
    trash: bool = False
    show_rating_key: int | None = None
    parent_rating_key: int | None = None
    index: int | None = None
    parent_index: int | None = None
    child_count: int = 0
    leaf_count: int = 0
    viewed_leaf_count: int = 0

    @property
    def content_rating_age(self) -> int | None:
        """Minimum viewer age implied by the content rating (None when unrated)."""
        return CONTENT_RATING_AGES.get(self.content_rating or "")

    @property
    def dovi(self) -> bool:
        """Whether the video carries Dolby Vision."""
        return self.hdr == "Dolby Vision"

    @property
    def unwatched(self) -> bool:
        """Plex's `unwatched`: never played to the end."""
        return self.view_count == 0

    @property
    def in_progress(self) -> bool:
        """Plex's `inProgress`: started but not finished."""
        return self.view_offset > 0

    @property
    def decade(self) -> int | None:
        """The decade of `year` (1994 → 1990)."""
        return None if self.year is None else self.year // 10 * 10

    @property
    def height(self) -> int | None:
        """Video height in pixels, from the resolution."""
        return RESOLUTION_SIZES[self.resolution][1] if self.resolution else None

    @property
    def width(self) -> int | None:
        """Video width in pixels, from the resolution."""
        return RESOLUTION_SIZES[self.resolution][0] if self.resolution else None

    @property
    def sort_title(self) -> str:
        """The key Plex-like `titleSort` ordering uses (articles dropped, case folded)."""
        return self.title_sort.casefold()


@dataclass(frozen=True, slots=True)
class CollectionRecord:
    """A manual collection of movies or shows in one section."""

    rating_key: int
    tag_id: int
    title: str
    section_key: int
    subtype: str
    members: tuple[int, ...]
    added_at: int


@dataclass(frozen=True, slots=True)
class Playlist:
    """A video playlist mixing movies and episodes."""

    rating_key: int
    title: str
    items: tuple[int, ...]
    added_at: int


@dataclass(slots=True)
class TagRegistry:
    """Global tag ids per tag kind, as Plex numbers its tags across sections."""

    _ids: dict[str, dict[str, int]] = field(default_factory=dict)
    _names: dict[str, dict[int, str]] = field(default_factory=dict)
    _next_id: int = FIRST_TAG_ID

    def register(self, kind: str, names: Iterable[str]) -> None:
        """Give every new name of a kind the next free id, in iteration order."""
        ids = self._ids.setdefault(kind, {})
        by_id = self._names.setdefault(kind, {})
        for name in names:
            if name not in ids:
                ids[name] = self._next_id
                by_id[self._next_id] = name
                self._next_id += 1

    def id_of(self, kind: str, name: str) -> int | None:
        """The id of a tag, or None when the kind has no such tag."""
        return self._ids.get(kind, {}).get(name)

    def name_of(self, kind: str, tag_id: int) -> str | None:
        """The title of a tag id, or None when the kind has no such id."""
        return self._names.get(kind, {}).get(tag_id)


@dataclass(slots=True)
class EmulatedLibrary:
    """The whole synthetic library, with the indexes the server needs to answer quickly."""

    seed: int
    anchor: int
    sections: tuple[Section, ...]
    items: dict[int, Item]
    tags: TagRegistry
    collections: dict[int, CollectionRecord]
    playlists: dict[int, Playlist]
    by_section_type: dict[tuple[int, str], list[Item]] = field(default_factory=dict)
    children: dict[int, list[int]] = field(default_factory=dict)
    leaves: dict[int, list[int]] = field(default_factory=dict)

    def section(self, key: int) -> Section | None:
        """The section with this key, if any."""
        return next((s for s in self.sections if s.key == key), None)

    def of_type(self, section_key: int, item_type: str) -> list[Item]:
        """Items of one type in one section, in Plex's default order for that type."""
        return self.by_section_type.get((section_key, item_type), [])

    def movies(self) -> list[Item]:
        """Every movie, in title order."""
        return self.of_type(MOVIES_SECTION_KEY, "movie")

    def shows(self) -> list[Item]:
        """Every show, in title order."""
        return self.of_type(SHOWS_SECTION_KEY, "show")

    def episodes(self) -> list[Item]:
        """Every episode, in show / season / episode order."""
        return self.of_type(SHOWS_SECTION_KEY, "episode")

    def playable(self) -> Iterator[Item]:
        """Movies then episodes: everything a channel can schedule."""
        yield from self.movies()
        yield from self.episodes()

    def show_of(self, item: Item) -> Item | None:
        """The show an episode or season belongs to."""
        return None if item.show_rating_key is None else self.items[item.show_rating_key]

    def collections_in(self, section_key: int) -> list[CollectionRecord]:
        """The collections of one section, in title order."""
        found = [c for c in self.collections.values() if c.section_key == section_key]
        return sorted(found, key=lambda c: (c.title.casefold(), c.rating_key))

    def media_item(self, rating_key: int) -> MediaItem:
        """The domain record a correct Plex adapter must produce for a movie or an episode.

        Episodes take genres, studio and network from their show, which is where Plex keeps them.

        Raises:
            ValueError: The rating key is not a movie or an episode.
        """
        item = self.items[rating_key]
        if item.type not in ("movie", "episode"):
            raise ValueError(f"{rating_key} is a {item.type}, not a playable item")
        show = self.show_of(item)
        return MediaItem(
            rating_key=str(item.rating_key),
            type="movie" if item.type == "movie" else "episode",
            title=item.title,
            duration_ms=item.duration_ms,
            year=item.year,
            originally_available_at=item.originally_available_at,
            added_at=iso_utc(item.added_at),
            library_key=str(item.section_key),
            summary=item.summary or None,
            studio=show.studio if show else item.studio,
            network=show.network if show else None,
            content_rating=item.content_rating,
            genres=show.genres if show else item.genres,
            directors=item.directors,
            cast=item.actors,
            audience_rating=item.audience_rating,
            critic_rating=item.rating,
            resolution=item.resolution,
            hdr=item.hdr,
            dovi=item.dovi,
            show_title=show.title if show else None,
            show_rating_key=str(show.rating_key) if show else None,
            season=item.parent_index,
            episode=item.index if item.type == "episode" else None,
            view_count=item.view_count,
            **self._media_extras(item),
        )

    def _media_extras(self, item: Item) -> dict[str, Any]:
        """Tagline, artwork paths, audio and Dolby Vision details, as the server renders them."""
        show_key = item.show_rating_key if item.type == "episode" else item.rating_key
        extras: dict[str, Any] = {
            "tagline": tagline_of(item) if item.type == "movie" else None,
            "thumb": f"/library/metadata/{item.rating_key}/thumb/{item.updated_at}",
            "art": f"/library/metadata/{show_key}/art/{item.updated_at}",
        }
        if item.resolution is None:
            return extras
        _, channels, dynamic = audio_of(item)
        extras.update(audio_channels=channels, video_codec=item.video_codec)
        if item.audio_languages:
            extras["dynamic_audio"] = dynamic
        if item.hdr == "Dolby Vision":
            profile, compat = dovi_profile_of(item)
            extras.update(dovi_profile=profile, dovi_level=6, dovi_bl_compat_id=compat)
        return extras

    def media_items(self, section_key: int | None = None) -> list[MediaItem]:
        """Domain records for every playable item (of one section, when given)."""
        return [
            self.media_item(item.rating_key)
            for item in self.playable()
            if section_key is None or item.section_key == section_key
        ]


def tagline_of(item: Item) -> str:
    """A movie's tagline, derived from its title so the generated library stays as it was."""
    return f"Nothing prepared them for {item.title}."


def audio_of(item: Item) -> tuple[str, int, str | None]:
    """Codec, channels and object audio (Atmos, DTS:X) of an item's main audio track.

    Derived from the rating key rather than drawn, so every seed's library is unchanged: most
    files are 5.1, some stereo, a few 7.1 with Atmos (TrueHD) or DTS:X.
    """
    roll = item.rating_key % 20
    if item.resolution == "4k" and roll < 4:
        return ("truehd", 8, "Atmos") if roll < 3 else ("dca", 8, "DTS:X")
    if roll < 6:
        return "aac", 2, None
    return "eac3", 6, None


def dovi_profile_of(item: Item) -> tuple[int, int]:
    """Dolby Vision profile and base-layer compatibility id: mostly 8.1 (HDR10-compatible), some
    profile 5 files."""
    return (5, 0) if item.rating_key % 4 == 0 else (8, 1)


def iso_utc(epoch_seconds: int) -> str:
    """Epoch seconds as the ISO-8601 UTC text `MediaItem.added_at` carries."""
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).isoformat()


def title_sort_of(title: str) -> str:
    """Plex's titleSort: the title without a leading article."""
    for article in ARTICLES:
        if title.startswith(article) and len(title) > len(article):
            return title[len(article) :]
    return title


def default_anchor() -> int:
    """Today's UTC midnight: "now" for the library, stable for a whole day of test runs."""
    today = datetime.now(tz=UTC).date()
    return int(datetime(today.year, today.month, today.day, tzinfo=UTC).timestamp())


def build_library(items: int, seed: int, *, anchor: int | None = None) -> EmulatedLibrary:
    """Build a deterministic library of `items` playable items (about 40% movies).

    Args:
        items: Total movies plus episodes (at least 2).
        seed: Seeds every random choice; the same seed and anchor give the same library.
        anchor: Epoch seconds treated as "now" for added/viewed dates; defaults to today's UTC
            midnight so relative-date filters keep matching something.

    Returns:
        The library, indexed for the server.
    """
    if items < 2:
        raise ValueError("a library needs at least 2 items (one movie, one episode)")
    builder = _Builder(seed, default_anchor() if anchor is None else anchor)
    n_movies = max(1, round(items * MOVIE_SHARE))
    builder.build_movies(n_movies)
    builder.build_shows(items - n_movies)
    builder.build_collections()
    builder.build_playlists()
    return builder.finish()


class _Builder:
    """Accumulates records while drawing every choice from one seeded RNG."""

    def __init__(self, seed: int, anchor: int) -> None:
        self.seed = seed
        self.anchor = anchor
        self.rng = random.Random(seed)
        self.next_key = 1001
        self.items: dict[int, Item] = {}
        self.tags = TagRegistry()
        self.titles: set[str] = set()
        self.collections: dict[int, CollectionRecord] = {}
        self.playlists: dict[int, Playlist] = {}
        self.children: dict[int, list[int]] = {}
        self.leaves: dict[int, list[int]] = {}
        self.movie_keys: list[int] = []
        self.show_keys: list[int] = []
        self.episode_keys: list[int] = []
        self.people = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
        self.rng.shuffle(self.people)
        self.tags.register("genre", GENRES)
        self.tags.register("country", COUNTRIES)
        self.tags.register("label", LABELS)
        self.tags.register("network", NETWORKS)
        self.tags.register("location", SECTION_PATHS.values())

    def key(self) -> int:
        self.next_key += 1
        return self.next_key - 1

    def unique_title(self, title: str, year: int) -> str:
        candidate = title
        for numeral in ROMAN:
            if candidate not in self.titles:
                break
            candidate = f"{title} {numeral}"
        else:
            candidate = f"{title} ({year})"
            suffix = 2
            while candidate in self.titles:
                candidate = f"{title} ({year}) {suffix}"
                suffix += 1
        self.titles.add(candidate)
        return candidate

    def movie_title(self) -> str:
        rng = self.rng
        adjective, noun = rng.choice(ADJECTIVES), rng.choice(NOUNS)
        pattern = rng.randrange(6)
        if pattern == 0:
            return f"The {adjective} {noun}"
        if pattern == 1:
            return f"{noun} of the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
        if pattern == 2:
            return f"A {adjective} {noun}"
        if pattern == 3:
            return f"Return to {adjective} {noun}"
        return f"{adjective} {noun}"

    def added_at(self) -> int:
        return self.anchor - self.rng.randrange(ADDED_SPAN_SECONDS)

    def viewed_after(self, added: int) -> int:
        return added + self.rng.randrange(max(1, self.anchor - added))

    def people_from(self, pool: list[str], count: int) -> tuple[str, ...]:
        return tuple(self.rng.sample(pool, min(count, len(pool))))

    def media(self, item: Item, resolution: str) -> None:
        rng = self.rng
        item.resolution = resolution
        hdr_chance = {"4k": 0.6, "1080": 0.05}.get(resolution, 0.0)
        if rng.random() < hdr_chance:
            item.hdr = rng.choices(HDR_FORMATS, HDR_WEIGHTS)[0]
        if resolution == "4k" or (resolution != "sd" and rng.random() < 0.2):
            item.video_codec = "hevc"
        else:
            item.video_codec = "h264" if resolution != "sd" else "mpeg4"
        base = {"sd": 1500, "720": 4000, "1080": 9000, "4k": 25000}[resolution]
        item.bitrate = base + rng.randrange(base // 2)
        roll = rng.random()
        if roll < 0.8:
            item.audio_languages = ("eng",)
        elif roll < 0.9:
            item.audio_languages = (rng.choice(AUDIO_LANGUAGES), "eng")
        else:
            item.audio_languages = (rng.choice(AUDIO_LANGUAGES),)
        roll = rng.random()
        if roll < 0.4:
            item.subtitle_languages = ("eng",)
        elif roll < 0.5:
            item.subtitle_languages = ("eng", "spa")

    def studio_for(self, genres: tuple[str, ...], year: int) -> str:
        """A studio active that year, most likely one that makes the title's first genre."""
        active = [
            name for name, (_, first, last) in STUDIO_PROFILES.items() if first <= year <= last
        ] or list(STUDIOS)
        weights = []
        for name in active:
            line = STUDIO_PROFILES[name][0]
            weights.append(8 if genres[0] in line else 3 if set(genres) & set(line) else 1)
        return self.rng.choices(active, weights)[0]

    def movie_rating(self, genres: tuple[str, ...]) -> str:
        """A content rating that fits the genres (kids' films G/PG, horror and crime mostly R)."""
        values: tuple[str, ...]
        weights: tuple[int, ...]
        if KIDS_GENRES & set(genres):
            values, weights = KIDS_MOVIE_RATINGS
        elif MATURE_GENRES & set(genres):
            values, weights = MATURE_MOVIE_RATINGS
        else:
            values, weights = MOVIE_CONTENT_RATINGS, MOVIE_CONTENT_RATING_WEIGHTS
        return self.rng.choices(values, weights)[0]

    def network_for(self, kind: ShowKind) -> str:
        """A network that airs this kind of show."""
        names, weights = zip(*NETWORKS_BY_KIND[kind.name], strict=True)
        return self.rng.choices(names, weights)[0]

    def build_movies(self, count: int) -> None:
        rng = self.rng
        directors = self.people[: min(len(self.people), max(20, count // 8))]
        actors = self.people[-min(len(self.people), max(40, count // 3)) :]
        writers = self.people[len(self.people) // 3 : len(self.people) // 3 + max(20, count // 8)]
        for pool, kind in ((directors, "director"), (actors, "actor"), (writers, "writer")):
            self.tags.register(kind, pool)
        self.tags.register("producer", writers)
        special = {
            (position * count) // len(NON_ASCII_MOVIE_TITLES): title
            for position, title in enumerate(NON_ASCII_MOVIE_TITLES)
        }
        for position in range(count):
            year = max(1930, 2026 - min(96, int(rng.expovariate(1 / 18))))
            raw_title = special.get(position) or self.movie_title()
            released = f"{year:04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            title = self.unique_title(raw_title, year)
            added = self.added_at()
            duration = rng.randint(75 * 60, 180 * 60) * 1000
            picked = rng.choices(GENRES, MOVIE_GENRE_WEIGHTS, k=rng.randint(1, 3))
            if KIDS_GENRES & set(picked):
                # A cartoon is not also a horror film: kids' titles keep kids' company.
                picked = [g for g in picked if g not in MATURE_GENRES]
            genres = tuple(dict.fromkeys(picked))
            countries = tuple(
                dict.fromkeys(rng.choices(COUNTRIES, COUNTRY_WEIGHTS, k=1 + (rng.random() < 0.2)))
            )
            movie = Item(
                rating_key=self.key(),
                type="movie",
                section_key=MOVIES_SECTION_KEY,
                title=title,
                title_sort=title_sort_of(title),
                year=year,
                originally_available_at=released,
                added_at=added,
                updated_at=added + rng.randrange(86400 * 30),
                summary=f"A {genres[0].lower()} film about a {rng.choice(NOUNS).lower()}.",
                studio=self.studio_for(genres, year),
                content_rating=self.movie_rating(genres),
                audience_rating=round(min(10.0, max(1.0, rng.gauss(6.8, 1.3))), 1),
                rating=round(min(10.0, max(1.0, rng.gauss(6.5, 1.6))), 1)
                if rng.random() < 0.9
                else None,
                user_rating=rng.choice((2.0, 4.0, 6.0, 8.0, 10.0)) if rng.random() < 0.08 else None,
                duration_ms=duration,
                edition_title=rng.choice(EDITIONS) if rng.random() < 0.03 else None,
                genres=genres,
                directors=self.people_from(directors, 1 + (rng.random() < 0.15)),
                writers=self.people_from(writers, rng.randint(1, 3)),
                producers=self.people_from(writers, rng.randint(0, 2)),
                actors=self.people_from(actors, rng.randint(3, 8)),
                countries=countries,
                labels=(rng.choice(LABELS),) if rng.random() < 0.15 else (),
                unmatched=rng.random() < 0.005,
                duplicate=rng.random() < 0.005,
                trash=rng.random() < 0.003,
            )
            self.media(movie, rng.choices(RESOLUTIONS, RESOLUTION_WEIGHTS)[0])
            roll = rng.random()
            if roll < 0.3:
                movie.view_count = rng.randint(1, 5)
                movie.last_viewed_at = self.viewed_after(added)
            elif roll < 0.35:
                movie.view_offset = rng.randrange(60_000, duration - 60_000)
                movie.last_viewed_at = self.viewed_after(added)
            self.items[movie.rating_key] = movie
            self.movie_keys.append(movie.rating_key)

    def show_title(self, kind: ShowKind) -> str:
        rng = self.rng
        adjective, noun = rng.choice(ADJECTIVES), rng.choice(NOUNS)
        if kind.name == "kids":
            return f"The {adjective} {noun} Gang"
        if kind.name == "docs":
            return f"Inside the {noun}"
        if kind.name == "sitcom":
            return f"{rng.choice(LAST_NAMES)} & {rng.choice(LAST_NAMES)}"
        return f"{adjective} {noun}"

    def build_shows(self, n_episodes: int) -> None:
        rng = self.rng
        directors = self.people[: min(len(self.people), max(20, n_episodes // 40))]
        cast_pool = self.people[-min(len(self.people), max(40, n_episodes // 10)) :]
        self.tags.register("director", directors)
        self.tags.register("actor", cast_pool)
        self.tags.register("writer", directors)
        per_show_cap = max(2, n_episodes // 3)
        remaining = n_episodes
        kinds_weights = [k.weight for k in SHOW_KINDS]
        while remaining > 0:
            kind = rng.choices(SHOW_KINDS, kinds_weights)[0]
            start_year = max(1950, 2026 - min(76, int(rng.expovariate(1 / 12))))
            raw_title = NON_ASCII_SHOW_TITLE if not self.show_keys else self.show_title(kind)
            title = self.unique_title(raw_title, start_year)
            show_added = self.added_at()
            genres = tuple(rng.sample(kind.genres, rng.randint(1, min(3, len(kind.genres)))))
            show = Item(
                rating_key=self.key(),
                type="show",
                section_key=SHOWS_SECTION_KEY,
                title=title,
                title_sort=title_sort_of(title),
                year=start_year,
                originally_available_at=f"{start_year:04d}-09-{rng.randint(1, 28):02d}",
                added_at=show_added,
                updated_at=show_added,
                summary=f"A {kind.name} series about a {rng.choice(NOUNS).lower()}.",
                studio=self.studio_for(genres, start_year),
                network=self.network_for(kind),
                content_rating=rng.choice(kind.ratings),
                audience_rating=round(min(10.0, max(1.0, rng.gauss(7.2, 1.1))), 1),
                rating=round(min(10.0, max(1.0, rng.gauss(7.0, 1.4))), 1)
                if rng.random() < 0.85
                else None,
                user_rating=rng.choice((4.0, 6.0, 8.0, 10.0)) if rng.random() < 0.1 else None,
                duration_ms=rng.randint(*kind.minutes) * 60_000,
                genres=genres,
                actors=self.people_from(cast_pool, rng.randint(3, 6)),
                countries=(rng.choices(COUNTRIES, COUNTRY_WEIGHTS)[0],),
                labels=(rng.choice(LABELS),) if rng.random() < 0.15 else (),
            )
            self.items[show.rating_key] = show
            self.show_keys.append(show.rating_key)
            budget = min(remaining, per_show_cap)
            show_directors = self.people_from(directors, rng.randint(2, 5))
            primary_resolution = "sd" if start_year < 2005 else rng.choice(("720", "1080", "4k"))
            watched_share = rng.choices((0.0, rng.random(), 1.0), (5, 3, 2))[0]
            self.build_seasons(show, kind, budget, show_directors, cast_pool, primary_resolution)
            episodes = self.leaves[show.rating_key]
            watched = round(watched_share * len(episodes))
            for position, episode_key in enumerate(episodes):
                episode = self.items[episode_key]
                if position < watched:
                    episode.view_count = rng.randint(1, 2)
                    episode.last_viewed_at = self.viewed_after(episode.added_at)
                elif position == watched and rng.random() < 0.3:
                    episode.view_offset = episode.duration_ms // 2
                    episode.last_viewed_at = self.viewed_after(episode.added_at)
            self.aggregate_show(show)
            remaining -= len(episodes)

    def build_seasons(
        self,
        show: Item,
        kind: ShowKind,
        budget: int,
        show_directors: tuple[str, ...],
        cast_pool: list[str],
        primary_resolution: str,
    ) -> None:
        rng = self.rng
        seasons: list[int] = []
        all_episodes: list[int] = []
        season_number = 0
        start_year = show.year or 2000
        season_count = self.rng.choices(range(1, 9), (30, 20, 15, 10, 8, 7, 5, 5))[0]
        while len(all_episodes) < budget and season_number < season_count:
            season_number += 1
            air_year = min(2026, start_year + season_number - 1)
            season = Item(
                rating_key=self.key(),
                type="season",
                section_key=SHOWS_SECTION_KEY,
                title=f"Season {season_number}",
                title_sort=f"Season {season_number}",
                year=air_year,
                show_rating_key=show.rating_key,
                parent_rating_key=show.rating_key,
                index=season_number,
                added_at=show.added_at,
            )
            self.items[season.rating_key] = season
            seasons.append(season.rating_key)
            season_added = max(show.added_at, self.added_at())
            premiere = date(air_year, 9, 1) + timedelta(days=rng.randrange(60))
            length = min(rng.randint(*kind.episodes_per_season), budget - len(all_episodes))
            episodes: list[int] = []
            for number in range(1, length + 1):
                aired = premiere + timedelta(weeks=number - 1)
                if season_number == 1 and number == 1:
                    title = "Pilot"
                elif rng.random() < 0.03:
                    title = f"Le Dernier Été {number}"
                else:
                    title = f"The {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
                actors = show.actors
                if rng.random() < 0.2:
                    actors = (*actors, rng.choice(cast_pool))
                resolution = primary_resolution
                if rng.random() < 0.15:
                    resolution = rng.choices(RESOLUTIONS, RESOLUTION_WEIGHTS)[0]
                low, high = kind.minutes
                episode = Item(
                    rating_key=self.key(),
                    type="episode",
                    section_key=SHOWS_SECTION_KEY,
                    title=title,
                    title_sort=title_sort_of(title),
                    year=aired.year,
                    originally_available_at=aired.isoformat(),
                    added_at=min(self.anchor, season_added + number * 3600),
                    updated_at=season_added,
                    summary=f"Episode {number} of season {season_number}.",
                    content_rating=show.content_rating,
                    audience_rating=round(min(10.0, max(1.0, rng.gauss(7.0, 1.0))), 1)
                    if rng.random() < 0.8
                    else None,
                    rating=round(min(10.0, max(1.0, rng.gauss(6.8, 1.3))), 1)
                    if rng.random() < 0.5
                    else None,
                    duration_ms=rng.randint(low * 60, high * 60) * 1000,
                    directors=(rng.choice(show_directors),),
                    writers=(rng.choice(show_directors),),
                    actors=actors,
                    show_rating_key=show.rating_key,
                    parent_rating_key=season.rating_key,
                    index=number,
                    parent_index=season_number,
                    duplicate=rng.random() < 0.003,
                )
                self.media(episode, resolution)
                self.items[episode.rating_key] = episode
                episodes.append(episode.rating_key)
            season.leaf_count = len(episodes)
            self.children[season.rating_key] = episodes
            all_episodes.extend(episodes)
        self.children[show.rating_key] = seasons
        self.leaves[show.rating_key] = all_episodes
        self.episode_keys.extend(all_episodes)

    def aggregate_show(self, show: Item) -> None:
        episodes = [self.items[key] for key in self.leaves[show.rating_key]]
        show.child_count = len(self.children[show.rating_key])
        show.leaf_count = len(episodes)
        show.viewed_leaf_count = sum(1 for e in episodes if e.view_count)
        show.view_count = sum(e.view_count for e in episodes)
        viewed = [e.last_viewed_at for e in episodes if e.last_viewed_at is not None]
        show.last_viewed_at = max(viewed) if viewed else None
        show.directors = tuple(dict.fromkeys(d for e in episodes for d in e.directors))
        show.writers = tuple(dict.fromkeys(w for e in episodes for w in e.writers))
        for season_key in self.children[show.rating_key]:
            season = self.items[season_key]
            season.viewed_leaf_count = sum(
                1 for key in self.children[season_key] if self.items[key].view_count
            )

    def build_collections(self) -> None:
        rng = self.rng
        movie_titles = ["Emu Classics"]
        count = min(40, max(2, len(self.movie_keys) // 120))
        while len(movie_titles) < count:
            name = rng.choice(
                (f"The {rng.choice(NOUNS)} Saga", f"{rng.choice(ADJECTIVES)} Classics")
            )
            if name not in movie_titles:
                movie_titles.append(name)
        show_titles = ["Emu Originals", "Saturday Morning", "Prestige Drama"]
        show_titles = show_titles[: max(1, min(3, len(self.show_keys) // 3))]
        self.tags.register("collection", movie_titles + show_titles)
        plans = [(t, MOVIES_SECTION_KEY, self.movie_keys, (3, 15)) for t in movie_titles]
        plans += [(t, SHOWS_SECTION_KEY, self.show_keys, (1, 6)) for t in show_titles]
        for title, section_key, pool, (low, high) in plans:
            members = sorted(rng.sample(pool, min(len(pool), rng.randint(low, high))))
            for member in members:
                item = self.items[member]
                item.collections = (*item.collections, title)
            tag_id = self.tags.id_of("collection", title)
            assert tag_id is not None  # registered just above
            record = CollectionRecord(
                rating_key=self.key(),
                tag_id=tag_id,
                title=title,
                section_key=section_key,
                subtype="movie" if section_key == MOVIES_SECTION_KEY else "show",
                members=tuple(members),
                added_at=self.added_at(),
            )
            self.collections[record.rating_key] = record

    def build_playlists(self) -> None:
        rng = self.rng
        friday = rng.sample(self.movie_keys, min(len(self.movie_keys), 6))
        binge = self.leaves[self.show_keys[0]][:5] + rng.sample(
            self.movie_keys, min(len(self.movie_keys), 2)
        )
        for title, keys in (("Friday Night", friday), ("Binge Queue", binge)):
            playlist = Playlist(self.key(), title, tuple(keys), self.added_at())
            self.playlists[playlist.rating_key] = playlist

    def finish(self) -> EmulatedLibrary:
        sections = (
            Section(MOVIES_SECTION_KEY, "Movies", "movie", SECTION_PATHS[1], _uuid(self.seed, 1)),
            Section(SHOWS_SECTION_KEY, "TV Shows", "show", SECTION_PATHS[2], _uuid(self.seed, 2)),
        )
        items = self.items
        shows = sorted((items[k] for k in self.show_keys), key=_title_order)
        show_rank = {show.rating_key: rank for rank, show in enumerate(shows)}

        def episode_order(item: Item) -> tuple[int, int, int, int]:
            assert item.show_rating_key is not None  # every episode has a show
            return (
                show_rank[item.show_rating_key],
                item.parent_index or 0,
                item.index or 0,
                item.rating_key,
            )

        seasons = [items[k] for show in shows for k in self.children[show.rating_key]]
        by_section_type = {
            (MOVIES_SECTION_KEY, "movie"): sorted(
                (items[k] for k in self.movie_keys), key=_title_order
            ),
            (SHOWS_SECTION_KEY, "show"): shows,
            (SHOWS_SECTION_KEY, "season"): seasons,
            (SHOWS_SECTION_KEY, "episode"): sorted(
                (items[k] for k in self.episode_keys), key=episode_order
            ),
        }
        return EmulatedLibrary(
            seed=self.seed,
            anchor=self.anchor,
            sections=sections,
            items=items,
            tags=self.tags,
            collections=self.collections,
            playlists=self.playlists,
            by_section_type=by_section_type,
            children=self.children,
            leaves=self.leaves,
        )


def _title_order(item: Item) -> tuple[str, int]:
    return (item.sort_title, item.rating_key)


def _uuid(seed: int, section_key: int) -> str:
    digits = f"{seed & 0xFFFFFFFF:08x}{section_key:024x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:32]}"
