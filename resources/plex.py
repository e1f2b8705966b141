"""The Plex adapter: Airwave filters run as plexapi searches, results returned as domain items.

Reference: docs/reference/domain.md (the "§N" below) and docs/reference/plex-emulator.md (the
Plex gotchas "GN").
"""

from __future__ import annotations

import enum
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from xml.etree.ElementTree import Element, ParseError, tostring

import dagster as dg
from plexapi.exceptions import BadRequest, NotFound, PlexApiException, Unauthorized
from plexapi.library import FilterChoice, FilteringField, LibrarySection
from plexapi.server import PlexServer
from plexapi.utils import parseXMLString
from pydantic import Field, PrivateAttr

from airwave_dagster import tracing
from airwave_dagster.domain.filters import (
    ALLOWED_OPS,
    FIELDS,
    Condition,
    FieldSpec,
    FilterEnvelope,
    FilterNode,
    Group,
    LibraryFields,
    OfferedFields,
)
from airwave_dagster.domain.library import MEDIA_TYPES, ItemType, Library, MediaItem, MediaType
from airwave_dagster.domain.pools import combine_pools
from airwave_dagster.settings import PLEX_TOKEN_ENV, PLEX_URL_ENV

logger = logging.getLogger(__name__)

PAGE_SIZE = 2000
"""Items per search page. Pools are read to the end, page after page: no cap on their size."""

METADATA_BATCH = 200
"""Rating keys per `/library/metadata/{id,id,…}` request (about 1.4 kB of URL).

Listings (`/all`, `/children`, `/allLeaves`) carry only the first few tags of each kind per item
(about 2 genres, 1 director, 3 roles); an item's own metadata carries the full lists (issue 22).
Every resolved item therefore takes its tags from its metadata, read in batches of this size.
"""

LISTING_EXCLUDES = (
    "excludeElements=Media,Genre,Country,Guid,Rating,Collection,Director,Writer,Role,Producer,"
    "Label,Similar,Style,Mood,Format,Image,UltraBlurColors"
    "&excludeFields=summary,tagline,key,guid,titleSort,updatedAt,userRating,lastViewedAt,"
    "viewOffset,editionTitle,parentKey,parentRatingKey,parentTitle,grandparentKey,"
    "librarySectionID,librarySectionKey,librarySectionTitle,thumb,art,year,"
    "originallyAvailableAt,addedAt,contentRating,contentRatingAge,rating,ratingImage,"
    "audienceRating,audienceRatingImage,studio,index,parentIndex,grandparentTitle,viewCount,"
    "skipCount,originalTitle,chapterSource,primaryExtraKey,parentThumb,grandparentThumb,"
    "grandparentArt,grandparentTheme,theme,lastRatedAt,hasPremiumExtras,hasPremiumPrimaryExtra"
)
"""What a pool's listing asks Plex to leave out of every item: its tags, media, parts and
streams, and every attribute but the few a listed item holds (`ListedItem`: ratingKey, type,
title, duration, grandparentRatingKey). Plex Media Server's response options `excludeElements`
and `excludeFields` (python-plexapi sends the pair for a partial reload, `_EXCLUDES` in
plexapi/base.py); with `includeGuids=0` a listing carries a small fraction of the bytes to send
and parse. A pool needs no more: an item written to the database is completed from its own
metadata anyway (`PlexClient.complete`). A server that ignores the options sends the full
items, read the same way."""

PLAYABLE_LIBTYPE = {"movie": "movie", "show": "episode"}
"""What a library type resolves to: TV is always resolved at episode level."""

EPISODE_LEVEL_ON_SHOWS = frozenset(
    {"year", "decade", "director", "actor", "audienceRating", "criticRating"}
)
"""Fields the catalog queries at show level but the local evaluator reads from the episode.

A resolved episode carries its own year, directors, cast and ratings, so on show libraries these
fields are asked of the episode: the pool then equals what `evaluate` says about its items.
"""

LIST_FIELD_TYPES = frozenset({"tag", "resolution", "audioLanguage", "subtitleLanguage"})
"""Plex field types whose filter values are choices (a tag id, a resolution key, a language)."""

MATCH_CHOICE_BY_KEY = frozenset({"resolution", "audioLanguage", "subtitleLanguage"})
"""List types whose item values are the choice keys ('1080', 'eng'); tags match by title."""

HDR_TRANSFERS = {"smpte2084": "HDR10", "arib-std-b67": "HLG"}
"""Video transfer characteristics that mean HDR (Dolby Vision is flagged separately)."""

_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_STATUS = re.compile(r"^\((\d{3})\)")
_VOCABULARY = re.compile(
    r"/|/library|/library/sections/?"
    r"|/library/sections/\d+/(?:all|collections)\?includeMeta=1&.*"
    r"|/library/sections/\d+/(?!all\b|collections\b)\w+(?:\?.*)?"
)
"""What plexapi reads to learn the server: its identity, the section list, each section's filter
and sort vocabulary (`includeMeta`) and the choices of a filter field. Searches and metadata
never match."""

Filters = dict[str, Any]
"""A plexapi advanced-search `filters=` dict: `{"and"|"or": [...]}` or one `{field: value}`."""


class PlexError(Exception):
    """Plex could not answer a request (base of the adapter's errors)."""


class PlexUnavailableError(PlexError):
    """Plex could not be reached, timed out, or answered with a server error (5xx)."""


class PlexAuthError(PlexError):
    """Plex refused the token (401)."""


