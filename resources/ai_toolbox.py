"""The worker tools' runtime side: previews against Plex, commits into a claimed channel row.

`PlexChannelToolbox` implements `domain.ai.tools.ChannelToolbox` for one reserved channel. Every
preview resolves the **complete** pool through `PlexClient.resolve_pool` (paged, no 800-item cap).
The commit path is guarded twice: `run_tool` re-resolves the filter itself and verifies the pool
(never the model's claimed count), and only then does `commit_channel` write the definitions (the
filter as INCLUDE, an exclusion as EXCLUDE: `channel_definitions`) and enable the row, in the same
transaction as the claim's commit (so a claim taken over meanwhile writes nothing). The first
12-hour schedule window is written in that same transaction, so a committed channel always has
its schedule, whatever kills the build afterwards (an attempt that adopts it finds it complete).
Only a window that cannot be computed is logged and skipped; the maintenance schedules then lay
it (docs/maintenance.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from airwave_dagster import failpoints, tracing
from airwave_dagster.domain.ai.tools import (
    CommittedChannel,
    FilterPreview,
    PreviewDetail,
    channel_definitions,
    summarise_pool,
)
from airwave_dagster.domain.errors import ToolError
from airwave_dagster.domain.filters import FilterEnvelope, FilterNode, plex_sort
from airwave_dagster.domain.library import MediaItem, MediaType
from airwave_dagster.domain.lineup_file import Ordering
from airwave_dagster.domain.schedule import (
    INITIAL_WINDOW_SECONDS,
    BumperPlan,
    ScheduleBuild,
    build_schedule,
    channel_seed,
)
from resources import tables as t
from resources.plex import PlexClient
from resources.stores.ai import AiStore
from resources.stores.channels import AirwaveStore
from resources.stores.claims import ChannelClaims, Claimant

logger = logging.getLogger(__name__)


def library_sizes(store: AirwaveStore, source_id: str) -> dict[str, int]:
    """Available playable items per media type of a source's snapshot (`movie`, `show`)."""
    li = t.library_item.c
    kind = li.item["type"].astext
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(kind, sa.func.count())
            .where(li.media_source_id == source_id, li.available.is_(True))
            .group_by(kind)
        ).all()
    counts = {row[0]: int(row[1]) for row in rows}
    return {"movie": counts.get("movie", 0), "show": counts.get("episode", 0)}


