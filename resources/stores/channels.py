"""The channel tables: media sources, packages, channels, definitions, schedules, traces, export."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine

from airwave_dagster.domain.guide_meta import show_items
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
from airwave_dagster.domain.schedule import (
    BumperPlan,
    ScheduleBuild,
    ScheduleCursor,
    cursor_to_storage,
    resolve_bumper_plan,
)
from resources import tables as t
from resources.airwave_attached import (
    AiConnection,
    Deployment,
    ai_connections,
    engine_runs_in_progress,
    resolve_user,
    select_source,
)
from resources.stores.rows import STORE_LOG, cap_json, keyed, media_item_row, new_id


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


@dataclass(frozen=True)
class BumperSettings:
    """Airwave's global bumper configuration as a schedule build reads it.

    docs/reference/airwave-database.md §3.8, §5.4.
    """

    enabled: bool
    rev: int
    lengths: BumperPlan

    def plan_for(self, bumper_mode: str) -> BumperPlan | None:
        """The bumper plan of a channel in `bumper_mode` (None: no bumpers are laid)."""
        return resolve_bumper_plan(bumper_mode, enabled=self.enabled, config=self.lengths)


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
    created_by_id: str | None = None,
    sort_index: int | None = None,
    bumper_mode: str | None = None,
    ai_generated: bool = False,
) -> dict[str, Any]:
    """A channel row's content columns (number and claim are the claim's), one shape for every
    writer: the importer and the AI builder. `created_by_id` is an Airwave user's id or None.
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
        "created_by_id": created_by_id,
    }
    if sort_index is not None:
        row["sort_index"] = sort_index
    if bumper_mode is not None:
        row["bumper_mode"] = bumper_mode
    if ai_generated:
        row["ai_generated"] = True
    return row


