"""A database of the previous release's layout (schema `airwave`, revisions 0001-0007), filled.

The upgrade test (tests/resources/test_legacy_upgrade.py) builds one, fills every old table by
plain SQL with rows shaped as the previous release wrote them (`git show
dc4d9ae:resources/tables.py` and `resources/stores/`), upgrades it and compares. Every instant is
away from midnight UTC, so a value shifted by a session's time zone lands on another wall clock
(and often another date).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg2
from psycopg2 import sql
from psycopg2.extras import Json

from airwave_dagster.cli import environment
from airwave_dagster.domain.library import MediaItem

LEGACY_REVISION = "0007_approvals"
"""The last revision of the old layout: what the previous release's `airwave db upgrade` left."""

CREATED = datetime(2026, 11, 28, 21, 15, 30, 250_000, tzinfo=UTC)
UPDATED = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
SYNCED = datetime(2026, 11, 30, 22, 45, 10, tzinfo=UTC)
SCANNED = datetime(2026, 11, 30, 22, 40, 5, 125_000, tzinfo=UTC)
STARTS = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
HEARTBEAT = datetime(2026, 11, 30, 23, 59, 59, 500_000, tzinfo=UTC)
TRACED = datetime(2026, 11, 30, 20, 5, 1, 750_000, tzinfo=UTC)
EXPIRES = datetime(2026, 12, 1, 20, 5, tzinfo=UTC)

SOURCE_ID = "src-living-room"
SECOND_SOURCE_ID = "src-cabin"
BASE_URL = "http://plex.local:32400"

# Old BIGINT ids, deliberately not 1..n, so a mapping by position would show.
HEAT_ID, WIRE_ID, TARGET_ID, ORPHAN_ID = 7, 8, 9, 12
OPENER_ID, BUMPER_ID, SECOND_ID, ON_CLAIMED_ID = 40, 41, 42, 50
PLAN_TRACE_ID, CHANNEL_TRACE_ID, FAILED_TRACE_ID = 3, 4, 5
AI_PLAN_ID, AI_FAILED_ID, AI_UNPRICED_ID = 11, 13, 14

HEAT = MediaItem(
    rating_key="101",
    type="movie",
    title="Heat",
    duration_ms=10_200_000,
    year=1995,
    originally_available_at="1995-12-15",
    added_at="2024-05-01T12:00:00Z",
    library_key="1",
    summary="A group of professional bank robbers.",
    studio="Warner Bros.",
    content_rating="R",
    genres=("Action", "Crime", "Drama", "Thriller", "Heist", "Neo-noir", "Epic"),
    directors=("Michael Mann", "Second Unit", "Third Unit", "Fourth Unit"),
    cast=(
        "Al Pacino",
        "Robert De Niro",
        "Val Kilmer",
        "Jon Voight",
        "Tom Sizemore",
        "Amy Brenneman",
    ),
    audience_rating=9.1,
    critic_rating=8.7,
    resolution="1080",
    hdr="HDR10",
    view_count=3,
)
WIRE = MediaItem(
    rating_key="200",
    type="show",
    title="The Wire",
    library_key="2",
    studio="HBO",
    network="HBO",
    genres=("Crime", "Drama"),
)
TARGET = MediaItem(
    rating_key="201",
    type="episode",
    title="The Target",
    duration_ms=3_600_000,
    year=2002,
    originally_available_at="2002-06-02",
    library_key="2",
    studio="HBO",
    network="HBO",
    content_rating="TV-MA",
    genres=("Crime", "Drama"),
    show_title="The Wire",
    show_rating_key="200",
    season=1,
    episode=1,
)
ORPHAN = MediaItem(
    rating_key="301",
    type="episode",
    title="Pilot",
    duration_ms=1_500_000,
    library_key="2",
    genres=("Comedy",),
    show_title="Gone Show",
    show_rating_key="300",
    season=1,
    episode=1,
)