class _VocabularyServer(PlexServer):
    """plexapi's server, answering vocabulary reads from what this run already read.

    Every read `_VOCABULARY` matches is kept as text in `known` (by path and paging headers) and
    answered from there the next time, so a step given the plan step's `known` asks Plex only
    for its searches and item metadata. Anything else goes to Plex as plexapi sends it.
    """

    def __init__(
        self, baseurl: str, token: str, *, session: Any, timeout: float, known: dict[str, str]
    ):
        self._known = known  # before plexapi's own __init__, which reads '/'
        super().__init__(baseurl, token, session=session, timeout=timeout)

    def query(
        self,
        key: str,
        method: Any = None,
        headers: dict[str, str] | None = None,
        params: Any = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Element | None:
        """`PlexServer.query`, from `known` for a vocabulary read seen before."""
        if method is not None or params is not None or kwargs or not _VOCABULARY.fullmatch(key):
            return super().query(
                key, method=method, headers=headers, params=params, timeout=timeout, **kwargs
            )
        cache_key = "|".join([key, *(f"{k}={v}" for k, v in sorted((headers or {}).items()))])
        if cache_key in self._known:
            text = self._known[cache_key]
            return parseXMLString(text) if text else None
        data = super().query(key, headers=headers, timeout=timeout)
        self._known[cache_key] = "" if data is None else tostring(data, encoding="unicode")
        return data


class _Match(enum.Enum):
    """A translated condition that needs no Plex term: it matches everything or nothing."""

    ALL = "all"
    NONE = "none"


Translated = Filters | _Match


@dataclass(frozen=True, slots=True)
class _ShowFacts:
    """What an episode inherits from its show (plexapi episodes carry no studio or genres, G12)."""

    studio: str | None
    network: str | None
    genres: tuple[str, ...]
    content_rating: str | None


@dataclass(frozen=True, slots=True)
class ListedItem:
    """A pool member as its library's listing names it: what a pool and a schedule read.

    Building a `MediaItem` per listed item (validated, every attribute converted) cost more than
    the listing's HTTP exchange and parse together, for pools of hundreds of which a window plays
    a few dozen. A listed item keeps its element, so `PlexClient.complete` can still fall back
    to what the listing said for an item that vanished before it was completed.
    """

    rating_key: str
    type: ItemType
    title: str
    duration_ms: int
    library_key: str
    show_rating_key: str | None
    element: Element = field(repr=False, compare=False)

    @classmethod
    def of(cls, element: Element, library_key: str) -> ListedItem:
        """The `<Video>` element of a listing, read as `_item` reads it."""
        a = element.attrib
        episode = a.get("type") == "episode"
        show_key = _int(a.get("grandparentRatingKey")) if episode else None
        return cls(
            rating_key=a["ratingKey"],
            type="episode" if episode else "movie",
            title=a.get("title") or "",
            duration_ms=_int(a.get("duration")) or 0,
            library_key=library_key,
            show_rating_key=None if show_key is None else str(show_key),
            element=element,
        )


class PlexClient:
    """Reads libraries and resolves channel pools through the real plexapi client.

    One instance caches the section list, each section's filter vocabulary, the filter choices
    per (section, field) and the show records of TV libraries, so repeated resolutions cost one
    paged search per library. Instances are cheap; nothing is requested until the first call.

    Args:
        base_url: Base URL of the Plex Media Server.
        token: The `X-Plex-Token`; never written to messages or logs. Empty: none is sent.
        timeout: Seconds to wait for each HTTP response.
    """

    def __init__(self, base_url: str, token: str, timeout: float = 30) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._plex: PlexServer | None = None
        self._sections: list[LibrarySection] | None = None
        self._choices: dict[tuple[str, str], list[FilterChoice]] = {}
        self._fields: dict[tuple[str, str], FilteringField | None] = {}
        self._shows: dict[str, _ShowFacts] = {}
        self._sort_keys: dict[tuple[str, str], set[str]] = {}
        self._switches: Mapping[str, bool] = {}
        self._unknown_enabled = True
        self._vocabulary: dict[str, str] = {}

    def use_library_switches(self, switches: Mapping[str, bool], *, unknown_enabled: bool) -> None:
        """Draw pools, tag values and vocabulary only from libraries the media source enables.

        Airwave feeds pools from its `media_library` rows with `enabled` set
        (docs/reference/airwave-database.md §3.7); an admin
        turns a library off there. `libraries()` still lists every section (the library scan
        and the importer's remap see them all).

        Args:
            switches: `enabled` by section key (the source's `media_library` rows).
            unknown_enabled: Whether a section without a row feeds pools: yes standalone (its
                row is created enabled at the next sync), no when attached (Airwave has not
                scanned it yet, so its own jobs would not use it either).
        """
        self._switches = dict(switches)
        self._unknown_enabled = unknown_enabled

    def use_vocabulary(self, vocabulary: Mapping[str, str]) -> None:
        """Answer vocabulary reads from `vocabulary` (another client's `vocabulary()`).

        One run reads the server's sections, filter fields, sorts and filter choices once, in
        its plan step; each build step, a process of its own, is given what was read instead of
        reading it again (about nine requests per step). Call before the first request.
        """
        self._vocabulary.update(vocabulary)

    def vocabulary(self) -> dict[str, str]:
        """Every vocabulary read so far, as `use_vocabulary` takes it (no token inside)."""
        return dict(self._vocabulary)

    def prepare(
        self,
        definitions: Sequence[tuple[str, dict[str, Any] | None, str | None]],
        *,
        sort: str,
    ) -> None:
        """Read all the vocabulary resolving these definitions needs, without searching.

        Raises:
            PlexUnavailableError: Plex cannot be reached or fails.
            PlexAuthError: The token is refused.
        """
        self.vocabulary_gaps(definitions, sort=sort)
        for _, plex_filter, library_key in definitions:
            envelope = (
                FilterEnvelope()
                if plex_filter is None
                else FilterEnvelope.model_validate(plex_filter)
            )
            if envelope.filter is None:
                continue
            for section in self._target_sections(envelope.effective_media_types, library_key):
                with self._errors(f"reading the vocabulary of library {section.title!r}"):
                    self._translate(envelope.filter, section)

    def libraries(self) -> list[Library]:
        """Every library section of the server, in server order.

        Raises:
            PlexUnavailableError: Plex cannot be reached or fails.
            PlexAuthError: The token is refused.
        """
        return [
            Library(key=_key(section), title=section.title, type=section.type)
            for section in self._all_sections()
        ]

    def resolve(
        self,
        plex_filter: dict[str, Any] | None,
        *,
        library_key: str | None = None,
        sort: str = "titleSort:asc",
    ) -> list[MediaItem]:
        """Resolve one filter envelope to its playable items (docs/reference/domain.md §2.5).

        Each library costs one paged search: the whole filter tree travels as one nested
        `filters=` dict, so OR branches and intersections are computed by Plex over the full
        pool, not over capped pages. Movies resolve as movies, TV libraries as episodes.

        Args:
            plex_filter: The lineup file's `{"mediaTypes": [...], "filter": {...}}`; None means
                every movie and TV library, unfiltered.
            library_key: Search only this library when the server has it (the definition's
                library remap; nothing is found when its type is not among the envelope's media
                types); otherwise every library of the envelope's media types.
            sort: Plex sort such as `titleSort:asc` (see `filters.plex_sort`), applied within
                each library; TV libraries sort episodes.

        Returns:
            Items unique by rating key, libraries in server order, each sorted by `sort`.

        Raises:
            PlexUnavailableError: Plex cannot be reached or fails.
            PlexAuthError: The token is refused.
            PlexError: Plex rejects the search (for instance an unknown sort).
            ValueError: `plex_filter` is not a valid envelope (pydantic's ValidationError).
        """
        return self.complete(self._listed(plex_filter, library_key=library_key, sort=sort))

    def _listed(
        self, plex_filter: dict[str, Any] | None, *, library_key: str | None, sort: str
    ) -> list[ListedItem]:
        """`resolve` as the listings carry the items (see `list_pool`)."""
        envelope = (
            FilterEnvelope() if plex_filter is None else FilterEnvelope.model_validate(plex_filter)
        )
        found: dict[str, ListedItem] = {}
        for section in self._target_sections(envelope.effective_media_types, library_key):
            for item in self._search(section, envelope.filter, sort):
                found.setdefault(item.rating_key, item)
        return list(found.values())

    def resolve_pool(
        self,
        definitions: Sequence[tuple[str, dict[str, Any] | None, str | None]],
        *,
        sort: str,
    ) -> list[MediaItem]:
        """Combine a channel's definitions into its pool (§2.6, decided in §8.1).

        Definitions are applied in order: INCLUDE adds its items, EXCLUDE removes its items from
        what earlier definitions added. Items keep the position of their first inclusion. This
        is the one pool rule for dry runs and real builds alike.

        Args:
            definitions: `(mode, plex_filter, library_key)` in evaluation order.
            sort: Plex sort applied within each library of each definition.

        Returns:
            The pool's items, complete (see `complete`).
        """
        return self.complete(self.list_pool(definitions, sort=sort))

    def list_pool(
        self,
        definitions: Sequence[tuple[str, dict[str, Any] | None, str | None]],
        *,
        sort: str,
    ) -> list[ListedItem]:
        """The pool of `resolve_pool` as the searches list it: one search per library, no more.

        Membership, order, rating keys, types, titles, durations, libraries and the episodes'
        show keys are exactly the complete pool's, and that is all a listed item holds: the
        listings are asked to leave out tags, media, summaries and taglines
        (`LISTING_EXCLUDES`). A build lays its schedule from this and completes only the items
        the schedule plays (`complete`).
        """
        parts: list[tuple[str, list[ListedItem]]] = []
        for mode, plex_filter, library_key in definitions:
            if mode == "EXCLUDE" and not any(m != "EXCLUDE" for m, _ in parts):
                continue  # Nothing included yet, so nothing to remove: skip the search.
            parts.append((mode, self._listed(plex_filter, library_key=library_key, sort=sort)))
        return combine_pools(parts)

    def tag_values(self, field: str, media_types: Sequence[str]) -> list[str]:
        """The distinct values a tag field takes in the libraries of the given media types.

        Args:
            field: A tag field of the catalog (`genre`, `studio`, `network`, `resolution`…).
            media_types: Library types to look in (`movie`, `show`); empty means both.

        Returns:
            Values usable in a condition on that field, sorted case-insensitively.

        Raises:
            ValueError: `field` is not a tag field of the catalog.
        """
        spec = FIELDS.get(field)
        if spec is None or spec.kind != "tag":
            raise ValueError(f"{field!r} is not a tag field of the filter catalog")
        values: dict[str, str] = {}
        for section in self._target_sections(tuple(media_types) or MEDIA_TYPES, None):
            library_type = _library_type(section)
            if library_type not in spec.applies:
                continue
            key = _plex_key(spec, library_type)
            with self._errors(f"listing the {field} values of library {section.title!r}"):
                plex_field = self._field(section, key)
                choices = [] if plex_field is None else self._choices_for(section, key)
            by_key = plex_field is not None and plex_field.type in MATCH_CHOICE_BY_KEY
            for choice in choices:
                value = choice.key if by_key else choice.title
                if value:
                    values.setdefault(value.lower(), value)
        return sorted(values.values(), key=str.casefold)

    def offered_fields(self) -> OfferedFields:
        """The catalog fields each movie and TV library offers, read from its advertised fields.

        A field counts as offered by a library when every Plex filter key a condition on it
        asks of that library (`show.genre`, `episode.year`, both titles on TV) is among the
        fields the section advertises. In-memory evaluation given this vocabulary
        (`filters.evaluate(..., offered)`) judges exactly what a Plex search of that library
        would: a field it lacks matches nothing.

        Raises:
            PlexUnavailableError: Plex cannot be reached or fails.
            PlexAuthError: The token is refused.
        """
        libraries: dict[str, LibraryFields] = {}
        for section in self._target_sections(MEDIA_TYPES, None):
            library_type = _library_type(section)
            with self._errors(f"reading the vocabulary of library {section.title!r}"):
                fields = frozenset(
                    spec.name
                    for spec in FIELDS.values()
                    if library_type in spec.applies
                    and all(
                        self._field(section, key) is not None
                        for key in _plex_keys(spec, library_type)
                    )
                )
            libraries[_key(section)] = LibraryFields(type=library_type, fields=fields)
        return OfferedFields(libraries=libraries)

    def vocabulary_gaps(
        self,
        definitions: Sequence[tuple[str, dict[str, Any] | None, str | None]],
        *,
        sort: str,
    ) -> list[str]:
        """What a channel asks of this server that the server does not offer, one line each.

        Real servers advertise their filter fields and sorts per library type and level (the
        `<Meta>` of a section search), and they differ: no `episode.director` anywhere, optional
        fields missing on some. A field the server lacks matches nothing in that library; a sort
        it lacks is replaced by the title order. Both are said here so the dry-run, the report
        and the UI can show them per channel instead of a silently empty or reordered pool.

        Args:
            definitions: `(mode, plex_filter, library_key)` as for `resolve_pool`.
            sort: The channel's Plex sort.

        Returns:
            Lines such as "filter field 'director' (episode.director) is not offered by library
            'TV Shows': it matches nothing there", without repeats, in definition order.
        """
        gaps: list[str] = []
        for _, plex_filter, library_key in definitions:
            envelope = (
                FilterEnvelope()
                if plex_filter is None
                else FilterEnvelope.model_validate(plex_filter)
            )
            for section in self._target_sections(envelope.effective_media_types, library_key):
                with self._errors(f"reading the vocabulary of library {section.title!r}"):
                    gaps.extend(self._section_gaps(section, envelope.filter, sort))
        return list(dict.fromkeys(gaps))

    def _section_gaps(
        self, section: LibrarySection, node: FilterNode | None, sort: str
    ) -> list[str]:
        library_type = _library_type(section)
        gaps: list[str] = []
        for condition in _conditions(node):
            spec = FIELDS.get(condition.field)
            if spec is None or library_type not in spec.applies:
                continue
            gaps.extend(
                f"filter field {spec.name!r} ({key}) is not offered by library "
                f"{section.title!r}: it matches nothing there"
                for key in _plex_keys(spec, library_type)
                if self._field(section, key) is None
            )
        for part in sort.split(","):
            key = part.partition(":")[0]
            if key and not self._sort_offered(section, key):
                gaps.append(
                    f"sort {key!r} is not offered by library {section.title!r}: "
                    "ordered by title there"
                )
        return gaps

    def _sorts(self, section: LibrarySection) -> set[str]:
        cache_key = (_key(section), "sorts")
        if cache_key not in self._sort_keys:
            libtype = PLAYABLE_LIBTYPE[section.type]
            self._sort_keys[cache_key] = {sort.key for sort in section.listSorts(libtype)}
        return self._sort_keys[cache_key]

    def _sort_offered(self, section: LibrarySection, key: str) -> bool:
        return key in self._sorts(section)

    def _offered_sort(self, section: LibrarySection, sort: str) -> str:
        """`sort` without the keys this library does not offer (`vocabulary_gaps` says which)."""
        kept = [p for p in sort.split(",") if self._sort_offered(section, p.partition(":")[0])]
        return ",".join(kept) or "titleSort:asc"

    def _server(self) -> PlexServer:
        if self._plex is None:
            with self._errors("connecting"):
                self._plex = _VocabularyServer(
                    self.base_url,
                    self._token,
                    session=tracing.http_session(),
                    timeout=self._timeout,
                    known=self._vocabulary,
                )
        return self._plex

    def _all_sections(self) -> list[LibrarySection]:
        if self._sections is None:
            server = self._server()
            with self._errors("listing libraries"):
                self._sections = list(server.library.sections())
        return self._sections

    def _target_sections(
        self, media_types: Sequence[str], library_key: str | None
    ) -> list[LibrarySection]:
        sections = [
            s
            for s in self._all_sections()
            if s.type in PLAYABLE_LIBTYPE and self._switches.get(_key(s), self._unknown_enabled)
        ]
        if library_key is not None and any(_key(s) == library_key for s in sections):
            sections = [s for s in sections if _key(s) == library_key]
        return [s for s in sections if s.type in media_types]

    def _search(
        self, section: LibrarySection, node: FilterNode | None, sort: str
    ) -> list[ListedItem]:
        """The section's items matching `node`, as its listing carries them (see `list_pool`)."""
        with self._errors(f"searching library {section.title!r}"):
            translated = _Match.ALL if node is None else self._translate(node, section)
            if translated is _Match.NONE:
                return []
            filters = None if translated is _Match.ALL else translated
            sort = self._offered_sort(section, sort)
            # plexapi validates the filters and the sort against the section's vocabulary and
            # builds the search path; the pages are read as XML elements, not plexapi objects.
            key = section._buildSearchKey(
                sort=sort,
                libtype=PLAYABLE_LIBTYPE[section.type],
                filters=filters,
                includeGuids=False,
            )
            key = f"{key}{'&' if '?' in key else '?'}{LISTING_EXCLUDES}"
            library_key = _key(section)  # once: plexapi's attribute access is not cheap
            return [ListedItem.of(element, library_key) for element in self._listing(key)]

    def _listing(self, key: str) -> list[Element]:
        """Every item element of a paged listing, page after page (as plexapi's fetchItems).

        plexapi would build an object per item, with its media, parts and tags: about a
        millisecond each, most of a build's CPU for a pool of hundreds. A pool needs only the
        listing's attributes, so the parsed elements are read directly.
        """
        server = self._server()
        items: list[Element] = []
        while True:
            headers = {
                "X-Plex-Container-Start": str(len(items)),
                "X-Plex-Container-Size": str(PAGE_SIZE),
            }
            data = server.query(key, headers=headers)
            if data is None:
                return items
            page = [child for child in data if "ratingKey" in child.attrib]
            items.extend(page)
            total = data.attrib.get("totalSize") or data.attrib.get("size") or ""
            if not page or not total.isdigit() or len(items) >= int(total):
                return items

    def complete(self, items: Sequence[ListedItem]) -> list[MediaItem]:
        """The items with everything their own metadata says: full tag lists, streams, shows.

        Listings are partial on real servers (the first few tags of each kind, no streams), so
        an item written to the database is read again from `/library/metadata/{ids}`, in
        batches, and an episode gets its show's studio, network, genres and rating from the
        show's metadata (Plex keeps those on the show). The shows an episode's listing names
        (`grandparentRatingKey`) and that this client has not read yet are asked for in the same
        request as the items: one round trip for a window of episodes, not two. An item that
        vanished since the listing is what its listing said.

        Raises:
            PlexUnavailableError: Plex cannot be reached or fails.
            PlexAuthError: The token is refused.
        """
        listed_shows = {
            item.show_rating_key
            for item in items
            if item.type == "episode" and item.show_rating_key is not None
        }
        unread_shows = sorted(listed_shows - self._shows.keys())
        with self._errors("reading item metadata"):
            fetched = self._full_metadata([item.rating_key for item in items] + unread_shows)
            self._remember_shows({key: fetched[key] for key in unread_shows if key in fetched})
            full = {
                item.rating_key: fetched[item.rating_key]
                for item in items
                if item.rating_key in fetched
            }
            # The shows the items' own metadata names: the listed ones, read above or before,
            # unless an episode moved (then its show is read now).
            shows = self._show_facts(
                {e.attrib.get("grandparentRatingKey", "") for e in full.values()} - {""}
                if any(item.type == "episode" for item in items)
                else set()
            )
        return [
            _item(full.get(item.rating_key, item.element), item.library_key, shows)
            for item in items
        ]

    def _full_metadata(self, rating_keys: Sequence[str]) -> dict[str, Element]:
        """Each item's own metadata element (full tag lists and streams), read in batches."""
        server = self._server()
        found: dict[str, Element] = {}
        wanted = list(dict.fromkeys(k for k in rating_keys if k.isdigit()))
        for start in range(0, len(wanted), METADATA_BATCH):
            batch = wanted[start : start + METADATA_BATCH]
            try:
                data = server.query(f"/library/metadata/{','.join(batch)}")
            except NotFound:
                continue  # every item of the batch is gone; the listing's values stay
            for element in data if data is not None else ():
                key = element.attrib.get("ratingKey")
                if key is not None:
                    found[key] = element
        return found

    def _show_facts(self, show_keys: set[str]) -> dict[str, _ShowFacts]:
        """What episodes of these shows inherit, from the shows' metadata (cached by key)."""
        self._remember_shows(self._full_metadata(sorted(show_keys - self._shows.keys())))
        return {key: self._shows[key] for key in show_keys if key in self._shows}

    def _remember_shows(self, shows: Mapping[str, Element]) -> None:
        """Keep what episodes inherit from each show's metadata element, by its rating key."""
        for key, show in shows.items():
            self._shows[key] = _ShowFacts(
                studio=show.attrib.get("studio"),
                network=show.attrib.get("network"),
                genres=_tags(show, "Genre"),
                content_rating=show.attrib.get("contentRating"),
            )

    def _translate(self, node: FilterNode, section: LibrarySection) -> Translated:
        if isinstance(node, Group):
            return self._group(node, section)
        return self._condition(node, section)

    def _group(self, group: Group, section: LibrarySection) -> Translated:
        # Short-circuit: once the outcome is fixed, later children need no choice lookups.
        decisive = _Match.ALL if group.combinator == "or" else _Match.NONE
        parts: list[Translated] = []
        for child in group.children:
            part = self._translate(child, section)
            if part is decisive:
                return decisive
            parts.append(part)
        return _combine(group.combinator, parts)

    def _condition(self, condition: Condition, section: LibrarySection) -> Translated:
        spec = FIELDS.get(condition.field)
        library_type = _library_type(section)
        if (
            spec is None
            or condition.op not in ALLOWED_OPS[spec.kind]
            or library_type not in spec.applies
        ):
            return _Match.NONE
        if spec.name == "title" and library_type == "show":
            # The local evaluator matches the episode title or the show title.
            parts = [
                self._text(section, f"{level}.title", condition) for level in ("show", "episode")
            ]
            return _combine("or" if condition.op == "contains" else "and", parts)
        key = _plex_key(spec, library_type)
        if spec.name == "decade":
            # decade = year // 10 * 10, so each comparison becomes an inclusive range of years.
            return self._decade(section, key.replace("decade", "year"), condition)
        if spec.kind == "text":
            return self._text(section, key, condition)
        plex_field = self._field(section, key)
        if plex_field is None:
            logger.warning("Plex offers no filter %r on %r: it matches nothing", key, section.title)
            return _Match.NONE
        if spec.kind in ("tag", "string"):
            return self._tag(section, plex_field, condition)
        if spec.kind == "int":
            return _number_term(key, condition, minutes=spec.name == "duration")
        if spec.kind == "date":
            return _date_term(key, condition)
        if spec.kind == "recency":
            return _recency_term(key, condition.value)
        return _bool_term(key, condition.value)

    def _text(self, section: LibrarySection, key: str, condition: Condition) -> Translated:
        if self._field(section, key) is None:
            return _Match.NONE
        suffix = "!" if condition.op == "notContains" else ""
        return {f"{key}{suffix}": condition.value}

    def _tag(
        self, section: LibrarySection, plex_field: FilteringField, condition: Condition
    ) -> Translated:
        key = str(plex_field.key)
        negate = condition.op == "isNot"
        if plex_field.type not in LIST_FIELD_TYPES:
            # String-typed Plex fields (studio, editionTitle) have an exact "is" / "is not".
            return {f"{key}{'!=' if negate else '='}": condition.value}
        choices = self._choices_for(section, key)
        by_key = plex_field.type in MATCH_CHOICE_BY_KEY
        choice = _find_choice(choices, condition.value, by_key=by_key)
        if choice is None:
            # A value this library does not have: "is" finds nothing, "is not" keeps everything.
            return _Match.ALL if negate else _Match.NONE
        if not negate:
            return {key: choice}
        operators = {operator.key for operator in section.listOperators(plex_field.type)}
        if "!=" in operators:
            return {f"{key}!": choice}
        # Resolution has no "is not" in Plex (only "is"): ask for every other value instead.
        others = [c for c in choices if c is not choice]
        return {key: others} if others else _Match.NONE

    def _decade(self, section: LibrarySection, year_key: str, condition: Condition) -> Translated:
        number = _parse_number(condition.value)
        if number is None or self._field(section, year_key) is None:
            return _Match.NONE
        return _decade_term(year_key, condition.op, number)

    def _field(self, section: LibrarySection, key: str) -> FilteringField | None:
        cache_key = (_key(section), key)
        if cache_key not in self._fields:
            libtype = key.split(".", 1)[0] if "." in key else section.TYPE
            fields = section.listFields(libtype)
            self._fields[cache_key] = next((f for f in fields if f.key == key), None)
        return self._fields[cache_key]

    def _choices_for(self, section: LibrarySection, key: str) -> list[FilterChoice]:
        cache_key = (_key(section), key)
        if cache_key not in self._choices:
            try:
                self._choices[cache_key] = list(section.listFilterChoices(key))
            except NotFound:
                # The field has no value list on this server: no value can be matched.
                self._choices[cache_key] = []
        return self._choices[cache_key]

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Turn transport and plexapi failures into the adapter's errors, token kept out."""
        try:
            yield
        except Unauthorized as error:
            raise PlexAuthError(
                f"Plex at {self.base_url} refused the token while {action} (401 Unauthorized). "
                f"Check {PLEX_TOKEN_ENV} (and that {PLEX_URL_ENV} is the right server)."
            ) from error
        except OSError as error:
            # requests' ConnectionError and Timeout are OSErrors.
            raise PlexUnavailableError(
                f"Plex is unavailable at {self.base_url} while {action}: {self._clean(error)}. "
                f"Check that the server is running and that {PLEX_URL_ENV} points at it."
            ) from error
        except BadRequest as error:
            status = _status_of(error)
            if status is not None and status >= 500:
                raise PlexUnavailableError(
                    f"Plex at {self.base_url} failed while {action} (HTTP {status}). "
                    f"Check the server behind {PLEX_URL_ENV}."
                ) from error
            raise PlexError(
                f"Plex at {self.base_url} rejected a request while {action}: "
                f"{self._clean(error)} ({PLEX_URL_ENV})"
            ) from error
        except ParseError as error:
            raise PlexError(
                f"Plex at {self.base_url} sent a response that is not XML while {action} "
                f"({PLEX_URL_ENV})"
            ) from error
        except PlexApiException as error:
            raise PlexError(
                f"Plex at {self.base_url} failed while {action}: {self._clean(error)} "
                f"({PLEX_URL_ENV})"
            ) from error

    def _clean(self, error: BaseException) -> str:
        text = str(error)
        return text.replace(self._token, "***") if self._token else text


class PlexResource(dg.ConfigurableResource):
    """The Plex Media Server whose libraries channels draw from, read through plexapi.

    Every call goes through the `PlexClient` of `get_client()`, which caches the section list
    and filter choices.

    The token is read from the environment variable `token_env_var` names when a step
    connects, never from config: unset or empty, no token is sent (a server that allows access
    without one, e.g. from its local network). Deciding at run time, not when the code location
    loads, keeps a run from depending on what the loading process happened to have set.

    Examples:
        plex = PlexResource(base_url=dg.EnvVar("PLEX_URL"))  # token from PLEX_TOKEN
    """

    base_url: str = Field(description="Base URL of the Plex Media Server, e.g. http://host:32400.")
    token: str = Field(
        default="",
        description="An explicit X-Plex-Token (tests); empty: read `token_env_var` instead.",
    )
    token_env_var: str = Field(
        default=PLEX_TOKEN_ENV,
        description="Environment variable holding the X-Plex-Token, read when a step connects.",
    )
    timeout_seconds: float = Field(default=30.0, description="Seconds to wait for each response.")

    _client: PlexClient | None = PrivateAttr(default=None)
    _run_id: str | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Remember the run: its steps in this process share one client (`get_client`)."""
        self._client = None
        self._run_id = context.run_id

    def get_client(self) -> PlexClient:
        """The run's client in this process (connects on first use; vocabulary cached).

        Every step of a run that executes in this process gets the same client, so the
        sections, filter fields, sorts, choices and shows it has read serve them all: on the
        threads executor a whole run, in a step process (multiprocess, celery) that step. The
        client's caches are only ever filled with what Plex answers, so concurrent steps at
        worst read a thing twice. Outside a run (tests, `build_resources`) each initialisation
        has a client of its own.
        """
        if self._client is None:
            token = self.token or dg.EnvVar(self.token_env_var).get_value() or ""
            identity = (self.base_url, token, self.timeout_seconds)
            if self._run_id is None:
                self._client = PlexClient(self.base_url, token, timeout=self.timeout_seconds)
            else:
                self._client = _run_client(self._run_id, identity)
        return self._client


_RUN_CLIENTS: OrderedDict[tuple[str, tuple[str, str, float]], PlexClient] = OrderedDict()
_RUN_CLIENTS_LOCK = threading.Lock()
_RUN_CLIENTS_KEPT = 8
"""Runs whose clients a process keeps (a run worker has one; a test process runs many)."""


def _run_client(run_id: str, identity: tuple[str, str, float]) -> PlexClient:
    """The client of `run_id` for this server, token and timeout in this process."""
    key = (run_id, identity)
    with _RUN_CLIENTS_LOCK:
        client = _RUN_CLIENTS.get(key)
        if client is None:
            base_url, token, timeout = identity
            client = _RUN_CLIENTS[key] = PlexClient(base_url, token, timeout=timeout)
            while len(_RUN_CLIENTS) > _RUN_CLIENTS_KEPT:
                _RUN_CLIENTS.popitem(last=False)
        else:
            _RUN_CLIENTS.move_to_end(key)
        return client


def _key(section: LibrarySection) -> str:
    """The section key as the domain writes it ('1')."""
    return str(section.key)


def _library_type(section: LibrarySection) -> MediaType:
    return "movie" if section.type == "movie" else "show"


def _plex_key(spec: FieldSpec, library_type: str) -> str:
    """The Plex filter key of a field on a library type: `genre`, `show.genre`, `episode.year`."""
    if library_type == "movie":
        return spec.plex_name
    level = "episode" if spec.name in EPISODE_LEVEL_ON_SHOWS else spec.tv_level
    return f"{level}.{spec.plex_name}"


def _plex_keys(spec: FieldSpec, library_type: str) -> list[str]:
    """Every Plex filter key a condition on this field asks of a library (see `_condition`)."""
    if spec.name == "title" and library_type == "show":
        return ["show.title", "episode.title"]
    key = _plex_key(spec, library_type)
    return [key.replace("decade", "year")] if spec.name == "decade" else [key]


def _conditions(node: FilterNode | None) -> list[Condition]:
    if node is None:
        return []
    if isinstance(node, Group):
        return [c for child in node.children for c in _conditions(child)]
    return [node]


def _combine(combinator: str, parts: Sequence[Translated]) -> Translated:
    """AND / OR of translated parts; an empty AND matches everything, an empty OR nothing."""
    if combinator == "or":
        if any(part is _Match.ALL for part in parts):
            return _Match.ALL
        kept = [part for part in parts if isinstance(part, dict)]
        if not kept:
            return _Match.NONE
    else:
        if any(part is _Match.NONE for part in parts):
            return _Match.NONE
        kept = [part for part in parts if isinstance(part, dict)]
        if not kept:
            return _Match.ALL
    return kept[0] if len(kept) == 1 else {combinator: kept}


def _find_choice(
    choices: Sequence[FilterChoice], value: str, *, by_key: bool
) -> FilterChoice | None:
    """The choice whose key (resolutions, languages) or title (tags) equals the value, any case.

    The other attribute is the fallback, as plexapi itself accepts either.
    """
    wanted = value.lower()
    for attribute in ("key", "title") if by_key else ("title", "key"):
        for choice in choices:
            if (getattr(choice, attribute) or "").lower() == wanted:
                return choice
    return None


def _parse_number(text: str) -> float | None:
    """A number as the local evaluator reads it; anything else matches nothing."""
    return float(text) if _NUMBER.fullmatch(text) else None


def _plain(number: float) -> int | float:
    return int(number) if number.is_integer() else number


def _number_term(key: str, condition: Condition, *, minutes: bool) -> Translated:
    number = _parse_number(condition.value)
    if number is None:
        return _Match.NONE
    if minutes:
        milliseconds = number * 60_000
        nearest = round(milliseconds)
        if abs(milliseconds - nearest) < 1e-6:
            milliseconds = nearest
        if condition.op == "is" and not float(milliseconds).is_integer():
            return _Match.NONE
        rounder = math.floor if condition.op == "lte" else math.ceil
        number = float(rounder(milliseconds))
    value = _plain(number)
    if condition.op == "is":
        return {key: value}
    # Plex's >> and << are strict (G13): "at least" is "equal or greater".
    strict = ">>" if condition.op == "gte" else "<<"
    return {"or": [{key: value}, {f"{key}{strict}": value}]}


def _decade_term(year_key: str, op: str, decade: float) -> Translated:
    if op == "is":
        if not decade.is_integer() or decade % 10:
            return _Match.NONE
        first = int(decade)
        return {"and": [{f"{year_key}>>": first - 1}, {f"{year_key}<<": first + 10}]}
    if op == "gte":
        return {f"{year_key}>>": math.ceil(decade / 10) * 10 - 1}
    return {f"{year_key}<<": math.floor(decade / 10) * 10 + 10}


def _date_term(key: str, condition: Condition) -> Translated:
    day = _parse_day(condition.value)
    if day is None:
        return _Match.NONE
    # plexapi sends datetimes as epoch seconds of local time, as it does 'YYYY-MM-DD' strings.
    midnight = datetime(day.year, day.month, day.day)  # local time, on purpose
    if condition.op == "lte":
        return {f"{key}<<": midnight + timedelta(days=1)}
    return {f"{key}>>": midnight - timedelta(seconds=1)}


def _parse_day(text: str) -> date | None:
    if not _DAY.fullmatch(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _recency_term(key: str, value: str) -> Translated:
    number = _parse_number(value)
    if number is None:
        return _Match.NONE
    return {f"{key}>>": f"-{max(0, round(number))}d"}


def _bool_term(key: str, value: str) -> Translated:
    folded = value.strip().lower()
    if folded in ("true", "1"):
        return {key: True}
    if folded in ("false", "0"):
        return {key: False}
    return _Match.NONE


def _status_of(error: BaseException) -> int | None:
    match = _STATUS.match(str(error))
    return int(match.group(1)) if match else None


def _tags(element: Element, name: str) -> tuple[str, ...]:
    """Tag titles (`Genre`, `Director`, `Role`…) of an item element, in Plex's order.

    plexapi builds one object per tag on access (about a millisecond per item with a cast
    list); the titles are read from the element plexapi already parsed instead.
    """
    if not len(element):
        return ()  # a listing item without child elements (LISTING_EXCLUDES): no path search
    return tuple(tag.attrib["tag"] for tag in element.findall(name) if "tag" in tag.attrib)


def _sound_and_dovi(element: Element) -> dict[str, Any]:
    """Audio channels, object audio and the Dolby Vision profile of the first media version."""
    media = element.find("Media") if len(element) else None
    if media is None:
        return {}
    channels = media.attrib.get("audioChannels")
    found: dict[str, Any] = {
        "audio_channels": int(channels) if channels and channels.isdigit() else None,
        "video_codec": media.attrib.get("videoCodec"),
    }
    streams = list(media.iter("Stream"))
    audio = next((s for s in streams if s.attrib.get("streamType") == "2"), None)
    label = "" if audio is None else audio.attrib.get("displayTitle", "")
    found["dynamic_audio"] = next((kind for kind in ("Atmos", "DTS:X") if kind in label), None)
    video = next((s for s in streams if s.attrib.get("streamType") == "1"), None)
    if video is not None and video.attrib.get("DOVIPresent") in ("1", "true"):
        for name, key in (
            ("dovi_profile", "DOVIProfile"),
            ("dovi_level", "DOVILevel"),
            ("dovi_bl_compat_id", "DOVIBLCompatID"),
        ):
            raw = video.attrib.get(key)
            found[name] = int(raw) if raw is not None and raw.isdigit() else None
    return found


def _picture(element: Element) -> tuple[str | None, str | None, bool]:
    """Resolution, HDR format and Dolby Vision flag of the item's first media version."""
    media = element.find("Media") if len(element) else None
    if media is None:
        return None, None, False
    stream = next((s for s in media.iter("Stream") if s.attrib.get("streamType") == "1"), None)
    if stream is None:
        return media.attrib.get("videoResolution"), None, False
    dovi = stream.attrib.get("DOVIPresent") in ("1", "true")
    transfer = stream.attrib.get("colorTrc")
    hdr = "Dolby Vision" if dovi else HDR_TRANSFERS.get(transfer or "")
    return media.attrib.get("videoResolution"), hdr, dovi


def _int(text: str | None) -> int | None:
    """An integer attribute as plexapi casts it (`utils.cast`): absent is None."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    """A float attribute as plexapi casts it: absent None, unreadable NaN."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return math.nan


def _release_day(text: str | None) -> str | None:
    """`originallyAvailableAt` when it is a real day (plexapi drops anything else)."""
    if text is None:
        return None
    if (
        len(text) == 10
        and text.isascii()
        and text[4] == "-"
        and text[7] == "-"
        and text.replace("-", "").isdigit()
        and text[0] != "0"
    ):
        # The usual form, checked without strptime (a tenth of its cost, over every listed item).
        try:
            return date(int(text[:4]), int(text[5:7]), int(text[8:])).isoformat()
        except ValueError:
            return None
    try:
        return datetime.strptime(text, "%Y-%m-%d").strftime("%Y-%m-%d")
    except ValueError:
        return None


def _added(text: str | None) -> str | None:
    """`addedAt` (epoch seconds) as an ISO-8601 UTC instant."""
    seconds = _int(text)
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat()
    except (OSError, OverflowError, ValueError):
        return (datetime.fromtimestamp(0, UTC) + timedelta(seconds=seconds)).isoformat()


def _item(element: Element, library_key: str, shows: Mapping[str, _ShowFacts]) -> MediaItem:
    """A movie or episode from its `<Video>` element (a listing's or its own metadata).

    Attributes are read as plexapi reads them, without building its objects. An episode takes
    its show's facts from `shows` (none there: as a listing leaves them, unknown).
    """
    a = element.attrib
    resolution, hdr, dovi = _picture(element)
    common: dict[str, Any] = {
        "rating_key": a["ratingKey"],
        "title": a.get("title"),
        "duration_ms": _int(a.get("duration")) or 0,
        "year": _int(a.get("year")),
        "originally_available_at": _release_day(a.get("originallyAvailableAt")),
        "added_at": _added(a.get("addedAt")),
        "library_key": library_key,
        "summary": a.get("summary") or None,
        "directors": _tags(element, "Director"),
        "cast": _tags(element, "Role"),
        "audience_rating": _float(a.get("audienceRating")),
        "critic_rating": _float(a.get("rating")),
        "resolution": resolution,
        "hdr": hdr,
        "dovi": dovi,
        "view_count": _int(a.get("viewCount", "0")) or 0,
        "tagline": a.get("tagline") or None,
        "thumb": a.get("thumb") or None,
        "art": a.get("art") or None,
        **_sound_and_dovi(element),
    }
    if a.get("type") != "episode":
        return MediaItem(
            type="movie",
            studio=a.get("studio"),
            content_rating=a.get("contentRating"),
            genres=_tags(element, "Genre"),
            **common,
        )
    show_key = _int(a.get("grandparentRatingKey"))
    show = None if show_key is None else shows.get(str(show_key))
    return MediaItem(
        type="episode",
        studio=show.studio if show else None,
        network=show.network if show else None,
        content_rating=a.get("contentRating") or (show.content_rating if show else None),
        genres=show.genres if show else (),
        show_title=a.get("grandparentTitle"),
        show_rating_key=None if show_key is None else str(show_key),
        season=_int(a.get("parentIndex")),
        episode=_int(a.get("index")),
        **common,
    )
