"""The emulator's filter vocabulary: fields, filters and sorts per item type, and how to read them.

One table drives three things so they cannot drift apart: the `<Meta>` block plexapi validates
against, the filter engine that evaluates search terms, and the filter-choice endpoints.

Reference: docs/reference/plex-emulator.md (the gotchas "GN" cited below).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Any

from airwave_dagster.emulators.plex.dataset import SECTION_PATHS, EmulatedLibrary, Item

Getter = Callable[[EmulatedLibrary, Item], Any]
"""Reads one value of an item; the value's type depends on the field (see `FieldDef.get`)."""

TYPE_NUMBERS = {"movie": 1, "show": 2, "season": 3, "episode": 4, "collection": 18}
TYPE_NAMES = {number: name for name, number in TYPE_NUMBERS.items()}

TAG_TYPES = frozenset({"tag", "resolution", "audioLanguage", "subtitleLanguage"})
"""Field types whose values are lists compared with is / is not."""

OPERATORS: dict[str, tuple[tuple[str, str], ...]] = {
    "tag": (("=", "is"), ("!=", "is not")),
    "integer": (
        ("=", "is"),
        ("!=", "is not"),
        (">>=", "is greater than"),
        ("<<=", "is less than"),
        (">=", "is greater than or equal to"),
        ("<=", "is less than or equal to"),
    ),
    "string": (
        ("=", "contains"),
        ("!=", "does not contain"),
        ("==", "is"),
        ("!==", "is not"),
        ("<=", "begins with"),
        (">=", "ends with"),
    ),
    "boolean": (("=", "is true"), ("!=", "is false")),
    "date": (
        ("<<=", "is before"),
        (">>=", "is after"),
        ("<=", "is on or before"),
        (">=", "is on or after"),
        ("=", "is"),
        ("!=", "is not"),
    ),
    "resolution": (("=", "is"),),
    "audioLanguage": (("=", "is"), ("!=", "is not")),
    "subtitleLanguage": (("=", "is"), ("!=", "is not")),
}
"""Operators per field type, as Plex's published API notes list them: strict `>>=` / `<<=` and
inclusive `>=` / `<=` on numbers and dates, `=` / `!=` on dates (the whole day), relative dates
such as `-30d` or, without a unit, `-2592000` seconds."""

RESOLUTION_TITLES = {"4k": "4K", "1080": "1080p", "720": "720p", "480": "480p", "sd": "SD"}


@dataclass(frozen=True, slots=True)
class FieldDef:
    """One filterable field of one item type.

    Attributes:
        key: The unprefixed Plex name (`genre`, `originallyAvailableAt`).
        type: The Plex field type, which selects the operators.
        title: Human label, as Plex Web shows it.
        get: Reads the value: a tuple of titles for list types, a scalar otherwise (dates as
            epoch seconds), None when absent.
        tag_kind: The tag registry kind when filter values may be numeric tag ids.
        choices: Whether the field has a filter-choice endpoint (and a `<Filter>` in the Meta).
    """

    key: str
    type: str
    title: str
    get: Getter
    tag_kind: str | None = None
    choices: bool = False


@dataclass(frozen=True, slots=True)
class SortDef:
    """One sort key of one item type; `get` returns a comparable value or None (sorted last)."""

    key: str
    title: str
    default_direction: str
    get: Getter


@lru_cache(maxsize=65536)
def local_midnight(day: str) -> int:
    """Epoch seconds of local midnight on a `YYYY-MM-DD` day, as plexapi encodes dates."""
    return int(time.mktime(date.fromisoformat(day).timetuple()))


def _day(value: str | None) -> int | None:
    return None if value is None else local_midnight(value)


def _tags(attribute: str, kind: str, title: str) -> FieldDef:
    def get(_: EmulatedLibrary, item: Item) -> Any:
        return getattr(item, attribute)

    return FieldDef(kind, "tag", title, get, tag_kind=kind, choices=True)


def _scalar(
    key: str, field_type: str, title: str, get: Getter, *, choices: bool = False
) -> FieldDef:
    return FieldDef(key, field_type, title, get, choices=choices)


