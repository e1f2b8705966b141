"""SQLAlchemy Core tables: Airwave's own in `public`, the project's state in `airwave_dagster`.

Two sets, one per owner (docs/database.md):

- **Airwave's tables** (`airwave_metadata`, schema `public`): exactly the shape of Airwave's own
  database (docs/reference/airwave-database.md §2-§3), so an Airwave server, web UI and TV app
  read what the jobs write. Column names are Airwave's quoted camelCase (`"mediaSourceId"`);
  each column's Python *key* is the snake_case spelling (`t.channel.c.media_source_id`), so the
  stores read like Python while every statement names Airwave's columns. Ids are TEXT minted
  here (`new_id`), `updatedAt` is set by the writer on insert and on every Core update
  (`default`/`onupdate`), and every timestamp is `TIMESTAMP(3)` without zone holding UTC
  (`UtcTimestamp`). Nothing of the project's is ever added to these tables.
- **The project's private state** (`metadata`, schema `airwave_dagster`): step outputs, run
  starts, claims, channel provenance, budgets and spend, approvals, the full library snapshot and
  profile, schedule state. Private timestamps are `timestamptz`.

The DDL itself lives in the migrations (`resources/migrations/versions/`); a test compares these
declarations with the migrated catalog, and another compares the catalog with Airwave's.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.engine import Dialect

AIRWAVE_SCHEMA = "public"
"""Where Airwave's tables live: Prisma only manages `public`, and so do both modes here."""

SCHEMA = "airwave_dagster"
"""The project's private schema: everything that is not Airwave's (and Alembic's bookkeeping)."""

LEGACY_SCHEMA = "airwave"
"""The project's layout before Airwave's tables (migrations 0001-0007); 0008 moves it away."""

UTC_SESSION: dict[str, str] = {"options": "-c TimeZone=UTC"}
"""psycopg2 connect arguments of every engine that touches Airwave's tables (§2.2): the
session's TimeZone is UTC, so `CURRENT_TIMESTAMP` defaults and `now()` comparisons against
`TIMESTAMP(3)` columns mean UTC whatever the server or role is set to."""

metadata = sa.MetaData()
"""Both sets in one MetaData (private tables reference Airwave's), each table naming its schema."""


# -- ids and time ---------------------------------------------------------------------------------

_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_counter_lock = threading.Lock()
_counter = secrets.randbelow(36**4)


def _base36(value: int, width: int) -> str:
    digits = []
    for _ in range(width):
        value, digit = divmod(value, 36)
        digits.append(_BASE36[digit])
    return "".join(reversed(digits))


def new_id() -> str:
    """A 25-character, time-ordered, collision-resistant row id in the shape Prisma's cuid has.

    `c`, then the millisecond clock (8 base-36 digits), a per-process counter (4), a process
    fingerprint (4) and 8 random digits. Airwave never parses ids; ordering by id follows
    creation time within a process and roughly across processes, which trace pages rely on as a
    tie-break after `startedAt`.
    """
    global _counter
    with _counter_lock:
        _counter = (_counter + 1) % 36**4
        count = _counter
    millis = int(time.time() * 1000)
    return (
        "c"
        + _base36(millis, 8)
        + _base36(count, 4)
        + _base36(os.getpid(), 4)
        + _base36(secrets.randbelow(36**8), 8)
    )


def utc_now() -> datetime:
    """Now, timezone-aware UTC (what `updatedAt` and the other written timestamps get)."""
    return datetime.now(UTC)


class UtcTimestamp(sa.types.TypeDecorator[datetime]):
    """Airwave's `TIMESTAMP(3) WITHOUT TIME ZONE` holding UTC wall-clock time.

    Aware datetimes are converted to UTC and stripped of their zone before they are bound, so the
    session's `TimeZone` never shifts them (§2.2); values read back are returned aware, in
    UTC. A naive datetime is refused: its instant would be a guess.
    """

    impl = pg.TIMESTAMP(timezone=False, precision=3)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Aware → naive UTC."""
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"Airwave timestamps must be timezone-aware, got {value!r}")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Naive UTC → aware UTC."""
        return None if value is None else value.replace(tzinfo=UTC)


