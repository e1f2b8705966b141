"""Dagster's Postgres event log over kept connections, for a process that writes many events.

`PostgresEventLogStorage` opens a new connection for every event it stores (its engine has no
pool, so that the many short-lived instances of a deployment hold no connections). A run worker
whose steps run in its threads (`AIRWAVE_EXECUTOR=threads`) stores every event of every step:
about 15 per channel, each paying a connection start (a TCP handshake and a new Postgres
backend, 4-5 ms here). `kept_event_connections` gives that one instance a small pool for the
duration of the run, as Dagster's webserver does for itself (`optimize_for_webserver`), and puts
the original engine back afterwards.

For the same run the storage also stores a run event in one statement (`_plain_store_event`):
dagster-postgres 0.29.27 builds a new INSERT per event (SQLAlchemy computes its cache key each
time), asks for the new row's id and then sends `NOTIFY` on a channel nothing listens to any
more (its own comment: kept for version skew; Dagster 1.13 watches runs by polling, and this
project pins the webserver, daemon and libraries to one version). Here the row is Dagster's own
(`_event_to_row`), inserted by one statement built once; asset and asset-check events, whose
ids index other tables, are stored by Dagster's method as before.

The storage's engine is a private attribute of dagster-postgres 0.29.27 (pinned with Dagster);
`tests/resources/test_event_storage.py` fails if it moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
from dagster._core.events import ASSET_CHECK_EVENTS, ASSET_EVENTS
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
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
    # An attribute of this storage object only: other instances keep Dagster's method.
    storage.store_event = _plain_store_event(storage)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        del storage.store_event
        storage._engine = original
        pooled.dispose()


_INDEXED_ELSEWHERE = frozenset(ASSET_EVENTS) | frozenset(ASSET_CHECK_EVENTS)
"""Event types whose stored id Dagster writes into its asset tables too."""


def _plain_store_event(storage: PostgresEventLogStorage) -> Callable[[EventLogEntry], None]:
    """`storage.store_event` in one statement built once, for events no other table refers to."""
    insert = SqlEventLogStorageTable.insert()
    dagster_store = storage.store_event

    def store_event(event: EventLogEntry) -> None:
        if event.is_dagster_event and event.get_dagster_event().event_type in _INDEXED_ELSEWHERE:
            dagster_store(event)
            return
        row = storage._event_to_row(event)
        with storage._connect() as conn:
            conn.execute(insert, row)

    return store_event
