"""What a Plex library means to Airwave: sections and the resolved media items of a pool."""

from __future__ import annotations

from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

MediaType = Literal["movie", "show"]
"""A library type a channel can draw from (the `mediaTypes` of a filter envelope)."""

ItemType = Literal["movie", "episode", "show"]

MEDIA_TYPES: tuple[MediaType, ...] = ("movie", "show")


class PoolItem(Protocol):
    """What pools and schedules read of an item: a `MediaItem`, or an item as a listing names it.

    Combining a channel's definitions goes by rating key; laying its schedule reads the type,
    the duration and the show (bumper lengths). A build lays its schedule from its listed pool
    and reads the complete metadata of the items the schedule plays only.
    """

    @property
    def rating_key(self) -> str: ...

    @property
    def type(self) -> ItemType: ...

    @property
    def duration_ms(self) -> int: ...

    @property
    def show_rating_key(self) -> str | None: ...


Item = TypeVar("Item", bound=PoolItem)
"""One kind of pool item throughout a call (a pool of listed items stays listed)."""


class Library(BaseModel):
    """One Plex library section of a media source."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Plex section key (per-server, e.g. '1').")
    title: str
    type: str = Field(description="'movie', 'show', or another Plex section type.")


class MediaItem(BaseModel):
    """A playable item of a channel's pool, as resolved from Plex (docs/reference/domain.md §2.10).

    Movies and episodes are playable; shows only appear in library snapshots. Optional fields are
    None when Plex does not carry them. Tag lists are the full lists Plex reports for the item
    (for an episode, the show's genres); an episode's `network` is its show's (Plex keeps the
    network on the show only).
    """

    model_config = ConfigDict(frozen=True)

    rating_key: str
    type: ItemType
    title: str
    duration_ms: int = 0
    year: int | None = None
    originally_available_at: str | None = Field(default=None, description="YYYY-MM-DD")
    added_at: str | None = Field(default=None, description="ISO-8601 UTC")
    library_key: str | None = None
    summary: str | None = None
    studio: str | None = None
    network: str | None = None
    content_rating: str | None = None
    genres: tuple[str, ...] = ()
    directors: tuple[str, ...] = ()
    cast: tuple[str, ...] = ()
    audience_rating: float | None = None
    critic_rating: float | None = None
    resolution: str | None = None
    hdr: str | None = Field(default=None, description="'HDR10', 'Dolby Vision' or 'HLG'")
    dovi: bool = False
    show_title: str | None = None
    show_rating_key: str | None = None
    season: int | None = None
    episode: int | None = None
    view_count: int = 0
    tagline: str | None = None
    thumb: str | None = Field(default=None, description="Relative Plex path of the poster.")
    art: str | None = Field(default=None, description="Relative Plex path of the background.")
    audio_channels: int | None = None
    video_codec: str | None = None
    dynamic_audio: str | None = Field(default=None, description="'Atmos' or 'DTS:X'")
    dovi_profile: int | None = None
    dovi_level: int | None = None
    dovi_bl_compat_id: int | None = None
