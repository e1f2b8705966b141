"""Airwave's table shapes as expected data, a reader of a live schema's catalog, and their diff.

The expected side is written from a specification of Airwave v0.11.73 (summarised in
`docs/reference/airwave-database.md` §2-§3) and then checked against a database built from Airwave's
own eight Prisma migrations (commit 8ddc77cf). Every value is spelled the way PostgreSQL reports it
back, not the way DDL writes it: `format_type` for types (`timestamp(3) without time zone`,
`"OrderingStrategy"` with its quotes), `pg_get_expr` for defaults (`'title'::text`,
`'SHUFFLE'::"OrderingStrategy"`), `pg_get_indexdef` and `pg_get_constraintdef` for definitions. The
reader runs with `search_path` set to the schema it reads, so those strings carry no schema prefix
except in index definitions, which always qualify their table.

Prisma declares every unique rule as a unique *index*, never as a UNIQUE constraint: a table
built with SQLAlchemy's `UniqueConstraint` has a `pg_constraint` row Airwave's tables lack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import psycopg2
from psycopg2 import sql

from airwave_dagster.cli import environment

TEXT = "text"
INTEGER = "integer"
BOOLEAN = "boolean"
JSONB = "jsonb"
TIMESTAMP = "timestamp(3) without time zone"
TEXT_ARRAY = "text[]"
NOW = "CURRENT_TIMESTAMP"

PRIMARY_KEY = "PRIMARY KEY"
FOREIGN_KEY = "FOREIGN KEY"
CASCADE = "CASCADE"
SET_NULL = "SET NULL"

# `quote_ident` leaves lower-case names alone unless they are reserved words; of the names in this
# catalog only the table `user` is one.
_RESERVED = frozenset({"user", "order", "group", "table", "select", "default", "check"})
_SIMPLE = re.compile(r"[a-z_][a-z0-9_$]*")


@dataclass(frozen=True)
class Column:
    """One column as `pg_attribute` and `pg_attrdef` report it."""

    name: str
    type: str
    nullable: bool
    default: str | None = None
    # Non-default collation, identity ('a'/'d') and generated ('s') markers: empty on Airwave's
    # tables, recorded so that a stray one shows up in the diff.
    collation: str | None = None
    identity: str = ""
    generated: str = ""


@dataclass(frozen=True)
class Index:
    """One index; `definition` is `pg_get_indexdef`, left empty on the expected side."""

    name: str
    columns: tuple[str, ...]
    unique: bool = False
    primary: bool = False
    method: str = "btree"
    predicate: str | None = None
    definition: str = ""


@dataclass(frozen=True)
class Constraint:
    """One `pg_constraint` row; `definition` is `pg_get_constraintdef`, empty when expected."""

    name: str
    kind: str
    columns: tuple[str, ...]
    referenced_table: str | None = None
    referenced_columns: tuple[str, ...] = ()
    on_delete: str | None = None
    on_update: str | None = None
    definition: str = ""


@dataclass(frozen=True)
class Table:
    """A table: its columns in `attnum` order, indexes, constraints and user triggers."""

    name: str
    columns: tuple[Column, ...]
    indexes: tuple[Index, ...]
    constraints: tuple[Constraint, ...]
    triggers: tuple[str, ...] = ()

    def column(self, name: str) -> Column | None:
        """The column called `name`, if the table has one."""
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True)
class Catalog:
    """What one schema holds: tables, enum types (labels in sort order), other relations."""

    schema: str
    tables: Mapping[str, Table]
    enums: Mapping[str, tuple[str, ...]]
    other_relations: Mapping[str, str] = field(default_factory=dict)


def quote_ident(name: str) -> str:
    """`name` as PostgreSQL's `quote_ident` spells it, for the names of this catalog."""
    if _SIMPLE.fullmatch(name) and name not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def text_default(value: str) -> str:
    """A TEXT column's default as `pg_get_expr` reports it: the literal with its cast."""
    return f"'{value}'::text"


def enum_default(type_name: str, value: str) -> str:
    """An enum column's default as `pg_get_expr` reports it (the type name stays quoted)."""
    return f"'{value}'::{quote_ident(type_name)}"


def enum_type(type_name: str) -> str:
    """An enum column's type as `format_type` reports it: mixed case forces the quotes."""
    return quote_ident(type_name)


def _id() -> Column:
    return Column("id", TEXT, nullable=False)


