"""The old layout upgrades in place with nothing lost, and every session zone writes UTC instants.

A database of the previous release's layout (schema `airwave`, revision 0007) is filled with rows
in every old table (tests/support/legacy.py), its time zone set away from UTC, and upgraded; then
each of Airwave's tables and each private one is read back, through the project's tables (aware
UTC datetimes), as raw column values (the UTC wall clock Airwave reads), and through the stores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import dagster as dg
import psycopg2
import pytest
import sqlalchemy as sa
from pydantic import BaseModel

from airwave_dagster import settings
from airwave_dagster.cli import environment
from airwave_dagster.domain.import_plan import plan_import
from airwave_dagster.domain.library import Library, MediaItem
from airwave_dagster.domain.lineup_file import parse_lineup
from airwave_dagster.domain.schedule import build_schedule
from resources import migrations
from resources import tables as t
from resources.database import DatabaseResource
from resources.io_manager import PostgresJsonIOManager
from resources.stores import Stores, open_stores
from resources.stores.channels import channel_row
from resources.stores.claims import Claimant
from resources.stores.engine import engine_for
from resources.stores.library import library_synced
from resources.stores.rows import keyed
from tests.support import legacy, lineups
from tests.support.channels import create_channel
from tests.support.homes import user_env

pytestmark = pytest.mark.postgres

AIRWAVE = str(Path(sys.executable).parent / "airwave")

SLACK = timedelta(minutes=1)
"""How far a value stamped by the database may be from the test's clock; every zone offset
that a shifted value would carry here (New York's 5 h, Kathmandu's 5 h 45, Kolkata's 5 h 30) is
far outside it."""

MOVED = (
    "step_output",
    "run_start",
    "ai_budget",
    "ai_spend",
    "library_profile",
    "channel_schedule_state",
    "interrupt",
)
"""The old layout's private tables, which 0008 moves into `airwave_dagster` as they are."""


def _database(suffix: str) -> str:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    prefix = os.environ.get("AIRWAVE_TEST_DB", "airwave_test") + (f"_{worker}" if worker else "")
    return f"{prefix}_{suffix}"


def legacy_id(prefix: str, old_id: int) -> str:
    """The text id 0008 gives a row whose old id was a BIGINT (`_legacy_id` of the migration)."""
    return f"c0{prefix}{old_id:022d}"


def naive(moment: datetime) -> datetime:
    """The UTC wall clock of an instant: what Airwave's `TIMESTAMP(3)` columns must hold."""
    return moment.astimezone(UTC).replace(tzinfo=None)


def _execute(url: str, statement: str, params: Any = None, *, zone: str | None = "UTC") -> Any:
    """Run one statement on a psycopg2 session of its own; its rows (None without a result).

    `zone` pins the session's TimeZone (raw column values then read as they are stored, and
    `now()` comparisons mean UTC); None leaves the database's and role's settings in force.
    """
    options = {} if zone is None else {"options": f"-c TimeZone={zone}"}
    conn = psycopg2.connect(environment.libpq_dsn(url), **options)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(statement, params)
            return cur.fetchall() if cur.description is not None else None
    finally:
        conn.close()


def _raw(url: str, table: str, columns: str, where: str = "TRUE") -> list[tuple[Any, ...]]:
    """Raw column values of public.`table` on a UTC session (naive datetimes as stored)."""
    rows: list[tuple[Any, ...]] = _execute(
        url, f'SELECT {columns} FROM public."{table}" WHERE {where} ORDER BY id'
    )
    return rows


def _rows(url: str, table: sa.Table) -> dict[str, dict[str, Any]]:
    """Every row of a project table by id (Python keys, aware UTC datetimes)."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args=t.UTC_SESSION)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(table).order_by(table.c.id)).all()
    finally:
        engine.dispose()
    return {row.id: keyed(row, table) for row in rows}


def _private(url: str, table: str, key: str) -> dict[Any, dict[str, Any]]:
    """Every row of a table of the private schema, by `key`."""
    rows = _execute(url, f"SELECT row_to_json(r)::text FROM airwave_dagster.{table} r")
    return {row[key]: row for row in (json.loads(text) for (text,) in rows)}


def _snapshot(url: str, schema: str, tables: tuple[str, ...]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of `tables` in `schema`, as psycopg2 reads them, in a stable order."""
    return {
        table: sorted(_execute(url, f"SELECT * FROM {schema}.{table}"), key=repr)
        for table in tables
    }


def _everything(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every schema, and every row of every table of the project with Alembic's version."""
    names = tuple(f'{table.schema}."{table.name}"' for table in t.metadata.sorted_tables)
    return {
        "schemas": _execute(url, "SELECT nspname FROM pg_namespace ORDER BY 1"),
        **{
            name: sorted(_execute(url, f"SELECT * FROM {name}"), key=repr)
            for name in (*names, "airwave_dagster.alembic_version")
        },
    }


def _set_zone(url: str, *, database: str | None = None, role: str | None = None) -> None:
    name = sa.make_url(url).database
    if database is not None:
        _execute(url, f"ALTER DATABASE \"{name}\" SET timezone TO '{database}'")
    if role is not None:
        _execute(url, f"ALTER ROLE CURRENT_USER IN DATABASE \"{name}\" SET timezone TO '{role}'")


def _session_zone(url: str) -> str:
    """The TimeZone a session gets when nothing pins it (database and role settings applied)."""
    ((zone,),) = _execute(url, "SHOW TimeZone", zone=None)
    return str(zone)


CLI = "airwave db upgrade"
UNPINNED = "an unpinned session"


@dataclass(frozen=True)
class Upgraded:
    """A legacy database after its upgrade, with what was read before it."""

    url: str
    via: str
    started: datetime
    finished: datetime
    moved_before: dict[str, list[tuple[Any, ...]]]

    def stamped(self, value: datetime) -> bool:
        """Whether an aware instant was stamped during the upgrade (not shifted by a zone)."""
        return self.started - SLACK <= value <= self.finished + SLACK

    def stamped_naive(self, value: datetime) -> bool:
        """Whether a raw column value is the UTC wall clock of a moment during the upgrade."""
        return naive(self.started - SLACK) <= value <= naive(self.finished + SLACK)


def _upgrade(via: str, url: str, home: Path) -> None:
    """Upgrade `url` to head the way `via` names (see `upgraded`); `home` is an empty directory."""
    if via == UNPINNED:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(migrations, "UTC_SESSION", {})
            migrations.upgrade(url)
        return
    env = user_env(
        home, **{settings.DATABASE_URL_ENV: url, settings.ENV_FILE_ENV: "/nonexistent/.env"}
    )
    env.pop(settings.DAGSTER_PG_URL_ENV, None)
    done = subprocess.run(
        [AIRWAVE, "db", "upgrade"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"at revision {', '.join(sorted(migrations.heads()))}" in done.stdout


@pytest.fixture(scope="module", params=[CLI, UNPINNED])
def upgraded(
    request: pytest.FixtureRequest, server_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Upgraded]:
    """A filled database of the previous release's layout, upgraded to head one of two ways.

    - `airwave db upgrade`: the command an operator runs (its engine pins TimeZone=UTC), on a
      database whose default zone is America/New_York.
    - an unpinned session: `upgrade()` with the pin taken away, on a session whose zone comes
      from the role's setting in that database (Asia/Kathmandu, over the database's New York),
      so the migration's own SQL must not depend on the session's zone.
    """
    via = str(request.param)
    suffix = "upgrade_cli" if via == CLI else "upgrade_session"
    with legacy.own_database(server_url, _database(suffix)) as url:
        legacy.build_legacy_layout(url)
        legacy.fill_legacy_layout(url)
        moved_before = _snapshot(url, "airwave", MOVED)
        if via == CLI:
            _set_zone(url, database="America/New_York")
            assert _session_zone(url) == "America/New_York"
        else:
            _set_zone(url, database="America/New_York", role="Asia/Kathmandu")
            assert _session_zone(url) == "Asia/Kathmandu"
        started = datetime.now(UTC)
        _upgrade(via, url, tmp_path_factory.mktemp("user"))
        finished = datetime.now(UTC)
        yield Upgraded(url, via, started, finished, moved_before)


@pytest.fixture
def stores(upgraded: Upgraded) -> Stores:
    """The project's stores over the upgraded database (overrides the clean-database one)."""
    return open_stores(upgraded.url)


# -- Airwave's tables ------------------------------------------------------------------------------


def test_media_sources_and_libraries_are_carried_over(upgraded: Upgraded, stores: Stores) -> None:
    url = upgraded.url
    sources = _rows(url, t.media_source)
    assert set(sources) == {legacy.SOURCE_ID, legacy.SECOND_SOURCE_ID}
    first, second = sources[legacy.SOURCE_ID], sources[legacy.SECOND_SOURCE_ID]
    assert (first["type"], first["name"], first["base_url"], first["token"]) == (
        "PLEX",
        "Living room",
        legacy.BASE_URL,
        "",
    )
    # The oldest source becomes Airwave's default; the second keeps its disabled state.
    assert (first["enabled"], first["is_default"]) == (True, True)
    assert (second["enabled"], second["is_default"]) == (False, False)
    assert (first["created_at"], first["updated_at"]) == (legacy.CREATED, legacy.UPDATED)
    assert second["created_at"] == legacy.CREATED + timedelta(days=1)
    assert _raw(url, "media_source", '"createdAt", "updatedAt"', f"id = '{legacy.SOURCE_ID}'") == [
        (naive(legacy.CREATED), naive(legacy.UPDATED))
    ]
    # library_synced_at left Airwave's table for the private one; a source never synced has none.
    assert {
        key: datetime.fromisoformat(row["library_synced_at"])
        for key, row in _private(url, "source_state", "media_source_id").items()
    } == {legacy.SOURCE_ID: legacy.SYNCED}
    assert library_synced(stores.channels, legacy.SOURCE_ID)
    assert not library_synced(stores.channels, legacy.SECOND_SOURCE_ID)

    libraries = _rows(url, t.media_library)
    assert {
        key: (
            r["media_source_id"],
            r["key"],
            r["title"],
            r["type"],
            r["enabled"],
            r["last_scan_at"],
        )
        for key, r in libraries.items()
    } == {
        "lib-movies": (legacy.SOURCE_ID, "1", "Movies", "movie", True, legacy.SCANNED),
        "lib-shows": (legacy.SOURCE_ID, "2", "TV Shows", "show", False, None),
    }
    # The old rows had no creation or update time: the upgrade's, in UTC.
    for row in libraries.values():
        assert upgraded.stamped(row["created_at"]) and upgraded.stamped(row["updated_at"])
    for scanned, created, updated in _raw(
        url, "media_library", '"lastScanAt", "createdAt", "updatedAt"', "key = '1'"
    ):
        assert scanned == naive(legacy.SCANNED)
        assert upgraded.stamped_naive(created) and upgraded.stamped_naive(updated)


def test_media_items_get_airwave_guides_and_the_full_items_stay_private(
    upgraded: Upgraded, stores: Stores
) -> None:
    url = upgraded.url
    items = _rows(url, t.media_item)
    heat, wire = legacy_id("m", legacy.HEAT_ID), legacy_id("m", legacy.WIRE_ID)
    target, orphan = legacy_id("m", legacy.TARGET_ID), legacy_id("m", legacy.ORPHAN_ID)
    assert set(items) == {heat, wire, target, orphan}
    assert {key: (r["rating_key"], r["type"], r["parent_id"]) for key, r in items.items()} == {
        heat: ("101", "movie", None),
        wire: ("200", "show", None),
        # The episode is linked to its show's row; the one whose show has no row is not.
        target: ("201", "episode", wire),
        orphan: ("301", "episode", None),
    }
    row = items[heat]
    assert (row["title"], row["duration_ms"], row["year"], row["air_date"]) == (
        "Heat",
        10_200_000,
        1995,
        "1995-12-15",
    )
    # GuideMeta: camelCase, Airwave's tag limits (3 directors, 5 genres, 5 cast), the
    # project's own fields (library, view count, network, dovi flag) left out.
    assert row["guide"] == {
        "title": "Heat",
        "type": "movie",
        "year": 1995,
        "contentRating": "R",
        "summary": "A group of professional bank robbers.",
        "studio": "Warner Bros.",
        "directors": ["Michael Mann", "Second Unit", "Third Unit"],
        "genres": ["Action", "Crime", "Drama", "Thriller", "Heist"],
        "cast": ["Al Pacino", "Robert De Niro", "Val Kilmer", "Jon Voight", "Tom Sizemore"],
        "audienceRating": 9.1,
        "criticRating": 8.7,
        "durationMs": 10_200_000,
        "addedAt": "2024-05-01T12:00:00.000Z",
        "resolution": "1080",
        "hdr": "HDR10",
    }
    assert items[target]["guide"] == {
        "title": "The Target",
        "type": "episode",
        "year": 2002,
        "contentRating": "TV-MA",
        "studio": "HBO",
        "genres": ["Crime", "Drama"],
        "durationMs": 3_600_000,
        "showTitle": "The Wire",
        "showRatingKey": "200",
        "season": 1,
        "episode": 1,
    }
    assert items[wire]["guide"] == {
        "title": "The Wire",
        "type": "show",
        "studio": "HBO",
        "genres": ["Crime", "Drama"],
        "durationMs": 0,
    }
    assert [items[key]["available"] for key in (heat, wire, target, orphan)] == [
        True,
        True,
        True,
        False,
    ]
    assert items[heat]["last_synced_at"] == legacy.SYNCED
    assert items[orphan]["last_synced_at"] == legacy.SCANNED
    # A row the previous release never stamped gets the upgrade's time, as do the new columns.
    assert upgraded.stamped(items[wire]["last_synced_at"])
    for item in items.values():
        assert upgraded.stamped(item["created_at"]) and upgraded.stamped(item["updated_at"])
    ((synced, created, updated),) = _raw(
        url, "media_item", '"lastSyncedAt", "createdAt", "updatedAt"', f"id = '{heat}'"
    )
    assert synced == naive(legacy.SYNCED)
    assert upgraded.stamped_naive(created) and upgraded.stamped_naive(updated)
    ((wire_synced,),) = _raw(url, "media_item", '"lastSyncedAt"', f"id = '{wire}'")
    assert upgraded.stamped_naive(wire_synced)

    # The private snapshot keeps the whole old dump: every tag, the project's own fields.
    snapshot = _private(url, "library_item", "rating_key")
    assert {key: (row["media_source_id"], row["item"]) for key, row in snapshot.items()} == {
        item.rating_key: (legacy.SOURCE_ID, legacy.old_dump(item))
        for item in (legacy.HEAT, legacy.WIRE, legacy.TARGET, legacy.ORPHAN)
    }
    assert datetime.fromisoformat(snapshot["101"]["synced_at"]) == legacy.SYNCED
    assert snapshot["301"]["available"] is False
    assert stores.ai.snapshot_items(legacy.SOURCE_ID) == [
        legacy.old_dump(item) for item in (legacy.HEAT, legacy.WIRE, legacy.TARGET)
    ]


def test_packages_channels_definitions_and_their_private_state(
    upgraded: Upgraded, stores: Stores
) -> None:
    url = upgraded.url
    packages = _rows(url, t.channel_package)
    assert {
        key: (r["key"], r["name"], r["description"], r["icon"], r["tint"], r["sort_index"])
        for key, r in packages.items()
    } == {
        "pkg-movies": ("movies", "Movies", "Feature films", "lucide:Film", "amber", 2),
        "pkg-ai": ("ai-picks", "AI picks", None, None, None, 5),
    }
    assert [(r["generated"], r["ai_generated"]) for r in packages.values()] == [
        (False, True),
        (False, False),
    ]
    assert {(r["created_at"], r["updated_at"]) for r in packages.values()} == {
        (legacy.CREATED, legacy.UPDATED)
    }

    channels = _rows(url, t.channel)
    assert set(channels) == {"ch-101", "ch-102", "ch-103"}
    action = channels["ch-101"]
    assert {key: action[key] for key in action if key not in ("id",)} == {
        "number": 101,
        "name": "Action Movies",
        "callsign": "ACTN",
        "description": "Explosions, mostly",
        "icon": "lucide:Flame",
        "tint": "red",
        "enabled": True,
        "sort_index": 1,
        "ordering": "IN_ORDER",
        "shuffle_seed": -123_456_789,
        "strategy": {"kind": "blocks"},
        "sort_field": "year",
        "sort_dir": "desc",
        "generated": False,
        "preset_key": None,
        "ai_generated": False,
        "schedule_pass_seed": -7,
        "schedule_pass_index": 2,
        "schedule_pass_pos": 3,
        "schedule_recent": legacy.RECENT,
        "bumper_mode": "FULL",
        "bumper_rev": 4,
        "media_source_id": legacy.SOURCE_ID,
        "package_id": "pkg-movies",
        "created_by_id": None,
        "created_at": legacy.CREATED,
        "updated_at": legacy.UPDATED,
    }
    claimed, preset = channels["ch-102"], channels["ch-103"]
    assert (claimed["enabled"], claimed["ordering"], claimed["bumper_mode"]) == (
        False,
        "BY_AIR_DATE",
        "OFF",
    )
    assert (claimed["ai_generated"], claimed["package_id"]) == (True, "pkg-ai")
    assert (preset["generated"], preset["preset_key"], preset["package_id"]) == (
        True,
        "preset:comedy",
        None,
    )
    assert (preset["ordering"], preset["bumper_mode"], preset["enabled"]) == (
        "SHUFFLE",
        "INHERIT",
        True,
    )
    # Enum columns hold Airwave's enum types, not text.
    enums = 'ordering::text, pg_typeof(ordering)::text, pg_typeof("bumperMode")::text'
    assert _raw(url, "channel", enums, "number = 101") == [
        ("IN_ORDER", '"OrderingStrategy"', '"BumperMode"')
    ]
    assert _raw(url, "channel", '"createdAt", "updatedAt"', "number = 101") == [
        (naive(legacy.CREATED), naive(legacy.UPDATED))
    ]

    # Signatures and claims moved to private rows; the preset has neither.
    origins = _private(url, "channel_origin", "channel_id")
    assert {key: (r["signature"], r["run_id"]) for key, r in origins.items()} == {
        "ch-101": ("sig-101", "run-import-1"),
        "ch-102": ("sig-102", "run-ai-1"),
    }
    assert datetime.fromisoformat(origins["ch-101"]["created_at"]) == legacy.CREATED
    claims = _private(url, "channel_claim", "channel_id")
    assert list(claims) == ["ch-102"]
    assert (claims["ch-102"]["run_id"], claims["ch-102"]["step_key"]) == (
        "run-ai-1",
        "build_ai_channel[noir]",
    )
    assert claims["ch-102"]["attempt"] == 2
    assert datetime.fromisoformat(claims["ch-102"]["heartbeat_at"]) == legacy.HEARTBEAT
    assert stores.claims.open_claims() == [
        (102, Claimant(run_id="run-ai-1", step_key="build_ai_channel[noir]", attempt=2))
    ]
    origin = stores.channels.channel_origin("ch-101")
    assert origin is not None and origin["signature"] == "sig-101"
    assert stores.channels.channel_origin("ch-103") is None

    definitions = _rows(url, t.channel_definition)
    assert {
        key: (r["channel_id"], r["kind"], r["mode"], r["sort_index"], r["manual_item_keys"])
        for key, r in definitions.items()
    } == {
        "def-101-exclude": ("ch-101", "PREDICATE", "EXCLUDE", 1, None),
        "def-101-include": ("ch-101", "PREDICATE", "INCLUDE", 0, None),
        "def-102": ("ch-102", "PLEX_COLLECTION", "INCLUDE", 0, None),
        # '{}' becomes NULL as Airwave leaves it; a real list stays.
        "def-103": ("ch-103", "MANUAL_ITEMS", "INCLUDE", 0, ["101", "201"]),
    }
    include = definitions["def-101-include"]
    assert (include["plex_filter"], include["plex_library_key"]) == (legacy.PLAN_FILTER, "1")
    assert definitions["def-102"]["plex_collection_key"] == "555"
    assert {(r["created_at"], r["updated_at"]) for r in definitions.values()} == {
        (legacy.CREATED, legacy.UPDATED)
    }

    lineup = stores.channels.export_lineup(exported_at=legacy.UPDATED)
    assert [(p.key, p.sort_index) for p in lineup.packages] == [("movies", 2), ("ai-picks", 5)]
    assert [(c.number, c.package_key, c.enabled) for c in lineup.channels] == [
        (101, "movies", True),
        (102, "ai-picks", False),
        (103, None, True),
    ]
    first = lineup.channels[0]
    assert (first.ordering, first.sort_field, first.sort_dir, first.bumper_mode) == (
        "IN_ORDER",
        "year",
        "desc",
        "FULL",
    )
    assert [
        (d.kind, d.mode, d.plex_filter, d.plex_library_title, d.manual_item_keys)
        for d in first.definitions
    ] == [
        ("PREDICATE", "INCLUDE", legacy.PLAN_FILTER, "Movies", []),
        ("PREDICATE", "EXCLUDE", {"mediaTypes": ["movie"]}, None, []),
    ]
    assert [d.manual_item_keys for d in lineup.channels[2].definitions] == [["101", "201"]]
    state = stores.channels.instance_state([])
    assert state.channel_numbers == {101, 102, 103}
    assert state.package_keys == {"movies", "ai-picks"}


def test_schedule_rows_keep_their_instants_and_items(upgraded: Upgraded, stores: Stores) -> None:
    url = upgraded.url
    rows = _rows(url, t.schedule_item)
    opener, bumper = legacy_id("s", legacy.OPENER_ID), legacy_id("s", legacy.BUMPER_ID)
    second, claimed = legacy_id("s", legacy.SECOND_ID), legacy_id("s", legacy.ON_CLAIMED_ID)
    bumper_at = legacy.STARTS + timedelta(seconds=10_200)
    fields = (
        "channel_id",
        "kind",
        "starts_at",
        "duration_seconds",
        "start_offset_seconds",
        "rating_key",
        "bumper_kind",
        "media_item_id",
        "target_media_item_id",
        "created_at",
    )
    assert {key: tuple(row[f] for f in fields) for key, row in rows.items()} == {
        opener: (
            "ch-101",
            "PROGRAM",
            legacy.STARTS,
            10_200,
            0,
            "101",
            None,
            legacy_id("m", legacy.HEAT_ID),
            None,
            legacy.CREATED,
        ),
        bumper: (
            "ch-101",
            "BUMPER",
            bumper_at,
            30,
            0,
            None,
            "interstitial",
            None,
            legacy_id("m", legacy.TARGET_ID),
            legacy.CREATED,
        ),
        second: (
            "ch-101",
            "PROGRAM",
            bumper_at + timedelta(seconds=30),
            3_600,
            0,
            "201",
            None,
            legacy_id("m", legacy.TARGET_ID),
            None,
            legacy.CREATED,
        ),
        claimed: (
            "ch-102",
            "PROGRAM",
            legacy.STARTS,
            1_500,
            0,
            "301",
            None,
            legacy_id("m", legacy.ORPHAN_ID),
            None,
            legacy.CREATED,
        ),
    }
    assert _raw(url, "schedule_item", '"startsAt", kind::text, pg_typeof(kind)::text') == [
        (naive(legacy.STARTS), "PROGRAM", '"ScheduleItemKind"'),
        (naive(bumper_at), "BUMPER", '"ScheduleItemKind"'),
        (naive(bumper_at + timedelta(seconds=30)), "PROGRAM", '"ScheduleItemKind"'),
        (naive(legacy.STARTS), "PROGRAM", '"ScheduleItemKind"'),
    ]

    # What maintenance reads: the channel's settings and where its schedule ends.
    plan = stores.maintenance.channel_plan("ch-101")
    assert (plan.ordering, plan.seed, plan.bumper_mode) == ("IN_ORDER", -123_456_789, "FULL")
    assert plan.definitions == (
        ("INCLUDE", legacy.PLAN_FILTER, "1"),
        ("EXCLUDE", {"mediaTypes": ["movie"]}, None),
    )
    assert stores.maintenance.tail_end("ch-101") == bumper_at + timedelta(seconds=3_630)

    # What a guide reader gets: the episode under its show's title, through the parent link;
    # the claimed channel is left out.
    channels, programmes = stores.maintenance.guide(
        legacy.STARTS - timedelta(hours=1), legacy.STARTS + timedelta(hours=5)
    )
    assert [c.number for c in channels] == [101, 103]
    assert [
        (p.channel_number, p.start, p.stop, p.title, p.sub_title, p.season, p.categories)
        for p in programmes
    ] == [
        (
            101,
            legacy.STARTS,
            bumper_at,
            "Heat",
            None,
            None,
            ("Action", "Crime", "Drama", "Thriller", "Heist"),
        ),
        (
            101,
            bumper_at + timedelta(seconds=30),
            bumper_at + timedelta(seconds=3_630),
            "The Wire",
            "The Target",
            1,
            ("Crime", "Drama"),
        ),
    ]


def test_trace_rows_and_their_private_costs_are_carried_over(
    upgraded: Upgraded, stores: Stores
) -> None:
    traced = legacy.TRACED
    imports = stores.channels.traces("run-import-1")
    assert [
        (
            r["id"],
            r["step_key"],
            r["step_name"],
            r["attempt"],
            r["phase"],
            r["status"],
            r["dry_run"],
            r["started_at"],
            r["finished_at"],
        )
        for r in imports
    ] == [
        (
            legacy_id("i", legacy.PLAN_TRACE_ID),
            "plan_import_lineup",
            "planImport",
            1,
            "plan",
            "ok",
            False,
            traced,
            traced + timedelta(seconds=2),
        ),
        (
            legacy_id("i", legacy.CHANNEL_TRACE_ID),
            "build_channel[c101]",
            "buildChannel",
            2,
            "channel",
            "created",
            False,
            traced + timedelta(seconds=3),
            traced + timedelta(seconds=9),
        ),
        (
            legacy_id("i", legacy.FAILED_TRACE_ID),
            "build_channel[c104]",
            "buildChannel",
            1,
            "channel",
            "failed",
            True,
            traced + timedelta(seconds=4),
            None,
        ),
    ]
    plan, built, failed = imports
    assert plan["output"] == legacy.PLAN_OUTPUT and plan["input"] is None
    assert (built["package_key"], built["channel_name"], built["channel_number"]) == (
        "movies",
        "Action Movies",
        101,
    )
    assert (built["pool_size"], built["schedule_slots"], built["number_reassigned"]) == (
        42,
        300,
        True,
    )
    assert (built["input"], built["output"]) == (
        {"number": 100},
        {"number": 101, "status": "created"},
    )
    assert (failed["reason"], failed["error"]) == ("the pool is empty", "the pool is empty")
    assert _raw(upgraded.url, "import_trace", '"startedAt"') == [
        (naive(traced),),
        (naive(traced + timedelta(seconds=3)),),
        (naive(traced + timedelta(seconds=4)),),
    ]

    ai = stores.ai.traces("run-ai-1")
    assert [
        (
            r["id"],
            r["step_key"],
            r["phase"],
            r["status"],
            r["model"],
            (
                r["input_tokens"],
                r["output_tokens"],
                r["cache_read_tokens"],
                r["cache_write_tokens"],
            ),
            r["agent_steps"],
            r["cost_usd"],
            r["context_sha256"],
            r["started_at"],
        )
        for r in ai
    ] == [
        (
            legacy_id("a", legacy.AI_PLAN_ID),
            "plan_lineup",
            "plan",
            "ok",
            "claude-sonnet-4-5",
            (1_200, 340, 5_000, 800),
            0,
            Decimal("0.012345"),
            "ab" * 32,
            traced,
        ),
        (
            legacy_id("a", legacy.AI_FAILED_ID),
            "build_ai_channel[noir]",
            "build",
            "failed",
            None,
            (0, 0, 0, 0),
            6,
            None,
            None,
            traced + timedelta(minutes=1),
        ),
        (
            legacy_id("a", legacy.AI_UNPRICED_ID),
            "build_ai_channel[jazz]",
            "build",
            "ok",
            "unknown-model",
            (0, 0, 0, 0),
            0,
            None,
            "cd" * 32,
            traced + timedelta(minutes=2),
        ),
    ]
    plan_row, failed_row, _ = ai
    assert plan_row["input"] == {"existingPackages": ["movies"]}
    assert plan_row["finished_at"] == traced + timedelta(seconds=30)
    assert (failed_row["channel_key"], failed_row["channel_number"]) == ("noir", 102)
    assert (failed_row["trace"], failed_row["error"]) == (legacy.AI_TRACE, "model overloaded")
    # Only rows that had a cost or a context got a private row.
    assert set(_private(upgraded.url, "ai_trace_cost", "trace_id")) == {
        legacy_id("a", legacy.AI_PLAN_ID),
        legacy_id("a", legacy.AI_UNPRICED_ID),
    }


# -- the private tables and the layout -------------------------------------------------------------


class Payload(BaseModel):
    """The shape of the stored step output the IO manager reads back."""

    number: int
    names: list[str]


@dg.op(tags={"airwave/code_version": "v3"})
def build_channel() -> Payload:
    """Stands for the op whose output the previous release stored."""
    return Payload(number=0, names=[])


def test_private_tables_move_with_every_row(upgraded: Upgraded, stores: Stores) -> None:
    url = upgraded.url
    moved = _snapshot(url, "airwave_dagster", MOVED)
    # Later revisions only append columns (0009: ai_spend.cache_write_1h_tokens); every column
    # the old layout had keeps its position and its value.
    assert {
        table: [row[: len(before[0])] if before else row for row in moved[table]]
        for table, before in upgraded.moved_before.items()
    } == upgraded.moved_before
    assert all(upgraded.moved_before[table] for table in MOVED)

    # The stores and the IO manager read them where they now are.
    manager = PostgresJsonIOManager(database=DatabaseResource(url=url))
    output = dg.build_output_context(
        run_id="run-import-1",
        step_key="build_channel",
        name="result",
        mapping_key="c101",
        op_def=build_channel,
        dagster_type=dg.DagsterType(
            type_check_fn=lambda _, __: True, name="Payload", typing_type=Payload
        ),
    )
    loaded = manager.load_input(dg.build_input_context(upstream_output=output))
    assert loaded == Payload(number=101, names=["Action Movies"])

    ledger = stores.ai.ledger("run-ai-1")
    assert (ledger.budget_usd, ledger.spent_usd, ledger.calls) == (5.0, 0.012345, 1)
    assert [row["model"] for row in stores.ai.spend_rows("run-ai-1")] == [
        "claude-sonnet-4-5",
        "unknown-model",
    ]
    assert stores.ai.load_profile(legacy.SOURCE_ID) == (legacy.PROFILE, "01" * 32)
    assert [m.model_dump(mode="json") for m in stores.maintenance.pass_marks("ch-101")] == [
        {"pass_seed": 7, "pass_index": 2, "starts_at": "2026-11-30T23:30:00Z"}
    ]
    waiting = stores.approvals.find("run-ai-1")
    assert waiting is not None and waiting.open
    assert (waiting.id, waiting.payload, waiting.expires_at) == (
        "int-open",
        legacy.INTERRUPT_PAYLOAD,
        legacy.EXPIRES,
    )
    answered = stores.approvals.find("run-ai-0")
    assert answered is not None
    assert answered.describe() == "approved by alice at 2026-11-30 23:30:00 UTC"
    assert answered.continuation_run_id == "run-ai-0b"

    # The spend ledger's identity sequence moved with its table: the next id follows the old.
    # (Inside a transaction the closing connection rolls back: the ledger stays as it was.)
    ((next_id,),) = _execute(
        url,
        "BEGIN; INSERT INTO airwave_dagster.ai_spend (ledger_id, run_id, phase, model) "
        "VALUES ('x', 'x', 'plan', 'x') RETURNING id",
    )
    assert next_id == 3


def test_the_old_schema_is_gone_and_alembic_is_at_head(upgraded: Upgraded) -> None:
    url = upgraded.url
    assert _execute(url, "SELECT nspname FROM pg_namespace WHERE nspname = 'airwave'") == []
    assert _execute(url, "SELECT to_regclass('airwave_dagster.alembic_version') IS NOT NULL") == [
        (True,)
    ]
    assert migrations.current_revisions(url) == migrations.heads()


def test_a_second_upgrade_changes_nothing(upgraded: Upgraded, tmp_path: Path) -> None:
    before = _everything(upgraded.url)

    _upgrade(upgraded.via, upgraded.url, tmp_path)

    assert _everything(upgraded.url) == before


def test_carried_claims_and_signatures_keep_working(server_url: str) -> None:
    with legacy.own_database(server_url, _database("upgrade_claims")) as url:
        legacy.build_legacy_layout(url)
        legacy.fill_legacy_layout(url)
        migrations.upgrade(url)
        stores = open_stores(url)
        values = channel_row(
            name="Whatever",
            callsign=None,
            description=None,
            icon=None,
            tint=None,
            ordering="SHUFFLE",
            sort_field="title",
            sort_dir="asc",
            media_source_id=legacy.SOURCE_ID,
            package_id=None,
        )
        retry = Claimant(run_id="run-import-1", step_key="build_channel[c101]", attempt=3)

        # A retry of the run that created channel 101 adopts it by its carried signature; another
        # channel on that number, or on the preset's (no signature: not the project's), conflicts.
        adopted = stores.claims.claim(
            number=101, claimant=retry, signature="sig-101", values=values, wait_seconds=0
        )
        clash = stores.claims.claim(
            number=101, claimant=retry, signature="sig-other", values=values, wait_seconds=0
        )
        preset = stores.claims.claim(
            number=103, claimant=retry, signature="sig-103", values=values, wait_seconds=0
        )
        assert (adopted.kind, adopted.channel_id) == ("existing", "ch-101")
        assert clash.kind == preset.kind == "conflict"

        # The build that held 102 before the upgrade still holds it: it beats and commits.
        holder = Claimant(run_id="run-ai-1", step_key="build_ai_channel[noir]", attempt=2)
        again = stores.claims.claim(
            number=102, claimant=holder, signature="sig-102", values=values, wait_seconds=0
        )
        assert (again.kind, again.channel_id) == ("claimed", "ch-102")
        assert stores.claims.heartbeat("ch-102", holder)
        with stores.channels.transaction() as conn:
            stores.claims.commit(conn, "ch-102", holder)
        assert stores.claims.open_claims() == []
        assert _raw(url, "channel", "enabled", "id = 'ch-102'") == [(True,)]


# -- new writes on a session zone that is not UTC --------------------------------------------------


def test_new_writes_store_the_same_instants_on_any_session_zone(server_url: str) -> None:
    with legacy.own_database(server_url, _database("kolkata")) as url:
        _set_zone(url, database="Asia/Kolkata")
        assert _session_zone(url) == "Asia/Kolkata"
        migrations.upgrade(url)
        stores = open_stores(url)
        # Half past five in the morning in Kolkata is half past eleven the evening before in UTC.
        start = datetime(2026, 12, 1, 5, 0, tzinfo=ZoneInfo("Asia/Kolkata"))
        assert naive(start) == datetime(2026, 11, 30, 23, 30)
        before = datetime.now(UTC)

        libraries = [Library(key="1", title="Movies", type="movie")]
        source_id = stores.channels.sync_source("http://plex.kolkata:32400", libraries)
        plan = plan_import(
            parse_lineup(json.dumps(lineups.genre_lineup(1)).encode(), source="tz.json"),
            stores.channels.instance_state(libraries),
        )
        (planned,) = plan.creates()
        created = create_channel(
            stores, planned, source_id=source_id, package_id=None, run_id="run-tz"
        )
        assert created.channel_id is not None
        channel_id = created.channel_id
        pool = [
            MediaItem(rating_key=str(k), type="movie", title=f"Film {k}", duration_ms=5_400_000)
            for k in range(1, 4)
        ]
        build = build_schedule(
            pool, ordering="IN_ORDER", channel_seed=7, start_at=start, window_seconds=6 * 3600
        )
        stores.channels.write_schedule(
            channel_id,
            source_id=source_id,
            shuffle_seed=7,
            build=build,
            pool=pool,
            bumper_rev=0,
        )
        stores.channels.record_trace(
            run_id="run-tz", step_name="report", phase="report", status="ok"
        )
        stores.ai.record_trace(
            run_id="run-tz", step_name="planLineup", phase="plan", status="ok", cost_usd=0.5
        )
        after = datetime.now(UTC)

        def now_then(value: datetime) -> bool:
            return naive(before - SLACK) <= value <= naive(after + SLACK)

        # The schedule holds the UTC wall clock of each instant, not Kolkata's.
        starts = [row[0] for row in _raw(url, "schedule_item", '"startsAt"')]
        assert sorted(starts) == [naive(entry.starts_at) for entry in build.entries]
        assert min(starts) == datetime(2026, 11, 30, 23, 30)
        # Database defaults (CURRENT_TIMESTAMP) and writer stamps both mean now, in UTC.
        stamped = {
            "media_source": '"createdAt", "updatedAt"',
            "media_library": '"createdAt", "updatedAt", "lastScanAt"',
            "channel": '"createdAt", "updatedAt"',
            "channel_definition": '"createdAt", "updatedAt"',
            "media_item": '"createdAt", "updatedAt", "lastSyncedAt"',
            "schedule_item": '"createdAt"',
            "import_trace": '"startedAt", "finishedAt"',
            "ai_lineup_trace": '"startedAt", "finishedAt"',
        }
        for table, columns in stamped.items():
            values = [value for row in _raw(url, table, columns) for value in row]
            assert values, table
            assert all(now_then(value) for value in values), (table, values, before)

        # Read back through the project's tables and stores: the same instants.
        read = sorted(row["starts_at"] for row in _rows(url, t.schedule_item).values())
        assert read == [entry.starts_at for entry in build.entries]
        _, programmes = stores.maintenance.guide(start, start + timedelta(hours=2))
        assert programmes[0].start == start
        (trace,) = stores.channels.traces("run-tz")
        assert before - SLACK <= trace["started_at"] <= after + SLACK

        # Why every engine of the project pins TimeZone=UTC: a session left on the database's
        # zone stores an aware instant, even one given in UTC, as Kolkata's wall clock, which
        # Airwave reads as UTC: 5 h 30 late.
        conn = psycopg2.connect(environment.libpq_dsn(url))
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW TimeZone")
                assert cur.fetchone() == ("Asia/Kolkata",)
                cur.execute(
                    'INSERT INTO public.schedule_item (id, "channelId", "startsAt", '
                    '"durationSeconds") VALUES (%s, %s, %s, %s) RETURNING "startsAt"',
                    ("trap", channel_id, start.astimezone(UTC), 60),
                )
                assert cur.fetchone() == (datetime(2026, 12, 1, 5, 0),)
        finally:
            conn.rollback()
            conn.close()
        with engine_for(url).connect() as pinned:
            assert pinned.execute(sa.text("SHOW TimeZone")).scalar_one() == "UTC"


# -- a database Airwave's server created ----------------------------------------------------------


@pytest.mark.parametrize("layout", ["empty", "legacy"])
def test_the_standalone_migration_refuses_a_public_schema_it_did_not_create(
    server_url: str, layout: str
) -> None:
    with legacy.own_database(server_url, _database(f"refuse_{layout}")) as url:
        if layout == "legacy":
            legacy.build_legacy_layout(url)
            legacy.fill_legacy_layout(url)
        _execute(url, "CREATE TABLE public.channel (id TEXT PRIMARY KEY, number INTEGER)")
        _execute(url, "INSERT INTO public.channel VALUES ('theirs', 7)")
        environment.ensure_schemas(url)
        before = _catalog(url)
        assert ("airwave_dagster",) in before["schemas"]
        old_rows = (
            _snapshot(url, "airwave", ("channel", "media_item")) if layout == "legacy" else {}
        )

        # A fresh database is refused before any revision runs, naming attached mode; one at
        # revision 0007 by 0008 itself, naming the tables it found.
        refusal: tuple[type[Exception], str] = (
            (migrations.ForeignAirwaveError, "set AIRWAVE_MODE=attached")
            if layout == "empty"
            else (RuntimeError, r"public already holds Airwave tables \(channel\)")
        )
        with pytest.raises(refusal[0], match=refusal[1]):
            migrations.upgrade(url)

        # Nothing was created (the refusal rolls the whole upgrade back) and nothing was lost.
        after = _catalog(url)
        assert after == before
        assert not [row for row in after["relations"] if row[0] == "airwave_dagster"]
        assert _execute(url, "SELECT * FROM public.channel") == [("theirs", 7)]
        if layout == "legacy":
            assert _snapshot(url, "airwave", ("channel", "media_item")) == old_rows
            assert _execute(url, "SELECT version_num FROM airwave.alembic_version") == [
                (legacy.LEGACY_REVISION,)
            ]
        else:
            assert ("airwave",) not in after["schemas"]


def _catalog(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every schema, every relation outside the system's, and every type of `public`."""
    return {
        "schemas": _execute(url, "SELECT nspname FROM pg_namespace ORDER BY 1"),
        "relations": _execute(
            url,
            "SELECT n.nspname, c.relname, c.relkind FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') "
            "ORDER BY 1, 2",
        ),
        "types": _execute(
            url,
            "SELECT typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
            "WHERE n.nspname = 'public' ORDER BY 1",
        ),
    }
