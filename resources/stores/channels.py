"""The channel tables: media sources, packages, channels, definitions, schedules, traces, export."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine

from airwave_dagster.domain.import_plan import (
    InstanceState,
    PlannedChannel,
    PlannedPackage,
    channel_signature,
)
from airwave_dagster.domain.library import Library, MediaItem
from airwave_dagster.domain.lineup_file import (
    LineupChannel,
    LineupDefinition,
    LineupFile,
    LineupPackage,
)
from airwave_dagster.domain.schedule import ScheduleBuild, ScheduleCursor, cursor_to_storage
from resources import tables as t
from resources.stores.rows import STORE_LOG, cap_json, media_item_row, new_id


@dataclass(frozen=True)
class ChannelCreation:
    """What happened when a planned channel was written."""

    status: Literal["created", "existing", "conflict"]
    channel_id: str | None
    detail: str | None = None


@dataclass(frozen=True)
class PackagesOutcome:
    """Package ids by key after the packages step, and which keys were created or reused."""

    ids: dict[str, str | None]
    created: tuple[str, ...]
    reused: tuple[str, ...]


def channel_row(
    *,
    name: str,
    callsign: str | None,
    description: str | None,
    icon: str | None,
    tint: str | None,
    ordering: str,
    sort_field: str,
    sort_dir: str,
    media_source_id: str,
    package_id: str | None,
    run_id: str,
    sort_index: int | None = None,
    bumper_mode: str | None = None,
    ai_generated: bool = False,
) -> dict[str, Any]:
    """A channel row's content columns (number and claim columns are the claim's), one shape
    for every writer: the importer and the AI builder.
    """
    row: dict[str, Any] = {
        "name": name.strip(),
        "callsign": callsign,
        "description": description,
        "icon": icon,
        "tint": tint,
        "ordering": ordering,
        "sort_field": sort_field,
        "sort_dir": sort_dir,
        "media_source_id": media_source_id,
        "package_id": package_id,
        "created_by_run_id": run_id,
    }
    if sort_index is not None:
        row["sort_index"] = sort_index
    if bumper_mode is not None:
        row["bumper_mode"] = bumper_mode
    if ai_generated:
        row["ai_generated"] = True
    return row


class AirwaveStore:
    """Repository over the `airwave` schema. Every write method runs in one transaction.

    Writes that a retried or resumed step can repeat are idempotent: packages are upserted by key,
    channel creation recognises its own earlier attempt by the channel's content signature, and a
    schedule write replaces the channel's rows as a whole.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection inside one transaction, committed on success."""
        with self.engine.begin() as conn:
            yield conn

    def sync_source(self, base_url: str, libraries: Sequence[Library]) -> str:
        """Upsert the media source for `base_url` and its libraries; return the source id.

        Library titles and types are refreshed; an admin's `enabled` choice survives.
        """
        now = datetime.now(UTC)
        with self.transaction() as conn:
            stmt = (
                pg_insert(t.media_source)
                .values(id=new_id(), name=base_url, base_url=base_url)
                .on_conflict_do_update(index_elements=["base_url"], set_={"updated_at": now})
                .returning(t.media_source.c.id)
            )
            source_id: str = conn.execute(stmt).scalar_one()
            for library in libraries:
                lib_stmt = pg_insert(t.media_library).values(
                    id=new_id(),
                    media_source_id=source_id,
                    key=library.key,
                    title=library.title,
                    type=library.type,
                    last_scan_at=now,
                )
                conn.execute(
                    lib_stmt.on_conflict_do_update(
                        constraint="media_library_source_key",
                        set_={"title": library.title, "type": library.type, "last_scan_at": now},
                    )
                )
            return source_id

    def find_source(self, base_url: str) -> str | None:
        """The id of the media source for `base_url`, if it was ever synced."""
        with self.engine.connect() as conn:
            return conn.execute(
                sa.select(t.media_source.c.id).where(t.media_source.c.base_url == base_url)
            ).scalar_one_or_none()

    def instance_state(self, libraries: Sequence[Library]) -> InstanceState:
        """What the import planner reads: numbers, package keys, libraries, signatures."""
        with self.engine.connect() as conn:
            numbers = frozenset(conn.execute(sa.select(t.channel.c.number)).scalars())
            keys = frozenset(conn.execute(sa.select(t.channel_package.c.key)).scalars())
            signatures = frozenset(self._signatures(conn).values())
        return InstanceState(
            channel_numbers=numbers,
            package_keys=keys,
            libraries=tuple(libraries),
            channel_signatures=signatures,
        )

    def _signatures(self, conn: Connection) -> dict[str, str]:
        """Content signature of every channel on the instance, by channel id."""
        filters: dict[str, list[object | None]] = {}
        defs = conn.execute(
            sa.select(t.channel_definition.c.channel_id, t.channel_definition.c.plex_filter).where(
                t.channel_definition.c.kind == "PREDICATE"
            )
        )
        for channel_id, plex_filter in defs:
            filters.setdefault(channel_id, []).append(plex_filter)
        rows = conn.execute(
            sa.select(
                t.channel.c.id,
                t.channel.c.name,
                t.channel_package.c.key,
                t.channel.c.ordering,
                t.channel.c.sort_field,
                t.channel.c.sort_dir,
            ).select_from(t.channel.outerjoin(t.channel_package))
        )
        return {
            row.id: channel_signature(
                row.name,
                row.key,
                row.ordering,
                row.sort_field,
                row.sort_dir,
                filters.get(row.id, []),
            )
            for row in rows
        }

    def ensure_packages(self, packages: Sequence[PlannedPackage]) -> PackagesOutcome:
        """Create or reuse each planned package by key (idempotent under retries and races)."""
        ids: dict[str, str | None] = {}
        created: list[str] = []
        reused: list[str] = []
        with self.transaction() as conn:
            max_sort = conn.execute(
                sa.select(sa.func.coalesce(sa.func.max(t.channel_package.c.sort_index), 0))
            ).scalar_one()
            for package in packages:
                existing = conn.execute(
                    sa.select(t.channel_package.c.id).where(t.channel_package.c.key == package.key)
                ).scalar_one_or_none()
                if existing is not None:
                    ids[package.key] = existing
                    reused.append(package.key)
                    continue
                if package.sort_index is None:
                    max_sort += 1
                sort_index = package.sort_index if package.sort_index is not None else max_sort
                stmt = (
                    pg_insert(t.channel_package)
                    .values(
                        id=new_id(),
                        key=package.key,
                        name=package.name,
                        description=package.description,
                        icon=package.icon,
                        tint=package.tint,
                        sort_index=sort_index,
                    )
                    .on_conflict_do_nothing(index_elements=["key"])
                    .returning(t.channel_package.c.id)
                )
                new = conn.execute(stmt).scalar_one_or_none()
                if new is None:
                    new = conn.execute(
                        sa.select(t.channel_package.c.id).where(
                            t.channel_package.c.key == package.key
                        )
                    ).scalar_one()
                    reused.append(package.key)
                else:
                    created.append(package.key)
                ids[package.key] = new
        return PackagesOutcome(ids=ids, created=tuple(created), reused=tuple(reused))

    def package_ids(self, keys: Sequence[str]) -> dict[str, str]:
        """Ids of existing packages by key."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.channel_package.c.key, t.channel_package.c.id).where(
                    t.channel_package.c.key.in_(list(keys))
                )
            )
            return {row.key: row.id for row in rows}

    @staticmethod
    def channel_values(
        planned: PlannedChannel, *, source_id: str, package_id: str | None, run_id: str
    ) -> dict[str, Any]:
        """The channel row's columns for a planned import channel (number and claim excluded)."""
        return channel_row(
            name=planned.name,
            callsign=planned.callsign,
            description=planned.description,
            icon=planned.icon,
            tint=planned.tint,
            ordering=planned.ordering,
            sort_field=planned.sort_field,
            sort_dir=planned.sort_dir,
            media_source_id=source_id,
            package_id=package_id,
            run_id=run_id,
            sort_index=planned.sort_index,
            bumper_mode=planned.bumper_mode,
        )

    @staticmethod
    def insert_definitions(conn: Connection, channel_id: str, planned: PlannedChannel) -> None:
        """Write the channel's filter definitions (replacing any a dead attempt left)."""
        conn.execute(
            t.channel_definition.delete().where(t.channel_definition.c.channel_id == channel_id)
        )
        if planned.definitions:
            conn.execute(
                t.channel_definition.insert(),
                [
                    {
                        "id": new_id(),
                        "channel_id": channel_id,
                        "kind": "PREDICATE",
                        "mode": d.mode,
                        "sort_index": d.sort_index,
                        "plex_filter": d.plex_filter,
                        "plex_library_key": d.plex_library_key,
                    }
                    for d in planned.definitions
                ],
            )

    def write_schedule(
        self,
        channel_id: str,
        *,
        source_id: str,
        shuffle_seed: int,
        build: ScheduleBuild,
        pool: Sequence[MediaItem],
        conn: Connection | None = None,
    ) -> int:
        """Replace the channel's schedule with `build` and store its pass cursor.

        Media items referenced by the schedule are upserted into the item cache first so every
        row links to its item. Runs inside `conn`'s transaction when given (so a build can commit
        its channel and schedule together), else in its own. Returns the number of rows written.
        """
        if conn is None:
            with self.transaction() as own:
                return self.write_schedule(
                    channel_id,
                    source_id=source_id,
                    shuffle_seed=shuffle_seed,
                    build=build,
                    pool=pool,
                    conn=own,
                )
        used = {e.rating_key for e in build.entries if e.rating_key is not None}
        used |= {e.target_rating_key for e in build.entries if e.target_rating_key is not None}
        items = [item for item in pool if item.rating_key in used]
        ids = self._upsert_media_items(conn, source_id, items)
        conn.execute(t.schedule_item.delete().where(t.schedule_item.c.channel_id == channel_id))
        if build.entries:
            conn.execute(
                t.schedule_item.insert(),
                [
                    {
                        "channel_id": channel_id,
                        "kind": entry.kind,
                        "starts_at": entry.starts_at,
                        "duration_seconds": entry.duration_seconds,
                        "rating_key": entry.rating_key,
                        "bumper_kind": entry.bumper_kind,
                        "media_item_id": ids.get(entry.rating_key or ""),
                        "target_media_item_id": ids.get(entry.target_rating_key or ""),
                    }
                    for entry in build.entries
                ],
            )
        seed, index, pos = cursor_to_storage(build.cursor)
        conn.execute(
            t.channel.update()
            .where(t.channel.c.id == channel_id)
            .values(
                shuffle_seed=shuffle_seed,
                schedule_pass_seed=seed,
                schedule_pass_index=index,
                schedule_pass_pos=pos,
            )
        )
        return len(build.entries)

    def _upsert_media_items(
        self, conn: Connection, source_id: str, items: Sequence[MediaItem]
    ) -> dict[str, int]:
        if not items:
            return {}
        rows = [media_item_row(source_id, item) for item in items]
        stmt = pg_insert(t.media_item)
        stmt = stmt.on_conflict_do_update(
            constraint="media_item_source_rating_key",
            set_={
                "title": stmt.excluded.title,
                "duration_ms": stmt.excluded.duration_ms,
                "guide": stmt.excluded.guide,
                "available": True,
                "last_synced_at": sa.func.now(),
            },
        )
        conn.execute(stmt, rows)
        found = conn.execute(
            sa.select(t.media_item.c.rating_key, t.media_item.c.id).where(
                t.media_item.c.media_source_id == source_id,
                t.media_item.c.rating_key.in_([item.rating_key for item in items]),
            )
        )
        return {row.rating_key: row.id for row in found}

    def schedule_count(self, channel_id: str) -> int:
        """How many schedule rows the channel has."""
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count())
                    .select_from(t.schedule_item)
                    .where(t.schedule_item.c.channel_id == channel_id)
                ).scalar_one()
            )

    def schedule_cursor(self, channel_id: str) -> ScheduleCursor | None:
        """The stored pass cursor of a channel (None before its first build)."""
        from airwave_dagster.domain.schedule import cursor_from_storage

        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(
                    t.channel.c.schedule_pass_seed,
                    t.channel.c.schedule_pass_index,
                    t.channel.c.schedule_pass_pos,
                ).where(t.channel.c.id == channel_id)
            ).one()
        return cursor_from_storage(*row)

    def record_trace(self, **fields: Any) -> None:
        """Append one import trace row. Best effort: a failure here never fails the step."""
        for key in ("input", "output"):
            if fields.get(key) is not None:
                fields[key] = cap_json(fields[key])
        fields.setdefault("finished_at", datetime.now(UTC))
        try:
            with self.transaction() as conn:
                conn.execute(t.import_trace.insert().values(**fields))
        except sa.exc.SQLAlchemyError:
            STORE_LOG.warning("could not record an import trace row", exc_info=True)

    def traces(self, run_id: str) -> list[Mapping[str, Any]]:
        """Every trace row of a run, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.import_trace)
                .where(t.import_trace.c.run_id == run_id)
                .order_by(t.import_trace.c.id)
            )
            return [dict(row._mapping) for row in rows]

    def export_lineup(self, exported_at: datetime | None = None) -> LineupFile:
        """The whole instance as a lineup v1 file (docs/reference/domain.md §3)."""
        with self.engine.connect() as conn:
            packages = conn.execute(
                sa.select(t.channel_package).order_by(
                    t.channel_package.c.sort_index, t.channel_package.c.key
                )
            ).all()
            keys_by_id = {p.id: p.key for p in packages}
            libraries = {
                (row.media_source_id, row.key): row.title
                for row in conn.execute(sa.select(t.media_library))
            }
            definitions: dict[str, list[Any]] = {}
            for row in conn.execute(
                sa.select(t.channel_definition).order_by(
                    t.channel_definition.c.channel_id, t.channel_definition.c.sort_index
                )
            ):
                definitions.setdefault(row.channel_id, []).append(row)
            channels = conn.execute(sa.select(t.channel).order_by(t.channel.c.number)).all()
        stamp = exported_at or datetime.now(UTC)
        return LineupFile(
            version=1,
            exported_at=stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            packages=[
                LineupPackage(
                    key=p.key,
                    name=p.name,
                    description=p.description,
                    icon=p.icon,
                    tint=p.tint,
                    sort_index=p.sort_index,
                )
                for p in packages
            ],
            channels=[
                LineupChannel(
                    number=c.number,
                    name=c.name,
                    callsign=c.callsign,
                    description=c.description,
                    icon=c.icon,
                    tint=c.tint,
                    enabled=c.enabled,
                    sort_index=c.sort_index,
                    ordering=c.ordering,
                    sort_field=c.sort_field,
                    sort_dir=c.sort_dir,
                    bumper_mode=c.bumper_mode,
                    package_key=keys_by_id.get(c.package_id) if c.package_id else None,
                    definitions=[
                        LineupDefinition(
                            kind=d.kind,
                            mode=d.mode,
                            sort_index=d.sort_index,
                            plex_filter=d.plex_filter,
                            plex_library_title=libraries.get(
                                (c.media_source_id, d.plex_library_key)
                            ),
                            plex_collection_key=d.plex_collection_key,
                            plex_playlist_key=d.plex_playlist_key,
                            manual_item_keys=list(d.manual_item_keys or []),
                        )
                        for d in definitions.get(c.id, [])
                    ],
                )
                for c in channels
            ],
        )

    def counts(self) -> dict[str, int]:
        """Row counts of the main tables (for reports, tests and the demo)."""
        with self.engine.connect() as conn:
            return {
                name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                for name, table in (
                    ("packages", t.channel_package),
                    ("channels", t.channel),
                    ("definitions", t.channel_definition),
                    ("schedule_items", t.schedule_item),
                    ("media_items", t.media_item),
                    ("import_traces", t.import_trace),
                )
            }