def _created_at() -> Column:
    return Column("createdAt", TIMESTAMP, nullable=False, default=NOW)


def _updated_at() -> Column:
    # No default: Prisma's @updatedAt is set by the client on every write.
    return Column("updatedAt", TIMESTAMP, nullable=False)


def _pkey(table: str) -> tuple[Index, Constraint]:
    name = f"{table}_pkey"
    return (
        Index(name, ("id",), unique=True, primary=True),
        Constraint(name, PRIMARY_KEY, ("id",)),
    )


def _fk(name: str, column: str, target: str, on_delete: str) -> Constraint:
    # Prisma's default ON UPDATE for every relation of this schema is CASCADE.
    return Constraint(
        name,
        FOREIGN_KEY,
        (column,),
        referenced_table=target,
        referenced_columns=("id",),
        on_delete=on_delete,
        on_update=CASCADE,
    )


def _table(
    name: str,
    columns: Iterable[Column],
    indexes: Iterable[Index] = (),
    foreign_keys: Iterable[Constraint] = (),
) -> Table:
    pkey_index, pkey = _pkey(name)
    return Table(
        name=name,
        columns=tuple(columns),
        indexes=(pkey_index, *indexes),
        constraints=(pkey, *foreign_keys),
    )


# §2.4, labels in declaration order (Postgres compares enum values in that order).
ENUMS: dict[str, tuple[str, ...]] = {
    "BumperSource": ("PLEX_PLAYLIST", "PLEX_COLLECTION", "LOCAL_DIR"),
    "BumperPlacement": ("BETWEEN_PROGRAMS", "MID_PROGRAM"),
    "OrderingStrategy": ("SHUFFLE", "IN_ORDER", "BY_AIR_DATE"),
    "ChannelDefinitionKind": ("PREDICATE", "PLEX_COLLECTION", "PLEX_PLAYLIST", "MANUAL_ITEMS"),
    "DefinitionMode": ("INCLUDE", "EXCLUDE"),
    "BumperMode": ("INHERIT", "OFF", "INTERSTITIAL_ONLY", "FULL"),
    "MediaSourceType": ("PLEX", "JELLYFIN", "EMBY"),
    "ScheduleItemKind": ("PROGRAM", "BUMPER"),
    "PackageAccessMode": ("FULL", "PARTIAL"),
}

CHANNEL_PACKAGE = _table(
    "channel_package",
    (
        _id(),
        Column("key", TEXT, nullable=False),
        Column("name", TEXT, nullable=False),
        Column("description", TEXT, nullable=True),
        Column("icon", TEXT, nullable=True),
        Column("tint", TEXT, nullable=True),
        Column("sortIndex", INTEGER, nullable=False, default="0"),
        Column("generated", BOOLEAN, nullable=False, default="false"),
        Column("aiGenerated", BOOLEAN, nullable=False, default="false"),
        _created_at(),
        _updated_at(),
    ),
    indexes=(Index("channel_package_key_key", ("key",), unique=True),),
)

CHANNEL = _table(
    "channel",
    (
        _id(),
        Column("number", INTEGER, nullable=False),
        Column("name", TEXT, nullable=False),
        Column("callsign", TEXT, nullable=True),
        Column("description", TEXT, nullable=True),
        Column("icon", TEXT, nullable=True),
        Column("tint", TEXT, nullable=True),
        Column("enabled", BOOLEAN, nullable=False, default="true"),
        Column("sortIndex", INTEGER, nullable=False, default="0"),
        Column(
            "ordering",
            enum_type("OrderingStrategy"),
            nullable=False,
            default=enum_default("OrderingStrategy", "SHUFFLE"),
        ),
        Column("shuffleSeed", INTEGER, nullable=True),
        Column("sortField", TEXT, nullable=False, default=text_default("title")),
        Column("sortDir", TEXT, nullable=False, default=text_default("asc")),
        Column("generated", BOOLEAN, nullable=False, default="false"),
        Column("presetKey", TEXT, nullable=True),
        Column("aiGenerated", BOOLEAN, nullable=False, default="false"),
        Column("schedulePassSeed", INTEGER, nullable=False, default="0"),
        Column("schedulePassIndex", INTEGER, nullable=False, default="0"),
        Column("schedulePassPos", INTEGER, nullable=False, default="0"),
        Column(
            "bumperMode",
            enum_type("BumperMode"),
            nullable=False,
            default=enum_default("BumperMode", "INHERIT"),
        ),
        Column("bumperRev", INTEGER, nullable=False, default="0"),
        Column("mediaSourceId", TEXT, nullable=False),
        Column("packageId", TEXT, nullable=True),
        Column("createdById", TEXT, nullable=True),
        _created_at(),
        _updated_at(),
        # Added by later migrations (add_channel_strategy, add_schedule_recent): at the end.
        Column("strategy", JSONB, nullable=True),
        Column("scheduleRecent", JSONB, nullable=True),
    ),
    indexes=(
        Index("channel_number_key", ("number",), unique=True),
        Index("channel_packageId_idx", ("packageId",)),
        Index("channel_mediaSourceId_idx", ("mediaSourceId",)),
    ),
    foreign_keys=(
        _fk("channel_mediaSourceId_fkey", "mediaSourceId", "media_source", CASCADE),
        _fk("channel_packageId_fkey", "packageId", "channel_package", SET_NULL),
        _fk("channel_createdById_fkey", "createdById", "user", SET_NULL),
    ),
)

