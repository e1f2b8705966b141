"""dagster-celery's executor, with a step task that raised handled as that step's failure.

dagster-celery (0.29.27) keeps the exception of a step task that raised, instead of its events,
in `core_celery_execution_loop`'s `step_errors`; from then on every tick skips starting steps,
retries that come due included, while the loop only ends once the plan is complete, which a
step waiting for its retry never is. The run worker then spins in that loop (that path never
sleeps) with its heartbeat fresh, the run stays STARTED and `airwave import --wait` waits for
good (seen: a Postgres restart in the full suite, 6 of 8 channels built; reproduced with an
outage of 14 s). A task raises, rather than reporting a step failure, when its worker cannot
write to Dagster's storage: Postgres away for longer than dagster-postgres' connection retries
(about 11 s), or, since only connecting is retried, an event write that the server's shutdown
cut mid-statement (more likely the more loaded the machine). dagster-celery also leaves a step
whose resources failed to initialise without any outcome, where the multiprocess executor
retries it.

Here the loop polls each task through `StepTask`, which turns a task that raised, or whose
resources failed, into the step's retry (while its retry policy has attempts left) or its
failure: the events the multiprocess executor emits for a step process that crashed
(`Executor.log_failure_or_retry_event_after_error`). The failure names the worker's error down
to its innermost cause (e.g. the `psycopg2.OperationalError` under dagster-postgres' "too many
retries for DB connection").

A worker killed mid-step leaves its task unacknowledged: RabbitMQ hands the message back when
the worker's connection drops, Redis only after the visibility timeout (an hour), and until then
the task stays STARTED on a worker that no longer exists. `StepTask` therefore also watches the
worker a started task runs on (`task_track_started` names it): when that worker has not answered
a ping for `LOST_AFTER_SECONDS`, the task is revoked (a later redelivery of it is dropped) and the
step gets the same retry or failure as a crashed step process. The retry's build waits for the
dead attempt's claim to go stale and takes it over; a build that had committed is adopted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg
from celery import states
from celery.exceptions import TaskRevokedError
from dagster._utils.error import SerializableErrorInfo
from dagster_celery.core_execution_loop import core_celery_execution_loop
from dagster_celery.executor import CeleryExecutor, _submit_task
from dagster_shared.serdes import deserialize_value, serialize_value

_OUTCOMES = (
    dg.DagsterEventType.STEP_SUCCESS,
    dg.DagsterEventType.STEP_FAILURE,
    dg.DagsterEventType.STEP_UP_FOR_RETRY,
)

LOST_AFTER_SECONDS = 30.0
"""A started task's worker silent to pings this long is gone: its step is retried or failed."""
PING_EVERY_SECONDS = 5.0
"""At most one ping of the workers per this many seconds, however many tasks are in flight."""
PING_TIMEOUT_SECONDS = 2.0


