"""Render library records as the XML a Plex Media Server sends.

Reference: docs/reference/plex-emulator.md §3 (sections and gotchas "GN" cited below).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from airwave_dagster.emulators.plex.dataset import (
    CollectionRecord,
    EmulatedLibrary,
    Item,
    Playlist,
    Section,
    audio_of,
    dovi_profile_of,
    tagline_of,
)
from airwave_dagster.emulators.plex.vocabulary import (
    FIELDS,
    OPERATORS,
    SORTS,
    TYPE_NUMBERS,
    section_types,
)

XML_HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n'
MACHINE_ID = "emu0000000000000000000000000000000000001"
SERVER_VERSION = "1.41.3.9314-a0bfb8370"
LIBRARY_ID = "com.plexapp.plugins.library"

LISTING_TAG_LIMITS = {
    "Genre": 2,
    "Director": 1,
    "Writer": 1,
    "Producer": 0,
    "Role": 3,
    "Country": 1,
    "Collection": 2,
}
"""How many tags of each kind real PMS keeps in listings (G10), unless listings are full.

Real servers cut every listing (`/all`, `/children`, `/allLeaves`, collection children) to the
first few tags of each kind; only `/library/metadata/{ids}` carries the full lists (issue 22;
python-plexapi documents the same in `PlexPartialObject` and reloads on attribute access).
"""

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;"})


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """Per-request switches that change how items are written."""

    full: bool = False
    truncate_tags: bool = True
    include_streams: bool = False
    exclude_elements: frozenset[str] = frozenset()
    """Child elements left out of every item (`excludeElements`): `Media` takes its parts and
    streams with it, a tag kind (`Genre`, `Role`…) all its tags."""
    exclude_fields: frozenset[str] = frozenset()
    """Attributes left out of every item (`excludeFields`), `summary` and `tagline` typically."""


def escape(value: object) -> str:
    """Escape a value for a double-quoted XML attribute."""
    return str(value).translate(_ESCAPES)


def attributes(pairs: Iterable[tuple[str, object]]) -> str:
    """` name="value"` for every pair whose value is not None."""
    return "".join(f' {name}="{escape(value)}"' for name, value in pairs if value is not None)


def container(children: Iterable[str], *, size: int | None = None, **extra: object) -> str:
    """A whole response document: the XML declaration and one MediaContainer."""
    body = "".join(children)
    pairs: list[tuple[str, object]] = []
    if size is not None:
        pairs.append(("size", size))
    pairs.extend(extra.items())
    return f"{XML_HEADER}<MediaContainer{attributes(pairs)}>{body}</MediaContainer>"


def _kept(pairs: list[tuple[str, object]], options: RenderOptions) -> list[tuple[str, object]]:
    """The attributes `excludeFields` did not ask to leave out."""
    if not options.exclude_fields:
        return pairs
    return [(name, value) for name, value in pairs if name not in options.exclude_fields]


def _number(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


class Renderer:
    """Writes items, sections, collections, playlists and the filter vocabulary as XML."""

    def __init__(self, library: EmulatedLibrary, missing: frozenset[str] = frozenset()) -> None:
        self.library = library
        self.missing = missing
        self._meta: dict[tuple[int, bool], str] = {}

    def section_attrs(self, item_section: int) -> list[tuple[str, object]]:
        section = self.library.section(item_section)
        return [
            ("librarySectionID", item_section),
            ("librarySectionKey", f"/library/sections/{item_section}"),
            ("librarySectionTitle", section.title if section else None),
        ]

    def item(
        self, item: Item, options: RenderOptions, extra: Iterable[tuple[str, object]] = ()
    ) -> str:
        """One movie, show, season or episode element."""
        if item.type in ("movie", "episode"):
            return self._video(item, options, extra)
        if item.type == "show":
            return self._show(item, options, extra)
        return self._season(item, extra)

    def _common(self, item: Item) -> list[tuple[str, object]]:
        return [
            ("ratingKey", item.rating_key),
            ("key", f"/library/metadata/{item.rating_key}"),
            ("guid", f"plex://{item.type}/emu{item.rating_key}"),
            ("type", item.type),
            ("title", item.title),
            ("titleSort", item.title_sort),
        ]

    def _watch(self, item: Item) -> list[tuple[str, object]]:
        return [
            ("viewCount", item.view_count or None),
            ("viewOffset", item.view_offset or None),
            ("lastViewedAt", item.last_viewed_at),
        ]

    def _video(
        self, item: Item, options: RenderOptions, extra: Iterable[tuple[str, object]]
    ) -> str:
        pairs = self._common(item)
        show_key = item.show_rating_key if item.type == "episode" else item.rating_key
        pairs += [
            ("summary", item.summary),
            ("tagline", tagline_of(item) if item.type == "movie" else None),
            ("thumb", f"/library/metadata/{item.rating_key}/thumb/{item.updated_at}"),
            ("art", f"/library/metadata/{show_key}/art/{item.updated_at}"),
            ("year", item.year),
            ("duration", item.duration_ms),
            ("originallyAvailableAt", item.originally_available_at),
            ("addedAt", item.added_at),
            ("updatedAt", item.updated_at),
            ("contentRating", item.content_rating),
            ("rating", _number(item.rating)),
            ("audienceRating", _number(item.audience_rating)),
            ("userRating", _number(item.user_rating)),
        ]
        if item.type == "movie":
            pairs += [("studio", item.studio), ("editionTitle", item.edition_title)]
        else:
            show = self.library.items[item.show_rating_key or 0]
            pairs += [
                ("index", item.index),
                ("parentIndex", item.parent_index),
                ("parentRatingKey", item.parent_rating_key),
                ("parentKey", f"/library/metadata/{item.parent_rating_key}"),
                ("parentTitle", f"Season {item.parent_index}"),
                ("grandparentRatingKey", show.rating_key),
                ("grandparentKey", f"/library/metadata/{show.rating_key}"),
                ("grandparentTitle", show.title),
            ]
        pairs += self._watch(item)
        pairs += self.section_attrs(item.section_key)
        pairs += list(extra)
        body = self._media(item, options) + self._tags(item, options)
        return f"<Video{attributes(_kept(pairs, options))}>{body}</Video>"

    def _media(self, item: Item, options: RenderOptions) -> str:
        if item.resolution is None or "Media" in options.exclude_elements:
            return ""
        media_id = item.rating_key * 10
        part_id = media_id * 10
        path = self.file_path(item)
        media = attributes(
            [
                ("id", media_id),
                ("duration", item.duration_ms),
                ("bitrate", item.bitrate),
                ("width", item.width),
                ("height", item.height),
                ("videoResolution", item.resolution),
                ("videoCodec", item.video_codec),
                ("videoProfile", "main 10" if item.hdr else "main"),
                ("audioCodec", audio_of(item)[0]),
                ("audioChannels", audio_of(item)[1]),
                ("container", "mkv"),
            ]
        )
        part = attributes(
            [
                ("id", part_id),
                ("key", f"/library/parts/{part_id}/{item.updated_at}/file.mkv"),
                ("duration", item.duration_ms),
                ("file", path),
                ("size", (item.bitrate or 1000) * item.duration_ms // 8),
                ("container", "mkv"),
            ]
        )
        streams = self._streams(item, part_id) if options.full or options.include_streams else ""
        return f"<Media{media}><Part{part}>{streams}</Part></Media>"

    def _streams(self, item: Item, part_id: int) -> str:
        video = [
            ("id", part_id * 10),
            ("streamType", 1),
            ("codec", item.video_codec),
            ("height", item.height),
            ("width", item.width),
            ("bitDepth", 10 if item.hdr else 8),
        ]
        if item.hdr == "HDR10":
            video.append(("colorTrc", "smpte2084"))
        elif item.hdr == "HLG":
            video.append(("colorTrc", "arib-std-b67"))
        elif item.hdr == "Dolby Vision":
            profile, compat = dovi_profile_of(item)
            video += [
                ("colorTrc", "smpte2084"),
                ("DOVIPresent", 1),
                ("DOVIProfile", profile),
                ("DOVILevel", 6),
                ("DOVIBLCompatID", compat),
            ]
        parts = [f"<Stream{attributes(video)}/>"]
        codec, channels, dynamic = audio_of(item)
        for offset, language in enumerate(item.audio_languages, start=1):
            audio = [("id", part_id * 10 + offset), ("streamType", 2), ("codec", codec)]
            audio += [("languageCode", language), ("channels", channels)]
            layout = {2: "2.0", 6: "5.1", 8: "7.1"}[channels]
            label = f"{codec.upper()}{' ' + dynamic if dynamic else ''} {layout}"
            audio += [("displayTitle", f"{language.title()} ({label})")]
            parts.append(f"<Stream{attributes(audio)}/>")
        for offset, language in enumerate(item.subtitle_languages, start=10):
            subtitle = [("id", part_id * 10 + offset), ("streamType", 3), ("codec", "srt")]
            subtitle.append(("languageCode", language))
            parts.append(f"<Stream{attributes(subtitle)}/>")
        return "".join(parts)

    def file_path(self, item: Item) -> str:
        """Where the item's file would live on the server."""
        if item.type == "movie":
            stem = f"{item.title} ({item.year})"
            return f"/data/movies/{stem}/{stem}.mkv"
        show = self.library.items[item.show_rating_key or 0]
        season = item.parent_index or 0
        return (
            f"/data/tv/{show.title}/Season {season:02d}/"
            f"{show.title} - s{season:02d}e{item.index or 0:02d}.mkv"
        )

    def _tags(self, item: Item, options: RenderOptions) -> str:
        groups = [
            ("Genre", "genre", item.genres),
            ("Director", "director", item.directors),
            ("Writer", "writer", item.writers),
            ("Producer", "producer", item.producers),
            ("Role", "actor", item.actors),
            ("Country", "country", item.countries),
            ("Label", "label", item.labels),
            ("Collection", "collection", item.collections),
        ]
        if item.type == "show":
            # Show rows carry aggregated director/writer sets for filtering, not as tags.
            groups = [g for g in groups if g[0] not in ("Director", "Writer")]
        tags = self.library.tags
        out: list[str] = []
        for element, kind, names in groups:
            if element in options.exclude_elements:
                continue
            if options.truncate_tags and not options.full:
                names = names[: LISTING_TAG_LIMITS.get(element, len(names))]
            for name in names:
                tag_id = tags.id_of(kind, name)
                pairs = [("id", tag_id), ("tag", name), ("filter", f"{kind}={tag_id}")]
                out.append(f"<{element}{attributes(pairs)}/>")
        return "".join(out)

    def _show(self, item: Item, options: RenderOptions, extra: Iterable[tuple[str, object]]) -> str:
        pairs = self._common(item)
        pairs[1] = ("key", f"/library/metadata/{item.rating_key}/children")
        pairs += [
            ("summary", item.summary),
            ("thumb", f"/library/metadata/{item.rating_key}/thumb/{item.updated_at}"),
            ("art", f"/library/metadata/{item.rating_key}/art/{item.updated_at}"),
            ("studio", item.studio),
            ("network", item.network),
            ("contentRating", item.content_rating),
            ("year", item.year),
            ("originallyAvailableAt", item.originally_available_at),
            ("duration", item.duration_ms),
            ("rating", _number(item.rating)),
            ("audienceRating", _number(item.audience_rating)),
            ("userRating", _number(item.user_rating)),
            ("childCount", item.child_count),
            ("leafCount", item.leaf_count),
            ("viewedLeafCount", item.viewed_leaf_count),
            ("addedAt", item.added_at),
            ("updatedAt", item.updated_at),
        ]
        pairs += self._watch(item)
        pairs += self.section_attrs(item.section_key)
        pairs += list(extra)
        kept = attributes(_kept(pairs, options))
        return f"<Directory{kept}>{self._tags(item, options)}</Directory>"

    def _season(self, item: Item, extra: Iterable[tuple[str, object]]) -> str:
        show = self.library.items[item.show_rating_key or 0]
        pairs = self._common(item)
        pairs[1] = ("key", f"/library/metadata/{item.rating_key}/children")
        pairs += [
            ("index", item.index),
            ("year", item.year),
            ("parentRatingKey", show.rating_key),
            ("parentKey", f"/library/metadata/{show.rating_key}"),
            ("parentTitle", show.title),
            ("parentIndex", 1),
            ("leafCount", item.leaf_count),
            ("viewedLeafCount", item.viewed_leaf_count),
            ("addedAt", item.added_at),
        ]
        pairs += self.section_attrs(item.section_key)
        pairs += list(extra)
        return f"<Directory{attributes(pairs)}/>"

    def collection(self, record: CollectionRecord) -> str:
        """A collection element; its key points at the children endpoint (G16)."""
        members = [self.library.items[key] for key in record.members]
        years = [m.year for m in members if m.year is not None]
        pairs = [
            ("ratingKey", record.rating_key),
            ("key", f"/library/collections/{record.rating_key}/children"),
            ("guid", f"collection://emu{record.rating_key}"),
            ("type", "collection"),
            ("title", record.title),
            ("titleSort", record.title),
            ("subtype", record.subtype),
            ("childCount", len(members)),
            ("smart", 0),
            ("index", record.tag_id),
            ("minYear", min(years) if years else None),
            ("maxYear", max(years) if years else None),
            ("addedAt", record.added_at),
            ("updatedAt", record.added_at),
            *self.section_attrs(record.section_key),
        ]
        return f"<Directory{attributes(pairs)}/>"

    def playlist(self, playlist: Playlist) -> str:
        """A playlist element; its key points at the items endpoint (G16)."""
        duration = sum(self.library.items[key].duration_ms for key in playlist.items)
        pairs = [
            ("ratingKey", playlist.rating_key),
            ("key", f"/playlists/{playlist.rating_key}/items"),
            ("guid", f"com.plexapp.agents.none://emu{playlist.rating_key}"),
            ("type", "playlist"),
            ("title", playlist.title),
            ("playlistType", "video"),
            ("smart", 0),
            ("leafCount", len(playlist.items)),
            ("duration", duration),
            ("addedAt", playlist.added_at),
            ("updatedAt", playlist.added_at),
        ]
        return f"<Playlist{attributes(pairs)}/>"

    def section(self, section: Section) -> str:
        """A `<Directory>` of `/library/sections`, with its one location."""
        pairs = [
            ("key", section.key),
            ("type", section.type),
            ("title", section.title),
            ("agent", f"tv.plex.agents.{section.type}.emulated"),
            ("scanner", "Plex Movie" if section.type == "movie" else "Plex TV Series"),
            ("language", "en-US"),
            ("uuid", section.uuid),
            ("filters", 1),
            ("refreshing", 0),
            ("allowSync", 1),
            ("createdAt", self.library.anchor - 4 * 365 * 86400),
            ("updatedAt", self.library.anchor),
        ]
        location = attributes([("id", section.key), ("path", section.path)])
        return f"<Directory{attributes(pairs)}><Location{location}/></Directory>"

    def meta(self, section: Section, collections: bool) -> str:
        """The `<Meta>` filter vocabulary of a section's `/all` or `/collections` (§3.9)."""
        cache_key = (section.key, collections)
        if cache_key not in self._meta:
            self._meta[cache_key] = self._build_meta(section, collections)
        return self._meta[cache_key]

    def _build_meta(self, section: Section, collections: bool) -> str:
        base = f"/library/sections/{section.key}"
        types: list[str] = []
        item_types = ("collection",) if collections else section_types(section.type)
        for index, item_type in enumerate(item_types):
            number = TYPE_NUMBERS[item_type]
            prefix = "" if section.type == "movie" or item_type == "collection" else f"{item_type}."
            query = "" if section.type == "movie" else f"?type={number}"
            children: list[str] = []
            fields = FIELDS[item_type] if item_type != "season" else {}
            for definition in fields.values():
                if definition.choices and definition.key not in self.missing:
                    pairs: list[tuple[str, object]] = [
                        ("filter", definition.key),
                        ("filterType", definition.type),
                        ("key", f"{base}/{definition.key}{query}"),
                        ("title", definition.title),
                        ("type", "filter"),
                    ]
                    children.append(f"<Filter{attributes(pairs)}/>")
            for position, sort in enumerate(SORTS[item_type].values()):
                pairs = [
                    ("key", sort.key),
                    ("defaultDirection", sort.default_direction),
                    ("descKey", f"{sort.key}:desc"),
                    ("title", sort.title),
                    ("active", 1 if position == 0 else None),
                    ("activeDirection", sort.default_direction if position == 0 else None),
                    ("default", sort.default_direction if position == 0 else None),
                ]
                children.append(f"<Sort{attributes(pairs)}/>")
            for definition in FIELDS[item_type].values():
                if definition.key in self.missing:
                    continue
                pairs = [
                    ("key", f"{prefix}{definition.key}"),
                    ("title", definition.title),
                    ("type", definition.type),
                    ("subType", "year" if definition.key == "year" else None),
                ]
                children.append(f"<Field{attributes(pairs)}/>")
            type_pairs = [
                ("key", f"{base}/all?type={number}"),
                ("type", item_type),
                ("title", item_type.capitalize()),
                ("active", 1 if index == 0 else 0),
            ]
            types.append(f"<Type{attributes(type_pairs)}>{''.join(children)}</Type>")
        if not collections:
            folder = [("key", f"{base}/folder"), ("type", "folder"), ("title", "Folders")]
            types.append(f"<Type{attributes([*folder, ('active', 0)])}/>")
        field_types = []
        for field_type, operators in OPERATORS.items():
            ops = "".join(
                f"<Operator{attributes([('key', key), ('title', title)])}/>"
                for key, title in operators
            )
            field_types.append(f'<FieldType type="{field_type}">{ops}</FieldType>')
        return f"<Meta>{''.join(types)}{''.join(field_types)}</Meta>"
