"""A queued run wakes the run queue's daemon of `airwave serve` (airwave_dagster/daemon.py).

Real parts: the project's run coordinator on the test Postgres (tests/support/coordinator.py),
Postgres LISTEN/NOTIFY, and the daemon's own loop (`WakingQueueDaemon.core_loop`) driven the way
Dagster's controller drives it. What a look at the queue does is Dagster's and is not under test
here: the looks are counted instead of taken. The interval between looks is a minute, so a look
seconds after a submission is one the announcement caused. Other tests may queue runs on the same
database at the same time, so the assertions count looks from a point on rather than exactly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.daemon import WakingQueueDaemon
from airwave_dagster.durability import wakeups
from airwave_dagster.durability.wakeups import QueueListener
from tests.support.coordinator import stand_in, submit
from tests.support.dagster_dev import wait_for
from tests.support.instances import airwave_instance_on
from tests.support.schemas import fresh_schema

pytestmark = [pytest.mark.postgres]

INTERVAL_SECONDS = 60.0
"""The daemon's own look interval here: far longer than any wait of these tests."""
PROMPT_SECONDS = 20.0
"""How long a look caused by an announcement may take to come on a loaded machine."""


class _CountingDaemon(WakingQueueDaemon):
    """The waking queue daemon whose look at the queue only records when it happened."""

    def __init__(self, postgres_url: str) -> None:
        super().__init__(INTERVAL_SECONDS, postgres_url)
        self.looks: list[float] = []

    def run_iteration(self, workspace_process_context: Any) -> Iterator[None]:
        self.looks.append(time.monotonic())
        yield None


def _postgres_url(instance: dg.DagsterInstance) -> str:
    return str(instance.run_storage.postgres_url)  # type: ignore[attr-defined]


def _backend_alive(url: str, pid: int) -> bool:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            query = "SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"
            return bool(conn.execute(sa.text(query), {"pid": pid}).scalar_one())
    finally:
        engine.dispose()


def _terminate(url: str, pid: int) -> None:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        engine.dispose()


@pytest.fixture
def running_daemon(queue_instance: dg.DagsterInstance) -> Iterator[_CountingDaemon]:
    """The daemon's loop in a thread, as `DagsterDaemon.run_daemon_loop` runs it."""
    daemon = _CountingDaemon(_postgres_url(queue_instance))
    shutdown = threading.Event()

    def drive() -> None:
        loop = daemon.core_loop(None, shutdown)
        try:
            while not shutdown.is_set():
                next(loop)
        finally:
            loop.close()

    thread = threading.Thread(target=drive, name="queue-daemon", daemon=True)
    thread.start()
    try:
        yield daemon
    finally:
        shutdown.set()
        thread.join(10)
    assert not thread.is_alive(), "the daemon's loop did not stop with the shutdown event"


def _listening(daemon: _CountingDaemon) -> int:
    """The listening connection's server pid, once the loop listens."""
    listener = daemon.listener
    pid = listener.backend_pid if listener is not None else None
    return pid or 0


def test_a_queued_run_is_announced_on_the_queue_channel(
    queue_instance: dg.DagsterInstance,
) -> None:
    listener = QueueListener(_postgres_url(queue_instance))
    try:
        never = threading.Event()
        listener.wait(0.1, never)  # opens the connection and listens
        assert listener.backend_pid is not None
        run = submit(queue_instance)
        assert run.status == dg.DagsterRunStatus.QUEUED
        assert wait_for(lambda: listener.wait(0.5, never), PROMPT_SECONDS, "the announcement")
    finally:
        listener.dispose()


def test_the_queue_daemon_looks_when_a_run_is_queued_not_only_at_its_interval(
    queue_instance: dg.DagsterInstance, running_daemon: _CountingDaemon
) -> None:
    daemon = running_daemon
    url = _postgres_url(queue_instance)
    first = wait_for(lambda: _listening(daemon), PROMPT_SECONDS, "the daemon to listen")
    before = len(daemon.looks)
    assert before >= 1  # the loop looks once when it starts, then waits for the interval
    submit(queue_instance)
    wait_for(lambda: len(daemon.looks) > before, PROMPT_SECONDS, "a look after the run queued")

    # The listening connection is lost (as in a Postgres restart): the daemon looks at once,
    # since a run may have been announced while it was going, then listens on a new one.
    before = len(daemon.looks)
    _terminate(url, first)
    wait_for(lambda: len(daemon.looks) > before, PROMPT_SECONDS, "a look when the listener died")
    second = wait_for(
        lambda: _listening(daemon) if _listening(daemon) != first else 0,
        PROMPT_SECONDS,
        "the daemon to listen again",
    )
    assert _backend_alive(url, second)
    before = len(daemon.looks)
    submit(queue_instance)
    wait_for(lambda: len(daemon.looks) > before, PROMPT_SECONDS, "a look after the next run")


def test_the_listening_connection_closes_with_the_daemon(
    queue_instance: dg.DagsterInstance,
) -> None:
    daemon = _CountingDaemon(_postgres_url(queue_instance))
    shutdown = threading.Event()
    loop = daemon.core_loop(None, shutdown)
    next(loop)  # the first look's start
    while not _listening(daemon):
        next(loop)
    pid = _listening(daemon)
    loop.close()  # what the controller does when the daemon stops or restarts its loop
    url = _postgres_url(queue_instance)
    wait_for(lambda: not _backend_alive(url, pid), PROMPT_SECONDS, "the connection to close")


def test_while_postgres_cannot_be_reached_the_daemon_waits_on_its_interval() -> None:
    unreachable = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    listener = QueueListener(unreachable)
    shutdown = threading.Event()
    try:
        started = time.monotonic()
        assert listener.wait(0.3, shutdown) is False
        assert listener.backend_pid is None
        # It waited, rather than returning at once (a busy loop for the daemon's thread).
        assert time.monotonic() - started >= 0.3
        shutdown.set()
        assert listener.wait(30, shutdown) is False  # the shutdown ends the wait
    finally:
        listener.dispose()


def test_a_run_that_ends_wakes_the_queue_for_the_runs_waiting_for_its_slot(
    database_url: str,
) -> None:
    with airwave_instance_on(fresh_schema(database_url, "dagster_queue_wakeups")) as instance:
        listener = QueueListener(_postgres_url(instance))
        never = threading.Event()
        try:
            listener.wait(0.1, never)
            assert listener.backend_pid is not None
            run = instance.create_run_for_job(stand_in)
            instance.report_engine_event("a step of the run", run)
            assert not listener.wait(0.5, never), "an event that ends no run woke the queue"
            instance.report_run_canceled(run)
            assert wait_for(lambda: listener.wait(0.5, never), PROMPT_SECONDS, "the wake-up")
        finally:
            listener.dispose()


def test_a_command_waiting_for_a_run_is_woken_by_a_notice(
    queue_instance: dg.DagsterInstance,
) -> None:
    """`wakeups.pauses`, what `airwave import --wait` and `runs … --wait` sleep with."""
    with wakeups.pauses(queue_instance) as pause:
        pause(0.1)  # opens the connection and listens
        notifier = threading.Timer(0.5, wakeups.wake_queue, args=(queue_instance,))
        notifier.start()
        began = time.monotonic()
        pause(INTERVAL_SECONDS)
        waited = time.monotonic() - began
        notifier.join()
    assert waited < INTERVAL_SECONDS / 2, f"the pause ran {waited:.1f} s: no notice ended it"