class AirwaveStore:
    """Repository over Airwave's channel tables. Every write method runs in one transaction.

    Writes that a retried or resumed step can repeat are idempotent: packages are upserted by key,
    channel creation recognises its own earlier attempt by the channel's content signature, and a
    schedule write replaces the channel's rows as a whole.
    """

    def __init__(self, engine: Engine, deployment: Deployment | None = None) -> None:
        self.engine = engine
        self.deployment = deployment or Deployment()
        self._creator: tuple[str | None] | None = None

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection inside one transaction, committed on success."""
        with self.engine.begin() as conn:
            yield conn

    def sync_source(self, base_url: str, libraries: Sequence[Library]) -> str:
        """The media source for `base_url` (created on first use) with its libraries; its id.

        Attached mode writes nothing here: the source is Airwave's configured one and its
        libraries are Airwave's rows (its library scan keeps them).

        Standalone mode is the only writer of `media_source`: the row is found by `baseUrl`
        (the oldest one, as the column is not unique in Airwave), created with an empty token
        (the project reads PLEX_TOKEN; a token is never stored) and made the default source when
        none is. Libraries are upserted by (source, key) as Airwave's library scan does: title,
        type and scan time refreshed, an admin's `enabled` choice kept.
        """
        if self.deployment.attached:
            return self.attached_source()
        now = datetime.now(UTC)
        s, lib = t.media_source.c, t.media_library.c
        with self.transaction() as conn:
            source_id = self._source_id(conn, base_url)
            if source_id is None:
                has_default = conn.execute(
                    sa.select(sa.exists().where(s.is_default.is_(True)))
                ).scalar_one()
                source_id = conn.execute(
                    t.media_source.insert()
                    .values(name=base_url, base_url=base_url, token="", is_default=not has_default)
                    .returning(s.id)
                ).scalar_one()
            for library in libraries:
                stmt = pg_insert(t.media_library).values(
                    media_source_id=source_id,
                    key=library.key,
                    title=library.title,
                    type=library.type,
                    last_scan_at=now,
                )
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=[lib.media_source_id, lib.key],
                        set_={
                            lib.title: library.title,
                            lib.type: library.type,
                            lib.last_scan_at: now,
                            lib.updated_at: now,
                        },
                    )
                )
            return str(source_id)

    @staticmethod
    def _source_id(conn: Connection, base_url: str) -> str | None:
        s = t.media_source.c
        found: str | None = conn.execute(
            sa.select(s.id).where(s.base_url == base_url).order_by(s.created_at, s.id).limit(1)
        ).scalar_one_or_none()
        return found

    def find_source(self, base_url: str) -> str | None:
        """The id of the media source for `base_url`, if it was ever synced.

        Attached mode: Airwave's configured source whatever the URL (PLEX_URL may override the
        address Airwave stores).
        """
        if self.deployment.attached:
            return self.attached_source()
        with self.engine.connect() as conn:
            return self._source_id(conn, base_url)

    def attached_source(self) -> str:
        """Airwave's media source chosen by AIRWAVE_SOURCE_ID, else its default or only one."""
        with self.engine.connect() as conn:
            return str(select_source(conn, self.deployment.source_id).id)

    def creator_id(self) -> str | None:
        """The Airwave user recorded as `createdById` of new channels (looked up once).

        AIRWAVE_USER's user when set (an unknown email is an error in both modes); otherwise the
        oldest admin when attached, as Airwave's own job trigger does, and nobody standalone.
        """
        if self._creator is None:
            email = self.deployment.user_email
            if email or self.deployment.attached:
                with self.engine.connect() as conn:
                    self._creator = (resolve_user(conn, email),)
            else:
                self._creator = (None,)
        return self._creator[0]

    def ai_connection_models(self) -> tuple[AiConnection | None, AiConnection | None]:
        """Airwave's planner and worker connections, without their keys (attached mode)."""
        with self.engine.connect() as conn:
            return ai_connections(conn, None, with_keys=False)

    def engine_runs_in_progress(self) -> list[str]:
        """Airwave's own import/AI workflow runs in progress (attached; always empty standalone)."""
        if not self.deployment.attached:
            return []
        with self.engine.connect() as conn:
            return engine_runs_in_progress(conn)

    def engine_busy(self) -> str | None:
        """Why a job must not start beside Airwave's own workflow engine, or None (§7.1).

        Both engines would write the same channels: Airwave's importer adopts any row at its
        number and its AI wipe deletes every AI channel, including this project's mid-run.
        """
        running = self.engine_runs_in_progress()
        if not running:
            return None
        return (
            "Airwave's own workflow engine has lineup runs in progress: "
            + ", ".join(running)
            + ". One engine per Airwave instance: let them finish or cancel them in Airwave, "
            "and leave WORKFLOW_ENABLED unset on Airwave's server (docs/attached.md)"
        )

    def library_switches(self, source_id: str | None) -> dict[str, bool]:
        """`enabled` of each of the source's `media_library` rows, by Plex section key."""
        if source_id is None:
            return {}
        lib = t.media_library.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(lib.key, lib.enabled).where(lib.media_source_id == source_id)
            )
            return {str(key): bool(enabled) for key, enabled in rows}

    def source_libraries(self, source_id: str) -> list[Library]:
        """The source's `media_library` rows, enabled or not (what the importer's remap reads)."""
        lib = t.media_library.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(lib.key, lib.title, lib.type)
                .where(lib.media_source_id == source_id)
                .order_by(lib.key)
            )
            return [Library(key=str(r.key), title=str(r.title), type=str(r.type)) for r in rows]

    def bumper_settings(self) -> BumperSettings:
        """Airwave's global bumper configuration, get-or-created as Airwave's builds do it.

        The row is inserted with Airwave's defaults when missing (a concurrent insert wins
        harmlessly), then read. Lengths follow Airwave's reading: tiers at least 1 second, the
        short-episode bound at least 0 minutes.
        """
        b = t.bumper_config.c
        stored = sa.select(t.bumper_config).where(b.key == "global")
        created = (
            pg_insert(t.bumper_config)
            # Column defaults computed in Python are not applied inside a WITH: given here.
            .values(key="global", id=new_id(), updated_at=t.utc_now())
            .on_conflict_do_nothing(index_elements=[b.key])
            .returning(*t.bumper_config.c)
            .cte("created")
        )
        with self.transaction() as conn:
            # One statement when the row exists or this creates it; a row another process
            # created after the statement began is read by a second one.
            row = conn.execute(sa.select(created).union_all(stored)).first()
            if row is None:
                row = conn.execute(stored).one()
        return BumperSettings(
            enabled=row.enabled,
            rev=row.rev,
            lengths=BumperPlan(
                interstitial_seconds=max(1, row.interstitial_seconds),
                after_movie_seconds=max(1, row.after_movie_seconds),
                after_episode_seconds=max(1, row.after_episode_seconds),
                quick_seconds=max(1, row.quick_seconds),
                short_episode_minutes=max(0, row.short_episode_minutes),
            ),
        )

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
        """Content signature of every channel on the instance, by channel id.

        A channel another import is building right now (its row claimed, its definitions not
        yet written) counts with the signature its build recorded (`channel_origin`), not the
        one its half-written row would give: read from the row, two imports of one channel at
        once each saw the other's number taken by "another channel" and created it twice, once
        on a reassigned number (the ten-imports load test, Shared).
        """
        origin, claim = t.channel_origin.c, t.channel_claim.c
        building = {
            row.channel_id: row.signature
            for row in conn.execute(
                sa.select(origin.channel_id, origin.signature)
                .join(t.channel_claim, claim.channel_id == origin.channel_id)
                .where(origin.signature.is_not(None))
            )
        }
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
            row.id: building.get(row.id)
            or channel_signature(
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
        planned: PlannedChannel,
        *,
        source_id: str,
        package_id: str | None,
        created_by_id: str | None = None,
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
            created_by_id=created_by_id,
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
        bumper_rev: int,
        conn: Connection | None = None,
    ) -> int:
        """Replace the channel's schedule with `build`, as Airwave's initial build does (§5.4).

        Media items the schedule plays are gap-filled create-only first (existing rows are
        Airwave's metadata and stay as they are), so every row links to its item. The channel
        gets its shuffle seed, the pass cursor where the build stopped (so Airwave's refresh
        continues the pass) and `bumperRev` = the bumper configuration's revision it was built
        under. Runs inside `conn`'s transaction when given (so a build commits its channel and
        schedule together), else in its own. Returns the number of rows written.
        """
        if conn is None:
            with self.transaction() as own:
                return self.write_schedule(
                    channel_id,
                    source_id=source_id,
                    shuffle_seed=shuffle_seed,
                    build=build,
                    pool=pool,
                    bumper_rev=bumper_rev,
                    conn=own,
                )
        used = build.played_keys
        items = [item for item in pool if item.rating_key in used]
        ids = self.media_item_ids(conn, source_id, items)
        conn.execute(t.schedule_item.delete().where(t.schedule_item.c.channel_id == channel_id))
        if build.entries:
            conn.execute(t.schedule_item.insert(), schedule_rows(channel_id, build, ids))
        seed, index, pos = cursor_to_storage(build.cursor)
        conn.execute(
            t.channel.update()
            .where(t.channel.c.id == channel_id)
            .values(
                shuffle_seed=shuffle_seed,
                schedule_pass_seed=seed,
                schedule_pass_index=index,
                schedule_pass_pos=pos,
                bumper_rev=bumper_rev,
            )
        )
        return len(build.entries)

    def media_item_ids(
        self, conn: Connection, source_id: str, items: Sequence[MediaItem]
    ) -> dict[str, str]:
        """Ids of the items' `media_item` rows by rating key, creating only the missing ones.

        Airwave's gap-fill (§5.4): existing rows keep their id and content, whoever wrote them,
        and every episode is linked to its show's row (`parentId`). Airwave links only to a
        show row its metadata sync already stored, and so does attached mode (the rows are its
        metadata sync's). Standalone, the project is its own metadata sync: a show without a
        row gets one, created the same create-only way from what its episodes carry
        (`show_items`), so an episode's guide has its series from the first build.
        """
        if not items:
            return {}
        shows = {item.show_rating_key for item in items if item.show_rating_key}
        parents: dict[str, str] = {}
        if shows:
            parents = (
                _select_ids(conn, source_id, sorted(shows), kind="show")
                if self.deployment.attached
                else _insert_ids(
                    conn,
                    source_id,
                    [media_item_row(source_id, show) for show in show_items(items)],
                    kind="show",
                )
            )
        rows = [
            {
                **media_item_row(source_id, item),
                "parent_id": parents.get(item.show_rating_key or ""),
            }
            for item in items
        ]
        return _insert_ids(conn, source_id, rows)

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
                .order_by(t.import_trace.c.started_at, t.import_trace.c.id)
            )
            return [keyed(row, t.import_trace) for row in rows]

    def channel_origin(self, channel_id: str) -> Mapping[str, Any] | None:
        """Which run created a channel and with which content signature (None: not ours)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(t.channel_origin).where(t.channel_origin.c.channel_id == channel_id)
            ).one_or_none()
        return None if row is None else dict(row._mapping)

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
                    ("snapshot_items", t.library_item),
                    ("import_traces", t.import_trace),
                )
            }


def schedule_rows(
    channel_id: str, build: ScheduleBuild, item_ids: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Airwave's `schedule_item` rows of a build (ids minted, `createdAt` by the database)."""
    return [
        {
            "id": new_id(),
            "channel_id": channel_id,
            "kind": entry.kind,
            "starts_at": entry.starts_at,
            "duration_seconds": entry.duration_seconds,
            "start_offset_seconds": 0,
            "rating_key": entry.rating_key,
            "bumper_kind": entry.bumper_kind,
            "media_item_id": item_ids.get(entry.rating_key or ""),
            "target_media_item_id": item_ids.get(entry.target_rating_key or ""),
        }
        for entry in build.entries
    ]