def _one(value: str | None) -> tuple[str, ...]:
    return () if value is None else (value,)


def _location(_: EmulatedLibrary, item: Item) -> Any:
    return (SECTION_PATHS[item.section_key],)


TITLE = _scalar("title", "string", "Title", lambda _, i: i.title)
SUMMARY = _scalar("summary", "string", "Summary", lambda _, i: i.summary)
STUDIO = _scalar("studio", "string", "Studio", lambda _, i: i.studio, choices=True)
EDITION = _scalar("editionTitle", "string", "Edition", lambda _, i: i.edition_title, choices=True)
GENRE = _tags("genres", "genre", "Genre")
COLLECTION = _tags("collections", "collection", "Collection")
LABEL = _tags("labels", "label", "Label")
DIRECTOR = _tags("directors", "director", "Director")
WRITER = _tags("writers", "writer", "Writer")
PRODUCER = _tags("producers", "producer", "Producer")
ACTOR = _tags("actors", "actor", "Actor")
COUNTRY = _tags("countries", "country", "Country")
NETWORK = FieldDef(
    "network", "tag", "Network", lambda _, i: _one(i.network), tag_kind="network", choices=True
)
LOCATION = FieldDef(
    "location", "tag", "Folder Location", _location, tag_kind="location", choices=True
)
CONTENT_RATING = FieldDef(
    "contentRating", "tag", "Content Rating", lambda _, i: _one(i.content_rating), choices=True
)
RESOLUTION = FieldDef(
    "resolution", "resolution", "Resolution", lambda _, i: _one(i.resolution), choices=True
)
AUDIO_LANGUAGE = FieldDef(
    "audioLanguage", "audioLanguage", "Audio Language", lambda _, i: i.audio_languages, choices=True
)
SUBTITLE_LANGUAGE = FieldDef(
    "subtitleLanguage",
    "subtitleLanguage",
    "Subtitle Language",
    lambda _, i: i.subtitle_languages,
    choices=True,
)
YEAR = _scalar("year", "integer", "Year", lambda _, i: i.year, choices=True)
DECADE = _scalar("decade", "integer", "Decade", lambda _, i: i.decade, choices=True)
DURATION = _scalar("duration", "integer", "Duration", lambda _, i: i.duration_ms)
VIEW_COUNT = _scalar("viewCount", "integer", "Plays", lambda _, i: i.view_count)
USER_RATING = _scalar("userRating", "integer", "User Rating", lambda _, i: i.user_rating)
AUDIENCE_RATING = _scalar(
    "audienceRating", "integer", "Audience Rating", lambda _, i: i.audience_rating
)
CRITIC_RATING = _scalar("rating", "integer", "Critic Rating", lambda _, i: i.rating)
CONTENT_RATING_AGE = _scalar(
    "contentRatingAge", "integer", "Content Rating Age", lambda _, i: i.content_rating_age
)
VIEW_OFFSET = _scalar("viewOffset", "integer", "View Offset", lambda _, i: i.view_offset)
RATING_KEY = _scalar("id", "integer", "Rating Key", lambda _, i: i.rating_key)
INDEX = _scalar("index", "integer", "Number", lambda _, i: i.index)
RELEASED = _scalar(
    "originallyAvailableAt",
    "date",
    "Release Date",
    lambda _, i: _day(i.originally_available_at),
)
ADDED = _scalar("addedAt", "date", "Date Added", lambda _, i: i.added_at)
UPDATED = _scalar("updatedAt", "date", "Date Updated", lambda _, i: i.updated_at)
VIEWED = _scalar("lastViewedAt", "date", "Last Played", lambda _, i: i.last_viewed_at)
UNWATCHED = _scalar("unwatched", "boolean", "Unplayed", lambda _, i: i.unwatched)
IN_PROGRESS = _scalar("inProgress", "boolean", "In Progress", lambda _, i: i.in_progress)
HDR = _scalar("hdr", "boolean", "HDR", lambda _, i: i.hdr is not None)
DOVI = _scalar("dovi", "boolean", "Dolby Vision", lambda _, i: i.dovi)
UNMATCHED = _scalar("unmatched", "boolean", "Unmatched", lambda _, i: i.unmatched)
DUPLICATE = _scalar("duplicate", "boolean", "Duplicate", lambda _, i: i.duplicate)
TRASH = _scalar("trash", "boolean", "In Trash", lambda _, i: i.trash)
UNWATCHED_LEAVES = _scalar(
    "unwatchedLeaves",
    "boolean",
    "Unplayed Episodes",
    lambda _, i: i.viewed_leaf_count < i.leaf_count,
)