class WorkerWatch:
    """When each celery worker last answered a ping, for one run's execution loop.

    A worker is first counted from the moment a task is seen started on it, so silence is never
    measured from before the run knew the worker. A ping that cannot be sent (the broker away)
    counts as an answer from everyone: only a silence the broker could carry is a lost worker.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._answered: dict[str, float] = {}
        self._pinged_at: float | None = None

    def silent_for(self, app: Any, worker: str) -> float:
        """Seconds since `worker` last answered (pinging all workers when it is time)."""
        now = self._clock()
        self._answered.setdefault(worker, now)
        if self._pinged_at is None or now - self._pinged_at >= PING_EVERY_SECONDS:
            self._pinged_at = now
            try:
                replies = app.control.ping(timeout=PING_TIMEOUT_SECONDS)
            except Exception:  # the broker could not carry the ping: nobody is counted silent
                replies = [{name: {}} for name in self._answered]
            for reply in replies:
                for name in reply:
                    self._answered[name] = self._clock()
        return now - self._answered[worker]


def innermost_error(traceback: str | None) -> str | None:
    """The first exception line of a formatted traceback: the root of its chain.

    Python prints a chain from its root (`The above exception was the direct cause…`), so the
    first unindented line after a `Traceback` header names what actually failed, e.g. the
    `psycopg2.OperationalError` under dagster-postgres' "too many retries".
    """
    header_seen = False
    for line in (traceback or "").splitlines():
        if line.startswith("Traceback (most recent call last)"):
            header_seen = True
        elif header_seen and line and not line[0].isspace():
            return line.strip()
    return None


class StepTask:
    """A submitted step as `core_celery_execution_loop` polls it: `ready()`, `get()`, `revoke()`.

    The step's outcome is settled in `ready()`, which the loop calls outside its error handling:
    if the run worker cannot record a failure or retry event (Dagster raises when a system event
    cannot be written, e.g. Postgres is still down), that error leaves the loop and fails the
    run, naming the cause, as the same error does under the multiprocess executor. An error in
    `get()` would be kept in `step_errors` instead. `get()` returns the task's serialised events,
    or the event standing in for a task that raised.
    """

    def __init__(
        self,
        result: Any,
        plan_context: Any,
        step: Any,
        known_state: Any,
        watch: tuple[Any, WorkerWatch] | None = None,
    ) -> None:
        self.result = result
        self.plan_context = plan_context
        self.step = step
        self.known_state = known_state
        self.watch = watch
        self._events: list[str] | None = None
        self._revoked = False

    def ready(self) -> bool:
        if self._events is None:
            state = self.result.state
            if state in states.READY_STATES:
                self._events = self._settle()
            elif state == states.STARTED:
                self._events = self._lost()
        return self._events is not None

    def _lost(self) -> list[str] | None:
        """The step's retry or failure if the worker running it stopped answering, else None."""
        info = self.result.info
        worker = info.get("hostname") if isinstance(info, dict) else None
        if self.watch is None or not worker:
            return None
        app, watch = self.watch
        silent = watch.silent_for(app, str(worker))
        if silent < LOST_AFTER_SECONDS:
            return None
        self.result.revoke()  # a redelivery of this task, if the broker makes one, is dropped
        error = SerializableErrorInfo(
            message=(
                f'celery worker {worker} stopped answering while it ran step "{self.step.key}" '
                f"(no reply to a ping for {silent:.0f} s): the task is revoked and the step "
                "handed to its retry policy"
            ),
            stack=[],
            cls_name=None,
        )
        return [serialize_value(self._failure_or_retry(error))]

    def revoke(self) -> None:
        self.result.revoke()

    def get(self) -> list[str]:
        if self._revoked:
            return list(self.result.get())  # raises TaskRevokedError: the loop reports a cancel
        return self._events or []

    def _settle(self) -> list[str]:
        try:
            events = list(self.result.get())
        except TaskRevokedError:
            self._revoked = True
            return []
        except Exception as error:
            return [serialize_value(self._failure_or_retry(self._task_error(error)))]
        for serialised in events:
            event = deserialize_value(serialised, dg.DagsterEvent)
            if event.event_type in _OUTCOMES:
                return events
            if event.is_resource_init_failure:
                init_error = event.engine_event_data.error
                if init_error is not None:
                    events.append(serialize_value(self._failure_or_retry(init_error)))
                return events
        return events

    def _task_error(self, error: Exception) -> SerializableErrorInfo:
        root = innermost_error(self.result.traceback)
        return SerializableErrorInfo(
            message=(
                f'the celery task of step "{self.step.key}" failed on its worker, outside the '
                f"op: {type(error).__name__}: {error}"
            ),
            stack=[self.result.traceback or ""],
            cls_name=type(error).__name__,
            cause=SerializableErrorInfo(message=root, stack=[], cls_name=None) if root else None,
        )

    def _failure_or_retry(self, error: SerializableErrorInfo) -> dg.DagsterEvent:
        return self.plan_context.executor.log_failure_or_retry_event_after_error(
            self.plan_context.for_step(self.step), error, self.known_state
        )


def _submit(
    app: Any,
    plan_context: Any,
    step: Any,
    queue: str,
    priority: int,
    known_state: Any,
    *,
    watch: WorkerWatch,
) -> StepTask:
    return StepTask(
        _submit_task(app, plan_context, step, queue, priority, known_state),
        plan_context,
        step,
        known_state,
        (app, watch),
    )


class CeleryStepExecutor(CeleryExecutor):
    """`CeleryExecutor` whose execution loop sees every task through `StepTask`.

    When the loop ends without finishing the run (it raised: the run worker lost Postgres, or it
    was stopped), every task it submitted that has not started is revoked. dagster-celery
    revokes only on a cancel; left on the queue, such a step ran on a worker later, beside the
    run's resume, and a build the failed run never started was paid twice (the Postgres-outage
    test on celery). A task already running is left to finish: its claim makes the resume wait
    for it and adopt what it commits.
    """

    def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[dg.DagsterEvent]:
        submitted: list[StepTask] = []
        watch = WorkerWatch()

        def submit(*args: Any, **kwargs: Any) -> StepTask:
            task = _submit(*args, watch=watch, **kwargs)
            submitted.append(task)
            return task

        try:
            yield from core_celery_execution_loop(
                plan_context, execution_plan, step_execution_fn=submit
            )
        except BaseException:
            _revoke_unstarted(submitted)
            raise


def _revoke_unstarted(tasks: list[StepTask]) -> None:
    """Revoke every task still waiting on the queue (best effort: never hides the loop's error)."""
    for task in tasks:
        try:
            if task.result.state == states.PENDING:
                task.result.revoke()
        except Exception:  # the broker or result backend unreachable: nothing more to do here
            continue
