"""Dagster's Postgres event log over kept connections, for a process that writes many events.

`PostgresEventLogStorage` opens a new connection for every event it stores (its engine has no
pool, so that the many short-lived instances of a deployment hold no connections). A run worker
whose steps run in its threads (`AIRWAVE_EXECUTOR=threads`) stores every event of every step:
about 15 per channel, each paying a connection start (a TCP handshake and a new Postgres
backend, 4-5 ms here). `kept_event_connections` gives that one instance a small pool for the
duration of the run, as Dagster's webserver does for itself (`optimize_for_webserver`), and puts
the original engine back afterwards.

The storage's engine is a private attribute of dagster-postgres 0.29.27 (pinned with Dagster);
`tests/resources/test_event_storage.py` fails if it moves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
from dagster_postgres.event_log import PostgresEventLogStorage
from dagster_postgres.utils import create_pg_engine

APPLICATION_NAME = "airwave-run-worker-events"
"""How the kept connections name themselves to Postgres (`pg_stat_activity.application_name`)."""


@contextmanager
def kept_event_connections(instance: dg.DagsterInstance, connections: int) -> Iterator[None]:
    """While the block runs, `instance` stores events over at most `connections` kept connections.

    More writers at once than that get a connection of their own for the write, as before. Each
    kept connection is checked with a ping when taken, so one cut by a Postgres restart is
    replaced instead of failing a write. A storage that is not Postgres is left as it is.
    """
    storage = instance.event_log_storage
    if not isinstance(storage, PostgresEventLogStorage):
        yield
        return
    original = storage._engine
    connect_args: dict[str, Any] = {"application_name": APPLICATION_NAME}
    options = original.url.query.get("options")
    if options:
        connect_args["options"] = options
    pooled = create_pg_engine(
        storage.postgres_url,
        storage._token_provider,
        isolation_level="AUTOCOMMIT",
        pool_size=connections,
        max_overflow=-1,
        pool_pre_ping=True,
        connect_args=connect_args,
    )
    storage._engine = pooled
    try:
        yield
    finally:
        storage._engine = original
        pooled.dispose()
