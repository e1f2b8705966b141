"""Run launcher whose run workers can be health-checked, so dead runs do not stay STARTED.

Dagster's `DefaultRunLauncher` cannot tell whether a run worker is alive
(`supports_check_run_worker_health` is False), so a run whose worker vanished while its code
server was gone too stays STARTED forever (docs/dagster-notes.md Q4b). This launcher answers
the monitoring daemon's health check from the operating system: the run worker reports its pid in
the event log ("Started process for run (pid: N)"), and when the code server that launched it is
on this machine (a unix socket or a loopback address — always so under `airwave dev` and the CLI)
a pid that no longer exists, or is a zombie, means the worker died. A worker on another machine
is judged by its heartbeat instead (resources/heartbeats.py): none for 60 s means it died. The
daemon then marks the run failed within one poll interval (5 s in dagster.yaml), and run retries
resume it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import dagster as dg
from dagster._core.errors import DagsterUserCodeUnreachableError
from dagster._core.launcher import (
    CheckRunHealthResult,
    DefaultRunLauncher,
    LaunchRunContext,
    WorkerStatus,
)
from dagster._core.storage.tags import GRPC_INFO_TAG
from dagster._grpc.types import GetCurrentRunsResult
from dagster._serdes import deserialize_value

from resources import heartbeats

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
_SERVED_LATE_SECONDS = 180.0
"""How long, after a start_run that failed in the client, the launcher waits for the code server
or the worker to answer (run monitoring's start timeout in dagster.yaml): on a loaded machine a
worker took 78 s to report itself."""


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The run worker's pid, from the engine event it reports when it starts."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=50
    ).records
    for record in records:
        entry = record.event_log_entry
        if entry.dagster_event is None or not (entry.message or "").startswith(
            "Started process for run"
        ):
            continue
        pid = entry.dagster_event.engine_event_data.metadata.get("pid")
        if pid is not None:
            try:
                return int(str(pid.value))
            except ValueError:
                return None
    return None


def process_alive(pid: int) -> bool:
    """Whether `pid` is a live (not zombie) process on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: existence is all we can know
    # The state is the first field after the parenthesised command name.
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def launched_locally(run: dg.DagsterRun) -> bool:
    """Whether the run's code server (and so its worker) is on this machine."""
    raw = run.tags.get(GRPC_INFO_TAG)
    if not raw:
        return False
    try:
        info = json.loads(raw)
    except ValueError:
        return False
    return bool(info.get("socket")) or info.get("host") in _LOCAL_HOSTS


def worker_health(instance: dg.DagsterInstance, run: dg.DagsterRun) -> CheckRunHealthResult:
    """Whether `run`'s worker is alive, as far as this machine can tell.

    FAILED when the worker was launched on this machine and its pid (from the event log) no
    longer names a live process, or when it runs elsewhere and its heartbeat went stale
    (resources/heartbeats.py); RUNNING whenever the answer is not known, so a caller never fails
    a run it cannot see.
    """
    if not launched_locally(run):
        # Another machine's pid means nothing here: judge by the worker's heartbeat instead.
        beat = heartbeats.last_beat(instance, run.run_id)
        if beat is None:
            return CheckRunHealthResult(WorkerStatus.RUNNING, "worker elsewhere, no heartbeat yet")
        reason = beat.stale_reason(time.time())
        if reason is not None:
            return CheckRunHealthResult(WorkerStatus.FAILED, reason, run_worker_id=str(beat.pid))
        return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=str(beat.pid))
    pid = worker_pid(instance, run.run_id)
    if pid is None:
        return CheckRunHealthResult(WorkerStatus.RUNNING, "worker pid not reported yet")
    if process_alive(pid):
        return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=str(pid))
    return CheckRunHealthResult(
        WorkerStatus.FAILED,
        f"run worker process {pid} is gone (killed or crashed)",
        run_worker_id=str(pid),
    )