CHANNEL_DEFINITION = _table(
    "channel_definition",
    (
        _id(),
        Column("channelId", TEXT, nullable=False),
        Column("kind", enum_type("ChannelDefinitionKind"), nullable=False),
        Column(
            "mode",
            enum_type("DefinitionMode"),
            nullable=False,
            default=enum_default("DefinitionMode", "INCLUDE"),
        ),
        Column("sortIndex", INTEGER, nullable=False, default="0"),
        Column("plexFilter", JSONB, nullable=True),
        Column("plexLibraryKey", TEXT, nullable=True),
        Column("plexCollectionKey", TEXT, nullable=True),
        Column("plexPlaylistKey", TEXT, nullable=True),
        # A non-optional Prisma list, yet a nullable column without a default.
        Column("manualItemKeys", TEXT_ARRAY, nullable=True),
        _created_at(),
        _updated_at(),
    ),
    indexes=(Index("channel_definition_channelId_idx", ("channelId",)),),
    foreign_keys=(_fk("channel_definition_channelId_fkey", "channelId", "channel", CASCADE),),
)

SCHEDULE_ITEM = _table(
    "schedule_item",
    (
        _id(),
        Column("channelId", TEXT, nullable=False),
        Column(
            "kind",
            enum_type("ScheduleItemKind"),
            nullable=False,
            default=enum_default("ScheduleItemKind", "PROGRAM"),
        ),
        Column("startsAt", TIMESTAMP, nullable=False),
        Column("durationSeconds", INTEGER, nullable=False),
        Column("startOffsetSeconds", INTEGER, nullable=False, default="0"),
        Column("ratingKey", TEXT, nullable=True),
        Column("bumperKind", TEXT, nullable=True),
        Column("mediaItemId", TEXT, nullable=True),
        Column("targetMediaItemId", TEXT, nullable=True),
        _created_at(),
    ),
    # No unique rule on ("channelId", "startsAt"): Airwave has none.
    indexes=(
        Index("schedule_item_channelId_startsAt_idx", ("channelId", "startsAt")),
        Index("schedule_item_channelId_kind_idx", ("channelId", "kind")),
        Index("schedule_item_mediaItemId_idx", ("mediaItemId",)),
    ),
    foreign_keys=(
        _fk("schedule_item_channelId_fkey", "channelId", "channel", CASCADE),
        _fk("schedule_item_mediaItemId_fkey", "mediaItemId", "media_item", SET_NULL),
        _fk("schedule_item_targetMediaItemId_fkey", "targetMediaItemId", "media_item", SET_NULL),
    ),
)

MEDIA_ITEM = _table(
    "media_item",
    (
        _id(),
        Column("mediaSourceId", TEXT, nullable=False),
        Column("ratingKey", TEXT, nullable=False),
        Column("type", TEXT, nullable=False),
        Column("title", TEXT, nullable=False),
        Column("durationMs", INTEGER, nullable=False, default="0"),
        Column("year", INTEGER, nullable=True),
        Column("airDate", TEXT, nullable=True),
        Column("parentId", TEXT, nullable=True),
        Column("guide", JSONB, nullable=False),
        Column("available", BOOLEAN, nullable=False, default="true"),
        Column("lastSyncedAt", TIMESTAMP, nullable=False, default=NOW),
        _created_at(),
        _updated_at(),
    ),
    indexes=(
        Index("media_item_mediaSourceId_type_idx", ("mediaSourceId", "type")),
        Index("media_item_parentId_idx", ("parentId",)),
        Index(
            "media_item_mediaSourceId_ratingKey_key", ("mediaSourceId", "ratingKey"), unique=True
        ),
    ),
    foreign_keys=(
        _fk("media_item_mediaSourceId_fkey", "mediaSourceId", "media_source", CASCADE),
        _fk("media_item_parentId_fkey", "parentId", "media_item", SET_NULL),
    ),
)

