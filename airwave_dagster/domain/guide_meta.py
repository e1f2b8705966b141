"""Airwave's `media_item` rows: GuideMeta and the row's other columns from a resolved item.

Airwave's server shows a schedule slot with the `guide` JSON of its `media_item` row merged over
its parent show's (docs/reference/airwave-database.md §3.5, §4.2). The keys are camelCase, every
key but `title` and `durationMs` is left out when Plex has no value (a stored `null` or `[]` would
overwrite the show's value in that merge), and tag lists keep only their first few entries, as
Airwave's own Plex reader builds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from airwave_dagster.domain.library import MediaItem

DIRECTORS_KEPT = 3
GENRES_KEPT = 5
CAST_KEPT = 5


def _first(tags: tuple[str, ...], count: int) -> list[str]:
    return [tag for tag in tags if tag][:count]


def added_at_text(value: str | None) -> str | None:
    """An ISO-8601 instant as Airwave writes `addedAt`: UTC, milliseconds, `Z`.

    Args:
        value: ISO-8601 text (with `Z` or an offset); None when Plex has none.

    Returns:
        `2024-05-01T12:00:00.000Z`, or None when absent or unreadable.
    """
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def guide_meta(item: MediaItem) -> dict[str, Any]:
    """The item's GuideMeta: camelCase keys, absent values left out (§3.5).

    Args:
        item: A movie, episode or show as the project resolved it (full tag lists).

    Returns:
        The JSON object Airwave stores in `media_item.guide`.
    """
    dovi: dict[str, int] | None = None
    if item.dovi_profile:
        dovi = {"profile": item.dovi_profile}
        if item.dovi_level is not None:
            dovi["level"] = item.dovi_level
        if item.dovi_bl_compat_id is not None:
            dovi["blCompatId"] = item.dovi_bl_compat_id
    episode = item.type == "episode"
    candidates: dict[str, Any] = {
        "title": item.title,
        "type": item.type,
        "year": item.year,
        "contentRating": item.content_rating,
        "summary": item.summary,
        "tagline": item.tagline,
        "studio": item.studio,
        "directors": _first(item.directors, DIRECTORS_KEPT),
        "genres": _first(item.genres, GENRES_KEPT),
        "cast": _first(item.cast, CAST_KEPT),
        "audienceRating": item.audience_rating,
        "criticRating": item.critic_rating,
        "durationMs": item.duration_ms,
        "thumb": item.thumb,
        "art": item.art,
        "addedAt": added_at_text(item.added_at),
        "resolution": item.resolution,
        "audioChannels": item.audio_channels,
        "videoCodec": item.video_codec,
        "hdr": item.hdr,
        "dovi": dovi,
        "dynamicAudio": item.dynamic_audio,
        "showTitle": item.show_title if episode else None,
        "showRatingKey": item.show_rating_key if episode else None,
        "season": item.season if episode else None,
        "episode": item.episode if episode else None,
    }
    guide = {key: value for key, value in candidates.items() if value not in (None, "", [])}
    guide["title"] = item.title
    guide["durationMs"] = item.duration_ms or 0
    return guide


def media_item_values(item: MediaItem) -> dict[str, Any]:
    """The content columns of the item's `media_item` row (ids, source and parent excluded).

    Keys are the Python keys of `resources/tables.py` (`duration_ms` for `"durationMs"`).
    """
    return {
        "rating_key": item.rating_key,
        "type": item.type,
        "title": item.title,
        "duration_ms": item.duration_ms or 0,
        "year": item.year,
        "air_date": item.originally_available_at,
        "guide": guide_meta(item),
    }


def show_items(items: Sequence[MediaItem]) -> list[MediaItem]:
    """A show row per show the episodes belong to, from what the episodes carry of it.

    Only the show-level facts the project resolves for every episode (title, genres, studio,
    network) are known here; Airwave's own sync, when it runs, fills in the rest.

    Args:
        items: Resolved items; only episodes with a show rating key contribute.

    Returns:
        One `type="show"` item per distinct show, in first-seen order.
    """
    shows: dict[str, MediaItem] = {}
    for item in items:
        key = item.show_rating_key
        if item.type != "episode" or not key or key in shows:
            continue
        shows[key] = MediaItem(
            rating_key=key,
            type="show",
            title=item.show_title or key,
            library_key=item.library_key,
            studio=item.studio,
            network=item.network,
            genres=item.genres,
        )
    return list(shows.values())