def _airwave(name: str, *columns: Any) -> sa.Table:
    return sa.Table(name, metadata, *columns, schema=AIRWAVE_SCHEMA)


def _private(name: str, *columns: Any) -> sa.Table:
    return sa.Table(name, metadata, *columns, schema=SCHEMA)


def _enum(name: str, *values: str) -> pg.ENUM:
    # Created by the migrations (create_type=False): the tables only bind and read them.
    return pg.ENUM(*values, name=name, schema=AIRWAVE_SCHEMA, create_type=False)


ORDERING = _enum("OrderingStrategy", "SHUFFLE", "IN_ORDER", "BY_AIR_DATE")
DEFINITION_KIND = _enum(
    "ChannelDefinitionKind", "PREDICATE", "PLEX_COLLECTION", "PLEX_PLAYLIST", "MANUAL_ITEMS"
)
DEFINITION_MODE = _enum("DefinitionMode", "INCLUDE", "EXCLUDE")
BUMPER_MODE = _enum("BumperMode", "INHERIT", "OFF", "INTERSTITIAL_ONLY", "FULL")
SCHEDULE_ITEM_KIND = _enum("ScheduleItemKind", "PROGRAM", "BUMPER")
MEDIA_SOURCE_TYPE = _enum("MediaSourceType", "PLEX", "JELLYFIN", "EMBY")
PACKAGE_ACCESS_MODE = _enum("PackageAccessMode", "FULL", "PARTIAL")
BUMPER_SOURCE = _enum("BumperSource", "PLEX_PLAYLIST", "PLEX_COLLECTION", "LOCAL_DIR")
BUMPER_PLACEMENT = _enum("BumperPlacement", "BETWEEN_PROGRAMS", "MID_PROGRAM")

AIRWAVE_ENUMS = (
    ORDERING,
    DEFINITION_KIND,
    DEFINITION_MODE,
    BUMPER_MODE,
    SCHEDULE_ITEM_KIND,
    MEDIA_SOURCE_TYPE,
    PACKAGE_ACCESS_MODE,
    BUMPER_SOURCE,
    BUMPER_PLACEMENT,
)


# -- column shorthands of Airwave's conventions ---------------------------------------------------


def _col(name: str, type_: Any, *args: Any, **kwargs: Any) -> sa.Column[Any]:
    """An Airwave column: named `name` in SQL, keyed by its snake_case spelling in Python.

    Nullable unless `nullable=False` is given, as in Prisma's schema.
    """
    key = "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in name)
    kwargs.setdefault("nullable", True)
    return sa.Column(name, type_, *args, key=key, **kwargs)


def _id() -> sa.Column[Any]:
    return sa.Column("id", sa.Text, primary_key=True, default=new_id)


def _created_at() -> sa.Column[Any]:
    return _col(
        "createdAt", UtcTimestamp, nullable=False, server_default=sa.text("CURRENT_TIMESTAMP")
    )


def _updated_at() -> sa.Column[Any]:
    # No database default in Airwave (Prisma's @updatedAt is client-side): the writer sets it.
    return _col("updatedAt", UtcTimestamp, nullable=False, default=utc_now, onupdate=utc_now)


def _fk(column: str, target: str, ondelete: str) -> sa.ForeignKey:
    return sa.ForeignKey(
        f"{AIRWAVE_SCHEMA}.{target}",
        name=column,
        ondelete=ondelete,
        onupdate="CASCADE",
    )


def _false() -> sa.TextClause:
    return sa.text("false")


def _true() -> sa.TextClause:
    return sa.text("true")


# -- Airwave's tables (§3) -------------------------------------------------------------------

user = _airwave(
    "user",
    _id(),
    _col("name", sa.Text, nullable=False),
    _col("email", sa.Text, nullable=False),
    _col("emailVerified", sa.Boolean, nullable=False, server_default=_false()),
    _col("image", sa.Text),
    _col("role", sa.Text),
    _col("banned", sa.Boolean),
    _col("banReason", sa.Text),
    _col("banExpires", UtcTimestamp),
    _col("allAccess", sa.Boolean, nullable=False, server_default=_true()),
    _created_at(),
    _updated_at(),
)

