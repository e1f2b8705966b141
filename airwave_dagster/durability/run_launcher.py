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
from pathlib import Path

import dagster as dg
import grpc
from dagster._core.errors import DagsterUserCodeUnreachableError
from dagster._core.launcher import (
    CheckRunHealthResult,
    DefaultRunLauncher,
    LaunchRunContext,
    WorkerStatus,
)
from dagster._core.storage.tags import GRPC_INFO_TAG

from resources import heartbeats

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
_SERVED_LATE_SECONDS = 180.0
"""How long a start_run that timed out may take to show its worker (run monitoring's start
timeout in dagster.yaml): on a loaded machine a worker took 78 s to report itself."""


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


def _timed_out(error: DagsterUserCodeUnreachableError) -> bool:
    cause = error.__cause__
    return isinstance(cause, grpc.RpcError) and cause.code() == grpc.StatusCode.DEADLINE_EXCEEDED


class AirwaveRunLauncher(DefaultRunLauncher):
    """`DefaultRunLauncher` plus a run-worker health check for workers on this machine.

    It also never starts a second worker for one run. A `start_run` that times out in the
    client (60 s; a loaded machine) has usually been served: the code server started the
    worker. The queue (`max_user_code_failure_retries`) would requeue the run and launch it
    again; a worker that then finds its run QUEUED, or a second worker for a run already
    running, ignores itself as a duplicate and exits, and the code server, seeing its latest
    process for the run end with the run unfinished, marks the run failed, even while the first
    worker still executes it (found by the ten-runs load test,
    tests/integration/test_load_and_faults.py). So a timed-out start waits for the worker to
    report itself, and a launch of a run whose worker is alive here does nothing.
    """

    def launch_run(self, context: LaunchRunContext) -> None:
        """Start the run's worker in its code server, unless one already runs it."""
        run = context.dagster_run
        pid = live_local_worker(self._instance, run.run_id)
        if pid is not None:
            self._instance.report_engine_event(
                f"Run worker {pid} already executes this run (an earlier start that timed out "
                "was served): not starting another",
                run,
                cls=type(self),
            )
            return
        try:
            super().launch_run(context)
        except DagsterUserCodeUnreachableError as error:
            if not _timed_out(error):
                raise
            deadline = time.monotonic() + _SERVED_LATE_SECONDS
            while time.monotonic() < deadline:
                pid = live_local_worker(self._instance, run.run_id)
                if pid is not None:
                    self._instance.report_engine_event(
                        f"start_run timed out but was served: run worker {pid} executes the run",
                        run,
                        cls=type(self),
                    )
                    self._run_ids.add(run.run_id)
                    return
                time.sleep(1.0)
            raise

    @property
    def supports_check_run_worker_health(self) -> bool:
        """The monitoring daemon may ask whether a run's worker is alive."""
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        """FAILED when this machine's run worker process is gone; RUNNING when unknowable."""
        return worker_health(self._instance, run)
