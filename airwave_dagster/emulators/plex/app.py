"""Route one Plex API request to a response: the emulator's behaviour without the HTTP plumbing.

Reference: docs/reference/plex-emulator.md (sections "§N" and gotchas "GN" cited below).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from urllib.parse import quote, unquote

from airwave_dagster.emulators.plex.dataset import EmulatedLibrary, Item, Section
from airwave_dagster.emulators.plex.json_body import to_json
from airwave_dagster.emulators.plex.query import (
    Compiler,
    QueryError,
    SearchRequest,
    decode_query,
    parse_search,
    parse_sort,
    result_type,
    sort_items,
)
from airwave_dagster.emulators.plex.render import (
    LIBRARY_ID,
    MACHINE_ID,
    SERVER_VERSION,
    Renderer,
    RenderOptions,
    attributes,
    container,
    escape,
)
from airwave_dagster.emulators.plex.vocabulary import (
    FIELDS,
    RESOLUTION_TITLES,
    TYPE_NUMBERS,
    FieldDef,
    section_types,
)

JSON_TYPE = "application/json"
_CONTAINER = re.compile(rb"<MediaContainer[^>]*>")
_ATTRIBUTE = re.compile(rb'(\w+)="([^"]*)"')
XML_TYPE = "text/xml;charset=utf-8"
"""The charset is mandatory: without it requests decodes text/* as ISO-8859-1 (G2)."""

SEARCH_CACHE_SIZE = 64
SEARCH_CACHE_SECONDS = 10.0
"""Matched sets are reused while a client pages through them; relative dates age, so not forever."""


@dataclass(frozen=True, slots=True)
class Response:
    """What to send back, and which request kind to count it under."""

    status: int
    body: bytes
    content_type: str
    kind: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    """The parts of an HTTP request the emulator looks at."""

    path: str
    query: str
    headers: Mapping[str, str]


def xml(document: str, kind: str, status: int = 200) -> Response:
    """A UTF-8 XML response."""
    return Response(status, document.encode("utf-8"), XML_TYPE, kind)


def not_found(kind: str = "not_found") -> Response:
    """A 404, which plexapi raises as NotFound."""
    return xml(container([], size=0), kind, status=404)


class PlexApp:
    """Answers the read-only subset of the PMS API that plexapi 4.18.3 uses (§2)."""

    def __init__(
        self,
        library: EmulatedLibrary,
        *,
        truncate_tags: Callable[[], bool],
        missing_fields: frozenset[str] = frozenset(),
    ) -> None:
        self.library = library
        self.missing_fields = missing_fields
        self.renderer = Renderer(library, missing_fields)
        self._truncate_tags = truncate_tags
        self._searches: OrderedDict[tuple[object, ...], tuple[float, list[Item]]] = OrderedDict()
        self._choices: dict[tuple[int, str, str], list[tuple[str, str]]] = {}
        self._lock = threading.Lock()
        self._routes: Sequence[tuple[re.Pattern[str], Callable[..., Response]]] = [
            (re.compile(r"/"), self.root),
            (re.compile(r"/identity"), self.identity),
            (re.compile(r"/library"), self.library_root),
            (re.compile(r"/library/sections/?"), self.sections),
            (re.compile(r"/library/sections/all"), self.sections),
            (re.compile(r"/library/sections/(\d+)/all"), self.search),
            (re.compile(r"/library/sections/(\d+)/collections"), self.section_collections),
            (re.compile(r"/library/sections/(\d+)/(\w+)"), self.filter_choices),
            (re.compile(r"/library/metadata/([\d,]+)"), self.metadata),
            (re.compile(r"/library/metadata/(\d+)/children"), self.children),
            (re.compile(r"/library/metadata/(\d+)/allLeaves"), self.all_leaves),
            (re.compile(r"/library/collections/(\d+)"), self.collection),
            (re.compile(r"/library/collections/(\d+)/children"), self.collection_children),
            (re.compile(r"/playlists/?"), self.playlists),
            (re.compile(r"/playlists/(\d+)"), self.playlist),
            (re.compile(r"/playlists/(\d+)/items"), self.playlist_items),
            (re.compile(r"/media/providers"), self.providers),
        ]

    def handle(self, request: Request) -> Response:
        """Dispatch one GET request; JSON instead of XML when the client accepts only that."""
        response = self._dispatch(request)
        opening = _CONTAINER.search(response.body[:2048])
        if opening is not None:
            # Plex's published paging headers, so a client can page without reading the body.
            attributes = dict(_ATTRIBUTE.findall(opening.group(0)))
            if b"totalSize" in attributes:
                paging = (
                    ("X-Plex-Container-Start", attributes.get(b"offset", b"0").decode()),
                    ("X-Plex-Container-Total-Size", attributes[b"totalSize"].decode()),
                )
                response = replace(response, headers=paging)
        accept = next((v for k, v in request.headers.items() if k.lower() == "accept"), "")
        if "application/json" in accept and response.content_type == XML_TYPE:
            return replace(response, body=to_json(response.body), content_type=JSON_TYPE)
        return response

    def _dispatch(self, request: Request) -> Response:
        for pattern, handler in self._routes:
            match = pattern.fullmatch(request.path)
            if match:
                try:
                    return handler(request, *match.groups())
                except QueryError as error:
                    message = f"<html><body><h1>400 Bad Request</h1><p>{error}</p></body></html>"
                    return Response(400, message.encode(), "text/html;charset=utf-8", "bad_request")
        return not_found()

    def options(self, parsed: SearchRequest, *, full: bool = False) -> RenderOptions:
        """Rendering switches for this request (its query, `parse_search`)."""
        return RenderOptions(
            full=full,
            truncate_tags=self._truncate_tags(),
            include_streams=parsed.include_streams,
            exclude_elements=parsed.exclude_elements,
            exclude_fields=parsed.exclude_fields,
        )

    def root(self, request: Request) -> Response:
        """`GET /`: the only request `PlexServer()` makes to connect."""
        return xml(
            container(
                [],
                size=0,
                friendlyName="Plex Emulator",
                machineIdentifier=MACHINE_ID,
                version=SERVER_VERSION,
                platform="Linux",
                platformVersion="emulated",
                myPlex=0,
                multiuser=1,
                allowSync=1,
                transcoderVideo=0,
                transcoderActiveVideoSessions=0,
                updatedAt=self.library.anchor,
            ),
            "root",
        )

    def identity(self, request: Request) -> Response:
        """`GET /identity`."""
        document = container(
            [], size=0, claimed=0, machineIdentifier=MACHINE_ID, version=SERVER_VERSION
        )
        return xml(document, "identity")

    def library_root(self, request: Request) -> Response:
        """`GET /library`: must answer 200 or plexapi cannot reach the sections (G1)."""
        children = [
            '<Directory key="sections" title="Library Sections"/>',
            '<Directory key="recentlyAdded" title="Recently Added Content"/>',
            '<Directory key="onDeck" title="On Deck Content"/>',
        ]
        document = container(children, size=3, identifier=LIBRARY_ID, title1="Plex Library")
        return xml(document, "library")

    def sections(self, request: Request) -> Response:
        """`GET /library/sections`."""
        children = [self.renderer.section(s) for s in self.library.sections]
        document = container(
            children, size=len(children), identifier=LIBRARY_ID, title1="Plex Library"
        )
        return xml(document, "sections")

    def search(self, request: Request, section_id: str) -> Response:
        """`GET /library/sections/{id}/all`: filters, and/or trees, sort, limit, paging (§4, §5)."""
        section = self.library.section(int(section_id))
        if section is None:
            return not_found("search")
        parsed = parse_search(request.query)
        item_type = result_type(section.type, parsed.type_number)
        meta = self.renderer.meta(section, collections=False) if parsed.include_meta else ""
        if item_type == "collection":
            titles = [t.value.casefold() for t in parsed.terms if t.name == "title"]
            records = [
                r
                for r in self.library.collections_in(section.key)
                if all(title in r.title.casefold() for title in titles)
            ]
            rendered = [self.renderer.collection(r) for r in records]
            return self._page(request, parsed, section, rendered, meta, "search")
        if item_type not in section_types(section.type):
            return self._page(request, parsed, section, [], meta, "search")
        matched = self._matched(section, item_type, parsed)
        window = self._window(request, parsed)
        page = matched[window]
        options = self.options(parsed)
        rendered_page = [self.renderer.item(item, options) for item in page]
        document = container(
            [meta, *rendered_page],
            size=len(page),
            totalSize=len(matched),
            offset=window.start,
            allowSync=1,
            identifier=LIBRARY_ID,
            librarySectionID=section.key,
            librarySectionTitle=section.title,
            librarySectionUUID=section.uuid,
            title1=section.title,
            viewGroup=item_type,
        )
        return xml(document, "search")

    def _matched(self, section: Section, item_type: str, parsed: SearchRequest) -> list[Item]:
        cache_key = (section.key, item_type, parsed.terms, parsed.sort, parsed.limit)
        now = time.monotonic()
        with self._lock:
            cached = self._searches.get(cache_key)
            if cached and now - cached[0] < SEARCH_CACHE_SECONDS:
                self._searches.move_to_end(cache_key)
                return cached[1]
        candidates = self.library.of_type(section.key, item_type)
        if parsed.terms:
            predicate = Compiler(self.library, item_type, missing=self.missing_fields).compile(
                parsed.terms
            )
            candidates = [item for item in candidates if predicate(item)]
        if parsed.sort:
            candidates = sort_items(self.library, candidates, parse_sort(item_type, parsed.sort))
        if parsed.limit is not None:
            candidates = candidates[: max(0, parsed.limit)]
        with self._lock:
            self._searches[cache_key] = (now, candidates)
            while len(self._searches) > SEARCH_CACHE_SIZE:
                self._searches.popitem(last=False)
        return candidates

    def _window(self, request: Request, parsed: SearchRequest) -> slice:
        """The page asked for; query parameters win over headers, which are case-insensitive."""
        headers = {name.lower(): value for name, value in request.headers.items()}
        start = parsed.start
        size = parsed.size
        if start is None and "x-plex-container-start" in headers:
            start = int(headers["x-plex-container-start"])
        if size is None and "x-plex-container-size" in headers:
            size = int(headers["x-plex-container-size"])
        first = max(0, start or 0)
        return slice(first, None if size is None else first + max(0, size))

    def _page(
        self,
        request: Request,
        parsed: SearchRequest,
        section: Section,
        rendered: list[str],
        meta: str,
        kind: str,
    ) -> Response:
        window = self._window(request, parsed)
        page = rendered[window]
        document = container(
            [meta, *page],
            size=len(page),
            totalSize=len(rendered),
            offset=window.start,
            identifier=LIBRARY_ID,
            librarySectionID=section.key,
            librarySectionTitle=section.title,
        )
        return xml(document, kind)

    def section_collections(self, request: Request, section_id: str) -> Response:
        """`GET /library/sections/{id}/collections`: 200 even when empty, with Meta (G8)."""
        section = self.library.section(int(section_id))
        if section is None:
            return not_found("collections")
        parsed = parse_search(request.query)
        meta = self.renderer.meta(section, collections=True) if parsed.include_meta else ""
        rendered = [self.renderer.collection(r) for r in self.library.collections_in(section.key)]
        return self._page(request, parsed, section, rendered, meta, "collections")

    def filter_choices(self, request: Request, section_id: str, name: str) -> Response:
        """`GET /library/sections/{id}/{filter}[?type=N]`: the values a filter can take (§3.8)."""
        section = self.library.section(int(section_id))
        if section is None:
            return not_found("choices")
        type_number = next(
            (int(t.value) for t in decode_query(request.query) if t.name == "type"), None
        )
        item_type = result_type(section.type, type_number)
        definition = None if name in self.missing_fields else FIELDS.get(item_type, {}).get(name)
        if definition is None or not definition.choices:
            return not_found("choices")
        query = "" if section.type == "movie" else f"&type={TYPE_NUMBERS[item_type]}"
        children = []
        for key, title in self.choices(section, item_type, definition):
            pairs = [
                ("fastKey", f"/library/sections/{section.key}/all?{name}={quote(key)}{query}"),
                ("key", key),
                ("title", title),
                ("type", name),
            ]
            children.append(f"<Directory{attributes(pairs)}/>")
        document = container(
            children,
            size=len(children),
            content="secondary",
            identifier=LIBRARY_ID,
            title1=section.title,
            title2=f"By {definition.title.lower()}",
            viewGroup="secondary",
        )
        return xml(document, "choices")

    def choices(
        self, section: Section, item_type: str, definition: FieldDef
    ) -> list[tuple[str, str]]:
        """(key, title) pairs of the values used by items of one type in a section."""
        cache_key = (section.key, item_type, definition.key)
        with self._lock:
            cached = self._choices.get(cache_key)
        if cached is not None:
            return cached
        seen: set[object] = set()
        for item in self.library.of_type(section.key, item_type):
            value = definition.get(self.library, item)
            if isinstance(value, tuple):
                seen.update(value)
            elif value is not None:
                seen.add(value)
        pairs: list[tuple[str, str]]
        if definition.key in ("year", "decade"):
            years = sorted((int(v) for v in seen if isinstance(v, int)), reverse=True)
            suffix = "s" if definition.key == "decade" else ""
            pairs = [(str(y), f"{y}{suffix}") for y in years]
        elif definition.tag_kind:
            names = sorted((str(v) for v in seen), key=str.casefold)
            tags = self.library.tags
            pairs = [(str(tags.id_of(definition.tag_kind, n)), n) for n in names]
        elif definition.key == "resolution":
            order = list(RESOLUTION_TITLES)
            pairs = [
                (str(v), RESOLUTION_TITLES.get(str(v), str(v)))
                for v in sorted(seen, key=lambda v: order.index(str(v)) if v in order else 99)
            ]
        else:
            pairs = [(str(v), str(v)) for v in sorted((str(v) for v in seen), key=str.casefold)]
        with self._lock:
            self._choices[cache_key] = pairs
        return pairs

    def metadata(self, request: Request, keys: str) -> Response:
        """`GET /library/metadata/{rk}[,{rk}…]`: full items, tags never truncated (G18)."""
        options = self.options(parse_search(request.query), full=True)
        rendered: list[str] = []
        for raw in keys.split(","):
            if not raw:
                continue
            key = int(raw)
            item = self.library.items.get(key)
            if item is not None:
                rendered.append(self.renderer.item(item, options))
            elif key in self.library.collections:
                rendered.append(self.renderer.collection(self.library.collections[key]))
        if not rendered:
            return not_found("metadata")
        return xml(container(rendered, size=len(rendered), identifier=LIBRARY_ID), "metadata")

    def children(self, request: Request, key: str) -> Response:
        """`GET /library/metadata/{rk}/children`: a show's seasons, a season's episodes."""
        rating_key = int(key)
        if rating_key in self.library.collections:
            return self.collection_children(request, key)
        parent = self.library.items.get(rating_key)
        if parent is None or parent.type not in ("show", "season"):
            return not_found("children")
        children = [self.library.items[k] for k in self.library.children.get(rating_key, [])]
        wanted_index = next(
            (int(t.value) for t in decode_query(request.query) if t.name == "index"), None
        )
        if wanted_index is not None:
            children = [c for c in children if c.index == wanted_index]
        return self._listing(request, parent, children, "children")

    def all_leaves(self, request: Request, key: str) -> Response:
        """`GET /library/metadata/{rk}/allLeaves`: every episode of a show or season."""
        parent = self.library.items.get(int(key))
        if parent is None or parent.type not in ("show", "season"):
            return not_found("all_leaves")
        source = self.library.leaves if parent.type == "show" else self.library.children
        episodes = [self.library.items[k] for k in source.get(parent.rating_key, [])]
        return self._listing(request, parent, episodes, "all_leaves")

    def _listing(self, request: Request, parent: Item, items: list[Item], kind: str) -> Response:
        parsed = parse_search(request.query)
        window = self._window(request, parsed)
        page = items[window]
        options = self.options(parsed)
        document = container(
            [self.renderer.item(item, options) for item in page],
            size=len(page),
            totalSize=len(items),
            offset=window.start,
            key=parent.rating_key,
            parentRatingKey=parent.rating_key,
            parentTitle=parent.title,
            title1=parent.title,
            identifier=LIBRARY_ID,
            librarySectionID=parent.section_key,
            viewGroup="season" if items and items[0].type == "season" else "episode",
        )
        return xml(document, kind)

    def collection(self, request: Request, key: str) -> Response:
        """`GET /library/collections/{rk}`: a collection's own record (reload)."""
        record = self.library.collections.get(int(key))
        if record is None:
            return not_found("collection")
        document = container([self.renderer.collection(record)], size=1, identifier=LIBRARY_ID)
        return xml(document, "collection")

    def collection_children(self, request: Request, key: str) -> Response:
        """`GET /library/collections/{rk}/children`: what `collection.items()` fetches (G16)."""
        record = self.library.collections.get(int(key))
        if record is None:
            return not_found("collection_children")
        parsed = parse_search(request.query)
        window = self._window(request, parsed)
        members = [self.library.items[k] for k in record.members]
        page = members[window]
        options = self.options(parsed)
        document = container(
            [self.renderer.item(item, options) for item in page],
            size=len(page),
            totalSize=len(members),
            offset=window.start,
            identifier=LIBRARY_ID,
            librarySectionID=record.section_key,
            title1=record.title,
        )
        return xml(document, "collection_children")

    def playlists(self, request: Request) -> Response:
        """`GET /playlists`: filtered by type, section and title (contains)."""
        arguments = {t.name: t.value for t in decode_query(request.query)}
        found = list(self.library.playlists.values())
        if arguments.get("playlistType", "video") != "video":
            found = []
        if "sectionID" in arguments:
            section_key = int(arguments["sectionID"])
            found = [
                p
                for p in found
                if any(self.library.items[k].section_key == section_key for k in p.items)
            ]
        if "title" in arguments:
            needle = arguments["title"].casefold()
            found = [p for p in found if needle in p.title.casefold()]
        found.sort(key=lambda p: p.title.casefold())
        parsed = parse_search(request.query)
        window = self._window(request, parsed)
        page = found[window]
        document = container(
            [self.renderer.playlist(p) for p in page],
            size=len(page),
            totalSize=len(found),
            offset=window.start,
        )
        return xml(document, "playlists")

    def playlist(self, request: Request, key: str) -> Response:
        """`GET /playlists/{rk}`: one playlist (reload)."""
        playlist = self.library.playlists.get(int(key))
        if playlist is None:
            return not_found("playlist")
        return xml(container([self.renderer.playlist(playlist)], size=1), "playlist")

    def playlist_items(self, request: Request, key: str) -> Response:
        """`GET /playlists/{rk}/items`: items with a `playlistItemID`, movies and episodes mixed."""
        playlist = self.library.playlists.get(int(key))
        if playlist is None:
            return not_found("playlist_items")
        parsed = parse_search(request.query)
        window = self._window(request, parsed)
        entries = list(enumerate(playlist.items, start=1))
        page = entries[window]
        options = self.options(parsed)
        rendered = [
            self.renderer.item(
                self.library.items[k], options, [("playlistItemID", playlist.rating_key * 100 + n)]
            )
            for n, k in page
        ]
        document = container(
            rendered,
            size=len(rendered),
            totalSize=len(entries),
            offset=window.start,
            ratingKey=playlist.rating_key,
            title=playlist.title,
            playlistType="video",
            leafCount=len(entries),
        )
        return xml(document, "playlist_items")

    def providers(self, request: Request) -> Response:
        """`GET /media/providers`: per-section totals; each Directory needs a child (G7)."""
        directories = []
        for section in self.library.sections:
            playable = "movie" if section.type == "movie" else "episode"
            items = self.library.of_type(section.key, playable)
            duration = sum(i.duration_ms for i in items)
            storage = sum((i.bitrate or 1000) * i.duration_ms // 8 for i in items)
            pivot = (
                f'<Pivot id="library" key="/library/sections/{section.key}/all" '
                f'type="list" title="Library"/>'
            )
            directories.append(
                f'<Directory id="{section.key}" title="{escape(section.title)}" '
                f'type="{section.type}" durationTotal="{duration}" storageTotal="{storage}">'
                f"{pivot}</Directory>"
            )
        provider = (
            f'<MediaProvider identifier="{LIBRARY_ID}" title="Library" types="video" '
            f'protocols="stream,download"><Feature key="/library/sections" type="content">'
            f"{''.join(directories)}</Feature></MediaProvider>"
        )
        return xml(container([provider], size=1), "providers")


def unquoted_path(raw_path: str) -> str:
    """The request path without its query, percent-decoded."""
    return unquote(raw_path.split("?", 1)[0])