FIELDS: dict[str, dict[str, FieldDef]] = {
    "movie": {
        f.key: f
        for f in (
            TITLE,
            STUDIO,
            EDITION,
            SUMMARY,
            GENRE,
            COLLECTION,
            LABEL,
            DIRECTOR,
            WRITER,
            PRODUCER,
            ACTOR,
            COUNTRY,
            CONTENT_RATING,
            RESOLUTION,
            AUDIO_LANGUAGE,
            SUBTITLE_LANGUAGE,
            YEAR,
            DECADE,
            DURATION,
            VIEW_COUNT,
            USER_RATING,
            AUDIENCE_RATING,
            CRITIC_RATING,
            VIEW_OFFSET,
            RATING_KEY,
            RELEASED,
            ADDED,
            UPDATED,
            VIEWED,
            UNWATCHED,
            IN_PROGRESS,
            HDR,
            DOVI,
            UNMATCHED,
            DUPLICATE,
            TRASH,
        )
    },
    "show": {
        f.key: f
        for f in (
            TITLE,
            STUDIO,
            NETWORK,
            EDITION,
            SUMMARY,
            GENRE,
            COLLECTION,
            LABEL,
            DIRECTOR,
            WRITER,
            PRODUCER,
            ACTOR,
            COUNTRY,
            CONTENT_RATING,
            YEAR,
            DECADE,
            VIEW_COUNT,
            USER_RATING,
            AUDIENCE_RATING,
            CRITIC_RATING,
            RATING_KEY,
            RELEASED,
            ADDED,
            UPDATED,
            VIEWED,
            UNWATCHED_LEAVES,
            UNMATCHED,
        )
    },
    "season": {f.key: f for f in (TITLE, YEAR, INDEX, RATING_KEY, ADDED, LABEL)},
    "episode": {
        f.key: f
        for f in (
            TITLE,
            SUMMARY,
            ACTOR,
            LABEL,
            CONTENT_RATING,
            RESOLUTION,
            AUDIO_LANGUAGE,
            SUBTITLE_LANGUAGE,
            YEAR,
            DECADE,
            DURATION,
            VIEW_COUNT,
            USER_RATING,
            AUDIENCE_RATING,
            CRITIC_RATING,
            VIEW_OFFSET,
            RATING_KEY,
            INDEX,
            RELEASED,
            ADDED,
            UPDATED,
            VIEWED,
            UNWATCHED,
            IN_PROGRESS,
            HDR,
            UNMATCHED,
            DUPLICATE,
            TRASH,
        )
    },
    "collection": {f.key: f for f in (TITLE, LABEL)},
}
"""Fields per item type, as real servers advertise them (issue 22, from captured `<Meta>` blocks).

In show sections the Meta lists them prefixed (`show.genre`). Real servers offer no
`episode.director`, `episode.writer`, `episode.dovi`, no `location` filter and no
`contentRatingAge`; `LOCATION` and `CONTENT_RATING_AGE` stay defined for a caller that builds its
own vocabulary, but no item type lists them.
"""

OPTIONAL_FIELDS = frozenset(
    {"hdr", "dovi", "audioLanguage", "subtitleLanguage", "editionTitle", "network", "label"}
)
"""Fields some servers lack (older releases, libraries without media analysis); the emulator's
`missing_fields` option removes any of them from the vocabulary and refuses them in searches."""


def _sort(key: str, title: str, direction: str, get: Getter) -> SortDef:
    return SortDef(key, title, direction, get)


def _casefold(value: str | None) -> str | None:
    return None if value is None else value.casefold()


def _shuffled(_: EmulatedLibrary, item: Item) -> Any:
    # A fixed permutation: "random" stays reproducible across requests and pages.
    return (item.rating_key * 2654435761) % 4294967296