MEDIA_SOURCE = _table(
    "media_source",
    (
        _id(),
        Column(
            "type",
            enum_type("MediaSourceType"),
            nullable=False,
            default=enum_default("MediaSourceType", "PLEX"),
        ),
        Column("name", TEXT, nullable=False),
        Column("baseUrl", TEXT, nullable=True),
        Column("machineIdentifier", TEXT, nullable=True),
        Column("token", TEXT, nullable=False),
        Column("clientIdentifier", TEXT, nullable=True),
        Column("webAppUrl", TEXT, nullable=True),
        Column("enabled", BOOLEAN, nullable=False, default="true"),
        Column("isDefault", BOOLEAN, nullable=False, default="false"),
        Column("ownerUserId", TEXT, nullable=True),
        _created_at(),
        _updated_at(),
        # Added by add_source_remote_urls, in alphabetical order as Prisma emits them.
        Column("relayUrl", TEXT, nullable=True),
        Column("remoteUrl", TEXT, nullable=True),
    ),
    indexes=(Index("media_source_ownerUserId_idx", ("ownerUserId",)),),
    foreign_keys=(_fk("media_source_ownerUserId_fkey", "ownerUserId", "user", SET_NULL),),
)

MEDIA_LIBRARY = _table(
    "media_library",
    (
        _id(),
        Column("mediaSourceId", TEXT, nullable=False),
        # §3.7 leaves key/title/type nullability unsaid: all NOT NULL.
        Column("key", TEXT, nullable=False),
        Column("title", TEXT, nullable=False),
        Column("type", TEXT, nullable=False),
        Column("enabled", BOOLEAN, nullable=False, default="true"),
        Column("lastScanAt", TIMESTAMP, nullable=True),
        _created_at(),
        _updated_at(),
    ),
    indexes=(
        Index("media_library_mediaSourceId_idx", ("mediaSourceId",)),
        Index("media_library_mediaSourceId_key_key", ("mediaSourceId", "key"), unique=True),
    ),
    foreign_keys=(
        _fk("media_library_mediaSourceId_fkey", "mediaSourceId", "media_source", CASCADE),
    ),
)


def _trace_head() -> tuple[Column, ...]:
    """The six columns both trace tables open with."""
    return (
        _id(),
        Column("runId", TEXT, nullable=False),
        Column("stepId", TEXT, nullable=True),
        Column("stepName", TEXT, nullable=False),
        Column("attempt", INTEGER, nullable=False, default="1"),
        Column("phase", TEXT, nullable=False),
    )


IMPORT_TRACE = _table(
    "import_trace",
    (
        *_trace_head(),
        Column("dryRun", BOOLEAN, nullable=False, default="false"),
        Column("packageKey", TEXT, nullable=True),
        Column("channelName", TEXT, nullable=True),
        Column("channelNumber", INTEGER, nullable=True),
        Column("status", TEXT, nullable=False),
        Column("reason", TEXT, nullable=True),
        Column("poolSize", INTEGER, nullable=True),
        Column("scheduleSlots", INTEGER, nullable=True),
        Column("numberReassigned", BOOLEAN, nullable=False, default="false"),
        Column("input", JSONB, nullable=True),
        Column("output", JSONB, nullable=True),
        Column("error", TEXT, nullable=True),
        Column("startedAt", TIMESTAMP, nullable=False, default=NOW),
        Column("finishedAt", TIMESTAMP, nullable=True),
    ),
    indexes=(
        Index("import_trace_runId_idx", ("runId",)),
        Index("import_trace_runId_phase_idx", ("runId", "phase")),
    ),
)

