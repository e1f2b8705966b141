"""The daemon of `airwave serve`: Dagster's daemons, with a run queue that wakes on submission.

Dagster 1.13's queue daemon (`QueuedRunCoordinatorDaemon`) looks for queued runs every
`dequeue_interval_seconds`, an integer (1 s at least), and between looks waits in steps of 0.5 s
(`IntervalDaemon.core_loop`): a run queued from the UI, the CLI or a sensor waited about 0.5 to
1.5 s before the daemon took it, most of the time between `airwave import` and its first build
with a server up (BENCHMARKS.md, "Starting an import"). Dagster offers no way to wake it.

This entry point runs what `dagster-daemon run` runs (`daemon_controller_from_instance`, then
`check_daemon_loop`: the same daemons, heartbeats and workspace) with one daemon changed: the
queue daemon also ends its wait when it is notified that the queue may have work: a run was
queued, or a run ended and freed a slot (`durability/wakeups.py` sends a Postgres `NOTIFY` on
`QUEUE_CHANNEL`; here a connection `LISTEN`s on it). The notice is only a hint: the daemon still
looks at its interval, so a notice it misses (its listening connection lost with a Postgres
restart and not yet back, a run queued by a process without this project's instance) delays a
run by at most the interval, as before. A notice of another instance on the same database
(another schema) costs one look.

Usage: `python -m airwave_dagster.daemon -w WORKSPACE [--log-level LEVEL]`.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from dagster._daemon.daemon import DaemonIterator, SpanMarker
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (
    QueuedRunCoordinatorDaemon,
)
from dagster._utils.error import serializable_error_info_from_exc_info

from airwave_dagster.durability.wakeups import QueueListener

LOG = logging.getLogger("dagster.daemon.airwave")

WAIT_STEP_SECONDS = 0.5
"""Longest wait between yields to the controller (Dagster's own step: heartbeats, shutdown)."""


class WakingQueueDaemon(QueuedRunCoordinatorDaemon):
    """Dagster's queue daemon, whose wait between looks ends when a run is announced."""

    def __init__(self, interval_seconds: float, postgres_url: str) -> None:
        super().__init__(interval_seconds=interval_seconds)
        self._postgres_url = postgres_url
        self.listener: QueueListener | None = None
        """The listener of the running loop (None before the loop starts)."""

    def core_loop(
        self, workspace_process_context: Any, shutdown_event: threading.Event
    ) -> DaemonIterator:
        listener = self.listener = QueueListener(self._postgres_url, log=LOG)
        try:
            while True:
                began = time.monotonic()
                yield SpanMarker.START_SPAN
                try:
                    yield from self.run_iteration(workspace_process_context)
                except Exception:
                    error = serializable_error_info_from_exc_info(sys.exc_info())
                    self._logger.error("Caught error:\n%s", error)
                    yield error
                yield SpanMarker.END_SPAN
                while (left := self.interval_seconds - (time.monotonic() - began)) > 0:
                    if listener.wait(min(left, WAIT_STEP_SECONDS), shutdown_event):
                        break
                    yield None
                yield None
        finally:
            listener.dispose()


def airwave_daemons(instance: Any) -> Iterable[Any]:
    """Dagster's daemons for `instance`, the queue daemon replaced by `WakingQueueDaemon`."""
    from dagster._daemon.controller import create_daemons_from_instance

    url = getattr(instance.run_storage, "postgres_url", None)
    for daemon in create_daemons_from_instance(instance):
        if isinstance(daemon, QueuedRunCoordinatorDaemon) and url:
            yield WakingQueueDaemon(daemon.interval_seconds, url)
        else:
            yield daemon


def _run(workspace: Sequence[str], log_level: str) -> None:
    from dagster._cli.utils import get_instance_for_cli
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster._daemon.cli import _get_heartbeat_tolerance
    from dagster._daemon.controller import daemon_controller_from_instance

    with (
        get_instance_for_cli() as instance,
        daemon_controller_from_instance(
            instance,
            workspace_load_target=WorkspaceFileTarget(paths=list(workspace)),
            heartbeat_tolerance_seconds=_get_heartbeat_tolerance(),
            gen_daemons=lambda i: list(airwave_daemons(i)),
            log_level=log_level,
            code_server_log_level=log_level,
        ) as controller,
    ):
        controller.check_daemon_loop()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the daemons until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="airwave-daemon")
    parser.add_argument("-w", "--workspace", action="append", required=True)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)

    from dagster._utils.interrupts import capture_interrupts, setup_interrupt_handlers

    setup_interrupt_handlers()
    try:
        with capture_interrupts():
            _run(args.workspace, args.log_level)
    except KeyboardInterrupt:
        return


if __name__ == "__main__":
    main()
