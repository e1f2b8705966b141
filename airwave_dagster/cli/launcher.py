"""Start runs the way the Dagster UI does, so CLI runs are visible and re-executable there.

Dagster has no public "launch this job with config and give me the run" call for a workspace
(docs/dagster-notes.md Q5): `dagster job launch` wraps the same internal steps used here. The
run is created against the code location from `workspace.yaml`, so it carries a remote job origin
and the UI can re-execute it. It then goes to the run queue when a daemon is running (`airwave
dev`), or straight to the run launcher otherwise, so the CLI works without the daemon.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.remote_representation.external import RemoteJob
from dagster._core.workspace.context import BaseWorkspaceRequestContext, WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceFileTarget

from airwave_dagster.cli.environment import airwave_home, open_project_stores, workspace_file
from airwave_dagster.cli.outages import patiently
from airwave_dagster.cli.starts import WILL_RETRY_TAG, ConfigInvalid, LaunchRefused, RunInfo
from airwave_dagster.durability import wakeups
from airwave_dagster.run_tags import CANCEL_REASON_TAG, IDEMPOTENCY_TAG
from airwave_dagster.suspension import has_stopped

LOCATION_NAME = "airwave"
_DAEMON_FRESH_SECONDS = 60


@contextmanager
def _children_write_to(log_path: Path) -> Iterator[None]:
    """Point fds 1 and 2 at a log file while child processes are started.

    The code server started here launches run workers, which print every event to the stdout
    they inherit. That would flood the CLI's own output (and break `--json`), so the children
    get the log file instead; the full event log is in Postgres and the UI anyway.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log_path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


@contextmanager
def workspace(instance: dg.DagsterInstance) -> Iterator[BaseWorkspaceRequestContext]:
    """A request context over the packaged `workspace.yaml` (starts a code server).

    The code server's output, and that of the run workers it launches, goes to
    `.airwave/logs/code-server.log`.
    """
    home = airwave_home()
    target = WorkspaceFileTarget(paths=[str(workspace_file(home))])
    with _children_write_to(home / "logs" / "code-server.log"):
        process_context = WorkspaceProcessContext(instance, target)
    with process_context:
        yield process_context.create_request_context()


def remote_job(context: BaseWorkspaceRequestContext, job_name: str) -> RemoteJob:
    """The job as the code server describes it."""
    location = context.get_code_location(LOCATION_NAME)
    repository = next(iter(location.get_repositories().values()))
    return repository.get_full_job(job_name)


def daemon_running(instance: dg.DagsterInstance) -> bool:
    """Whether a queued-run daemon heartbeat is fresh (then runs go through the queue)."""
    heartbeats = instance.get_daemon_heartbeats()
    beat = heartbeats.get("QUEUED_RUN_COORDINATOR")
    return beat is not None and time.time() - beat.timestamp < _DAEMON_FRESH_SECONDS


def create_run(
    instance: dg.DagsterInstance,
    context: BaseWorkspaceRequestContext,
    job_name: str,
    run_config: Mapping[str, object],
    tags: Mapping[str, str],
) -> dg.DagsterRun:
    """Create a NOT_STARTED run of `job_name` with a remote origin (UI re-executable)."""
    location = context.get_code_location(LOCATION_NAME)
    job = remote_job(context, job_name)
    plan = location.get_execution_plan(
        job, dict(run_config), step_keys_to_execute=None, known_state=None, instance=instance
    )
    snapshot = plan.execution_plan_snapshot
    repository = next(iter(location.get_repositories().values()))
    return instance.create_run(
        job_name=job.name,
        run_id=None,
        run_config=dict(run_config),
        resolved_op_selection=None,
        step_keys_to_execute=snapshot.step_keys_to_execute,
        op_selection=None,
        status=None,
        root_run_id=None,
        parent_run_id=None,
        tags={**job.tags, **tags},
        job_snapshot=job.job_snapshot,
        execution_plan_snapshot=snapshot,
        parent_job_snapshot=job.parent_job_snapshot,
        remote_job_origin=job.get_remote_origin(),
        job_code_origin=job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repository.asset_graph,
    )


