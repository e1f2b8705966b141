"""Wake-ups of the run queue's daemon: a Postgres `NOTIFY` when the queue may have work.

Dagster's queue daemon only polls (`dequeue_interval_seconds`, 1 s here, in waits of 0.5 s), so
a queued run waited 0.5-1.5 s before it started. The daemon of `airwave serve`
(`airwave_dagster/daemon.py`) also listens on `QUEUE_CHANNEL`, and two moments send a notice
there: the run coordinator queued a run (`durability/coordinator.py`), and a run ended, freeing
one of the queue's `max_concurrent_runs` for a run that waits for it (`durability/instance.py`).

A notice is a hint, never the only way a run is taken: one that cannot be sent (Postgres
unreachable at that moment) or that no daemon hears (Dagster's own `dagster-daemon run`, as under
`airwave dev`) leaves the run to the daemon's next look, as before.
"""

from __future__ import annotations

import logging

import dagster as dg
import sqlalchemy as sa

LOG = logging.getLogger(__name__)

QUEUE_CHANNEL = "airwave_run_queue"
"""The Postgres notification channel the queue daemon listens on (one per database)."""


def wake_queue(instance: dg.DagsterInstance) -> None:
    """Notify a listening queue daemon (best effort: it also looks on its own)."""
    storage = instance.run_storage
    connect = getattr(storage, "connect", None)
    if connect is None or not hasattr(storage, "postgres_url"):
        return  # not Postgres run storage: nothing listens
    try:
        with connect() as conn:  # dagster-postgres' connections commit each statement
            conn.execute(sa.text("SELECT pg_notify(:channel, '')"), {"channel": QUEUE_CHANNEL})
    except Exception as error:  # the daemon's next look does the same, a little later
        LOG.debug("could not wake the run queue: %s", error)
