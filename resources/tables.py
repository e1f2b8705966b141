"""SQLAlchemy Core tables of the `airwave` schema, declared in one place.

Reference: docs/reference/domain.md §1 (the data model).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

SCHEMA = "airwave"

metadata = sa.MetaData(schema=SCHEMA)


def _timestamps() -> list[sa.Column[object]]:
    return [
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
            onupdate=sa.func.now(),
        ),
    ]


media_source = sa.Table(
    "media_source",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    # The token is never stored: it is read from PLEX_TOKEN at run time.
    sa.Column("base_url", sa.Text, nullable=False, unique=True),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    # Set by a complete library snapshot (resources/stores/library.py); media items also arrive
    # one by one from schedules, so their presence alone does not mean the library is mirrored.
    sa.Column("library_synced_at", sa.DateTime(timezone=True)),
    *_timestamps(),
)

media_library = sa.Table(
    "media_library",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column(
        "media_source_id",
        sa.Text,
        sa.ForeignKey("media_source.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("last_scan_at", sa.DateTime(timezone=True)),
    sa.UniqueConstraint("media_source_id", "key", name="media_library_source_key"),
)

media_item = sa.Table(
    "media_item",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column(
        "media_source_id",
        sa.Text,
        sa.ForeignKey("media_source.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("rating_key", sa.Text, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("duration_ms", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("year", sa.Integer),
    sa.Column("air_date", sa.Text),
    sa.Column("parent_rating_key", sa.Text),
    sa.Column("guide", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
    sa.Column("available", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("last_synced_at", sa.DateTime(timezone=True), server_default=sa.func.now()),
    sa.UniqueConstraint("media_source_id", "rating_key", name="media_item_source_rating_key"),
)

channel_package = sa.Table(
    "channel_package",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("key", sa.Text, nullable=False, unique=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("description", sa.Text),
    sa.Column("icon", sa.Text),
    sa.Column("tint", sa.Text),
    sa.Column("sort_index", sa.Integer, nullable=False, server_default="0"),
    sa.Column("generated", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("ai_generated", sa.Boolean, nullable=False, server_default=sa.false()),
    *_timestamps(),
)

channel = sa.Table(
    "channel",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("number", sa.Integer, nullable=False, unique=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("callsign", sa.Text),
    sa.Column("description", sa.Text),
    sa.Column("icon", sa.Text),
    sa.Column("tint", sa.Text),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("sort_index", sa.Integer, nullable=False, server_default="0"),
    sa.Column("ordering", sa.Text, nullable=False, server_default="SHUFFLE"),
    sa.Column("shuffle_seed", sa.Integer),
    sa.Column("strategy", pg.JSONB),
    sa.Column("sort_field", sa.Text, nullable=False, server_default="title"),
    sa.Column("sort_dir", sa.Text, nullable=False, server_default="asc"),
    sa.Column("generated", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("preset_key", sa.Text),
    sa.Column("ai_generated", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("schedule_pass_seed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("schedule_pass_index", sa.Integer, nullable=False, server_default="0"),
    sa.Column("schedule_pass_pos", sa.Integer, nullable=False, server_default="0"),
    sa.Column("schedule_recent", pg.JSONB),
    sa.Column("bumper_mode", sa.Text, nullable=False, server_default="INHERIT"),
    sa.Column("bumper_rev", sa.Integer, nullable=False, server_default="0"),
    sa.Column(
        "media_source_id",
        sa.Text,
        sa.ForeignKey("media_source.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column(
        "package_id",
        sa.Text,
        sa.ForeignKey("channel_package.id", ondelete="SET NULL"),
        index=True,
    ),
    # Content signature (§4.4) of the channel as created, for dedupe and for recognising our own
    # earlier attempt when a retry finds the number taken.
    sa.Column("signature", sa.Text),
    # Provenance of the run that created the row.
    sa.Column("created_by_run_id", sa.Text),
    # Reserve, don't check (resources/stores/claims.py): while a build holds the number, the row is
    # disabled and names its claimant; commit clears these, a failed build deletes the row, and a
    # claim whose heartbeat stopped may be taken over.
    sa.Column("claim_run_id", sa.Text),
    sa.Column("claim_step_key", sa.Text),
    sa.Column("claim_attempt", sa.Integer),
    sa.Column("claim_heartbeat_at", sa.DateTime(timezone=True)),
    *_timestamps(),
    sa.CheckConstraint("number > 0", name="channel_number_positive"),
    sa.CheckConstraint("ordering IN ('SHUFFLE','IN_ORDER','BY_AIR_DATE')", name="channel_ordering"),
    sa.CheckConstraint(
        "bumper_mode IN ('INHERIT','OFF','INTERSTITIAL_ONLY','FULL')", name="channel_bumper_mode"
    ),
)

channel_definition = sa.Table(
    "channel_definition",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column(
        "channel_id",
        sa.Text,
        sa.ForeignKey("channel.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("mode", sa.Text, nullable=False, server_default="INCLUDE"),
    sa.Column("sort_index", sa.Integer, nullable=False, server_default="0"),
    sa.Column("plex_filter", pg.JSONB),
    sa.Column("plex_library_key", sa.Text),
    sa.Column("plex_collection_key", sa.Text),
    sa.Column("plex_playlist_key", sa.Text),
    sa.Column("manual_item_keys", pg.ARRAY(sa.Text), nullable=False, server_default="{}"),
    *_timestamps(),
    sa.CheckConstraint("mode IN ('INCLUDE','EXCLUDE')", name="channel_definition_mode"),
)

schedule_item = sa.Table(
    "schedule_item",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column(
        "channel_id",
        sa.Text,
        sa.ForeignKey("channel.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("kind", sa.Text, nullable=False, server_default="PROGRAM"),
    sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("duration_seconds", sa.Integer, nullable=False),
    sa.Column("start_offset_seconds", sa.Integer, nullable=False, server_default="0"),
    sa.Column("rating_key", sa.Text),
    sa.Column("bumper_kind", sa.Text),
    sa.Column("media_item_id", sa.BigInteger, sa.ForeignKey("media_item.id", ondelete="SET NULL")),
    sa.Column(
        "target_media_item_id", sa.BigInteger, sa.ForeignKey("media_item.id", ondelete="SET NULL")
    ),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.CheckConstraint("duration_seconds >= 1", name="schedule_item_duration_positive"),
    sa.UniqueConstraint("channel_id", "starts_at", name="schedule_item_channel_start"),
    sa.Index("schedule_item_media_item", "media_item_id"),
)

import_trace = sa.Table(
    "import_trace",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("run_id", sa.Text, nullable=False, index=True),
    sa.Column("step_key", sa.Text),
    sa.Column("step_name", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
    sa.Column("phase", sa.Text, nullable=False),
    sa.Column("dry_run", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("package_key", sa.Text),
    sa.Column("channel_name", sa.Text),
    sa.Column("channel_number", sa.Integer),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("pool_size", sa.Integer),
    sa.Column("schedule_slots", sa.Integer),
    sa.Column("number_reassigned", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("input", pg.JSONB),
    sa.Column("output", pg.JSONB),
    sa.Column("error", sa.Text),
    sa.Column(
        "started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Index("import_trace_run_phase", "run_id", "phase"),
)

step_output = sa.Table(
    "step_output",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("step_key", sa.Text, primary_key=True),
    sa.Column("output_name", sa.Text, primary_key=True),
    # '' for outputs that are not dynamic; part of the key, so never NULL.
    sa.Column("mapping_key", sa.Text, primary_key=True, server_default=""),
    sa.Column("type_name", sa.Text, nullable=False),
    sa.Column("code_version", sa.Text),
    sa.Column("value", pg.JSONB, nullable=False),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)


# Idempotent starts: one row per idempotency key (the lineup content hash for imports, or a key the
# caller gives) naming the run it started; see airwave_dagster/cli/launcher.py.
run_start = sa.Table(
    "run_start",
    metadata,
    sa.Column("idempotency_key", sa.Text, primary_key=True),
    sa.Column("job_name", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)


# AI lineup builder (migration 0005). One trace row per phase and attempt of an `ai_lineup` run,
# with the usage of every model call that attempt made (failed attempts included).
ai_lineup_trace = sa.Table(
    "ai_lineup_trace",
    metadata,
    sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
    sa.Column("run_id", sa.Text, nullable=False, index=True),
    sa.Column("step_key", sa.Text),
    sa.Column("step_name", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
    sa.Column("phase", sa.Text, nullable=False),
    sa.Column("channel_key", sa.Text),
    sa.Column("channel_number", sa.Integer),
    sa.Column("channel_name", sa.Text),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("model", sa.Text),
    sa.Column("input", pg.JSONB),
    sa.Column("output", pg.JSONB),
    sa.Column("trace", pg.JSONB),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cache_write_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("agent_steps", sa.Integer, nullable=False, server_default="0"),
    # NULL when the model has no price in the run's price table ("unpriced").
    sa.Column("cost_usd", sa.Numeric(14, 6)),
    sa.Column("context_sha256", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column(
        "started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Index("ai_lineup_trace_run_phase", "run_id", "phase"),
)

# The budget ledger of an AI lineup, keyed by the root run id so a re-execution spends from the
# same budget as the run it resumes. Every step process adds to `spent_usd` with one atomic UPDATE.
ai_budget = sa.Table(
    "ai_budget",
    metadata,
    sa.Column("ledger_id", sa.Text, primary_key=True),
    sa.Column("budget_usd", sa.Numeric(14, 6)),
    sa.Column("spent_usd", sa.Numeric(14, 6), nullable=False, server_default="0"),
    sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
    *_timestamps(),
)

# One row per model API call that returned usage, in the ledger it was charged to.
ai_spend = sa.Table(
    "ai_spend",
    metadata,
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
    sa.Column("cost_usd", sa.Numeric(14, 6)),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)

# The `library_profile` asset's value, one row per media source (the latest materialisation).
library_profile = sa.Table(
    "library_profile",
    metadata,
    sa.Column(
        "media_source_id",
        sa.Text,
        sa.ForeignKey("media_source.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("profile", pg.JSONB, nullable=False),
    sa.Column("sha256", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text),
    sa.Column(
        "computed_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)


# Schedule maintenance (migration 0004). Per channel: the fingerprint of the pool its schedule was
# last laid from, and where each laid pass starts, so a library refresh re-lays only channels whose
# pool changed, and only from their next pass (ops/maintenance.py).
channel_schedule_state = sa.Table(
    "channel_schedule_state",
    metadata,
    sa.Column(
        "channel_id",
        sa.Text,
        sa.ForeignKey("channel.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("pool_fingerprint", sa.Text),
    sa.Column("pool_size", sa.Integer),
    # [{"pass_index": n, "starts_at": iso}] of the passes that start inside the laid rows.
    sa.Column("pass_marks", pg.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
)

# One durable interrupt per approval gate of a run tree (resources/stores/approvals.py): the run
# stops at the gate and ends; whoever answers first flips `status` from 'open' in one conditional
# UPDATE, so concurrent answers have exactly one winner.
interrupt = sa.Table(
    "interrupt",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("root_run_id", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("gate_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="open"),
    sa.Column("payload", pg.JSONB, nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True)),
    sa.Column("resolved_by", sa.Text),
    sa.Column("resolved_at", sa.DateTime(timezone=True)),
    sa.Column("reason", sa.Text),
    sa.Column("continuation_run_id", sa.Text),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.UniqueConstraint("root_run_id", "gate_id", name="interrupt_one_per_gate"),
    sa.CheckConstraint(
        "status IN ('open','approved','rejected','canceled','expired')", name="interrupt_status"
    ),
)