AI_LINEUP_TRACE = _table(
    "ai_lineup_trace",
    (
        *_trace_head(),
        Column("channelKey", TEXT, nullable=True),
        Column("channelNumber", INTEGER, nullable=True),
        Column("channelName", TEXT, nullable=True),
        Column("status", TEXT, nullable=False),
        Column("reason", TEXT, nullable=True),
        Column("input", JSONB, nullable=True),
        Column("output", JSONB, nullable=True),
        Column("trace", JSONB, nullable=True),
        Column("model", TEXT, nullable=True),
        # All five counters are NOT NULL DEFAULT 0, not only agentSteps (§3.10 reads ambiguously).
        Column("inputTokens", INTEGER, nullable=False, default="0"),
        Column("outputTokens", INTEGER, nullable=False, default="0"),
        Column("cacheReadTokens", INTEGER, nullable=False, default="0"),
        Column("cacheWriteTokens", INTEGER, nullable=False, default="0"),
        Column("agentSteps", INTEGER, nullable=False, default="0"),
        Column("error", TEXT, nullable=True),
        Column("startedAt", TIMESTAMP, nullable=False, default=NOW),
        Column("finishedAt", TIMESTAMP, nullable=True),
    ),
    indexes=(
        Index("ai_lineup_trace_runId_idx", ("runId",)),
        Index("ai_lineup_trace_runId_phase_idx", ("runId", "phase")),
    ),
)

BUMPER_CONFIG = _table(
    "bumper_config",
    (
        _id(),
        Column("key", TEXT, nullable=False, default=text_default("global")),
        Column("enabled", BOOLEAN, nullable=False, default="true"),
        Column("rev", INTEGER, nullable=False, default="0"),
        Column("interstitialSeconds", INTEGER, nullable=False, default="15"),
        Column("afterMovieSeconds", INTEGER, nullable=False, default="120"),
        Column("afterEpisodeSeconds", INTEGER, nullable=False, default="30"),
        Column("quickSeconds", INTEGER, nullable=False, default="10"),
        Column("shortEpisodeMinutes", INTEGER, nullable=False, default="20"),
        Column("interstitialStyle", TEXT, nullable=False, default=text_default("up-next")),
        Column("interstitialMusicKey", TEXT, nullable=True),
        Column("source", enum_type("BumperSource"), nullable=True),
        Column("plexPlaylistKey", TEXT, nullable=True),
        Column("plexCollectionKey", TEXT, nullable=True),
        Column("localDirPath", TEXT, nullable=True),
        Column("minPerBreak", INTEGER, nullable=False, default="1"),
        Column("maxPerBreak", INTEGER, nullable=False, default="1"),
        Column(
            "placement",
            enum_type("BumperPlacement"),
            nullable=False,
            default=enum_default("BumperPlacement", "BETWEEN_PROGRAMS"),
        ),
        Column("midProgramCadenceMinutes", INTEGER, nullable=True),
        _created_at(),
        _updated_at(),
        # Added by add_bumper_music, in alphabetical order as Prisma emits them.
        Column("musicEnabled", BOOLEAN, nullable=False, default="true"),
        Column("musicFadeInMs", INTEGER, nullable=False, default="1000"),
        Column("musicFadeOutMs", INTEGER, nullable=False, default="1500"),
        Column("musicVolume", INTEGER, nullable=False, default="30"),
    ),
    indexes=(Index("bumper_config_key_key", ("key",), unique=True),),
)

# §3.11 names these columns without types; types, nullability and defaults (`banned` nullable
# without a default, `emailVerified` NOT NULL false) are the migrations'.
USER = _table(
    "user",
    (
        _id(),
        Column("name", TEXT, nullable=False),
        Column("email", TEXT, nullable=False),
        Column("emailVerified", BOOLEAN, nullable=False, default="false"),
        Column("image", TEXT, nullable=True),
        _created_at(),
        _updated_at(),
        Column("role", TEXT, nullable=True),
        Column("banned", BOOLEAN, nullable=True),
        Column("banReason", TEXT, nullable=True),
        Column("banExpires", TIMESTAMP, nullable=True),
        # Added by add_user_access.
        Column("allAccess", BOOLEAN, nullable=False, default="true"),
    ),
    indexes=(Index("user_email_key", ("email",), unique=True),),
)

TABLES: dict[str, Table] = {
    table.name: table
    for table in (
        CHANNEL_PACKAGE,
        CHANNEL,
        CHANNEL_DEFINITION,
        SCHEDULE_ITEM,
        MEDIA_ITEM,
        MEDIA_SOURCE,
        MEDIA_LIBRARY,
        IMPORT_TRACE,
        AI_LINEUP_TRACE,
        BUMPER_CONFIG,
        USER,
    )
}