def _select_ids(
    conn: Connection, source_id: str, keys: Sequence[str], *, kind: str | None = None
) -> dict[str, str]:
    """Ids of the source's `media_item` rows with these rating keys (of one type if given)."""
    m = t.media_item.c
    query = sa.select(m.rating_key, m.id).where(
        m.media_source_id == source_id, m.rating_key.in_(keys)
    )
    if kind is not None:
        query = query.where(m.type == kind)
    return dict(conn.execute(query).tuples().all())


_ROW_KEYS = (
    "id",
    "rating_key",
    "type",
    "title",
    "duration_ms",
    "year",
    "air_date",
    "parent_id",
    "guide",
)
"""The `media_item` columns `_insert_ids` takes from each row (the rest are one value a batch)."""
_ROW_COLUMNS = tuple((key, t.media_item.c[key].name) for key in _ROW_KEYS)
"""Each of `_ROW_KEYS` with its column's name in the database (the JSONB rows' keys)."""


def _insert_ids(
    conn: Connection, source_id: str, rows: Sequence[dict[str, Any]], *, kind: str | None = None
) -> dict[str, str]:
    """Create the rows that are missing (create-only) and return every row's id by rating key.

    One statement: the insert's returned ids, plus the ids of rows that already existed. A row
    a concurrent build inserted after this statement began is neither, so its id is read by a
    second statement, only then. The rows travel as one JSONB array unpacked by
    `jsonb_to_recordset` and every value is a parameter, so the statement is built once per
    process (`_insert_ids_statement`) and SQLAlchemy neither rebuilds nor re-keys it per build
    (a multi-row VALUES of a few hundred bound values took as long to compile as to run; a
    statement rebuilt per call still cost its cache key).
    """
    keys = [row["rating_key"] for row in rows]
    payload: list[dict[str, Any]] = []
    for row in rows:
        unknown = row.keys() - {*_ROW_KEYS, "media_source_id"}
        if unknown:
            raise ValueError(f"media_item rows carry no such column here: {sorted(unknown)}")
        full = {"id": new_id(), **row}
        payload.append({name: full.get(key) for key, name in _ROW_COLUMNS})
    found = dict(
        conn.execute(
            _insert_ids_statement(kind),
            {
                "media_rows": payload,
                "source_id": source_id,
                "updated_at": t.utc_now(),
                "rating_keys": keys,
            },
        )
        .tuples()
        .all()
    )
    missing = [key for key in keys if key not in found]
    if missing:
        found.update(_select_ids(conn, source_id, missing, kind=kind))
    return found