media_source = _airwave(
    "media_source",
    _id(),
    _col("type", MEDIA_SOURCE_TYPE, nullable=False, server_default=sa.text("'PLEX'")),
    _col("name", sa.Text, nullable=False),
    _col("baseUrl", sa.Text),
    _col("remoteUrl", sa.Text),
    _col("relayUrl", sa.Text),
    _col("machineIdentifier", sa.Text),
    # Encrypted by Airwave (§6.1); standalone stores '' and reads PLEX_TOKEN instead.
    _col("token", sa.Text, nullable=False),
    _col("clientIdentifier", sa.Text),
    _col("webAppUrl", sa.Text),
    _col("enabled", sa.Boolean, nullable=False, server_default=_true()),
    _col("isDefault", sa.Boolean, nullable=False, server_default=_false()),
    _col("ownerUserId", sa.Text, _fk("media_source_ownerUserId_fkey", "user.id", "SET NULL")),
    _created_at(),
    _updated_at(),
)

media_library = _airwave(
    "media_library",
    _id(),
    _col(
        "mediaSourceId",
        sa.Text,
        _fk("media_library_mediaSourceId_fkey", "media_source.id", "CASCADE"),
        nullable=False,
    ),
    _col("key", sa.Text, nullable=False),
    _col("title", sa.Text, nullable=False),
    _col("type", sa.Text, nullable=False),
    _col("enabled", sa.Boolean, nullable=False, server_default=_true()),
    _col("lastScanAt", UtcTimestamp),
    _created_at(),
    _updated_at(),
)

