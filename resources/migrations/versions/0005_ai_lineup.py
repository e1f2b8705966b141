"""AI lineup builder: trace rows, the budget ledger and the stored library profile.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _tokens() -> list[sa.Column[object]]:
    return [
        sa.Column(name, sa.BigInteger(), server_default="0", nullable=False)
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    ]


def _now(name: str) -> sa.Column[object]:
    return sa.Column(
        name, sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
    )


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "ai_lineup_trace",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("step_key", sa.Text(), nullable=True),
        sa.Column("step_name", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="1", nullable=False),
        sa.Column("phase", sa.Text(), nullable=False),
        sa.Column("channel_key", sa.Text(), nullable=True),
        sa.Column("channel_number", sa.Integer(), nullable=True),
        sa.Column("channel_name", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("input", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("output", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("trace", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        *_tokens(),
        sa.Column("agent_steps", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cost_usd", sa.Numeric(14, 6), nullable=True),
        sa.Column("context_sha256", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        _now("started_at"),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        schema="airwave",
    )
    op.create_index(
        op.f("ix_airwave_ai_lineup_trace_run_id"),
        "ai_lineup_trace",
        ["run_id"],
        unique=False,
        schema="airwave",
    )
    op.create_index(
        "ai_lineup_trace_run_phase",
        "ai_lineup_trace",
        ["run_id", "phase"],
        unique=False,
        schema="airwave",
    )
    op.create_table(
        "ai_budget",
        sa.Column("ledger_id", sa.Text(), nullable=False),
        sa.Column("budget_usd", sa.Numeric(14, 6), nullable=True),
        sa.Column("spent_usd", sa.Numeric(14, 6), server_default="0", nullable=False),
        sa.Column("calls", sa.Integer(), server_default="0", nullable=False),
        _now("created_at"),
        _now("updated_at"),
        sa.PrimaryKeyConstraint("ledger_id"),
        schema="airwave",
    )
    op.create_table(
        "ai_spend",
        sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False),
        sa.Column("ledger_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("step_key", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), server_default="1", nullable=False),
        sa.Column("phase", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        *_tokens(),
        sa.Column("cost_usd", sa.Numeric(14, 6), nullable=True),
        _now("created_at"),
        sa.PrimaryKeyConstraint("id"),
        schema="airwave",
    )
    op.create_index(
        op.f("ix_airwave_ai_spend_ledger_id"),
        "ai_spend",
        ["ledger_id"],
        unique=False,
        schema="airwave",
    )
    op.create_table(
        "library_profile",
        sa.Column("media_source_id", sa.Text(), nullable=False),
        sa.Column("profile", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("sha256", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        _now("computed_at"),
        sa.ForeignKeyConstraint(
            ["media_source_id"], ["airwave.media_source.id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("media_source_id"),
        schema="airwave",
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("library_profile", schema="airwave")
    op.drop_index(op.f("ix_airwave_ai_spend_ledger_id"), table_name="ai_spend", schema="airwave")
    op.drop_table("ai_spend", schema="airwave")
    op.drop_table("ai_budget", schema="airwave")
    op.drop_index("ai_lineup_trace_run_phase", table_name="ai_lineup_trace", schema="airwave")
    op.drop_index(
        op.f("ix_airwave_ai_lineup_trace_run_id"), table_name="ai_lineup_trace", schema="airwave"
    )
    op.drop_table("ai_lineup_trace", schema="airwave")