class PlexChannelToolbox:
    """The tools of one channel build: Plex for pools, Postgres for the claimed channel row.

    Args:
        plex: A Plex client (one per build: it caches sections and tag choices).
        store: The application database (schedules).
        ai_store: The AI tables (definition writes).
        claims: The claim registry the row was reserved in.
        claimant: This attempt, the holder of the claim.
        channel_id: The reserved (disabled) channel row.
        number: Its channel number.
        source_id: The media source whose library the channel draws from.
        ordering: The channel's ordering (decides the schedule's order and the resolve sort).
        sort_field: The channel's sort field.
        sort_dir: The channel's sort direction.
        library_items: Items per media type of the whole library, so a filter that matches all
            of it is refused.
        now: Clock for the schedule's start (tests pin it).
    """

    def __init__(
        self,
        *,
        plex: PlexClient,
        store: AirwaveStore,
        ai_store: AiStore,
        claims: ChannelClaims,
        claimant: Claimant,
        channel_id: str,
        number: int,
        source_id: str,
        ordering: Ordering = "SHUFFLE",
        sort_field: str = "title",
        sort_dir: str = "asc",
        library_items: dict[str, int] | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.plex = plex
        self.store = store
        self.ai_store = ai_store
        self.claims = claims
        self.claimant = claimant
        self.channel_id = channel_id
        self.number = number
        self.source_id = source_id
        self.ordering: Ordering = ordering
        self.sort = plex_sort(ordering, sort_field, sort_dir)
        self.library_items = library_items or {}
        self.now = now
        self.previews = 0
        self.schedule_slots: int | None = None
        self.schedule_error: str | None = None
        self.released = False
        self._pools: dict[str, list[MediaItem]] = {}

    # -- ChannelToolbox -------------------------------------------------------------------------

    def discover_field_values(self, field: str, media_types: tuple[MediaType, ...]) -> list[str]:
        """Tag values of a field in the libraries of those types (one Plex round trip)."""
        try:
            return self.plex.tag_values(field, media_types)
        except ValueError as error:
            raise ToolError(f"discover_field_values: {error}") from None

    def preview_filter(
        self, envelope: FilterEnvelope, detail: PreviewDetail, exclude: FilterNode | None = None
    ) -> FilterPreview:
        """Resolve the envelope's complete pool (minus the exclusion) and summarise it.

        A Plex failure (`PlexError`) propagates: the build fails and its claim is released.
        """
        items = self._resolve(envelope, exclude)
        self.previews += 1
        searched = envelope.effective_media_types
        library = sum(self.library_items.get(kind, 0) for kind in searched) or None
        return summarise_pool(items, detail=detail, library_items=library)

    def commit_channel(
        self, envelope: FilterEnvelope, pool: FilterPreview, exclude: FilterNode | None = None
    ) -> CommittedChannel:
        """Write the verified definitions, the first 12 h and enable the row: one transaction."""
        items = self._resolve(envelope, exclude)
        seed = channel_seed(self.channel_id)
        bumpers = self.store.bumper_settings()
        # AI channels keep the row's default bumper mode (INHERIT), as Airwave's builder does.
        build = self._first_window(items, seed, bumpers.plan_for("INHERIT"))
        failpoints.reach(failpoints.BUILD_BEFORE_COMMIT, key=self.number)
        with (
            tracing.span("commit channel", {"airwave.channel.number": self.number}),
            self.store.transaction() as conn,
        ):
            self.ai_store.write_definitions(
                conn, self.channel_id, _plex_definitions(envelope, exclude)
            )
            if build is not None:
                self.schedule_slots = self.store.write_schedule(
                    self.channel_id,
                    source_id=self.source_id,
                    shuffle_seed=seed,
                    build=build,
                    pool=items,
                    bumper_rev=bumpers.rev,
                    conn=conn,
                )
            self.claims.commit(conn, self.channel_id, self.claimant, enabled=True)
            failpoints.reach(failpoints.BUILD_IN_COMMIT, key=self.number)
        failpoints.reach(failpoints.BUILD_COMMITTED, key=self.number)
        return CommittedChannel(channel_id=self.channel_id, number=self.number)

    def give_up(self, reason: str) -> None:
        """Delete the reservation (only while it is still this attempt's)."""
        self.release()

    # -- helpers --------------------------------------------------------------------------------

    def release(self) -> None:
        """Release the claim once (give-up, refusal or failure paths all end here)."""
        if not self.released:
            self.claims.release(self.channel_id, self.claimant)
            self.released = True

    def _resolve(self, envelope: FilterEnvelope, exclude: FilterNode | None) -> list[MediaItem]:
        definitions = _plex_definitions(envelope, exclude)
        key = json.dumps(definitions, sort_keys=True)
        if key not in self._pools:
            try:
                self._pools[key] = self.plex.resolve_pool(
                    [(mode, plex_filter, None) for mode, plex_filter in definitions],
                    sort=self.sort,
                )
            except ValueError as error:
                raise ToolError(f"the filter cannot be resolved: {error}") from None
        if not self._pools[key]:
            self._explain_empty(definitions)
        return self._pools[key]

    def _explain_empty(self, definitions: list[tuple[str, dict[str, Any]]]) -> None:
        """An empty pool caused by fields this server lacks is refused by name, so the agent
        chooses from what the server offers instead of reading "0 items" as "no such titles"."""
        lacking = [
            gap
            for gap in self.plex.vocabulary_gaps(
                [(mode, plex_filter, None) for mode, plex_filter in definitions],
                sort="titleSort:asc",
            )
            if gap.startswith("filter field")
        ]
        if lacking:
            raise ToolError("this Plex server cannot filter on that: " + "; ".join(lacking))

    def _first_window(
        self, pool: list[MediaItem], seed: int, bumpers: BumperPlan | None
    ) -> ScheduleBuild | None:
        """The initial 12-hour window, or None (logged) when it cannot be computed."""
        try:
            return build_schedule(
                pool,
                ordering=self.ordering,
                channel_seed=seed,
                start_at=self.now(),
                window_seconds=INITIAL_WINDOW_SECONDS,
                bumpers=bumpers,
            )
        except Exception as error:
            self.schedule_error = f"{type(error).__name__}: {error}"
            logger.warning(
                "channel %s is committed without a schedule (maintenance lays it): %s",
                self.number,
                self.schedule_error,
            )
            return None


def _plex_definitions(
    envelope: FilterEnvelope, exclude: FilterNode | None
) -> list[tuple[str, dict[str, Any]]]:
    """`(mode, plexFilter)` of each definition the channel stores, in order."""
    return [
        (mode, part.model_dump(mode="json", by_alias=True, exclude_none=True))
        for mode, part in channel_definitions(envelope, exclude)
    ]
