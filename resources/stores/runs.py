"""Idempotent run starts: one row per idempotency key naming the run it started."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine

from resources import tables as t


@dataclass
class RunStartSlot:
    """An idempotency key held under its advisory lock until the surrounding block ends."""

    conn: Connection
    key: str

    def recorded_run_id(self) -> str | None:
        """The run this key started last, if any."""
        return self.conn.execute(
            sa.select(t.run_start.c.run_id).where(t.run_start.c.idempotency_key == self.key)
        ).scalar_one_or_none()

    def record(self, run_id: str, job_name: str) -> None:
        """Make `run_id` the key's run (replacing an older one, as `--force` asks)."""
        stmt = pg_insert(t.run_start).values(
            idempotency_key=self.key, job_name=job_name, run_id=run_id
        )
        self.conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["idempotency_key"],
                set_={"run_id": run_id, "job_name": job_name, "created_at": sa.func.now()},
            )
        )


class RunStarts:
    """Repository of `airwave.run_start`: which run an idempotency key started."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextmanager
    def slot(self, key: str) -> Iterator[RunStartSlot]:
        """Hold `key` for the block: concurrent starts with one key run one after another.

        The transaction-scoped advisory lock is released when the block's transaction ends, so
        the second of two simultaneous starts sees the run the first one recorded.
        """
        with self._engine.begin() as conn:
            conn.execute(
                sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": key}
            )
            yield RunStartSlot(conn, key)