PLAN_FILTER = {
    "mediaTypes": ["movie"],
    "filter": {
        "type": "group",
        "op": "and",
        "children": [{"type": "condition", "field": "genre", "op": "is", "value": "Action"}],
    },
}
RECENT = {"ratingKeys": ["101", "201"]}
PASS_MARKS = [{"pass_seed": 7, "pass_index": 2, "starts_at": "2026-11-30T23:30:00Z"}]
PROFILE = {"movies": 1, "episodes": 2, "genres": {"Crime": 3, "Drama": 3}}
PLAN_OUTPUT = {
    "counts": {"toCreate": 2, "skipDuplicate": 0, "disabled": 0, "reassigned": 1},
    "packages": [{"key": "movies", "action": "create"}],
}
AI_TRACE = [{"call": "search", "input": {"genre": "Noir"}}, {"result": "ok", "matched": 4}]
STEP_VALUE = {"number": 101, "names": ["Action Movies"]}
INTERRUPT_PAYLOAD = {"diff": {"create": [101]}, "cost_usd": 0.42}


def old_dump(item: MediaItem) -> dict[str, Any]:
    """The old `media_item.guide`: the whole item, as the previous release's `media_guide` wrote it.

    The old model had none of the fields added since, and those default to None, so this is the
    same JSON the previous release stored.
    """
    return item.model_dump(mode="json", exclude_none=True)


@contextmanager
def own_database(server_url: str, name: str) -> Iterator[str]:
    """A database of the test's own on the test server, dropped afterwards with its settings."""
    _drop(server_url, name)  # a run killed before its cleanup left it behind
    url = environment.ensure_database(server_url, name)
    try:
        yield url
    finally:
        from resources.stores.engine import engine_for

        # Stores keep one pooled engine per URL per process; its idle connections would hold
        # the database open.
        engine_for(url).dispose()
        _drop(server_url, name)


def _drop(server_url: str, name: str) -> None:
    conn = psycopg2.connect(
        environment.libpq_dsn(environment.with_database(server_url, "postgres"))
    )
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    finally:
        conn.close()


def build_legacy_layout(url: str) -> None:
    """The previous release's layout: revisions up to 0007, Alembic's version table in `airwave`.

    Today's revisions 0001-0007 are the previous release's (0001 only gained a CREATE SCHEMA that
    the previous release ran before migrating), but today's `upgrade` keeps the version table in
    the private schema, which the previous release did not have: moved back, and that schema
    dropped, as a database built by the previous release has them.
    """
    from resources.migrations import upgrade

    upgrade(url, LEGACY_REVISION)
    with _connect(url) as cur:
        cur.execute("ALTER TABLE airwave_dagster.alembic_version SET SCHEMA airwave")
        cur.execute("DROP SCHEMA airwave_dagster")


@contextmanager
def _connect(url: str) -> Iterator[Any]:
    conn = psycopg2.connect(environment.libpq_dsn(url))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            yield cur
    finally:
        conn.close()


_JSON_LISTS = frozenset({"pass_marks", "trace"})
"""JSONB columns given a list here (other lists, `manual_item_keys`, are Postgres arrays)."""


def _value(column: str, value: Any) -> Any:
    if isinstance(value, dict) or (isinstance(value, list) and column in _JSON_LISTS):
        return Json(value)
    return value