_INSERT_IDS_STATEMENTS: dict[str | None, sa.CompoundSelect[str, str]] = {}


def _insert_ids_statement(kind: str | None) -> sa.CompoundSelect[str, str]:
    """`_insert_ids`' statement for rows of `kind` (None: any), built on first use."""
    statement = _INSERT_IDS_STATEMENTS.get(kind)
    if statement is not None:
        return statement
    m = t.media_item.c
    columns = [m[key] for key in _ROW_KEYS]
    unpacked = (
        sa.func.jsonb_to_recordset(sa.bindparam("media_rows", type_=pg.JSONB))
        .table_valued(*(sa.column(c.name, c.type) for c in columns))
        .render_derived(name="media_rows", with_types=True)
    )
    source_id = sa.bindparam("source_id", type_=sa.Text)
    inserted = (
        pg_insert(t.media_item)
        .from_select(
            [*columns, m.media_source_id, m.updated_at],
            sa.select(
                *(unpacked.c[c.name] for c in columns),
                source_id,
                # Column defaults computed in Python are not applied to an INSERT … SELECT.
                sa.bindparam("updated_at", type_=t.UtcTimestamp()),
            ),
        )
        .on_conflict_do_nothing(index_elements=[m.media_source_id, m.rating_key])
        .returning(m.rating_key, m.id)
        .cte("inserted")
    )
    existing = sa.select(m.rating_key, m.id).where(
        m.media_source_id == source_id,
        m.rating_key == sa.any_(sa.bindparam("rating_keys", type_=pg.ARRAY(sa.Text))),
    )
    if kind is not None:
        existing = existing.where(m.type == kind)
    statement = sa.select(inserted.c.rating_key, inserted.c.id).union_all(existing)
    _INSERT_IDS_STATEMENTS[kind] = statement  # a race builds an equal statement twice: harmless
    return statement