# The enum types these eleven tables use; `PackageAccessMode` belongs to user_package_access.
ENUMS_OF_TABLES = frozenset(ENUMS) - {"PackageAccessMode"}


def index_definition(schema: str, table: str, index: Index) -> str:
    """What `pg_get_indexdef` reports for an expected index in `schema`."""
    unique = "UNIQUE " if index.unique else ""
    columns = ", ".join(quote_ident(c) for c in index.columns)
    where = f" WHERE ({index.predicate})" if index.predicate else ""
    return (
        f"CREATE {unique}INDEX {quote_ident(index.name)} ON {quote_ident(schema)}."
        f"{quote_ident(table)} USING {index.method} ({columns}){where}"
    )


def constraint_definition(constraint: Constraint) -> str:
    """What `pg_get_constraintdef` reports for an expected PK or FK (search_path = its schema)."""
    columns = ", ".join(quote_ident(c) for c in constraint.columns)
    if constraint.kind == PRIMARY_KEY:
        return f"PRIMARY KEY ({columns})"
    if constraint.kind != FOREIGN_KEY or constraint.referenced_table is None:
        raise ValueError(f"no rendering for {constraint.kind} {constraint.name}")
    target = ", ".join(quote_ident(c) for c in constraint.referenced_columns)
    actions = ""
    # Postgres prints only the actions that differ from NO ACTION, ON UPDATE first.
    if constraint.on_update not in (None, "NO ACTION"):
        actions += f" ON UPDATE {constraint.on_update}"
    if constraint.on_delete not in (None, "NO ACTION"):
        actions += f" ON DELETE {constraint.on_delete}"
    return (
        f"FOREIGN KEY ({columns}) REFERENCES {quote_ident(constraint.referenced_table)}({target})"
        f"{actions}"
    )


# ---------------------------------------------------------------------------------------------
# Reading a live schema
# ---------------------------------------------------------------------------------------------

_ACTIONS = {"a": "NO ACTION", "r": "RESTRICT", "c": CASCADE, "n": SET_NULL, "d": "SET DEFAULT"}
_KINDS = {
    "p": PRIMARY_KEY,
    "f": FOREIGN_KEY,
    "u": "UNIQUE",
    "c": "CHECK",
    "x": "EXCLUDE",
    "t": "CONSTRAINT TRIGGER",
}
_RELKINDS = {
    "v": "view",
    "m": "materialized view",
    "S": "sequence",
    "f": "foreign table",
    "c": "composite type",
}

_TABLES_SQL = """
SELECT c.oid, c.relname
FROM pg_class c
WHERE c.relnamespace = %(ns)s AND c.relkind IN ('r', 'p')
ORDER BY c.relname
"""

_OTHER_RELATIONS_SQL = """
SELECT c.relname, c.relkind
FROM pg_class c
WHERE c.relnamespace = %(ns)s AND c.relkind IN ('v', 'm', 'S', 'f', 'c')
ORDER BY c.relname
"""

_COLUMNS_SQL = """
SELECT a.attname,
       format_type(a.atttypid, a.atttypmod),
       NOT a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid),
       CASE WHEN a.attcollation <> t.typcollation THEN co.collname END,
       a.attidentity,
       a.attgenerated
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE a.attrelid = %(rel)s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

_INDEXES_SQL = """
SELECT ic.relname,
       ARRAY(
           SELECT CASE WHEN k.attnum = 0
                       THEN pg_get_indexdef(i.indexrelid, k.position::int, true)
                       ELSE (SELECT a.attname FROM pg_attribute a
                             WHERE a.attrelid = i.indrelid AND a.attnum = k.attnum)
                  END
           FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, position)
           ORDER BY k.position
       ),
       i.indisunique,
       i.indisprimary,
       am.amname,
       pg_get_expr(i.indpred, i.indrelid, true),
       pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_am am ON am.oid = ic.relam
WHERE i.indrelid = %(rel)s
ORDER BY ic.relname
"""

# contype 'n' (NOT NULL as a constraint, PostgreSQL 18+) is left out: nullability is a column
# property here, read from attnotnull on every version.
_CONSTRAINTS_SQL = """
SELECT con.conname,
       con.contype,
       ARRAY(
           SELECT a.attname
           FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, position)
           JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
           ORDER BY k.position
       ),
       ref.relname,
       ARRAY(
           SELECT a.attname
           FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, position)
           JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum
           ORDER BY k.position
       ),
       con.confdeltype,
       con.confupdtype,
       pg_get_constraintdef(con.oid)
