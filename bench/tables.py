"""Emptying the tables a benchmark fills, so each measured run starts from the same state."""

from __future__ import annotations

import sqlalchemy as sa

IMPORT_TABLES = (
    "public.channel",
    "public.channel_package",
    "public.schedule_item",
    "public.media_item",
    "public.import_trace",
    "airwave_dagster.step_output",
)
"""What an import writes: emptied before each timed import, so each builds the same channels."""

AI_LINEUP_TABLES = (
    "public.channel",
    "public.channel_package",
    "public.schedule_item",
    "public.ai_lineup_trace",
    "airwave_dagster.ai_spend",
    "airwave_dagster.ai_budget",
)
"""What an AI lineup writes and spends."""


def truncate(database_url: str, tables: tuple[str, ...]) -> None:
    """TRUNCATE … CASCADE the tables in one statement."""
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"TRUNCATE {', '.join(tables)} CASCADE"))
    finally:
        engine.dispose()
