"""The JSON form of the emulator's answers, derived from the XML it renders (one source of truth).

A Plex Media Server answers `Accept: application/json` with the same MediaContainer as JSON
(Plex's published API notes, developer.plex.tv/pms, and the community OpenAPI description,
LukeHagar/plex-api-spec): the container's attributes become its keys; library items (`Video`,
`Directory` of a movie/show/season/episode, `Playlist`) are listed under `Metadata`; sections and
other directories under `Directory`; `Meta` keeps its `Type` / `FieldType` lists; every other child
element (`Genre`, `Role`, `Media`, `Part`, `Stream`, `Location`…) becomes a list under its own
name.

Each attribute takes the JSON type the OpenAPI description gives it, not the type its text looks
like: rating keys, paths, titles and `videoResolution` ("1080") are strings; the flags Plex writes
as 0/1 in XML and documents as booleans (`allowSync`, `DOVIPresent`, `smart`…) are `true`/`false`;
every other attribute that reads as a number is a number.
"""

from __future__ import annotations

import json
import re
from typing import Any
from xml.etree import ElementTree

_INTEGER = re.compile(r"-?(?:0|[1-9]\d{0,17})")
_DECIMAL = re.compile(r"-?\d+\.\d+")
_STRINGS = frozenset(
    {
        "tag",
        "summary",
        "tagline",
        "guid",
        "version",
        "studio",
        "network",
        "contentRating",
        "videoResolution",
        "videoProfile",
        "videoFrameRate",
        "file",
        "path",
        "uuid",
        "librarySectionUUID",
        "machineIdentifier",
        "platformVersion",
        "originallyAvailableAt",
        "codec",
        "languageCode",
        "filter",
    }
)
"""Attributes typed `string` in plex-api-spec that can look numeric (a film titled "1917")."""
_STRING_SUFFIXES = ("Key", "key", "Title", "title", "Sort")
"""`ratingKey`, `grandparentRatingKey`, `key`, `fastKey`, `parentTitle`, `titleSort`…: strings."""
_BOOLEANS = frozenset(
    {
        "allowSync",
        "active",
        "claimed",
        "DOVIPresent",
        "filters",
        "hidden",
        "multiuser",
        "myPlex",
        "refreshing",
        "smart",
        "transcoderVideo",
    }
)
"""Attributes plex-api-spec types `boolean`; the XML writes them as 1 and 0."""


def _value(name: str, raw: str) -> Any:
    if name in _STRINGS or name.endswith(_STRING_SUFFIXES):
        return raw
    if name in _BOOLEANS and raw in ("0", "1"):
        return raw == "1"
    if _INTEGER.fullmatch(raw):
        return int(raw)
    if _DECIMAL.fullmatch(raw):
        return float(raw)
    return raw


def _group(element: ElementTree.Element) -> str:
    if element.tag == "Video" or element.tag == "Playlist":
        return "Metadata"
    # Sections are typed `movie` / `show` too, but only library items carry a rating key.
    if element.tag == "Directory" and "ratingKey" in element.attrib:
        return "Metadata"
    return element.tag


def _object(element: ElementTree.Element) -> dict[str, Any]:
    found: dict[str, Any] = {name: _value(name, raw) for name, raw in element.attrib.items()}
    for child in element:
        if child.tag == "Meta":
            found["Meta"] = _object(child)
            continue
        found.setdefault(_group(child), []).append(_object(child))
    return found


def to_json(document: bytes) -> bytes:
    """The JSON body equal to an XML MediaContainer document."""
    root = ElementTree.fromstring(document)
    return json.dumps({root.tag: _object(root)}, ensure_ascii=False).encode("utf-8")