TITLE_SORT = _sort("titleSort", "Title", "asc", lambda _, i: i.sort_title)
PLAYABLE_SORTS = (
    TITLE_SORT,
    _sort("year", "Year", "desc", lambda _, i: i.year),
    _sort("originallyAvailableAt", "Release Date", "desc", lambda _, i: i.originally_available_at),
    _sort("rating", "Critic Rating", "desc", lambda _, i: i.rating),
    _sort("audienceRating", "Audience Rating", "desc", lambda _, i: i.audience_rating),
    _sort("userRating", "Rating", "desc", lambda _, i: i.user_rating),
    _sort("contentRating", "Content Rating", "asc", lambda _, i: _casefold(i.content_rating)),
    _sort("duration", "Duration", "desc", lambda _, i: i.duration_ms),
    _sort("viewCount", "Plays", "desc", lambda _, i: i.view_count),
    _sort("addedAt", "Date Added", "desc", lambda _, i: i.added_at),
    _sort("lastViewedAt", "Date Viewed", "desc", lambda _, i: i.last_viewed_at),
    _sort("mediaHeight", "Resolution", "desc", lambda _, i: i.height),
    _sort("mediaBitrate", "Bitrate", "desc", lambda _, i: i.bitrate),
    _sort("random", "Randomly", "asc", _shuffled),
)
HIDDEN_SORTS = (
    _sort("id", "Rating Key", "asc", lambda _, i: i.rating_key),
    _sort("guid", "Guid", "asc", lambda _, i: i.rating_key),
    _sort("index", "Number", "asc", lambda _, i: i.index),
    _sort("title", "Title", "asc", lambda _, i: i.title.casefold()),
    _sort("summary", "Summary", "asc", lambda _, i: i.summary.casefold()),
    _sort("tagline", "Tagline", "asc", lambda _, i: None),
    _sort("updatedAt", "Date Updated", "desc", lambda _, i: i.updated_at),
)
"""Sorts plexapi adds on its own (or callers may send raw); accepted but not listed in the Meta."""

VIEW_OFFSET_SORT = _sort("viewOffset", "Progress", "desc", lambda _, i: i.view_offset or None)


def _latest_episode_added(library: EmulatedLibrary, item: Item) -> Any:
    added = [library.items[key].added_at for key in library.leaves.get(item.rating_key, [])]
    return max(added) if added else None


SHOW_ONLY_SORTS = (
    _sort(
        "unviewedLeafCount",
        "Unplayed Episodes",
        "desc",
        lambda _, i: i.leaf_count - i.viewed_leaf_count,
    ),
    _sort("episode.addedAt", "Last Episode Date Added", "desc", _latest_episode_added),
)

SORTS: dict[str, dict[str, SortDef]] = {
    "movie": {s.key: s for s in (*PLAYABLE_SORTS, VIEW_OFFSET_SORT)},
    "show": {
        **{
            s.key: s
            for s in PLAYABLE_SORTS
            if s.key not in ("duration", "mediaHeight", "mediaBitrate")
        },
        **{s.key: s for s in SHOW_ONLY_SORTS},
    },
    "season": {"titleSort": TITLE_SORT},
    "episode": {s.key: s for s in (*PLAYABLE_SORTS, VIEW_OFFSET_SORT) if s.key != "contentRating"},
    "collection": {"titleSort": TITLE_SORT},
}
"""Sorts per item type as real servers advertise them: episodes have no `contentRating` sort;
movies and episodes sort by `viewOffset`; shows by `unviewedLeafCount` and `episode.addedAt`."""

HIDDEN_SORTS_BY_KEY = {s.key: s for s in HIDDEN_SORTS}


def find_sort(item_type: str, key: str) -> SortDef | None:
    """The sort definition for a key of an item type, including the hidden extras."""
    return SORTS.get(item_type, {}).get(key) or HIDDEN_SORTS_BY_KEY.get(key)


def section_types(section_type: str) -> tuple[str, ...]:
    """The item types a section of this type contains, main type first."""
    return ("show", "season", "episode") if section_type == "show" else (section_type,)