FROM pg_constraint con
LEFT JOIN pg_class ref ON ref.oid = con.confrelid
WHERE con.conrelid = %(rel)s AND con.contype <> 'n'
ORDER BY con.conname
"""

_TRIGGERS_SQL = """
SELECT tgname FROM pg_trigger WHERE tgrelid = %(rel)s AND NOT tgisinternal ORDER BY tgname
"""

_ENUMS_SQL = """
SELECT t.typname, ARRAY(
    SELECT e.enumlabel::text FROM pg_enum e WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder
)
FROM pg_type t
WHERE t.typnamespace = %(ns)s AND t.typtype = 'e'
ORDER BY t.typname
"""


def read_catalog(database_url: str, schema: str) -> Catalog:
    """Read every table, index, constraint, trigger and enum type of `schema` from a database.

    The read runs in one transaction with `search_path` set to `schema` alone, so types,
    defaults and constraint definitions come back unqualified, as Airwave's own tables report
    them in `public`. A missing schema reads as empty.
    """
    conn = psycopg2.connect(environment.libpq_dsn(database_url))
    try:
        with conn.cursor() as cur:
            cur.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
            cur.execute("SELECT oid FROM pg_namespace WHERE nspname = %s", (schema,))
            row = cur.fetchone()
            if row is None:
                return Catalog(schema=schema, tables={}, enums={})
            namespace = row[0]
            cur.execute(_TABLES_SQL, {"ns": namespace})
            relations = cur.fetchall()
            tables = {name: _read_table(cur, oid, name) for oid, name in relations}
            cur.execute(_ENUMS_SQL, {"ns": namespace})
            enums = {name: tuple(labels) for name, labels in cur.fetchall()}
            cur.execute(_OTHER_RELATIONS_SQL, {"ns": namespace})
            others = {name: _RELKINDS[kind] for name, kind in cur.fetchall()}
        conn.rollback()
    finally:
        conn.close()
    return Catalog(schema=schema, tables=tables, enums=enums, other_relations=others)


def _read_table(cur: psycopg2.extensions.cursor, oid: int, name: str) -> Table:
    cur.execute(_COLUMNS_SQL, {"rel": oid})
    columns = tuple(
        Column(n, t, nullable, default, collation, identity, generated)
        for n, t, nullable, default, collation, identity, generated in cur.fetchall()
    )
    cur.execute(_INDEXES_SQL, {"rel": oid})
    indexes = tuple(
        Index(n, tuple(cols), unique, primary, method, predicate, definition)
        for n, cols, unique, primary, method, predicate, definition in cur.fetchall()
    )
    cur.execute(_CONSTRAINTS_SQL, {"rel": oid})
    constraints = tuple(
        Constraint(
            name=n,
            kind=_KINDS.get(kind, kind),
            columns=tuple(cols),
            referenced_table=ref,
            referenced_columns=tuple(ref_cols),
            on_delete=_ACTIONS.get(on_delete) if kind == "f" else None,
            on_update=_ACTIONS.get(on_update) if kind == "f" else None,
            definition=definition,
        )
        for n, kind, cols, ref, ref_cols, on_delete, on_update, definition in cur.fetchall()
    )
    cur.execute(_TRIGGERS_SQL, {"rel": oid})
    triggers = tuple(n for (n,) in cur.fetchall())
    return Table(name, columns, indexes, constraints, triggers)


# ---------------------------------------------------------------------------------------------
# Comparing
# ---------------------------------------------------------------------------------------------


def column_differences(expected: Table, actual: Table) -> list[str]:
    """Missing, extra and differing columns, one line each, naming table, column and values."""
    problems: list[str] = []
    where = expected.name
    for column in expected.columns:
        found = actual.column(column.name)
        if found is None:
            problems.append(f"{where}.{column.name}: missing (expected {column})")
            continue
        for attribute in ("type", "nullable", "default", "collation", "identity", "generated"):
            want, got = getattr(column, attribute), getattr(found, attribute)
            if want != got:
                problems.append(
                    f"{where}.{column.name}: {attribute} expected {want!r}, got {got!r}"
                )
    expected_names = {c.name for c in expected.columns}
    problems.extend(
        f"{where}.{c.name}: extra column {c}"
        for c in actual.columns
        if c.name not in expected_names
    )
    return problems


def column_order_differences(expected: Table, actual: Table) -> list[str]:
    """A one-line report when the common columns come in another order than Airwave's."""
    names = {c.name for c in actual.columns}
    want = [c.name for c in expected.columns if c.name in names]
    common = {c.name for c in expected.columns}
    got = [c.name for c in actual.columns if c.name in common]
    if want == got:
        return []
    return [f"{expected.name}: column order expected {want}, got {got}"]


