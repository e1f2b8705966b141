"""Idempotent run starts: one `airwave_dagster.run_start` row per idempotency key, naming its run.

Plain DB-API SQL over psycopg2, not SQLAlchemy like the stores: this is the only database work of
`airwave import` / `airwave lineup` when a webserver takes the run, and importing SQLAlchemy
would cost that path a quarter of its one-second budget (README, "Using it"). Only the CLI starts
runs this way; the table itself is declared with the others (`resources/tables.py`) and created
by the migrations.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg2

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_RECORDED = "SELECT run_id FROM airwave_dagster.run_start WHERE idempotency_key = %s"
_RECORD = (
    "INSERT INTO airwave_dagster.run_start (idempotency_key, job_name, run_id) VALUES (%s, %s, %s) "
    "ON CONFLICT (idempotency_key) DO UPDATE "
    "SET run_id = EXCLUDED.run_id, job_name = EXCLUDED.job_name, created_at = now()"
)


@dataclass
class RunStartSlot:
    """An idempotency key held under its advisory lock until the surrounding block ends."""

    cursor: Any
    key: str

    def recorded_run_id(self) -> str | None:
        """The run this key started last, if any."""
        self.cursor.execute(_RECORDED, (self.key,))
        row = self.cursor.fetchone()
        return None if row is None else str(row[0])

    def record(self, run_id: str, job_name: str) -> None:
        """Make `run_id` the key's run (replacing an older one, as `--force` asks)."""
        self.cursor.execute(_RECORD, (self.key, job_name, run_id))


class RunStarts:
    """Repository of `airwave_dagster.run_start`: which run an idempotency key started.

    Args:
        dsn: libpq connection string or URL of the project database (no `+driver` suffix).
    """

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn

    @contextmanager
    def slot(self, key: str) -> Iterator[RunStartSlot]:
        """Hold `key` for the block: concurrent starts with one key run one after another.

        The transaction-scoped advisory lock is released when the block's transaction ends
        (committed, or rolled back if the block raised), so the second of two simultaneous
        starts sees the run the first one recorded.
        """
        conn = psycopg2.connect(self._dsn)
        try:
            with conn, conn.cursor() as cursor:  # one transaction: commit, or roll back
                cursor.execute(_LOCK, (key,))
                yield RunStartSlot(cursor, key)
        finally:
            conn.close()
