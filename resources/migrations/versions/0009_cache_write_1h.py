"""The ledger keeps 1-hour cache writes apart: they cost 2x the input price, 5-minute ones 1.25x.

Adds `airwave_dagster.ai_spend.cache_write_1h_tokens`, the part of `cache_write_tokens` the
Messages API reports as `usage.cache_creation.ephemeral_1h_input_tokens`. Existing rows were all
5-minute writes (the product never asked for the 1-hour lifetime), so they take 0.

Revision ID: 0009_cache_write_1h
Revises: 0008_airwave_tables
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_cache_write_1h"
down_revision = "0008_airwave_tables"
branch_labels = None
depends_on = None

SCHEMA = "airwave_dagster"


def upgrade() -> None:
    """Apply this revision."""
    op.add_column(
        "ai_spend",
        sa.Column("cache_write_1h_tokens", sa.BigInteger(), nullable=False, server_default="0"),
        schema=SCHEMA,
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_column("ai_spend", "cache_write_1h_tokens", schema=SCHEMA)