def _insert(cur: Any, table: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        cur.execute(
            sql.SQL("INSERT INTO airwave.{} ({}) VALUES ({})").format(
                sql.Identifier(table),
                sql.SQL(", ").join(sql.Identifier(column) for column in row),
                sql.SQL(", ").join(sql.Placeholder() * len(row)),
            ),
            [_value(column, value) for column, value in row.items()],
        )


def _item_row(row_id: int, source_id: str, item: MediaItem, **extra: Any) -> dict[str, Any]:
    # The previous release's `media_item_row`: every column from the item, the guide its dump.
    return {
        "id": row_id,
        "media_source_id": source_id,
        "rating_key": item.rating_key,
        "type": item.type,
        "title": item.title,
        "duration_ms": item.duration_ms,
        "year": item.year,
        "air_date": item.originally_available_at,
        "parent_rating_key": item.show_rating_key,
        "guide": old_dump(item),
        **extra,
    }


def fill_legacy_layout(url: str) -> None:
    """Rows in every table of the old layout, each column the previous release wrote set."""
    with _connect(url) as cur:
        _insert(
            cur,
            "media_source",
            [
                {
                    "id": SOURCE_ID,
                    "name": "Living room",
                    "base_url": BASE_URL,
                    "enabled": True,
                    "library_synced_at": SYNCED,
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
                {
                    "id": SECOND_SOURCE_ID,
                    "name": "Cabin",
                    "base_url": "http://cabin.local:32400",
                    "enabled": False,
                    "created_at": CREATED + timedelta(days=1),
                    "updated_at": UPDATED,
                },
            ],
        )
        _insert(
            cur,
            "media_library",
            [
                {
                    "id": "lib-movies",
                    "media_source_id": SOURCE_ID,
                    "key": "1",
                    "title": "Movies",
                    "type": "movie",
                    "enabled": True,
                    "last_scan_at": SCANNED,
                },
                {
                    "id": "lib-shows",
                    "media_source_id": SOURCE_ID,
                    "key": "2",
                    "title": "TV Shows",
                    "type": "show",
                    "enabled": False,
                },
            ],
        )
        _insert(
            cur,
            "media_item",
            [
                _item_row(HEAT_ID, SOURCE_ID, HEAT, last_synced_at=SYNCED),
                # No sync time: the old column was nullable (the upgrade stamps the upgrade's).
                _item_row(WIRE_ID, SOURCE_ID, WIRE, last_synced_at=None),
                _item_row(TARGET_ID, SOURCE_ID, TARGET, last_synced_at=SYNCED),
                _item_row(ORPHAN_ID, SOURCE_ID, ORPHAN, available=False, last_synced_at=SCANNED),
            ],
        )
        _insert(
            cur,
            "channel_package",
            [
                {
                    "id": "pkg-movies",
                    "key": "movies",
                    "name": "Movies",
                    "description": "Feature films",
                    "icon": "lucide:Film",
                    "tint": "amber",
                    "sort_index": 2,
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
                {
                    "id": "pkg-ai",
                    "key": "ai-picks",
                    "name": "AI picks",
                    "sort_index": 5,
                    "generated": False,
                    "ai_generated": True,
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
            ],
        )
        _insert(
            cur,
            "channel",
            [
                {
                    "id": "ch-101",
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
                    "schedule_pass_seed": -7,
                    "schedule_pass_index": 2,
                    "schedule_pass_pos": 3,
                    "schedule_recent": RECENT,
                    "bumper_mode": "FULL",
                    "bumper_rev": 4,
                    "media_source_id": SOURCE_ID,
                    "package_id": "pkg-movies",
                    "signature": "sig-101",
                    "created_by_run_id": "run-import-1",
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
                {
                    # A build in progress: disabled, its claimant on the row.
                    "id": "ch-102",
                    "number": 102,
                    "name": "Noir Nights",
                    "enabled": False,
                    "ordering": "BY_AIR_DATE",
                    "ai_generated": True,
                    "bumper_mode": "OFF",
                    "media_source_id": SOURCE_ID,
                    "package_id": "pkg-ai",
                    "signature": "sig-102",
                    "created_by_run_id": "run-ai-1",
                    "claim_run_id": "run-ai-1",
                    "claim_step_key": "build_ai_channel[noir]",
                    "claim_attempt": 2,
                    "claim_heartbeat_at": HEARTBEAT,
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
                {
                    # A preset channel nobody of this project created: no signature.
                    "id": "ch-103",
                    "number": 103,
                    "name": "Comedy Preset",
                    "generated": True,
                    "preset_key": "preset:comedy",
                    "media_source_id": SOURCE_ID,
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
            ],
        )
        _insert(
            cur,
            "channel_definition",
            [
                {
                    "id": "def-101-include",
                    "channel_id": "ch-101",
                    "kind": "PREDICATE",
                    "mode": "INCLUDE",
                    "sort_index": 0,
                    "plex_filter": PLAN_FILTER,
                    "plex_library_key": "1",
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
                {
                    "id": "def-101-exclude",
                    "channel_id": "ch-101",
                    "kind": "PREDICATE",
                    "mode": "EXCLUDE",
                    "sort_index": 1,
                    "plex_filter": {"mediaTypes": ["movie"]},
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
                {
                    "id": "def-102",
                    "channel_id": "ch-102",
                    "kind": "PLEX_COLLECTION",
                    "plex_collection_key": "555",
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
                {
                    "id": "def-103",
                    "channel_id": "ch-103",
                    "kind": "MANUAL_ITEMS",
                    "manual_item_keys": ["101", "201"],
                    "created_at": CREATED,
                    "updated_at": UPDATED,
                },
            ],
        )
        bumper_at = STARTS + timedelta(seconds=10_200)
        _insert(
            cur,
            "schedule_item",
            [
                {
                    "id": OPENER_ID,
                    "channel_id": "ch-101",
                    "kind": "PROGRAM",
                    "starts_at": STARTS,
                    "duration_seconds": 10_200,
                    "rating_key": "101",
                    "media_item_id": HEAT_ID,
                    "created_at": CREATED,
                },
                {
                    "id": BUMPER_ID,
                    "channel_id": "ch-101",
                    "kind": "BUMPER",
                    "starts_at": bumper_at,
                    "duration_seconds": 30,
                    "bumper_kind": "interstitial",
                    "target_media_item_id": TARGET_ID,
                    "created_at": CREATED,
                },
                {
                    "id": SECOND_ID,
                    "channel_id": "ch-101",
                    "kind": "PROGRAM",
                    "starts_at": bumper_at + timedelta(seconds=30),
                    "duration_seconds": 3_600,
                    "start_offset_seconds": 0,
                    "rating_key": "201",
                    "media_item_id": TARGET_ID,
                    "created_at": CREATED,
                },
                {
                    "id": ON_CLAIMED_ID,
                    "channel_id": "ch-102",
                    "kind": "PROGRAM",
                    "starts_at": STARTS,
                    "duration_seconds": 1_500,
                    "rating_key": "301",
                    "media_item_id": ORPHAN_ID,
                    "created_at": CREATED,
                },
            ],
        )
        _insert(
            cur,
            "import_trace",
            [
                {
                    "id": PLAN_TRACE_ID,
                    "run_id": "run-import-1",
                    "step_key": "plan_import_lineup",
                    "step_name": "planImport",
                    "phase": "plan",
                    "status": "ok",
                    "output": PLAN_OUTPUT,
                    "started_at": TRACED,
                    "finished_at": TRACED + timedelta(seconds=2),
                },
                {
                    "id": CHANNEL_TRACE_ID,
                    "run_id": "run-import-1",
                    "step_key": "build_channel[c101]",
                    "step_name": "buildChannel",
                    "attempt": 2,
                    "phase": "channel",
                    "dry_run": False,
                    "package_key": "movies",
                    "channel_name": "Action Movies",
                    "channel_number": 101,
                    "status": "created",
                    "pool_size": 42,
                    "schedule_slots": 300,
                    "number_reassigned": True,
                    "input": {"number": 100},
                    "output": {"number": 101, "status": "created"},
                    "started_at": TRACED + timedelta(seconds=3),
                    "finished_at": TRACED + timedelta(seconds=9),
                },
                {
                    "id": FAILED_TRACE_ID,
                    "run_id": "run-import-1",
                    "step_key": "build_channel[c104]",
                    "step_name": "buildChannel",
                    "phase": "channel",
                    "dry_run": True,
                    "channel_name": "Broken",
                    "channel_number": 104,
                    "status": "failed",
                    "reason": "the pool is empty",
                    "error": "the pool is empty",
                    "started_at": TRACED + timedelta(seconds=4),
                },
            ],
        )
        _insert(
            cur,
            "ai_lineup_trace",
            [
                {
                    "id": AI_PLAN_ID,
                    "run_id": "run-ai-1",
                    "step_key": "plan_lineup",
                    "step_name": "planLineup",
                    "phase": "plan",
                    "status": "ok",
                    "model": "claude-sonnet-4-5",
                    "input": {"existingPackages": ["movies"]},
                    "output": {"packages": []},
                    "input_tokens": 1_200,
                    "output_tokens": 340,
                    "cache_read_tokens": 5_000,
                    "cache_write_tokens": 800,
                    "cost_usd": "0.012345",
                    "context_sha256": "ab" * 32,
                    "started_at": TRACED,
                    "finished_at": TRACED + timedelta(seconds=30),
                },
                {
                    "id": AI_FAILED_ID,
                    "run_id": "run-ai-1",
                    "step_key": "build_ai_channel[noir]",
                    "step_name": "buildChannel",
                    "attempt": 2,
                    "phase": "build",
                    "channel_key": "noir",
                    "channel_number": 102,
                    "channel_name": "Noir Nights",
                    "status": "failed",
                    "reason": "model overloaded",
                    "error": "model overloaded",
                    "trace": AI_TRACE,
                    "agent_steps": 6,
                    "started_at": TRACED + timedelta(minutes=1),
                },
                {
                    "id": AI_UNPRICED_ID,
                    "run_id": "run-ai-1",
                    "step_key": "build_ai_channel[jazz]",
                    "step_name": "buildChannel",
                    "phase": "build",
                    "status": "ok",
                    "model": "unknown-model",
                    "context_sha256": "cd" * 32,
                    "started_at": TRACED + timedelta(minutes=2),
                },
            ],
        )
        _insert(
            cur,
            "step_output",
            [
                {
                    "run_id": "run-import-1",
                    "step_key": "build_channel",
                    "output_name": "result",
                    "mapping_key": "c101",
                    "type_name": "Payload",
                    "code_version": "v3",
                    "value": STEP_VALUE,
                    "created_at": TRACED,
                },
                {
                    "run_id": "run-import-1",
                    "step_key": "plan_import_lineup",
                    "output_name": "result",
                    "type_name": "ImportPlan",
                    "value": {"channels": []},
                    "created_at": TRACED,
                },
            ],
        )
        _insert(
            cur,
            "run_start",
            [
                {
                    "idempotency_key": "lineup:" + "ef" * 32,
                    "job_name": "import_lineup",
                    "run_id": "run-import-1",
                    "created_at": TRACED,
                }
            ],
        )
        _insert(
            cur,
            "ai_budget",
            [
                {
                    "ledger_id": "run-ai-1",
                    "budget_usd": "5.000000",
                    "spent_usd": "0.012345",
                    "calls": 1,
                    "created_at": TRACED,
                    "updated_at": TRACED + timedelta(seconds=30),
                }
            ],
        )
        # Ids from the identity, as the previous release got them: the sequence must move too.
        _insert(
            cur,
            "ai_spend",
            [
                {
                    "ledger_id": "run-ai-1",
                    "run_id": "run-ai-1",
                    "step_key": "plan_lineup",
                    "phase": "plan",
                    "model": "claude-sonnet-4-5",
                    "input_tokens": 1_200,
                    "output_tokens": 340,
                    "cache_read_tokens": 5_000,
                    "cache_write_tokens": 800,
                    "cost_usd": "0.012345",
                    "created_at": TRACED,
                },
                {
                    "ledger_id": "run-ai-1",
                    "run_id": "run-ai-1",
                    "step_key": "build_ai_channel[jazz]",
                    "phase": "build",
                    "model": "unknown-model",
                    "created_at": TRACED + timedelta(minutes=2),
                },
            ],
        )
        _insert(
            cur,
            "library_profile",
            [
                {
                    "media_source_id": SOURCE_ID,
                    "profile": PROFILE,
                    "sha256": "01" * 32,
                    "run_id": "run-profile-1",
                    "computed_at": SYNCED,
                }
            ],
        )
        _insert(
            cur,
            "channel_schedule_state",
            [
                {
                    "channel_id": "ch-101",
                    "pool_fingerprint": "fp-101",
                    "pool_size": 42,
                    "pass_marks": PASS_MARKS,
                    "updated_at": UPDATED,
                }
            ],
        )
        _insert(
            cur,
            "interrupt",
            [
                {
                    "id": "int-open",
                    "root_run_id": "run-ai-1",
                    "run_id": "run-ai-1",
                    "gate_id": "approve_lineup",
                    "payload": INTERRUPT_PAYLOAD,
                    "expires_at": EXPIRES,
                    "created_at": TRACED,
                },
                {
                    "id": "int-approved",
                    "root_run_id": "run-ai-0",
                    "run_id": "run-ai-0",
                    "gate_id": "approve_lineup",
                    "status": "approved",
                    "payload": {"diff": {}},
                    "resolved_by": "alice",
                    "resolved_at": UPDATED,
                    "reason": "looks right",
                    "continuation_run_id": "run-ai-0b",
                    "created_at": CREATED,
                },
            ],
        )
