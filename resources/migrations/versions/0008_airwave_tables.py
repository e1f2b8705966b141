"""Airwave's own tables in `public`; the project's private state in `airwave_dagster`.

Creates Airwave's domain tables exactly as Airwave's database has them (written from
docs/reference/airwave-database.md §2-§3: enum types, quoted camelCase columns, TEXT ids,
`TIMESTAMP(3)` without zone, Prisma's constraint and index names), moves the project's private
tables out of the old `airwave` schema, and carries every row of the old layout over:
packages, channels, definitions, schedule rows, media items (their guide rewritten as Airwave's
GuideMeta, the full item kept in the private snapshot), trace rows, claims, signatures, approvals,
budgets, spend and stored step outputs. The old `airwave` schema is dropped at the end.

Refuses to run when `public` already holds any of Airwave's tables: a database that an Airwave
server created is used in attached mode, never taken over by a standalone migration.

Revision ID: 0008_airwave_tables
Revises: 0007_approvals
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from airwave_dagster.domain.guide_meta import guide_meta
from airwave_dagster.domain.library import MediaItem

revision = "0008_airwave_tables"
down_revision = "0007_approvals"
branch_labels = None
depends_on = None

OLD = "airwave"
NEW = "airwave_dagster"

AIRWAVE_TABLE_NAMES = (
    "user",
    "media_source",
    "media_library",
    "media_item",
    "channel_package",
    "channel",
    "channel_definition",
    "schedule_item",
    "bumper_config",
    "import_trace",
    "ai_lineup_trace",
)

_ENUMS = {
    "OrderingStrategy": ("SHUFFLE", "IN_ORDER", "BY_AIR_DATE"),
    "ChannelDefinitionKind": ("PREDICATE", "PLEX_COLLECTION", "PLEX_PLAYLIST", "MANUAL_ITEMS"),
    "DefinitionMode": ("INCLUDE", "EXCLUDE"),
    "BumperMode": ("INHERIT", "OFF", "INTERSTITIAL_ONLY", "FULL"),
    "ScheduleItemKind": ("PROGRAM", "BUMPER"),
    "MediaSourceType": ("PLEX", "JELLYFIN", "EMBY"),
    "PackageAccessMode": ("FULL", "PARTIAL"),
    "BumperSource": ("PLEX_PLAYLIST", "PLEX_COLLECTION", "LOCAL_DIR"),
    "BumperPlacement": ("BETWEEN_PROGRAMS", "MID_PROGRAM"),
}

_TS = "TIMESTAMP(3)"
_CREATED = f'"createdAt" {_TS} NOT NULL DEFAULT CURRENT_TIMESTAMP'
_UPDATED = f'"updatedAt" {_TS} NOT NULL'

# The six columns both trace tables open with.
_TRACE_HEAD = [
    '"id" TEXT NOT NULL',
    '"runId" TEXT NOT NULL',
    '"stepId" TEXT',
    '"stepName" TEXT NOT NULL',
    '"attempt" INTEGER NOT NULL DEFAULT 1',
    '"phase" TEXT NOT NULL',
]

# Column lists of Airwave's tables, in the order Airwave's migrations leave them (columns added
# by later migrations last), so `SELECT *`, COPY and pg_dump read as on an Airwave database.
_TABLES: dict[str, list[str]] = {
    "user": [
        '"id" TEXT NOT NULL',
        '"name" TEXT NOT NULL',
        '"email" TEXT NOT NULL',
        '"emailVerified" BOOLEAN NOT NULL DEFAULT false',
        '"image" TEXT',
        _CREATED,
        _UPDATED,
        '"role" TEXT',
        '"banned" BOOLEAN',
        '"banReason" TEXT',
        f'"banExpires" {_TS}',
        '"allAccess" BOOLEAN NOT NULL DEFAULT true',
    ],
    "media_source": [
        '"id" TEXT NOT NULL',
        '"type" "MediaSourceType" NOT NULL DEFAULT \'PLEX\'',
        '"name" TEXT NOT NULL',
        '"baseUrl" TEXT',
        '"machineIdentifier" TEXT',
        '"token" TEXT NOT NULL',
        '"clientIdentifier" TEXT',
        '"webAppUrl" TEXT',
        '"enabled" BOOLEAN NOT NULL DEFAULT true',
        '"isDefault" BOOLEAN NOT NULL DEFAULT false',
        '"ownerUserId" TEXT',
        _CREATED,
        _UPDATED,
        '"relayUrl" TEXT',
        '"remoteUrl" TEXT',
    ],
    "media_library": [
        '"id" TEXT NOT NULL',
        '"mediaSourceId" TEXT NOT NULL',
        '"key" TEXT NOT NULL',
        '"title" TEXT NOT NULL',
        '"type" TEXT NOT NULL',
        '"enabled" BOOLEAN NOT NULL DEFAULT true',
        f'"lastScanAt" {_TS}',
        _CREATED,
        _UPDATED,
    ],
    "media_item": [
        '"id" TEXT NOT NULL',
        '"mediaSourceId" TEXT NOT NULL',
        '"ratingKey" TEXT NOT NULL',
        '"type" TEXT NOT NULL',
        '"title" TEXT NOT NULL',
        '"durationMs" INTEGER NOT NULL DEFAULT 0',
        '"year" INTEGER',
        '"airDate" TEXT',
        '"parentId" TEXT',
        '"guide" JSONB NOT NULL',
        '"available" BOOLEAN NOT NULL DEFAULT true',
        f'"lastSyncedAt" {_TS} NOT NULL DEFAULT CURRENT_TIMESTAMP',
        _CREATED,
        _UPDATED,
    ],
    "channel_package": [
        '"id" TEXT NOT NULL',
        '"key" TEXT NOT NULL',
        '"name" TEXT NOT NULL',
        '"description" TEXT',
        '"icon" TEXT',
        '"tint" TEXT',
        '"sortIndex" INTEGER NOT NULL DEFAULT 0',
        '"generated" BOOLEAN NOT NULL DEFAULT false',
        '"aiGenerated" BOOLEAN NOT NULL DEFAULT false',
        _CREATED,
        _UPDATED,
    ],
    "channel": [
        '"id" TEXT NOT NULL',
        '"number" INTEGER NOT NULL',
        '"name" TEXT NOT NULL',
        '"callsign" TEXT',
        '"description" TEXT',
        '"icon" TEXT',
        '"tint" TEXT',
        '"enabled" BOOLEAN NOT NULL DEFAULT true',
        '"sortIndex" INTEGER NOT NULL DEFAULT 0',
        '"ordering" "OrderingStrategy" NOT NULL DEFAULT \'SHUFFLE\'',
        '"shuffleSeed" INTEGER',
        "\"sortField\" TEXT NOT NULL DEFAULT 'title'",
        "\"sortDir\" TEXT NOT NULL DEFAULT 'asc'",
        '"generated" BOOLEAN NOT NULL DEFAULT false',
        '"presetKey" TEXT',
        '"aiGenerated" BOOLEAN NOT NULL DEFAULT false',
        '"schedulePassSeed" INTEGER NOT NULL DEFAULT 0',
        '"schedulePassIndex" INTEGER NOT NULL DEFAULT 0',
        '"schedulePassPos" INTEGER NOT NULL DEFAULT 0',
        '"bumperMode" "BumperMode" NOT NULL DEFAULT \'INHERIT\'',
        '"bumperRev" INTEGER NOT NULL DEFAULT 0',
        '"mediaSourceId" TEXT NOT NULL',
        '"packageId" TEXT',
        '"createdById" TEXT',
        _CREATED,
        _UPDATED,
        '"strategy" JSONB',
        '"scheduleRecent" JSONB',
    ],
    "channel_definition": [
        '"id" TEXT NOT NULL',
        '"channelId" TEXT NOT NULL',
        '"kind" "ChannelDefinitionKind" NOT NULL',
        '"mode" "DefinitionMode" NOT NULL DEFAULT \'INCLUDE\'',
        '"sortIndex" INTEGER NOT NULL DEFAULT 0',
        '"plexFilter" JSONB',
        '"plexLibraryKey" TEXT',
        '"plexCollectionKey" TEXT',
        '"plexPlaylistKey" TEXT',
        '"manualItemKeys" TEXT[]',
        _CREATED,
        _UPDATED,
    ],
    "schedule_item": [
        '"id" TEXT NOT NULL',
        '"channelId" TEXT NOT NULL',
        '"kind" "ScheduleItemKind" NOT NULL DEFAULT \'PROGRAM\'',
        f'"startsAt" {_TS} NOT NULL',
        '"durationSeconds" INTEGER NOT NULL',
        '"startOffsetSeconds" INTEGER NOT NULL DEFAULT 0',
        '"ratingKey" TEXT',
        '"bumperKind" TEXT',
        '"mediaItemId" TEXT',
        '"targetMediaItemId" TEXT',
        _CREATED,
    ],
    "bumper_config": [
        '"id" TEXT NOT NULL',
        "\"key\" TEXT NOT NULL DEFAULT 'global'",
        '"enabled" BOOLEAN NOT NULL DEFAULT true',
        '"rev" INTEGER NOT NULL DEFAULT 0',
        '"interstitialSeconds" INTEGER NOT NULL DEFAULT 15',
        '"afterMovieSeconds" INTEGER NOT NULL DEFAULT 120',
        '"afterEpisodeSeconds" INTEGER NOT NULL DEFAULT 30',
        '"quickSeconds" INTEGER NOT NULL DEFAULT 10',
        '"shortEpisodeMinutes" INTEGER NOT NULL DEFAULT 20',
        "\"interstitialStyle\" TEXT NOT NULL DEFAULT 'up-next'",
        '"interstitialMusicKey" TEXT',
        '"source" "BumperSource"',
        '"plexPlaylistKey" TEXT',
        '"plexCollectionKey" TEXT',
        '"localDirPath" TEXT',
        '"minPerBreak" INTEGER NOT NULL DEFAULT 1',
        '"maxPerBreak" INTEGER NOT NULL DEFAULT 1',
        '"placement" "BumperPlacement" NOT NULL DEFAULT \'BETWEEN_PROGRAMS\'',
        '"midProgramCadenceMinutes" INTEGER',
        _CREATED,
        _UPDATED,
        '"musicEnabled" BOOLEAN NOT NULL DEFAULT true',
        '"musicFadeInMs" INTEGER NOT NULL DEFAULT 1000',
        '"musicFadeOutMs" INTEGER NOT NULL DEFAULT 1500',
        '"musicVolume" INTEGER NOT NULL DEFAULT 30',
    ],
    "import_trace": [
        *_TRACE_HEAD,
        '"dryRun" BOOLEAN NOT NULL DEFAULT false',
        '"packageKey" TEXT',
        '"channelName" TEXT',
        '"channelNumber" INTEGER',
        '"status" TEXT NOT NULL',
        '"reason" TEXT',
        '"poolSize" INTEGER',
        '"scheduleSlots" INTEGER',
        '"numberReassigned" BOOLEAN NOT NULL DEFAULT false',
        '"input" JSONB',
        '"output" JSONB',
        '"error" TEXT',
        f'"startedAt" {_TS} NOT NULL DEFAULT CURRENT_TIMESTAMP',
        f'"finishedAt" {_TS}',
    ],
    "ai_lineup_trace": [
        *_TRACE_HEAD,
        '"channelKey" TEXT',
        '"channelNumber" INTEGER',
        '"channelName" TEXT',
        '"status" TEXT NOT NULL',
        '"reason" TEXT',
        '"input" JSONB',
        '"output" JSONB',
        '"trace" JSONB',
        '"model" TEXT',
        '"inputTokens" INTEGER NOT NULL DEFAULT 0',
        '"outputTokens" INTEGER NOT NULL DEFAULT 0',
        '"cacheReadTokens" INTEGER NOT NULL DEFAULT 0',
        '"cacheWriteTokens" INTEGER NOT NULL DEFAULT 0',
        '"agentSteps" INTEGER NOT NULL DEFAULT 0',
        '"error" TEXT',
        f'"startedAt" {_TS} NOT NULL DEFAULT CURRENT_TIMESTAMP',
        f'"finishedAt" {_TS}',
    ],
}

# (index name, table, columns, unique), Prisma's names.
_INDEXES: list[tuple[str, str, tuple[str, ...], bool]] = [
    ("user_email_key", "user", ("email",), True),
    ("media_source_ownerUserId_idx", "media_source", ("ownerUserId",), False),
    ("media_library_mediaSourceId_idx", "media_library", ("mediaSourceId",), False),
    ("media_library_mediaSourceId_key_key", "media_library", ("mediaSourceId", "key"), True),
    ("media_item_mediaSourceId_type_idx", "media_item", ("mediaSourceId", "type"), False),
    ("media_item_parentId_idx", "media_item", ("parentId",), False),
    (
        "media_item_mediaSourceId_ratingKey_key",
        "media_item",
        ("mediaSourceId", "ratingKey"),
        True,
    ),
    ("channel_package_key_key", "channel_package", ("key",), True),
    ("channel_number_key", "channel", ("number",), True),
    ("channel_packageId_idx", "channel", ("packageId",), False),
    ("channel_mediaSourceId_idx", "channel", ("mediaSourceId",), False),
    ("channel_definition_channelId_idx", "channel_definition", ("channelId",), False),
    (
        "schedule_item_channelId_startsAt_idx",
        "schedule_item",
        ("channelId", "startsAt"),
        False,
    ),
    ("schedule_item_channelId_kind_idx", "schedule_item", ("channelId", "kind"), False),
    ("schedule_item_mediaItemId_idx", "schedule_item", ("mediaItemId",), False),
    ("bumper_config_key_key", "bumper_config", ("key",), True),
    ("import_trace_runId_idx", "import_trace", ("runId",), False),
    ("import_trace_runId_phase_idx", "import_trace", ("runId", "phase"), False),
    ("ai_lineup_trace_runId_idx", "ai_lineup_trace", ("runId",), False),
    ("ai_lineup_trace_runId_phase_idx", "ai_lineup_trace", ("runId", "phase"), False),
]

# (table, column, referenced table, on delete); every one ON UPDATE CASCADE.
_FOREIGN_KEYS: list[tuple[str, str, str, str]] = [
    ("channel", "mediaSourceId", "media_source", "CASCADE"),
    ("channel", "packageId", "channel_package", "SET NULL"),
    ("channel", "createdById", "user", "SET NULL"),
    ("channel_definition", "channelId", "channel", "CASCADE"),
    ("media_source", "ownerUserId", "user", "SET NULL"),
    ("media_item", "mediaSourceId", "media_source", "CASCADE"),
    ("media_item", "parentId", "media_item", "SET NULL"),
    ("media_library", "mediaSourceId", "media_source", "CASCADE"),
    ("schedule_item", "channelId", "channel", "CASCADE"),
    ("schedule_item", "mediaItemId", "media_item", "SET NULL"),
    ("schedule_item", "targetMediaItemId", "media_item", "SET NULL"),
]

# Private tables of the old layout that move as they are (rows, keys and all).
_MOVED = (
    "step_output",
    "run_start",
    "ai_budget",
    "ai_spend",
    "library_profile",
    "channel_schedule_state",
    "interrupt",
)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table_exists(conn: sa.Connection, schema: str, table: str) -> bool:
    return bool(
        conn.execute(
            sa.text("SELECT to_regclass(:name) IS NOT NULL"),
            {"name": f"{_q(schema)}.{_q(table)}"},
        ).scalar_one()
    )


def _refuse_foreign_tables(conn: sa.Connection) -> None:
    present = [name for name in AIRWAVE_TABLE_NAMES if _table_exists(conn, "public", name)]
    if present:
        raise RuntimeError(
            "schema public already holds Airwave tables ("
            + ", ".join(present)
            + ") that this project did not create: it looks like a database an Airwave server "
            "uses. Standalone mode never takes one over; use an empty database (or attached "
            "mode, docs/database.md)."
        )


def _create_airwave_tables() -> None:
    for name, values in _ENUMS.items():
        labels = ", ".join(f"'{value}'" for value in values)
        op.execute(f"CREATE TYPE public.{_q(name)} AS ENUM ({labels})")
    for table, columns in _TABLES.items():
        body = ",\n    ".join([*columns, f'CONSTRAINT {_q(table + "_pkey")} PRIMARY KEY ("id")'])
        op.execute(f"CREATE TABLE public.{_q(table)} (\n    {body}\n)")
    for index, table, indexed, unique in _INDEXES:
        kind = "UNIQUE INDEX" if unique else "INDEX"
        cols = ", ".join(_q(c) for c in indexed)
        op.execute(f"CREATE {kind} {_q(index)} ON public.{_q(table)}({cols})")
    for table, column, target, on_delete in _FOREIGN_KEYS:
        op.execute(
            f"ALTER TABLE public.{_q(table)} ADD CONSTRAINT {_q(f'{table}_{column}_fkey')} "
            f'FOREIGN KEY ({_q(column)}) REFERENCES public.{_q(target)}("id") '
            f"ON DELETE {on_delete} ON UPDATE CASCADE"
        )


def _create_private_tables() -> None:
    op.execute(
        f"""
        CREATE TABLE {NEW}.channel_claim (
            channel_id TEXT PRIMARY KEY REFERENCES public.channel(id) ON DELETE CASCADE,
            run_id TEXT NOT NULL,
            step_key TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE INDEX channel_claim_run_id ON {NEW}.channel_claim (run_id);
        CREATE TABLE {NEW}.channel_origin (
            channel_id TEXT PRIMARY KEY REFERENCES public.channel(id) ON DELETE CASCADE,
            signature TEXT NOT NULL,
            run_id TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE TABLE {NEW}.source_state (
            media_source_id TEXT PRIMARY KEY REFERENCES public.media_source(id) ON DELETE CASCADE,
            library_synced_at TIMESTAMPTZ
        );
        CREATE TABLE {NEW}.library_item (
            media_source_id TEXT NOT NULL REFERENCES public.media_source(id) ON DELETE CASCADE,
            rating_key TEXT NOT NULL,
            item JSONB NOT NULL,
            available BOOLEAN NOT NULL DEFAULT true,
            synced_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (media_source_id, rating_key)
        );
        CREATE TABLE {NEW}.ai_trace_cost (
            trace_id TEXT PRIMARY KEY REFERENCES public.ai_lineup_trace(id) ON DELETE CASCADE,
            cost_usd NUMERIC(14, 6),
            context_sha256 TEXT
        );
        """
    )


def _utc(column: str) -> str:
    # timestamptz → Airwave's naive UTC wall clock, whatever the session's TimeZone.
    return f"({column} AT TIME ZONE 'UTC')"


# The migration's own time for columns the old rows had no value for. Not CURRENT_TIMESTAMP (nor
# the columns' defaults): cast to TIMESTAMP(3), that is the session's wall clock, hours off UTC on
# a session that is not pinned to it.
_NOW = _utc("now()")


def _legacy_id(prefix: str, column: str) -> str:
    # Old BIGINT ids become 25-character text ids that sort before every new one.
    return f"('c0{prefix}' || lpad({column}::text, 22, '0'))"


def _carry_over(conn: sa.Connection) -> None:
    """Copy every row of the old layout into the new tables (old ids kept where they were TEXT)."""
    op.execute(
        f"""
        INSERT INTO public.media_source
            (id, type, name, "baseUrl", token, enabled, "isDefault", "createdAt", "updatedAt")
        SELECT id, 'PLEX', name, base_url, '', enabled,
               id = (SELECT id FROM {OLD}.media_source ORDER BY created_at, id LIMIT 1),
               {_utc("created_at")}, {_utc("updated_at")}
        FROM {OLD}.media_source;

        INSERT INTO {NEW}.source_state (media_source_id, library_synced_at)
        SELECT id, library_synced_at FROM {OLD}.media_source
        WHERE library_synced_at IS NOT NULL;

        INSERT INTO public.media_library
            (id, "mediaSourceId", key, title, type, enabled, "lastScanAt", "createdAt",
             "updatedAt")
        SELECT id, media_source_id, key, title, type, enabled, {_utc("last_scan_at")}, {_NOW},
               {_NOW}
        FROM {OLD}.media_library;

        INSERT INTO public.media_item
            (id, "mediaSourceId", "ratingKey", type, title, "durationMs", year, "airDate",
             guide, available, "lastSyncedAt", "createdAt", "updatedAt")
        SELECT {_legacy_id("m", "id")}, media_source_id, rating_key, type, title,
               LEAST(duration_ms, 2147483647)::integer, year, air_date, guide, available,
               COALESCE({_utc("last_synced_at")}, {_NOW}), {_NOW}, {_NOW}
        FROM {OLD}.media_item;

        INSERT INTO {NEW}.library_item (media_source_id, rating_key, item, available, synced_at)
        SELECT media_source_id, rating_key, guide, available, COALESCE(last_synced_at, now())
        FROM {OLD}.media_item;

        UPDATE public.media_item AS episode SET "parentId" = show.id
        FROM {OLD}.media_item AS old, public.media_item AS show
        WHERE episode.id = {_legacy_id("m", "old.id")}
          AND old.parent_rating_key IS NOT NULL
          AND show."mediaSourceId" = episode."mediaSourceId"
          AND show.type = 'show' AND show."ratingKey" = old.parent_rating_key;

        INSERT INTO public.channel_package
            (id, key, name, description, icon, tint, "sortIndex", generated, "aiGenerated",
             "createdAt", "updatedAt")
        SELECT id, key, name, description, icon, tint, sort_index, generated, ai_generated,
               {_utc("created_at")}, {_utc("updated_at")}
        FROM {OLD}.channel_package;

        INSERT INTO public.channel
            (id, number, name, callsign, description, icon, tint, enabled, "sortIndex", ordering,
             "shuffleSeed", strategy, "sortField", "sortDir", generated, "presetKey",
             "aiGenerated", "schedulePassSeed", "schedulePassIndex", "schedulePassPos",
             "scheduleRecent", "bumperMode", "bumperRev", "mediaSourceId", "packageId",
             "createdAt", "updatedAt")
        SELECT id, number, name, callsign, description, icon, tint, enabled, sort_index,
               ordering::public."OrderingStrategy", shuffle_seed, strategy, sort_field, sort_dir,
               generated, preset_key, ai_generated, schedule_pass_seed, schedule_pass_index,
               schedule_pass_pos, schedule_recent, bumper_mode::public."BumperMode", bumper_rev,
               media_source_id, package_id, {_utc("created_at")}, {_utc("updated_at")}
        FROM {OLD}.channel;

        INSERT INTO {NEW}.channel_origin (channel_id, signature, run_id, created_at)
        SELECT id, signature, COALESCE(created_by_run_id, ''), created_at
        FROM {OLD}.channel WHERE signature IS NOT NULL;

        INSERT INTO {NEW}.channel_claim (channel_id, run_id, step_key, attempt, heartbeat_at)
        SELECT id, claim_run_id, COALESCE(claim_step_key, ''), COALESCE(claim_attempt, 1),
               COALESCE(claim_heartbeat_at, now())
        FROM {OLD}.channel WHERE claim_run_id IS NOT NULL;

        INSERT INTO public.channel_definition
            (id, "channelId", kind, mode, "sortIndex", "plexFilter", "plexLibraryKey",
             "plexCollectionKey", "plexPlaylistKey", "manualItemKeys", "createdAt", "updatedAt")
        SELECT id, channel_id, kind::public."ChannelDefinitionKind",
               mode::public."DefinitionMode", sort_index, plex_filter, plex_library_key,
               plex_collection_key, plex_playlist_key,
               CASE WHEN cardinality(manual_item_keys) = 0 THEN NULL ELSE manual_item_keys END,
               {_utc("created_at")}, {_utc("updated_at")}
        FROM {OLD}.channel_definition;

        INSERT INTO public.schedule_item
            (id, "channelId", kind, "startsAt", "durationSeconds", "startOffsetSeconds",
             "ratingKey", "bumperKind", "mediaItemId", "targetMediaItemId", "createdAt")
        SELECT {_legacy_id("s", "id")}, channel_id, kind::public."ScheduleItemKind",
               {_utc("starts_at")}, duration_seconds, start_offset_seconds, rating_key,
               bumper_kind,
               CASE WHEN media_item_id IS NULL THEN NULL ELSE {_legacy_id("m", "media_item_id")}
               END,
               CASE WHEN target_media_item_id IS NULL THEN NULL
                    ELSE {_legacy_id("m", "target_media_item_id")} END,
               {_utc("created_at")}
        FROM {OLD}.schedule_item;

        INSERT INTO public.import_trace
            (id, "runId", "stepId", "stepName", attempt, phase, "dryRun", "packageKey",
             "channelName", "channelNumber", status, reason, "poolSize", "scheduleSlots",
             "numberReassigned", input, output, error, "startedAt", "finishedAt")
        SELECT {_legacy_id("i", "id")}, run_id, step_key, step_name, attempt, phase, dry_run,
               package_key, channel_name, channel_number, status, reason, pool_size,
               schedule_slots, number_reassigned, input, output, error, {_utc("started_at")},
               {_utc("finished_at")}
        FROM {OLD}.import_trace;

        INSERT INTO public.ai_lineup_trace
            (id, "runId", "stepId", "stepName", attempt, phase, "channelKey", "channelNumber",
             "channelName", status, reason, input, output, trace, model, "inputTokens",
             "outputTokens", "cacheReadTokens", "cacheWriteTokens", "agentSteps", error,
             "startedAt", "finishedAt")
        SELECT {_legacy_id("a", "id")}, run_id, step_key, step_name, attempt, phase, channel_key,
               channel_number, channel_name, status, reason, input, output, trace, model,
               LEAST(input_tokens, 2147483647)::integer, LEAST(output_tokens, 2147483647)::integer,
               LEAST(cache_read_tokens, 2147483647)::integer,
               LEAST(cache_write_tokens, 2147483647)::integer, agent_steps, error,
               {_utc("started_at")}, {_utc("finished_at")}
        FROM {OLD}.ai_lineup_trace;

        INSERT INTO {NEW}.ai_trace_cost (trace_id, cost_usd, context_sha256)
        SELECT {_legacy_id("a", "id")}, cost_usd, context_sha256
        FROM {OLD}.ai_lineup_trace
        WHERE cost_usd IS NOT NULL OR context_sha256 IS NOT NULL;
        """
    )
    _rewrite_guides(conn)


def _rewrite_guides(conn: sa.Connection) -> None:
    """The old guide was the project's item dump; Airwave reads GuideMeta (camelCase)."""
    rows = conn.execute(
        sa.text(f"SELECT {_legacy_id('m', 'id')} AS id, guide FROM {OLD}.media_item")
    ).all()
    updates: list[dict[str, Any]] = []
    for row in rows:
        try:
            item = MediaItem.model_validate(row.guide)
        except ValueError:
            continue  # not an item dump: kept as it was
        updates.append({"id": row.id, "guide": json.dumps(guide_meta(item))})
    if updates:
        conn.execute(
            sa.text("UPDATE public.media_item SET guide = CAST(:guide AS jsonb) WHERE id = :id"),
            updates,
        )


def _move_private_tables() -> None:
    for table in _MOVED:
        op.execute(f"ALTER TABLE {OLD}.{table} SET SCHEMA {NEW}")
    # Their foreign keys still name the old tables: point them at Airwave's.
    op.execute(
        f"""
        ALTER INDEX {NEW}.ix_airwave_ai_spend_ledger_id
            RENAME TO ix_airwave_dagster_ai_spend_ledger_id;
        ALTER TABLE {NEW}.library_profile
            DROP CONSTRAINT IF EXISTS library_profile_media_source_id_fkey;
        ALTER TABLE {NEW}.library_profile ADD CONSTRAINT library_profile_media_source_id_fkey
            FOREIGN KEY (media_source_id) REFERENCES public.media_source(id) ON DELETE CASCADE;
        ALTER TABLE {NEW}.channel_schedule_state
            DROP CONSTRAINT IF EXISTS channel_schedule_state_channel_id_fkey;
        ALTER TABLE {NEW}.channel_schedule_state
            ADD CONSTRAINT channel_schedule_state_channel_id_fkey
            FOREIGN KEY (channel_id) REFERENCES public.channel(id) ON DELETE CASCADE;
        """
    )


def _drop_old_layout() -> None:
    for table in (
        "schedule_item",
        "channel_definition",
        "channel",
        "channel_package",
        "media_item",
        "media_library",
        "media_source",
        "import_trace",
        "ai_lineup_trace",
    ):
        op.execute(f"DROP TABLE {OLD}.{table}")
    # Anything else someone put there stays, with its schema.
    op.execute(
        f"""
        DO $$ BEGIN
            IF NOT EXISTS (
                SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = '{OLD}'
            ) THEN EXECUTE 'DROP SCHEMA {OLD}'; END IF;
        END $$;
        """
    )


def upgrade() -> None:
    """Apply this revision."""
    conn = op.get_bind()
    _refuse_foreign_tables(conn)
    _create_airwave_tables()
    _create_private_tables()
    _carry_over(conn)
    # After the carry-over: the moved tables' new foreign keys are checked against the rows
    # already in Airwave's tables (a profile or schedule state refers to a carried source or
    # channel).
    _move_private_tables()
    _drop_old_layout()


def downgrade() -> None:
    """Not supported: the old layout cannot hold what Airwave's tables do."""
    raise NotImplementedError("0008 cannot be downgraded; restore a backup taken before it")