media_item = _airwave(
    "media_item",
    _id(),
    _col(
        "mediaSourceId",
        sa.Text,
        _fk("media_item_mediaSourceId_fkey", "media_source.id", "CASCADE"),
        nullable=False,
    ),
    _col("ratingKey", sa.Text, nullable=False),
    _col("type", sa.Text, nullable=False),
    _col("title", sa.Text, nullable=False),
    _col("durationMs", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("year", sa.Integer),
    _col("airDate", sa.Text),
    _col("parentId", sa.Text, _fk("media_item_parentId_fkey", "media_item.id", "SET NULL")),
    # GuideMeta, camelCase, absent keys left out (airwave_dagster/domain/guide_meta.py).
    _col("guide", pg.JSONB, nullable=False),
    _col("available", sa.Boolean, nullable=False, server_default=_true()),
    _col("lastSyncedAt", UtcTimestamp, nullable=False, server_default=sa.text("CURRENT_TIMESTAMP")),
    _created_at(),
    _updated_at(),
)

channel_package = _airwave(
    "channel_package",
    _id(),
    _col("key", sa.Text, nullable=False),
    _col("name", sa.Text, nullable=False),
    _col("description", sa.Text),
    _col("icon", sa.Text),
    _col("tint", sa.Text),
    _col("sortIndex", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("generated", sa.Boolean, nullable=False, server_default=_false()),
    _col("aiGenerated", sa.Boolean, nullable=False, server_default=_false()),
    _created_at(),
    _updated_at(),
)

channel = _airwave(
    "channel",
    _id(),
    _col("number", sa.Integer, nullable=False),
    _col("name", sa.Text, nullable=False),
    _col("callsign", sa.Text),
    _col("description", sa.Text),
    _col("icon", sa.Text),
    _col("tint", sa.Text),
    _col("enabled", sa.Boolean, nullable=False, server_default=_true()),
    _col("sortIndex", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("ordering", ORDERING, nullable=False, server_default=sa.text("'SHUFFLE'")),
    _col("shuffleSeed", sa.Integer),
    _col("strategy", pg.JSONB),
    _col("sortField", sa.Text, nullable=False, server_default=sa.text("'title'")),
    _col("sortDir", sa.Text, nullable=False, server_default=sa.text("'asc'")),
    _col("generated", sa.Boolean, nullable=False, server_default=_false()),
    _col("presetKey", sa.Text),
    _col("aiGenerated", sa.Boolean, nullable=False, server_default=_false()),
    _col("schedulePassSeed", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("schedulePassIndex", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("schedulePassPos", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("scheduleRecent", pg.JSONB),
    _col("bumperMode", BUMPER_MODE, nullable=False, server_default=sa.text("'INHERIT'")),
    _col("bumperRev", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col(
        "mediaSourceId",
        sa.Text,
        _fk("channel_mediaSourceId_fkey", "media_source.id", "CASCADE"),
        nullable=False,
    ),
    _col("packageId", sa.Text, _fk("channel_packageId_fkey", "channel_package.id", "SET NULL")),
    _col("createdById", sa.Text, _fk("channel_createdById_fkey", "user.id", "SET NULL")),
    _created_at(),
    _updated_at(),
)

channel_definition = _airwave(
    "channel_definition",
    _id(),
    _col(
        "channelId",
        sa.Text,
        _fk("channel_definition_channelId_fkey", "channel.id", "CASCADE"),
        nullable=False,
    ),
    _col("kind", DEFINITION_KIND, nullable=False),
    _col("mode", DEFINITION_MODE, nullable=False, server_default=sa.text("'INCLUDE'")),
    _col("sortIndex", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("plexFilter", pg.JSONB),
    _col("plexLibraryKey", sa.Text),
    _col("plexCollectionKey", sa.Text),
    _col("plexPlaylistKey", sa.Text),
    _col("manualItemKeys", pg.ARRAY(sa.Text)),
    _created_at(),
    _updated_at(),
)

schedule_item = _airwave(
    "schedule_item",
    _id(),
    _col(
        "channelId",
        sa.Text,
        _fk("schedule_item_channelId_fkey", "channel.id", "CASCADE"),
        nullable=False,
    ),
    _col("kind", SCHEDULE_ITEM_KIND, nullable=False, server_default=sa.text("'PROGRAM'")),
    _col("startsAt", UtcTimestamp, nullable=False),
    _col("durationSeconds", sa.Integer, nullable=False),
    _col("startOffsetSeconds", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("ratingKey", sa.Text),
    _col("bumperKind", sa.Text),
    _col(
        "mediaItemId",
        sa.Text,
        _fk("schedule_item_mediaItemId_fkey", "media_item.id", "SET NULL"),
    ),
    _col(
        "targetMediaItemId",
        sa.Text,
        _fk("schedule_item_targetMediaItemId_fkey", "media_item.id", "SET NULL"),
    ),
    _created_at(),
)

bumper_config = _airwave(
    "bumper_config",
    _id(),
    _col("key", sa.Text, nullable=False, server_default=sa.text("'global'")),
    _col("enabled", sa.Boolean, nullable=False, server_default=_true()),
    _col("rev", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("interstitialSeconds", sa.Integer, nullable=False, server_default=sa.text("15")),
    _col("interstitialStyle", sa.Text, nullable=False, server_default=sa.text("'up-next'")),
    _col("interstitialMusicKey", sa.Text),
    _col("afterMovieSeconds", sa.Integer, nullable=False, server_default=sa.text("120")),
    _col("afterEpisodeSeconds", sa.Integer, nullable=False, server_default=sa.text("30")),
    _col("quickSeconds", sa.Integer, nullable=False, server_default=sa.text("10")),
    _col("shortEpisodeMinutes", sa.Integer, nullable=False, server_default=sa.text("20")),
    _col("source", BUMPER_SOURCE),
    _col("plexPlaylistKey", sa.Text),
    _col("plexCollectionKey", sa.Text),
    _col("localDirPath", sa.Text),
    _col("minPerBreak", sa.Integer, nullable=False, server_default=sa.text("1")),
    _col("maxPerBreak", sa.Integer, nullable=False, server_default=sa.text("1")),
    _col(
        "placement",
        BUMPER_PLACEMENT,
        nullable=False,
        server_default=sa.text("'BETWEEN_PROGRAMS'"),
    ),
    _col("midProgramCadenceMinutes", sa.Integer),
    _col("musicEnabled", sa.Boolean, nullable=False, server_default=_true()),
    _col("musicVolume", sa.Integer, nullable=False, server_default=sa.text("30")),
    _col("musicFadeInMs", sa.Integer, nullable=False, server_default=sa.text("1000")),
    _col("musicFadeOutMs", sa.Integer, nullable=False, server_default=sa.text("1500")),
    _created_at(),
    _updated_at(),
)


def _trace_common() -> list[sa.Column[Any]]:
    return [
        _id(),
        _col("runId", sa.Text, nullable=False),
        # Dagster's step key; Python key `step_key` (the name every caller already used).
        sa.Column("stepId", sa.Text, key="step_key", nullable=True),
        _col("stepName", sa.Text, nullable=False),
        _col("attempt", sa.Integer, nullable=False, server_default=sa.text("1")),
        _col("phase", sa.Text, nullable=False),
    ]


import_trace = _airwave(
    "import_trace",
    *_trace_common(),
    _col("dryRun", sa.Boolean, nullable=False, server_default=_false()),
    _col("packageKey", sa.Text),
    _col("channelName", sa.Text),
    _col("channelNumber", sa.Integer),
    _col("status", sa.Text, nullable=False),
    _col("reason", sa.Text),
    _col("poolSize", sa.Integer),
    _col("scheduleSlots", sa.Integer),
    _col("numberReassigned", sa.Boolean, nullable=False, server_default=_false()),
    _col("input", pg.JSONB),
    _col("output", pg.JSONB),
    _col("error", sa.Text),
    _col("startedAt", UtcTimestamp, nullable=False, server_default=sa.text("CURRENT_TIMESTAMP")),
    _col("finishedAt", UtcTimestamp),
)

ai_lineup_trace = _airwave(
    "ai_lineup_trace",
    *_trace_common(),
    _col("channelKey", sa.Text),
    _col("channelNumber", sa.Integer),
    _col("channelName", sa.Text),
    _col("status", sa.Text, nullable=False),
    _col("reason", sa.Text),
    _col("input", pg.JSONB),
    _col("output", pg.JSONB),
    _col("trace", pg.JSONB),
    _col("model", sa.Text),
    _col("inputTokens", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("outputTokens", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("cacheReadTokens", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("cacheWriteTokens", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("agentSteps", sa.Integer, nullable=False, server_default=sa.text("0")),
    _col("error", sa.Text),
    _col("startedAt", UtcTimestamp, nullable=False, server_default=sa.text("CURRENT_TIMESTAMP")),
    _col("finishedAt", UtcTimestamp),
)


def _index(name: str, table: sa.Table, *keys: str, unique: bool = False) -> None:
    sa.Index(name, *(table.c[key] for key in keys), unique=unique)


# Airwave's indexes under Prisma's names (unique ones are indexes, not constraints, in Airwave).
_index("user_email_key", user, "email", unique=True)
_index("media_source_ownerUserId_idx", media_source, "owner_user_id")
_index("media_library_mediaSourceId_idx", media_library, "media_source_id")
_index("media_library_mediaSourceId_key_key", media_library, "media_source_id", "key", unique=True)
_index("media_item_mediaSourceId_type_idx", media_item, "media_source_id", "type")
_index("media_item_parentId_idx", media_item, "parent_id")
_index(
    "media_item_mediaSourceId_ratingKey_key",
    media_item,
    "media_source_id",
    "rating_key",
    unique=True,
)
_index("channel_package_key_key", channel_package, "key", unique=True)
_index("channel_number_key", channel, "number", unique=True)
_index("channel_packageId_idx", channel, "package_id")
_index("channel_mediaSourceId_idx", channel, "media_source_id")
_index("channel_definition_channelId_idx", channel_definition, "channel_id")
_index("schedule_item_channelId_startsAt_idx", schedule_item, "channel_id", "starts_at")
_index("schedule_item_channelId_kind_idx", schedule_item, "channel_id", "kind")
_index("schedule_item_mediaItemId_idx", schedule_item, "media_item_id")
_index("bumper_config_key_key", bumper_config, "key", unique=True)
_index("import_trace_runId_idx", import_trace, "run_id")
_index("import_trace_runId_phase_idx", import_trace, "run_id", "phase")
_index("ai_lineup_trace_runId_idx", ai_lineup_trace, "run_id")
_index("ai_lineup_trace_runId_phase_idx", ai_lineup_trace, "run_id", "phase")


AIRWAVE_TABLES = (
    user,
    media_source,
    media_library,
    media_item,
    channel_package,
    channel,
    channel_definition,
    schedule_item,
    bumper_config,
    import_trace,
    ai_lineup_trace,
)
"""The Airwave tables the project reads or writes (standalone creates exactly these)."""


# -- the project's private state (schema airwave_dagster) -----------------------------------------


def _private_fk(target: str) -> sa.ForeignKey:
    return sa.ForeignKey(f"{AIRWAVE_SCHEMA}.{target}", ondelete="CASCADE")


def _tz(name: str, **kwargs: Any) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), **kwargs)


def _tz_now(name: str) -> sa.Column[Any]:
    return _tz(name, nullable=False, server_default=sa.func.now())


# A build's reservation of a channel number (resources/stores/claims.py): created in the same
# transaction as the disabled `channel` row it reserves, deleted when the build commits.
channel_claim = _private(
    "channel_claim",
    sa.Column("channel_id", sa.Text, _private_fk("channel.id"), primary_key=True),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("step_key", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    _tz_now("heartbeat_at"),
    sa.Index("channel_claim_run_id", "run_id"),
)

# Which channels this project created, with the content signature they were created with: a
# retry recognises its own earlier attempt by it (§7.3), and nothing else is ever adopted.
channel_origin = _private(
    "channel_origin",
    sa.Column("channel_id", sa.Text, _private_fk("channel.id"), primary_key=True),
    sa.Column("signature", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    _tz_now("created_at"),
)

# Per media source: when a complete library snapshot was last taken.
source_state = _private(
    "source_state",
    sa.Column("media_source_id", sa.Text, _private_fk("media_source.id"), primary_key=True),
    _tz("library_synced_at"),
)

# The full library snapshot: every item as the project resolved it, with complete tag lists
# (Airwave's `media_item.guide` keeps only the first few tags, §3.5). The AI profile and
# in-memory filter evaluation read this; Airwave's rows are what its server reads.
library_item = _private(
    "library_item",
    sa.Column("media_source_id", sa.Text, _private_fk("media_source.id"), primary_key=True),
    sa.Column("rating_key", sa.Text, primary_key=True),
    sa.Column("item", pg.JSONB, nullable=False),
    sa.Column("available", sa.Boolean, nullable=False, server_default=sa.true()),
    _tz_now("synced_at"),
)

step_output = _private(
    "step_output",
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("step_key", sa.Text, primary_key=True),
    sa.Column("output_name", sa.Text, primary_key=True),
    # '' for outputs that are not dynamic; part of the key, so never NULL.
    sa.Column("mapping_key", sa.Text, primary_key=True, server_default=""),
    sa.Column("type_name", sa.Text, nullable=False),
    sa.Column("code_version", sa.Text),
    sa.Column("value", pg.JSONB, nullable=False),
    _tz_now("created_at"),
)

# Idempotent starts: one row per idempotency key (the lineup content hash for imports, or a key the
# caller gives) naming the run it started; see resources/run_starts.py.
run_start = _private(
    "run_start",
    sa.Column("idempotency_key", sa.Text, primary_key=True),
    sa.Column("job_name", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    _tz_now("created_at"),
)

# What Airwave's `ai_lineup_trace` has no column for: each trace row's price and the shared
# context it was built with.
ai_trace_cost = _private(
    "ai_trace_cost",
    sa.Column("trace_id", sa.Text, _private_fk("ai_lineup_trace.id"), primary_key=True),
    # NULL when the model has no price in the run's price table ("unpriced").
    sa.Column("cost_usd", sa.Numeric(14, 6)),
    sa.Column("context_sha256", sa.Text),
)

# The budget ledger of an AI lineup, keyed by the root run id so a re-execution spends from the
# same budget as the run it resumes. Every step process adds to `spent_usd` with one atomic UPDATE.
ai_budget = _private(
    "ai_budget",
    sa.Column("ledger_id", sa.Text, primary_key=True),
    sa.Column("budget_usd", sa.Numeric(14, 6)),
    sa.Column("spent_usd", sa.Numeric(14, 6), nullable=False, server_default="0"),
    sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
    _tz_now("created_at"),
    _tz_now("updated_at"),
)

# One row per model API call that returned usage, in the ledger it was charged to.
ai_spend = _private(
    "ai_spend",
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("ledger_id", sa.Text, nullable=False, index=True),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("step_key", sa.Text),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
    sa.Column("phase", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cache_write_tokens", sa.BigInteger, nullable=False, server_default="0"),
    # The 1-hour part of cache_write_tokens: priced at 2x input, not 1.25x (migration 0009).
    sa.Column("cache_write_1h_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Numeric(14, 6)),
    _tz_now("created_at"),
)

# The `library_profile` asset's value, one row per media source (the latest materialisation).
library_profile = _private(
    "library_profile",
    sa.Column("media_source_id", sa.Text, _private_fk("media_source.id"), primary_key=True),
    sa.Column("profile", pg.JSONB, nullable=False),
    sa.Column("sha256", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text),
    _tz_now("computed_at"),
)

# Schedule maintenance. Per channel: the fingerprint of the pool its schedule was last laid from,
# and where each laid pass starts, so a library refresh re-lays only channels whose pool changed,
# and only from their next pass (ops/maintenance.py).
channel_schedule_state = _private(
    "channel_schedule_state",
    sa.Column("channel_id", sa.Text, _private_fk("channel.id"), primary_key=True),
    sa.Column("pool_fingerprint", sa.Text),
    sa.Column("pool_size", sa.Integer),
    # [{"pass_index": n, "starts_at": iso}] of the passes that start inside the laid rows.
    sa.Column("pass_marks", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    _tz_now("updated_at"),
)

# An AI channel on air that an `ai_lineup` run rebuilds because its approved diff kept it: the
# packages step parks its row (negative number, disabled) instead of deleting it, and the report
# step deletes it once its rebuild committed, or puts it back as it was and notes where and why
# (ops/ai_lineup/reporting.py).
ai_parked_channel = _private(
    "ai_parked_channel",
    sa.Column("channel_id", sa.Text, _private_fk("channel.id"), primary_key=True),
    sa.Column("ledger_id", sa.Text, nullable=False),
    sa.Column("previous_number", sa.Integer, nullable=False),
    sa.Column("previous_enabled", sa.Boolean, nullable=False),
    _tz_now("parked_at"),
    # Set when the report step put the channel back (its rebuild did not commit): where, and why.
    sa.Column("restored_number", sa.Integer),
    sa.Column("note", sa.Text),
    sa.Index("ai_parked_channel_ledger_id", "ledger_id"),
)

# What an approved `ai_lineup` run replaced, captured in its wipe's transaction (one row per
# lineup, keyed by its root run id): the rows of every AI channel in scope and of the AI packages
# they use or the wipe deletes, each as `to_jsonb` of the table row, so `rollback_lineup` can put
# them back with their ids (resources/stores/rollback.py). `after` is the fingerprint of each AI
# channel the lineup left on air, written by its report step; a rollback refuses when the air
# no longer matches it.
ai_lineup_snapshot = _private(
    "ai_lineup_snapshot",
    sa.Column("ledger_id", sa.Text, primary_key=True),
    sa.Column("media_source_id", sa.Text, nullable=False),
    sa.Column("attached", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("rows", pg.JSONB, nullable=False),
    _tz_now("taken_at"),
    sa.Column("after", pg.JSONB),
    _tz("after_at"),
    # The rollback that put the rows back (its root run id), in the same transaction.
    sa.Column("rolled_back_by", sa.Text),
    _tz("rolled_back_at"),
)

# One durable interrupt per approval gate of a run tree (resources/stores/approvals.py): the run
# stops at the gate and ends; whoever answers first flips `status` from 'open' in one conditional
# UPDATE, so concurrent answers have exactly one winner.
interrupt = _private(
    "interrupt",
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("root_run_id", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("gate_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="open"),
    sa.Column("payload", pg.JSONB, nullable=False),
    _tz("expires_at"),
    sa.Column("resolved_by", sa.Text),
    _tz("resolved_at"),
    sa.Column("reason", sa.Text),
    sa.Column("continuation_run_id", sa.Text),
    _tz_now("created_at"),
    sa.UniqueConstraint("root_run_id", "gate_id", name="interrupt_one_per_gate"),
    sa.CheckConstraint(
        "status IN ('open','approved','rejected','canceled','expired')", name="interrupt_status"
    ),
)


PRIVATE_TABLES = tuple(table for table in metadata.sorted_tables if table.schema == SCHEMA)
"""Every table of the private schema."""