def start_run(
    instance: dg.DagsterInstance,
    context: BaseWorkspaceRequestContext,
    run: dg.DagsterRun,
) -> dg.DagsterRun:
    """Queue the run if a daemon serves the queue, otherwise launch it now."""
    if daemon_running(instance):
        return instance.submit_run(run.run_id, context)
    return instance.launch_run(run.run_id, context)


_HEALTH_CHECK_SECONDS = 10.0
"""How often a waiting command asks whether the run's worker is still alive (no daemon)."""

UNSERVED_QUEUE_SECONDS = 20.0
"""A run queued this long while the queue has room is not being taken: the run-queue daemon
dequeues every second (`dequeue_interval_seconds` in dagster.yaml), so twenty intervals without
a dequeue mean it is gone even on a loaded machine (a daemon's heartbeat stays fresh for up to a
minute after it stops)."""

_QUEUE_CHECK_SECONDS = 2.0
"""How often a waiting command asks whether its queued run is being taken."""


def unserved_queue(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """Why the queued run `run_id` will not be taken by any daemon, or None if it may be.

    A queue is unserved when no run-queue daemon has a fresh heartbeat, or when the run has
    waited `UNSERVED_QUEUE_SECONDS` although fewer runs are in progress than the queue allows
    (then nothing holds it back but a daemon that stopped: `airwave dev` ended with Ctrl-C leaves
    a heartbeat that looks alive for a minute).
    """
    record = instance.get_run_record_by_id(run_id)
    if record is None or record.dagster_run.status != dg.DagsterRunStatus.QUEUED:
        return None
    if not daemon_running(instance):
        return "no run-queue daemon is running"
    waited = time.time() - record.create_timestamp.timestamp()
    if waited < UNSERVED_QUEUE_SECONDS:
        return None
    limit = instance.run_coordinator.get_run_queue_config().max_concurrent_runs  # type: ignore[attr-defined]
    busy = instance.get_runs_count(
        dg.RunsFilter(
            statuses=[
                dg.DagsterRunStatus.STARTING,
                dg.DagsterRunStatus.STARTED,
                dg.DagsterRunStatus.CANCELING,
            ]
        )
    )
    if limit >= 0 and busy >= limit:
        return None  # a full queue: the run waits its turn
    return (
        f"it waited {waited:.0f} s in the queue with {busy} of {limit} runs in progress: the "
        "run-queue daemon is not taking runs (was `airwave dev` stopped?)"
    )


class RunWatch:
    """A run as a command waiting for it reads it: through database outages, and never forever.

    Each read rides out an unreachable database (`outages.patiently`). Every
    `_HEALTH_CHECK_SECONDS`, while no daemon watches the instance, an unfinished run whose worker
    is gone is marked FAILURE (`fail_if_dead`), as the daemon's run monitoring would: a worker
    that died, or ended while Postgres was down and could not record the run's end, would
    otherwise leave the command waiting on a STARTED run for good.
    """

    def __init__(
        self,
        instance: dg.DagsterInstance,
        run_id: str,
        take_if_unserved: Callable[[str], str | None] | None = None,
    ) -> None:
        self.instance = instance
        self.run_id = run_id
        self._checked_at = time.monotonic()
        self._take = take_if_unserved
        self._queue_checked_at = time.monotonic()

    def run(self) -> dg.DagsterRun | None:
        """The run as stored now (None if there is no such run).

        A queued run that nothing takes is launched by this command when it can
        (`take_if_unserved`: the command holds a code server of its own).
        """
        waiting_for = f"run {self.run_id}"
        run = patiently(partial(self.instance.get_run_by_id, self.run_id), waiting_for=waiting_for)
        if run is None or has_stopped(run):
            return run
        now = time.monotonic()
        if (
            run.status == dg.DagsterRunStatus.QUEUED
            and self._take is not None
            and now - self._queue_checked_at >= _QUEUE_CHECK_SECONDS
        ):
            self._queue_checked_at = now
            if patiently(partial(self._take, run.run_id), waiting_for=waiting_for):
                return self.instance.get_run_by_id(self.run_id)
        now = time.monotonic()
        if now - self._checked_at < _HEALTH_CHECK_SECONDS:
            return run
        self._checked_at = now
        return patiently(partial(self._failed_if_dead, run), waiting_for=waiting_for)

    def _failed_if_dead(self, run: dg.DagsterRun) -> dg.DagsterRun | None:
        if daemon_running(self.instance):
            return run  # its run monitoring judges the worker, and may resume the run
        # Read again: after an outage cut this short, the run may already be marked.
        current = self.instance.get_run_by_id(run.run_id)
        if current is None or current.is_finished:
            return current
        return fail_if_dead(self.instance, current)


def wait_for_run(
    instance: dg.DagsterInstance,
    run_id: str,
    *,
    poll_seconds: float = 0.5,
    take_if_unserved: Callable[[str], str | None] | None = None,
) -> dg.DagsterRun:
    """Block until the run finished or is SUSPENDED at an approval gate; return it (`RunWatch`)."""
    watch = RunWatch(instance, run_id, take_if_unserved)
    with wakeups.pauses(instance) as pause:  # a run's end is looked at when it happens
        while True:
            run = watch.run()
            if run is None:
                raise LookupError(f"run {run_id} not found")
            if has_stopped(run):
                return run
            pause(poll_seconds)


def _root_cause(error: Any) -> str:
    """The innermost error of a serialised chain: "Exceeded max_retries of 2" names no cause."""
    outer = error.message.strip()
    while error.cause is not None:
        error = error.cause
    inner = error.message.strip()
    return outer if inner == outer else f"{inner} ({outer.splitlines()[0]})"


def failure_messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The step and run failure messages of a run, in order."""
    messages: list[str] = []
    engine_error: Any = None
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.ENGINE_EVENT and event.step_key is None:
            engine_error = getattr(event.event_specific_data, "error", None) or engine_error
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            if data.user_failure_data is not None and data.user_failure_data.description:
                messages.append(f"{event.step_key}: {data.user_failure_data.description}")
            elif data.error is not None:
                messages.append(f"{event.step_key}: {_root_cause(data.error)}")
        elif event.event_type == dg.DagsterEventType.RUN_FAILURE and not messages:
            # A run that failed outside any step (its worker could not write to Dagster's
            # storage) says only "An exception was thrown during execution", or "marked as
            # failed from outside the execution context" when the worker's own failure event
            # was lost and only the engine event before it kept the error; the error chain ends
            # at the driver's own words.
            error = event.job_failure_data.error if event.event_specific_data else None
            error = error or engine_error
            cause = f" Cause: {_root_cause(error)}" if error is not None else ""
            messages.append(f"{record.message or 'run failed'}{cause}")
    return messages


# --- re-execution, cancel and idempotent starts --------------------------------------------------


def launch(
    instance: dg.DagsterInstance, context: BaseWorkspaceRequestContext, run: dg.DagsterRun
) -> dg.DagsterRun:
    """`start_run` with the code-version guard also on the direct-launch path (no daemon)."""
    from airwave_dagster.durability.coordinator import guard_submission
    from airwave_dagster.durability.versions import CodeVersionChanged

    if not daemon_running(instance):
        try:
            guard_submission(instance, run)
        except CodeVersionChanged as error:
            raise LaunchRefused(str(error)) from error
    try:
        return start_run(instance, context, run)
    except CodeVersionChanged as error:  # the queue's guard refused it
        raise LaunchRefused(str(error)) from error


def free_pool_slots(instance: dg.DagsterInstance, run_id: str) -> None:
    """Give back every concurrency-pool slot (the `llm` pool's) that `run_id` still holds.

    A run worker frees a step's slot when the step ends, so a worker killed mid-step leaves its
    slots claimed; only the monitoring daemon would free them, 30 s after the run is marked
    finished (`free_slots_after_run_end_seconds`). Without a daemon they would stay claimed and
    shrink the pool for every later run, so whatever marks a dead run finished frees them too.
    """
    if instance.event_log_storage.supports_global_concurrency_limits:
        instance.event_log_storage.free_concurrency_slots_for_run(run_id)


def fail_if_dead(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRun:
    """Mark an in-progress run whose worker is gone FAILURE, so it can be resumed; return it.

    Without a daemon nothing else would ever notice (docs/durability.md, "Crashes, one by one").
    The run is tagged not to be retried automatically: the caller resumes it itself, and a
    daemon must not resume it a second time. Storing the failure computes that tag from the retry
    policy, so it is overwritten right after (a daemon polls every few seconds; this takes
    milliseconds). The pool slots the dead worker held are freed.
    """
    from airwave_dagster.durability.run_launcher import dead_worker_reason

    reason = dead_worker_reason(instance, run)
    if reason is None:
        return run
    instance.report_run_failed(
        run, message=f"{reason}; marked FAILURE by the airwave CLI so it can be resumed"
    )
    instance.add_run_tags(run.run_id, {WILL_RETRY_TAG: "false"})
    free_pool_slots(instance, run.run_id)
    refreshed = instance.get_run_by_id(run.run_id)
    return refreshed if refreshed is not None else run


def fail_if_dead_by_id(run_id: str) -> None:
    """`fail_if_dead` for a run known only by id, on the instance of `$DAGSTER_HOME`."""
    instance = dg.DagsterInstance.get()
    run = instance.get_run_by_id(run_id)
    if run is not None:
        fail_if_dead(instance, run)


def _location_and_job(context: BaseWorkspaceRequestContext, job_name: str) -> tuple[Any, RemoteJob]:
    return context.get_code_location(LOCATION_NAME), remote_job(context, job_name)


@contextmanager
def _refusals() -> Iterator[None]:
    """A version or config refusal as the `LaunchRefused` the commands report (4; 3: invalid)."""
    from airwave_dagster.durability.reconfig import ConfigChangeRefused, InvalidRunConfig
    from airwave_dagster.durability.versions import CodeVersionChanged

    try:
        yield
    except InvalidRunConfig as error:
        raise ConfigInvalid(str(error)) from error
    except (CodeVersionChanged, ConfigChangeRefused, dg.DagsterInvalidSubsetError) as error:
        raise LaunchRefused(str(error)) from error


def _resume_run(
    instance: dg.DagsterInstance,
    context: BaseWorkspaceRequestContext,
    parent: dg.DagsterRun,
    edit: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
) -> dg.DagsterRun:
    """Create the complete from-failure re-execution of a failed or canceled run.

    `edit`, a partial run config, is merged over the parent's; `create_resume_run` validates
    and checks the change before creating anything. `tags` go over the inherited ones.
    """
    from airwave_dagster.durability.reconfig import merge
    from airwave_dagster.durability.resume import create_resume_run

    location, job = _location_and_job(context, parent.job_name)
    with _refusals():
        return create_resume_run(
            instance,
            request_context=context,
            parent_run=parent,
            code_location=location,
            remote_job=job,
            run_config=merge(parent.run_config, edit) if edit is not None else None,
            extra_tags=tags,
        )


def _all_steps_run(
    instance: dg.DagsterInstance,
    context: BaseWorkspaceRequestContext,
    parent: dg.DagsterRun,
    edit: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
) -> dg.DagsterRun:
    """Create a new run of every step of `parent`'s job with its config (nothing replayed).

    With `edit` merged over the config: validated, and any change allowed (nothing replayed).
    `tags` go over the inherited ones.
    """
    from dagster._core.execution.plan.resume_retry import ReexecutionStrategy

    from airwave_dagster.durability import reconfig
    from airwave_dagster.run_tags import CONFIG_CHANGED_TAG

    location, job = _location_and_job(context, parent.job_name)
    config = reconfig.merge(parent.run_config, edit or {})
    changes = reconfig.changed_paths(parent.run_config, config)
    with _refusals():
        if changes:
            reconfig.validate(job.config_schema_snapshot, job.root_config_key, config)
        return instance.create_reexecuted_run(
            request_context=context,
            parent_run=parent,
            code_location=location,
            remote_job=job,
            strategy=ReexecutionStrategy.ALL_STEPS,
            run_config=config,
            extra_tags={
                **(tags or {}),
                **({CONFIG_CHANGED_TAG: reconfig.changed_tag(changes)} if changes else {}),
            },
            use_parent_run_tags=True,
        )


class CodeServerTarget:
    """`starts.Target` over a code server this command started (`workspace`) and the instance."""

    def __init__(self, instance: dg.DagsterInstance, context: BaseWorkspaceRequestContext) -> None:
        self.instance = instance
        self.context = context

    def _info(self, runs: list[dg.DagsterRun]) -> list[RunInfo]:
        if not runs:
            return []
        records = self.instance.get_run_records(
            filters=dg.RunsFilter(run_ids=[run.run_id for run in runs])
        )
        created = {r.dagster_run.run_id: r.create_timestamp.timestamp() for r in records}
        return [
            RunInfo(
                run_id=run.run_id,
                status=run.status.value,
                job_name=run.job_name,
                parent_run_id=run.parent_run_id,
                created=created.get(run.run_id, 0.0),
                tags=dict(run.tags),
            )
            for run in runs
        ]

    def _stored(self, run_id: str) -> dg.DagsterRun:
        run = self.instance.get_run_by_id(run_id)
        if run is None:
            raise LaunchRefused(f"no run {run_id}")
        return run

    def run(self, run_id: str) -> RunInfo | None:
        """See `starts.Target`."""
        run = self.instance.get_run_by_id(run_id)
        return self._info([run])[0] if run is not None else None

    def tagged(self, key: str) -> RunInfo | None:
        """See `starts.Target`."""
        runs = self.instance.get_runs(
            filters=dg.RunsFilter(tags={IDEMPOTENCY_TAG: key[:200]}), limit=1
        )
        return self._info(list(runs))[0] if runs else None

    def tree(self, run_id: str) -> list[RunInfo]:
        """See `starts.Target`."""
        return self._info(run_tree(self.instance, run_id))

    def submit(
        self, job_name: str, run_config: Mapping[str, object], tags: Mapping[str, str]
    ) -> str:
        """See `starts.Target`."""
        run = create_run(self.instance, self.context, job_name, run_config, tags)
        return launch(self.instance, self.context, run).run_id

    def reexecute(
        self,
        run_id: str,
        *,
        from_failure: bool,
        config: Mapping[str, object] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """See `starts.Target`."""
        parent = self._stored(run_id)
        create = _resume_run if from_failure else _all_steps_run
        child = create(self.instance, self.context, parent, config, tags or {})
        return launch(self.instance, self.context, child).run_id

    def fail_if_dead(self, run: RunInfo) -> RunInfo:
        """See `starts.Target`."""
        if not run.in_progress:
            return run
        refreshed = fail_if_dead(self.instance, self._stored(run.run_id))
        return self._info([refreshed])[0]

    def daemon_running(self) -> bool:
        """See `starts.Target`."""
        return daemon_running(self.instance)

    def take_if_unserved(self, run_id: str) -> str | None:
        """See `starts.Target`: this command's code server launches it, as the daemon would."""
        reason = unserved_queue(self.instance, run_id)
        if reason is None:
            return None
        # Plain stderr: the console module imports this one.
        print(
            f"run {run_id} is queued but {reason}; launching it from this command",
            file=sys.stderr,
            flush=True,
        )
        # The daemon launches a queued run the same way, and skips one no longer QUEUED.
        self.instance.launch_run(run_id, self.context)
        return reason


def run_tree(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterRun]:
    """Every run of `run_id`'s group (its root, re-executions and their re-executions)."""
    group = instance.get_run_group(run_id)
    return list(group[1]) if group else []


def cancel(
    instance: dg.DagsterInstance, run_id: str, reason: str, *, timeout: float = 60.0
) -> tuple[dg.DagsterRun, bool, int]:
    """Cancel a run: (the run as it ended, whether this call changed it, claims released).

    Idempotent: a finished run is reported as it is and nothing changes. A queued run is removed
    from the queue. A running one is terminated through its code server — the executor interrupts
    in-flight steps, whose builds delete their own claims — or, when that server is gone, by
    signalling its worker process on this machine. Claims its steps still hold afterwards (a
    process killed without cleanup) are deleted, so are the pool slots it still holds, and the
    reason is recorded on the run. Canceled runs are never resumed automatically (run retries
    only follow failures).
    """
    from airwave_dagster.durability.run_launcher import (
        dead_worker_reason,
        launched_locally,
        process_alive,
        worker_pid,
    )

    run = instance.get_run_by_id(run_id)
    if run is None:
        raise LaunchRefused(f"no run {run_id}")
    if run.is_finished:
        return run, False, 0
    instance.add_run_tags(run_id, {CANCEL_REASON_TAG: reason[:500]})
    instance.report_engine_event(f"Cancel requested: {reason}", run)
    terminated = False
    gone = dead_worker_reason(instance, run)
    if gone is not None:
        # Nothing is left to stop: asking a vanished code server and then waiting for the run to
        # end on its own is what made this take a minute.
        instance.report_run_canceled(run, message=f"Canceled ({gone}): {reason}")
        terminated = True
    elif run.status.value in ("QUEUED", "NOT_STARTED"):
        instance.report_run_canceled(run, message=f"Canceled before it started: {reason}")
        terminated = True
    elif run.status == dg.DagsterRunStatus.SUSPENDED:
        # Waiting at an approval gate: no worker to stop (its interrupt is closed by the caller).
        instance.report_run_canceled(run, message=f"Canceled while waiting for approval: {reason}")
        terminated = True
    else:
        try:
            terminated = bool(instance.run_launcher.terminate(run_id))
        except Exception:  # its code server may be gone; fall back to the worker process
            terminated = False
        if not terminated:
            pid = worker_pid(instance, run_id)
            if pid is not None and launched_locally(run) and process_alive(pid):
                os.kill(pid, 15)
                terminated = True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = instance.get_run_by_id(run_id)
        if current is not None and current.is_finished:
            break
        time.sleep(0.5)
    current = instance.get_run_by_id(run_id)
    if current is not None and not current.is_finished:
        # The worker could not be reached or did not stop in time: record the cancel so the run
        # does not stay in progress forever.
        instance.report_run_canceled(current, message=f"Canceled: {reason}")
    released = open_project_stores().claims.release_run({run_id})
    free_pool_slots(instance, run_id)
    final = instance.get_run_by_id(run_id)
    assert final is not None
    return final, True, released


_RETRY_DECISION_SECONDS = 60.0


def follow(
    instance: dg.DagsterInstance, run_id: str, *, poll_seconds: float = 0.5
) -> dg.DagsterRun:
    """Wait for `run_id` and for any automatic resume of it; return the run that ended the tree.

    A run that failed because its worker died is resumed by the daemon (run retries); the
    failure is only final when the daemon decided not to retry it, or no daemon is running.
    """
    current = wait_for_run(instance, run_id, poll_seconds=poll_seconds)
    undecided_since = time.monotonic()
    waiting_for = f"run {run_id} and its automatic resume"
    while current.status.value == "FAILURE":
        tree = patiently(partial(run_tree, instance, current.run_id), waiting_for=waiting_for)
        child = next((r for r in tree if r.parent_run_id == current.run_id), None)
        if child is not None:
            current = wait_for_run(instance, child.run_id, poll_seconds=poll_seconds)
            continue
        decision = current.tags.get(WILL_RETRY_TAG)
        if decision == "false" or not patiently(
            partial(daemon_running, instance), waiting_for=waiting_for
        ):
            break
        if decision is None and time.monotonic() - undecided_since > _RETRY_DECISION_SECONDS:
            break
        time.sleep(poll_seconds)  # the daemon has not decided yet, or is creating the retry
        refreshed = patiently(
            partial(instance.get_run_by_id, current.run_id), waiting_for=waiting_for
        )
        current = refreshed if refreshed is not None else current
    return current
