"""Fixtures for the AI domain tests: the emulator's demo library in memory and a local toolbox.

The demo library is the same synthetic dataset the Plex emulator serves (2,000 items, seed 7),
built in-process without HTTP. `LocalToolbox` implements `ChannelToolbox` by evaluating filters
locally with `filters.evaluate`, plus `network` (which the local evaluator does not know) from
the dataset's show records, so offline builds can be checked without Plex or Postgres.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from airwave_dagster.domain.ai.context import VOCABULARY_FIELDS
from airwave_dagster.domain.ai.profile import LibraryProfile, build_profile
from airwave_dagster.domain.ai.tools import (
    CommittedChannel,
    FilterPreview,
    PreviewDetail,
    summarise_pool,
)
from airwave_dagster.domain.errors import ToolError
from airwave_dagster.domain.filters import Condition, FilterEnvelope, FilterNode, Group, evaluate
from airwave_dagster.domain.library import MediaItem, MediaType
from airwave_dagster.emulators.plex.dataset import EmulatedLibrary, build_library

DEMO_ITEMS = 2000
DEMO_SEED = 7
DEMO_ANCHOR = 1_780_000_000
"""A fixed "now" so the dataset (and every number derived from it) is stable across days."""


@dataclass(frozen=True)
class Demo:
    """The demo library as the AI domain sees it."""

    library: EmulatedLibrary
    items: tuple[MediaItem, ...]
    show_networks: dict[str, str]
    vocabulary: dict[str, list[str]]
    profile: LibraryProfile


def demo_vocabulary(library: EmulatedLibrary, items: Sequence[MediaItem]) -> dict[str, list[str]]:
    """Tag values per vocabulary field, as the runtime would fetch them from Plex."""
    values: dict[str, set[str]] = {name: set() for name in VOCABULARY_FIELDS}
    for item in items:
        values["genre"].update(item.genres)
        if item.studio:
            values["studio"].add(item.studio)
        if item.content_rating:
            values["contentRating"].add(item.content_rating)
        if item.resolution:
            values["resolution"].add(item.resolution)
    for show in library.shows():
        if show.network:
            values["network"].add(show.network)
    return {name: sorted(found) for name, found in values.items() if found}


@pytest.fixture(scope="session")
def demo() -> Demo:
    """The emulator's demo library (2,000 items, seed 7), profiled."""
    library = build_library(DEMO_ITEMS, DEMO_SEED, anchor=DEMO_ANCHOR)
    items = tuple(library.media_items())
    networks = {str(show.rating_key): show.network for show in library.shows() if show.network}
    vocabulary = demo_vocabulary(library, items)
    profile = build_profile(items, source_id="demo", show_networks=networks)
    return Demo(library, items, networks, vocabulary, profile)


def local_match(node: FilterNode | None, item: MediaItem, networks: dict[str, str]) -> bool:
    """`filters.evaluate`, plus the show-only `network` field from the dataset."""
    if node is None:
        return True
    if isinstance(node, Group):
        results = (local_match(child, item, networks) for child in node.children)
        return any(results) if node.combinator == "or" else all(results)
    if isinstance(node, Condition) and node.field == "network":
        if item.type != "episode" or node.op not in ("is", "isNot"):
            return False
        found = networks.get(item.show_rating_key or "", "").casefold() == node.value.casefold()
        return found if node.op == "is" else not found
    return evaluate(node, item)


def _of_types(items: Sequence[MediaItem], media_types: Sequence[MediaType]) -> list[MediaItem]:
    wanted = {"movie" if t == "movie" else "episode" for t in media_types}
    return [item for item in items if item.type in wanted]


@dataclass
class LocalToolbox:
    """A `ChannelToolbox` over an in-memory item list; records what the build did."""

    items: Sequence[MediaItem]
    networks: dict[str, str] = field(default_factory=dict)
    number: int = 1001
    previews: int = 0
    commits: list[FilterEnvelope] = field(default_factory=list)
    exclusions: list[FilterNode | None] = field(default_factory=list)
    gave_up: list[str] = field(default_factory=list)
    fail_previews_after: int | None = None
    tag_values: dict[str, list[str]] = field(default_factory=dict)

    def pool(self, envelope: FilterEnvelope, exclude: FilterNode | None = None) -> list[MediaItem]:
        candidates = _of_types(self.items, envelope.effective_media_types)
        return [
            item
            for item in candidates
            if local_match(envelope.filter, item, self.networks)
            and not (exclude is not None and local_match(exclude, item, self.networks))
        ]

    def discover_field_values(self, field: str, media_types: tuple[MediaType, ...]) -> list[str]:
        if field not in self.tag_values:
            raise ToolError(f"no values recorded for {field!r}")
        return self.tag_values[field]

    def preview_filter(
        self, envelope: FilterEnvelope, detail: PreviewDetail, exclude: FilterNode | None = None
    ) -> FilterPreview:
        self.previews += 1
        if self.fail_previews_after is not None and self.previews > self.fail_previews_after:
            raise ConnectionError("Plex is unreachable")
        library = len(_of_types(self.items, envelope.effective_media_types))
        return summarise_pool(self.pool(envelope, exclude), detail=detail, library_items=library)

    def commit_channel(
        self, envelope: FilterEnvelope, pool: FilterPreview, exclude: FilterNode | None = None
    ) -> CommittedChannel:
        self.commits.append(envelope)
        self.exclusions.append(exclude)
        return CommittedChannel(channel_id=f"ch-{self.number}", number=self.number)

    def give_up(self, reason: str) -> None:
        self.gave_up.append(reason)