def dead_worker_reason(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str | None:
    """Why an in-progress run can never finish (its worker is gone), or None.

    Only STARTING and STARTED runs are judged: a queued run has no worker yet and a finished one
    needs none.
    """
    if run.status not in (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED):
        return None
    health = worker_health(instance, run)
    if health.status != WorkerStatus.FAILED:
        return None
    return health.msg or "run worker is gone"


def live_local_worker(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The pid of `run_id`'s run worker when it runs on this machine now, else None."""
    run = instance.get_run_by_id(run_id)
    if run is None or not launched_locally(run):
        return None
    pid = worker_pid(instance, run_id)
    return pid if pid is not None and process_alive(pid) else None


_ABSENT_CONFIRM_SECONDS = 2.0
"""How far apart two answers of the code server must be, both without the run, before a start is
judged never served: a `start_run` handler that began before the first answer has its worker in
the code server's table by the second (it registers it under the lock that answer takes)."""


_UNREACHABLE_SECONDS = 15.0
"""How long a code server that never answered may stay unreachable before a start is judged not
served (a call that timed out already waited its whole gRPC deadline)."""


class StartProbe(Protocol):
    """What a launcher can ask after a `start_run` call that failed in the client."""

    def reported_worker(self) -> int | None:
        """The pid of the run's worker once it has reported itself in the event log."""
        ...

    def code_server_runs(self) -> set[str] | None:
        """The runs the code server has workers for now, or None when it cannot be reached."""
        ...


def start_was_served(
    run_id: str,
    probe: StartProbe,
    *,
    window_seconds: float = _SERVED_LATE_SECONDS,
    confirm_seconds: float = _ABSENT_CONFIRM_SECONDS,
    unreachable_seconds: float = _UNREACHABLE_SECONDS,
    poll_seconds: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """After a `start_run` that failed in the client, whether the code server started the worker.

    The event log is asked whether a worker reported itself (then it was served, whatever the
    worker did next), the code server which runs it has workers for (its `GetCurrentRuns`).
    Returns why the start counts as served (the run must not be launched again), or None when it
    was not: the code server, reached twice `confirm_seconds`
    apart, had no worker for the run, or had one that ended without ever reporting itself (its
    setup failed; it never executed the run). A worker the code server holds counts as served
    even when it is slower than `window_seconds` to report itself: launching the run again would
    make it find its run QUEUED and exit as a duplicate. A code server that cannot be reached
    for `unreachable_seconds` without ever having shown the run (it is down or restarting: the
    queue's retries are for that), or any situation undecided after `window_seconds`, counts as
    not served.
    """
    started = clock()
    deadline = started + window_seconds
    held = False
    absent_since: float | None = None
    while True:
        pid = probe.reported_worker()
        if pid is not None:
            return f"run worker {pid} reported itself"
        runs = probe.code_server_runs()
        now = clock()
        if runs is None and not held and now - started >= unreachable_seconds:
            return None
        if runs is not None:
            if run_id in runs:
                held, absent_since = True, None
            elif held:
                # Its worker was there and is gone: unless it reported itself in the meantime,
                # its setup failed before it executed anything.
                pid = probe.reported_worker()
                return None if pid is None else f"run worker {pid} reported itself"
            elif absent_since is None:
                absent_since = now
            elif now - absent_since >= confirm_seconds:
                return None
        if now >= deadline:
            if held:
                return "the code server holds a worker for the run that has not reported itself"
            return None
        sleep(poll_seconds)


class _GrpcStartProbe:
    """`StartProbe` from the run's event log and its code server (the run's gRPC tag)."""

    def __init__(self, launcher: AirwaveRunLauncher, run_id: str) -> None:
        self._launcher = launcher
        self._run_id = run_id

    def reported_worker(self) -> int | None:
        return worker_pid(self._launcher._instance, self._run_id)

    def code_server_runs(self) -> set[str] | None:
        client = self._launcher._get_grpc_client_for_termination(self._run_id)
        if client is None:
            return None
        try:
            result = deserialize_value(client.get_current_runs(), GetCurrentRunsResult)
        except DagsterUserCodeUnreachableError:
            return None
        if result.serializable_error_info is not None:
            return None
        return set(result.current_runs)


class AirwaveRunLauncher(DefaultRunLauncher):
    """`DefaultRunLauncher` plus a run-worker health check for workers on this machine.

    It also never starts a second worker for one run. A `start_run` that fails in the client
    (its 60 s deadline passed on a loaded machine, or the call broke off) has often been served:
    the code server started the worker. The queue (`max_user_code_failure_retries`) would
    requeue the run and launch it again; a worker that then finds its run QUEUED, or a second
    worker for a run already running, ignores itself as a duplicate and exits, and the code
    server, seeing its latest process for the run end with the run unfinished, marks the run
    failed, even while the first worker still executes it (found by the ten-runs load test,
    tests/integration/test_load_and_faults.py). So after a failed start the launcher asks the
    code server whether it holds a worker for the run (`start_was_served`) and requeues only
    when it does not; and a launch of a run whose worker is alive here, or held by its code
    server, does nothing.
    """

    def launch_run(self, context: LaunchRunContext) -> None:
        """Start the run's worker in its code server, unless one already runs it."""
        run = context.dagster_run
        probe = _GrpcStartProbe(self, run.run_id)
        pid = live_local_worker(self._instance, run.run_id)
        held = (
            pid is None
            and GRPC_INFO_TAG in run.tags  # launched before: its code server may hold a worker
            and run.run_id in (probe.code_server_runs() or set())
        )
        if pid is not None or held:
            worker = f"Run worker {pid}" if pid is not None else "A run worker"
            self._instance.report_engine_event(
                f"{worker} already executes this run (an earlier start that failed in the "
                "client was served): not starting another",
                run,
                cls=type(self),
            )
            self._run_ids.add(run.run_id)
            return
        try:
            super().launch_run(context)
        except DagsterUserCodeUnreachableError:
            served = start_was_served(run.run_id, probe)
            if served is None:
                raise
            self._instance.report_engine_event(
                f"start_run failed in the client but was served: {served}",
                run,
                cls=type(self),
            )
            self._run_ids.add(run.run_id)

    @property
    def supports_check_run_worker_health(self) -> bool:
        """The monitoring daemon may ask whether a run's worker is alive."""
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        """FAILED when this machine's run worker process is gone; RUNNING when unknowable."""
        return worker_health(self._instance, run)
