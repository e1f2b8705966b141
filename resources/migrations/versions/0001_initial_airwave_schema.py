"""Initial airwave schema: sources, libraries, media items, packages, channels, schedules, traces.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply this revision."""
    # The project's first layout lived in its own schema; 0008 moves everything out of it.
    op.execute('CREATE SCHEMA IF NOT EXISTS "airwave"')
    op.create_table(
        "channel_package",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("icon", sa.Text(), nullable=True),
        sa.Column("tint", sa.Text(), nullable=True),
        sa.Column("sort_index", sa.Integer(), server_default="0", nullable=False),
        sa.Column("generated", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("ai_generated", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
        schema="airwave",
    )
    op.create_table(
        "import_trace",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("step_key", sa.Text(), nullable=True),
        sa.Column("step_name", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="1", nullable=False),
        sa.Column("phase", sa.Text(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("package_key", sa.Text(), nullable=True),
        sa.Column("channel_name", sa.Text(), nullable=True),
        sa.Column("channel_number", sa.Integer(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("pool_size", sa.Integer(), nullable=True),
        sa.Column("schedule_slots", sa.Integer(), nullable=True),
        sa.Column(
            "number_reassigned", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column("input", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("output", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        schema="airwave",
    )
    op.create_index(
        "import_trace_run_phase",
        "import_trace",
        ["run_id", "phase"],
        unique=False,
        schema="airwave",
    )
    op.create_index(
        op.f("ix_airwave_import_trace_run_id"),
        "import_trace",
        ["run_id"],
        unique=False,
        schema="airwave",
    )
    op.create_table(
        "media_source",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("base_url", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("base_url"),
        schema="airwave",
    )
    op.create_table(
        "channel",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("callsign", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("icon", sa.Text(), nullable=True),
        sa.Column("tint", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("sort_index", sa.Integer(), server_default="0", nullable=False),
        sa.Column("ordering", sa.Text(), server_default="SHUFFLE", nullable=False),
        sa.Column("shuffle_seed", sa.Integer(), nullable=True),
        sa.Column("strategy", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("sort_field", sa.Text(), server_default="title", nullable=False),
        sa.Column("sort_dir", sa.Text(), server_default="asc", nullable=False),
        sa.Column("generated", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("preset_key", sa.Text(), nullable=True),
        sa.Column("ai_generated", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("schedule_pass_seed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("schedule_pass_index", sa.Integer(), server_default="0", nullable=False),
        sa.Column("schedule_pass_pos", sa.Integer(), server_default="0", nullable=False),
        sa.Column("schedule_recent", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("bumper_mode", sa.Text(), server_default="INHERIT", nullable=False),
        sa.Column("bumper_rev", sa.Integer(), server_default="0", nullable=False),
        sa.Column("media_source_id", sa.Text(), nullable=False),
        sa.Column("package_id", sa.Text(), nullable=True),
        sa.Column("signature", sa.Text(), nullable=True),
        sa.Column("created_by_run_id", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "bumper_mode IN ('INHERIT','OFF','INTERSTITIAL_ONLY','FULL')",
            name="channel_bumper_mode",
        ),
        sa.CheckConstraint(
            "ordering IN ('SHUFFLE','IN_ORDER','BY_AIR_DATE')", name="channel_ordering"
        ),
        sa.CheckConstraint("number > 0", name="channel_number_positive"),
        sa.ForeignKeyConstraint(
            ["media_source_id"], ["airwave.media_source.id"], ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["package_id"], ["airwave.channel_package.id"], ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("number"),
        schema="airwave",
    )
    op.create_index(
        op.f("ix_airwave_channel_package_id"),
        "channel",
        ["package_id"],
        unique=False,
        schema="airwave",
    )
    op.create_table(
        "media_item",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("media_source_id", sa.Text(), nullable=False),
        sa.Column("rating_key", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("duration_ms", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("year", sa.Integer(), nullable=True),
        sa.Column("air_date", sa.Text(), nullable=True),
        sa.Column("parent_rating_key", sa.Text(), nullable=True),
        sa.Column(
            "guide",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("available", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column(
            "last_synced_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=True,
        ),
        sa.ForeignKeyConstraint(
            ["media_source_id"], ["airwave.media_source.id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("media_source_id", "rating_key", name="media_item_source_rating_key"),
        schema="airwave",
    )
    op.create_table(
        "media_library",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("media_source_id", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("last_scan_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["media_source_id"], ["airwave.media_source.id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("media_source_id", "key", name="media_library_source_key"),
        schema="airwave",
    )
    op.create_table(
        "channel_definition",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("channel_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("mode", sa.Text(), server_default="INCLUDE", nullable=False),
        sa.Column("sort_index", sa.Integer(), server_default="0", nullable=False),
        sa.Column("plex_filter", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("plex_library_key", sa.Text(), nullable=True),
        sa.Column("plex_collection_key", sa.Text(), nullable=True),
        sa.Column("plex_playlist_key", sa.Text(), nullable=True),
        sa.Column(
            "manual_item_keys", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("mode IN ('INCLUDE','EXCLUDE')", name="channel_definition_mode"),
        sa.ForeignKeyConstraint(["channel_id"], ["airwave.channel.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        schema="airwave",
    )
    op.create_index(
        op.f("ix_airwave_channel_definition_channel_id"),
        "channel_definition",
        ["channel_id"],
        unique=False,
        schema="airwave",
    )
    op.create_table(
        "schedule_item",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("channel_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), server_default="PROGRAM", nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_seconds", sa.Integer(), nullable=False),
        sa.Column("start_offset_seconds", sa.Integer(), server_default="0", nullable=False),
        sa.Column("rating_key", sa.Text(), nullable=True),
        sa.Column("bumper_kind", sa.Text(), nullable=True),
        sa.Column("media_item_id", sa.BigInteger(), nullable=True),
        sa.Column("target_media_item_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("duration_seconds >= 1", name="schedule_item_duration_positive"),
        sa.ForeignKeyConstraint(["channel_id"], ["airwave.channel.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["media_item_id"], ["airwave.media_item.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(
            ["target_media_item_id"], ["airwave.media_item.id"], ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("channel_id", "starts_at", name="schedule_item_channel_start"),
        schema="airwave",
    )
    op.create_index(
        "schedule_item_media_item",
        "schedule_item",
        ["media_item_id"],
        unique=False,
        schema="airwave",
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index("schedule_item_media_item", table_name="schedule_item", schema="airwave")
    op.drop_table("schedule_item", schema="airwave")
    op.drop_index(
        op.f("ix_airwave_channel_definition_channel_id"),
        table_name="channel_definition",
        schema="airwave",
    )
    op.drop_table("channel_definition", schema="airwave")
    op.drop_table("media_library", schema="airwave")
    op.drop_table("media_item", schema="airwave")
    op.drop_index(op.f("ix_airwave_channel_package_id"), table_name="channel", schema="airwave")
    op.drop_table("channel", schema="airwave")
    op.drop_table("media_source", schema="airwave")
    op.drop_index(
        op.f("ix_airwave_import_trace_run_id"), table_name="import_trace", schema="airwave"
    )
    op.drop_index("import_trace_run_phase", table_name="import_trace", schema="airwave")
    op.drop_table("import_trace", schema="airwave")
    op.drop_table("channel_package", schema="airwave")