def index_differences(schema: str, expected: Table, actual: Table) -> list[str]:
    """Missing, extra and differing indexes (the primary key's index included)."""
    problems: list[str] = []
    where = expected.name
    found = {i.name: i for i in actual.indexes}
    for index in expected.indexes:
        got = found.get(index.name)
        want_def = index_definition(schema, expected.name, index)
        if got is None:
            problems.append(f"{where}: index {index.name} missing (expected {want_def})")
            continue
        for attribute in ("columns", "unique", "primary", "method", "predicate"):
            want_value, got_value = getattr(index, attribute), getattr(got, attribute)
            if want_value != got_value:
                problems.append(
                    f"{where}: index {index.name} {attribute} expected {want_value!r}, "
                    f"got {got_value!r}"
                )
        if got.definition != want_def:
            problems.append(
                f"{where}: index {index.name} definition expected {want_def!r}, "
                f"got {got.definition!r}"
            )
    expected_names = {i.name for i in expected.indexes}
    problems.extend(
        f"{where}: extra index {i.name}: {i.definition}"
        for i in actual.indexes
        if i.name not in expected_names
    )
    return problems


def constraint_differences(expected: Table, actual: Table) -> list[str]:
    """Missing, extra and differing constraints (PK, FKs; any other kind is extra)."""
    problems: list[str] = []
    where = expected.name
    found = {c.name: c for c in actual.constraints}
    for constraint in expected.constraints:
        got = found.get(constraint.name)
        want_def = constraint_definition(constraint)
        if got is None:
            problems.append(f"{where}: constraint {constraint.name} missing (expected {want_def})")
            continue
        for attribute in (
            "kind",
            "columns",
            "referenced_table",
            "referenced_columns",
            "on_delete",
            "on_update",
        ):
            want_value, got_value = getattr(constraint, attribute), getattr(got, attribute)
            if attribute == "referenced_columns" and constraint.kind != FOREIGN_KEY:
                continue
            if want_value != got_value:
                problems.append(
                    f"{where}: constraint {constraint.name} {attribute} expected {want_value!r}, "
                    f"got {got_value!r}"
                )
        if got.definition != want_def:
            problems.append(
                f"{where}: constraint {constraint.name} definition expected {want_def!r}, "
                f"got {got.definition!r}"
            )
    expected_names = {c.name for c in expected.constraints}
    problems.extend(
        f"{where}: extra {c.kind} constraint {c.name}: {c.definition}"
        for c in actual.constraints
        if c.name not in expected_names
    )
    return problems


def trigger_differences(expected: Table, actual: Table) -> list[str]:
    """Triggers present on one side only (Airwave's tables have none)."""
    want, got = set(expected.triggers), set(actual.triggers)
    return [f"{expected.name}: extra trigger {t}" for t in sorted(got - want)] + [
        f"{expected.name}: trigger {t} missing" for t in sorted(want - got)
    ]


def enum_differences(expected: Mapping[str, tuple[str, ...]], catalog: Catalog) -> list[str]:
    """Enum types of `expected` that are missing or whose labels differ (order included)."""
    problems: list[str] = []
    for name, labels in expected.items():
        got = catalog.enums.get(name)
        if got is None:
            problems.append(f"enum {catalog.schema}.{name}: missing (expected {list(labels)})")
        elif got != labels:
            problems.append(
                f"enum {catalog.schema}.{name}: labels expected {list(labels)}, got {list(got)}"
            )
    return problems


def table_differences(schema: str, expected: Table, actual: Table | None) -> list[str]:
    """Every difference between one expected table and what the schema holds."""
    if actual is None:
        return [f"{expected.name}: table missing from schema {schema}"]
    return [
        *column_differences(expected, actual),
        *column_order_differences(expected, actual),
        *index_differences(schema, expected, actual),
        *constraint_differences(expected, actual),
        *trigger_differences(expected, actual),
    ]
