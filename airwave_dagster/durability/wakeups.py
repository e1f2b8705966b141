"""Wake-ups of the run queue's daemon: a Postgres `NOTIFY` when the queue may have work.

Dagster's queue daemon only polls (`dequeue_interval_seconds`, 1 s here, in waits of 0.5 s), so
a queued run waited 0.5-1.5 s before it started. The daemon of `airwave serve`
(`airwave_dagster/daemon.py`) also listens on `QUEUE_CHANNEL`, and two moments send a notice
there: the run coordinator queued a run (`durability/coordinator.py`), and a run ended, freeing
one of the queue's `max_concurrent_runs` for a run that waits for it (`durability/instance.py`).

A command waiting for a run (`airwave import --wait`, `runs resume --wait`, ...) listens on the
same channel (`pauses`): it checks the run again when a run ends instead of at its next poll.

A notice is a hint, never the only way a run is taken: one that cannot be sent (Postgres
unreachable at that moment) or that no daemon hears (Dagster's own `dagster-daemon run`, as under
`airwave dev`) leaves the run to the daemon's next look, as before.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
import sqlalchemy as sa

LOG = logging.getLogger(__name__)

QUEUE_CHANNEL = "airwave_run_queue"
"""The Postgres notification channel the queue daemon listens on (one per database)."""
RECONNECT_SECONDS = 5.0
"""Least time between attempts to open a listening connection after one failed."""
CONNECT_SECONDS = 5
"""Longest wait for a listening connection to open (libpq's `connect_timeout`)."""


def _postgres_url(instance: dg.DagsterInstance) -> str | None:
    url = getattr(instance.run_storage, "postgres_url", None)
    return url if isinstance(url, str) else None


@contextmanager
def pauses(instance: dg.DagsterInstance) -> Iterator[Callable[[float], None]]:
    """`pause(seconds)` for a loop that polls runs: a sleep that a notice on the channel ends.

    Without Postgres run storage (nothing notifies) it is `time.sleep`.
    """
    url = _postgres_url(instance)
    if url is None:
        yield time.sleep
        return
    listener = QueueListener(url)

    def pause(seconds: float) -> None:
        listener.wait(seconds)

    try:
        yield pause
    finally:
        listener.dispose()


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


class QueueListener:
    """A connection that `LISTEN`s on `QUEUE_CHANNEL`, reopened when it is lost.

    Opened lazily; while it cannot be opened (Postgres down), `wait` only waits, and another
    attempt is made every `RECONNECT_SECONDS`. With `log`, says when it stops and starts
    listening (the daemon's log); without, it is silent (a command's terminal).
    """

    def __init__(self, postgres_url: str, log: logging.Logger | None = None) -> None:
        # psycopg2 whatever the URL names: its `poll` and `notifies` are what `wait` reads.
        url = sa.engine.make_url(postgres_url).set(drivername="postgresql+psycopg2")
        # A host that does not answer must not hold the waiting loop for TCP's own timeout.
        self._engine = sa.create_engine(
            url, poolclass=sa.pool.NullPool, connect_args={"connect_timeout": CONNECT_SECONDS}
        )
        self._connection: Any = None  # the driver's (psycopg2) connection
        self._handle: Any = None  # SQLAlchemy's proxy, closed with it
        self._next_attempt = 0.0
        self._paused = False
        self._listened = False
        self._log = log

    def _listening(self) -> Any:
        if self._connection is not None:
            return self._connection
        now = time.monotonic()
        if now < self._next_attempt:
            return None
        self._next_attempt = now + RECONNECT_SECONDS
        try:
            handle = self._engine.raw_connection()
            connection: Any = handle.driver_connection
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f"LISTEN {QUEUE_CHANNEL}")
        except Exception as error:  # any failure to connect: wake on the interval meanwhile
            if not self._paused and self._log is not None:
                self._log.warning(
                    "Run queue wake-ups paused (queued runs are taken every interval), cannot "
                    "listen: %s",
                    _first_line(error),
                )
            self._paused = True
            return None
        if (self._paused or not self._listened) and self._log is not None:
            self._log.info("Run queue wake-ups on: listening on %s", QUEUE_CHANNEL)
        self._paused = False
        self._listened = True
        self._handle, self._connection = handle, connection
        return connection

    @property
    def backend_pid(self) -> int | None:
        """The listening connection's server process, while there is one."""
        return None if self._connection is None else int(self._connection.get_backend_pid())

    def wait(self, timeout: float, shutdown: threading.Event | None = None) -> bool:
        """Wait up to `timeout` s (less once `shutdown` is set); True when notified.

        Also True when the connection was lost: a notice may have been missed.
        """
        connection = self._listening()
        if connection is None:
            if shutdown is None:
                time.sleep(timeout)
            else:
                shutdown.wait(timeout)
            return False
        try:
            readable, _, _ = select.select([connection], [], [], timeout)
            if not readable:
                return False
            connection.poll()
            announced = bool(connection.notifies)
            connection.notifies.clear()
            return announced
        except Exception as error:  # the connection is gone: look now, listen again later
            if self._log is not None:
                self._log.warning(
                    "Run queue wake-ups paused (queued runs are taken every interval): %s",
                    _first_line(error),
                )
            self._paused = True
            self.close()
            return True

    def close(self) -> None:
        """Close the connection (a later `wait` reopens it)."""
        handle, self._handle, self._connection = self._handle, None, None
        if handle is not None:
            try:
                handle.close()
            except Exception:  # already broken: nothing to release
                pass

    def dispose(self) -> None:
        """Close the connection for good."""
        self.close()
        self._engine.dispose()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
