"""Concurrency-pool limits in the Dagster instance's event-log storage."""

from __future__ import annotations

import dagster as dg
from sqlalchemy.exc import IntegrityError


def set_pool_limit(instance: dg.DagsterInstance, pool: str, limit: int) -> None:
    """Make `pool`'s limit `limit` in the instance (idempotent, safe when run workers race).

    Dagster's upsert of a pool's row reads it, then inserts it when missing: two run workers
    starting at the same moment on a fresh instance both insert, and the second fails on the
    unique key (seen in the suite: `concurrency_limits_concurrency_key_key`). The row exists
    then, so setting the limit again updates it.
    """
    storage = instance.event_log_storage
    try:
        storage.set_concurrency_slots(pool, limit)
    except IntegrityError:
        storage.set_concurrency_slots(pool, limit)
