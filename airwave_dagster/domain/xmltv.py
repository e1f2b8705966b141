"""XMLTV rendering of stored schedules: channels and programmes as any IPTV guide reads them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from xml.etree import ElementTree as ET

from pydantic import BaseModel, ConfigDict, Field

GENERATOR_NAME = "airwave-dagster"
"""The `generator-info-name` written on the `<tv>` element."""

XMLTV_DOCTYPE = '<!DOCTYPE tv SYSTEM "xmltv.dtd">'
"""The document type line guides expect; the DTD itself is not shipped with the file."""

_TIME_FORMAT = "%Y%m%d%H%M%S %z"


class GuideChannel(BaseModel):
    """A channel as the guide lists it."""

    model_config = ConfigDict(frozen=True)

    number: int
    name: str
    callsign: str | None = None


class GuideProgramme(BaseModel):
    """One programme (a PROGRAM row; bumpers are not listed) with what the guide shows of it."""

    model_config = ConfigDict(frozen=True)

    channel_number: int
    start: datetime
    stop: datetime
    title: str = Field(description="The show title for an episode, else the item title.")
    sub_title: str | None = Field(default=None, description="The episode title.")
    description: str | None = None
    year: int | None = None
    season: int | None = Field(default=None, description="1-based, as Plex numbers seasons.")
    episode: int | None = Field(default=None, description="1-based, as Plex numbers episodes.")
    categories: tuple[str, ...] = ()
    content_rating: str | None = None


def channel_id(number: int) -> str:
    """The XMLTV id of a channel: stable across renames because it is built from the number."""
    return f"{number}.airwave"


def xmltv_time(moment: datetime) -> str:
    """A time as XMLTV writes it: `YYYYMMDDhhmmss +0000`, in UTC.

    Raises:
        ValueError: If `moment` is naive, since its instant would be a guess.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"guide times must be timezone-aware, got {moment!r}")
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def episode_numbers(season: int | None, episode: int | None) -> list[tuple[str, str]]:
    """The `<episode-num>` values of an episode: `(system, text)` pairs.

    `xmltv_ns` counts from zero and leaves unknown parts empty (`.4.` is episode 5 of an unknown
    season); `onscreen` is the familiar `S01E05`, written only when both numbers are known.

    Args:
        season: 1-based season, or None.
        episode: 1-based episode, or None.

    Returns:
        Nothing for a movie, else one or two pairs.
    """
    if season is None and episode is None:
        return []
    season_part = "" if season is None or season < 1 else str(season - 1)
    episode_part = "" if episode is None or episode < 1 else str(episode - 1)
    numbers = [("xmltv_ns", f"{season_part}.{episode_part}.")]
    if season is not None and episode is not None:
        numbers.append(("onscreen", f"S{season:02d}E{episode:02d}"))
    return numbers


def _channel_element(channel: GuideChannel) -> ET.Element:
    element = ET.Element("channel", id=channel_id(channel.number))
    # Guides pick the first display-name as the label and match the others when mapping; the
    # number and callsign on their own let a user's existing mapping find the channel.
    names = [f"{channel.number} {channel.name}", channel.name, str(channel.number)]
    if channel.callsign:
        names.append(channel.callsign)
    for name in dict.fromkeys(names):
        ET.SubElement(element, "display-name").text = name
    return element


def _programme_element(programme: GuideProgramme) -> ET.Element:
    element = ET.Element(
        "programme",
        start=xmltv_time(programme.start),
        stop=xmltv_time(programme.stop),
        channel=channel_id(programme.channel_number),
    )
    # Children in the order the XMLTV DTD declares them, or a validating guide rejects the file.
    ET.SubElement(element, "title").text = programme.title
    if programme.sub_title:
        ET.SubElement(element, "sub-title").text = programme.sub_title
    if programme.description:
        ET.SubElement(element, "desc").text = programme.description
    if programme.year is not None:
        ET.SubElement(element, "date").text = str(programme.year)
    for category in programme.categories:
        ET.SubElement(element, "category").text = category
    for system, text in episode_numbers(programme.season, programme.episode):
        ET.SubElement(element, "episode-num", system=system).text = text
    if programme.content_rating:
        rating = ET.SubElement(element, "rating")
        ET.SubElement(rating, "value").text = programme.content_rating
    return element


def render_xmltv(
    channels: Sequence[GuideChannel],
    programmes: Sequence[GuideProgramme],
    *,
    source_name: str = "Airwave",
) -> bytes:
    """An XMLTV document listing the channels and their programmes.

    Args:
        channels: Channels in guide order (by number).
        programmes: Programmes of those channels; each channel's in start order.
        source_name: The `source-info-name` of the document.

    Returns:
        UTF-8 bytes with an XML declaration and the XMLTV doctype.

    Raises:
        ValueError: A programme names a channel that is not listed, or stops before it starts;
            either would make the file lie to the guide.
    """
    numbers = {channel.number for channel in channels}
    root = ET.Element(
        "tv", {"source-info-name": source_name, "generator-info-name": GENERATOR_NAME}
    )
    for channel in channels:
        root.append(_channel_element(channel))
    for programme in programmes:
        if programme.channel_number not in numbers:
            raise ValueError(
                f"programme {programme.title!r} names unknown channel {programme.channel_number}"
            )
        if programme.stop <= programme.start:
            raise ValueError(
                f"programme {programme.title!r} on channel {programme.channel_number} stops at "
                f"{programme.stop.isoformat()}, not after its start {programme.start.isoformat()}"
            )
        root.append(_programme_element(programme))
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{XMLTV_DOCTYPE}\n{body}\n'.encode()
