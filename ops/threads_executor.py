"""Steps as threads of the run worker: Dagster's own step execution, without a process per step.

Under `AIRWAVE_EXECUTOR=threads` the fan-out jobs run each step of a run in a thread of the run
worker, at most `max_concurrent` at once. Everything that decides *which* step runs when is
Dagster's: `ActiveExecution` (dependencies, dynamic outputs, the retry policy's
STEP_UP_FOR_RETRY and its delay, re-execution's known state) and `InstanceConcurrencyContext`
(the slots of op pools such as `llm`, claimed in the instance before a step starts), the same
objects the multiprocess executor drives. Each thread executes its one step as a multiprocess
step process does (`MultiprocessExecutorChildProcessCommand`): a sub-plan of that step, executed
as Dagster's `execute_plan_iterator` executes it (with the run's resources, below), its events
written by the step and handed to the orchestrating thread. What a step no longer pays is the
process: a forkserver child, `DagsterInstance.from_ref` and a second code-location load per
step. Nor does it build the whole run's plan to cut its own out of it: the sub-plans are cut
from one plan per state of the run's dynamic outputs (`RunPlans`).

Resources are the run's, as on Dagster's in-process executor: the first step that needs a set of
resources initializes them with Dagster's own code (its RESOURCE_INIT events are that step's; a
failure there is that step's resource-init failure, retried by its policy, and nothing is kept),
and every later step needing the same set gets the same objects; they are torn down when the
executor ends. Each step still gets exactly the resources it requires. Resources shared this
way are used by concurrent steps, so they must be thread-safe (Airwave's are: engines, the
run's Plex client, a stateless IO manager); an async resource would be bound to the event loop
of the step that built it, and is not supported here.

Every step's events are stored from this one process, so for the run its instance keeps a few
event-log connections open instead of opening one per event (`kept_event_connections`).

Three things Dagster does per step assume a step owns its process, and are changed for the run:

- A step's log manager has the instance build the `dagster.yaml` log handlers, through
  `logging.config.dictConfig`, which closes every handler of the process under the logging
  module's lock: with another step thread logging at that moment, the two deadlock (seen: the
  first run on threads hung at its second step). `yaml_handlers_once` builds them once per run.
- A step attaches its log handler to the process's managed Python loggers (`dagster.builtin`
  and those `dagster.yaml` names) while its code runs
  (`DagsterLogManager.begin_python_log_capture`).
  With steps in threads every attached handler would receive every thread's records: each step's
  event log would carry the others' messages, and a record handled under one step's handler lock
  that reaches another step's handler takes two handler locks in an order the other thread may
  take in reverse, a deadlock. `thread_bound_log_capture` attaches a step's handler so that it
  sees only the records of the thread that attached it.
- A terminated run interrupts a step process with SIGINT; a thread cannot be interrupted. On
  termination no new step starts, in-flight steps get `STOP_GRACE_SECONDS` to finish, and then
  the run ends interrupted while they are abandoned: the run is marked canceled and the run
  worker's process, which exits after the run, takes the abandoned threads with it (they are
  daemon threads). Their channel claims die with them and `airwave runs cancel` deletes them.

A run worker's death takes every in-flight step at once (not one step process): run monitoring
sees the worker gone and fails the run, run retries resume it from failure, and the channel
claims make a second build of a committed channel impossible (docs/durability.md).
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, cast

from dagster._core.definitions.job_definition import JobDefinition
from dagster._core.definitions.reconstruct import ReconstructableJob
from dagster._core.definitions.repository_definition import RepositoryLoadData
from dagster._core.definitions.scoped_resources_builder import ScopedResourcesBuilder
from dagster._core.errors import DagsterExecutionInterruptedError, DagsterSubprocessError
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.api import ExecuteRunWithPlanIterable
from dagster._core.execution.context.system import PlanOrchestrationContext
from dagster._core.execution.context_creation_job import PlanExecutionContextManager
from dagster._core.execution.plan.active import ActiveExecution
from dagster._core.execution.plan.execute_plan import inner_plan_execution_iterator
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.execution.plan.plan import ExecutionPlan
from dagster._core.execution.plan.state import KnownExecutionState
from dagster._core.execution.resources_init import resource_initialization_manager
from dagster._core.execution.retries import RetryMode
from dagster._core.executor.base import Executor
from dagster._core.instance import DagsterInstance
from dagster._core.log_manager import DagsterLogManager
from dagster._core.storage.dagster_run import DagsterRun
from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager
from dagster._core.system_config.objects import ResolvedRunConfig
from dagster._utils import EventGenerationManager
from dagster._utils.error import SerializableErrorInfo, serializable_error_info_from_exc_info

from resources.event_storage import kept_event_connections

STOP_GRACE_SECONDS = 15.0
"""How long a terminated run waits for its in-flight steps before it ends without them.

A step that is not done by then (hung on a socket, a lock, a slow model call) is abandoned: the
run ends canceled at once and the run worker's exit ends the thread."""
_POLL_SECONDS = 0.05
"""How long the orchestrating thread waits for a step event before it looks at the plan again."""


@dataclass(frozen=True)
class _StepRaised:
    """A step thread's execution raised outside the step's own error handling (Dagster's side)."""

    error: SerializableErrorInfo


@dataclass(frozen=True)
class _StepEnded:
    """A step thread has finished: nothing more will arrive from it."""


_ENDED = _StepEnded()
_Message = DagsterEvent | _StepRaised | _StepEnded
_Outbox = queue.SimpleQueue[tuple[str, int, _Message]]
"""What step threads send the orchestrator: (step key, the thread's token, message)."""


class _Running:
    """The step threads alive, and which of them runs each step's current attempt.

    A retried step is started again as soon as its STEP_UP_FOR_RETRY is handled, while the
    thread of the failed attempt may still be finishing (tearing down its resources): its end
    must not be taken for the new attempt's, so every thread has a token of its own.
    """

    def __init__(self) -> None:
        self._next = 0
        self.alive: dict[int, str] = {}
        self.current: dict[str, int] = {}
        self.init_failed: set[int] = set()
        """Threads whose resource-init failure is handled: their raise that follows is expected."""

    def start(self, key: str) -> int:
        self._next += 1
        self.alive[self._next] = key
        self.current[key] = self._next
        return self._next

    def end(self, key: str, token: int) -> bool:
        """Forget the thread; True when it ran the step's current attempt."""
        self.alive.pop(token, None)
        self.init_failed.discard(token)
        if self.current.get(key) != token:
            return False
        del self.current[key]
        return True

    def is_current(self, key: str, token: int) -> bool:
        return self.current.get(key) == token

    def __len__(self) -> int:
        return len(self.alive)

    def keys(self) -> list[str]:
        return sorted(set(self.alive.values()))


class _ThreadBoundHandler(logging.Handler):
    """Forwards to a step's Dagster log handler the records logged on the thread that owns it."""

    def __init__(self, target: logging.Handler, thread_id: int) -> None:
        super().__init__(level=target.level)
        self.target = target
        self.thread_id = thread_id

    def handle(self, record: logging.LogRecord) -> bool:
        # No lock of its own: the target takes its lock, on its own thread only.
        if record.thread != self.thread_id:
            return False
        return bool(self.target.handle(record))

    def emit(self, record: logging.LogRecord) -> None:
        self.target.emit(record)


_BOUND_ATTRIBUTE = "_airwave_thread_bound_handlers"
_capture_lock = threading.Lock()
_capture_users = 0
_original_capture: tuple[Callable[..., None], Callable[..., None]] | None = None


def _begin_bound_capture(log_manager: DagsterLogManager) -> None:
    handler = log_manager._dagster_handler
    bound = _ThreadBoundHandler(handler, threading.get_ident())
    attached = []
    for logger in log_manager._managed_loggers:
        logger.addHandler(bound)
        attached.append(logger)
    setattr(log_manager, _BOUND_ATTRIBUTE, (bound, attached))


def _end_bound_capture(log_manager: DagsterLogManager) -> None:
    bound, attached = getattr(log_manager, _BOUND_ATTRIBUTE, (None, []))
    for logger in attached:
        logger.removeHandler(bound)
    if bound is not None:
        delattr(log_manager, _BOUND_ATTRIBUTE)


@contextmanager
def thread_bound_log_capture() -> Iterator[None]:
    """While the block runs, a step's Python log capture sees only its own thread's records.

    `DagsterLogManager`'s capture methods are replaced for the process (they are class
    attributes) and restored when the last user leaves; re-entrant across executors in one
    process. In a process with one step at a time the bound capture is the original one.
    """
    global _capture_users, _original_capture
    with _capture_lock:
        if _capture_users == 0:
            _original_capture = (
                DagsterLogManager.begin_python_log_capture,
                DagsterLogManager.end_python_log_capture,
            )
            DagsterLogManager.begin_python_log_capture = _begin_bound_capture  # type: ignore[method-assign,assignment]
            DagsterLogManager.end_python_log_capture = _end_bound_capture  # type: ignore[method-assign,assignment]
        _capture_users += 1
    try:
        yield
    finally:
        with _capture_lock:
            _capture_users -= 1
            if _capture_users == 0 and _original_capture is not None:
                begin, end = _original_capture
                DagsterLogManager.begin_python_log_capture = begin  # type: ignore[method-assign]
                DagsterLogManager.end_python_log_capture = end  # type: ignore[method-assign]
                _original_capture = None


@contextmanager
def yaml_handlers_once(instance: DagsterInstance) -> Iterator[None]:
    """While the block runs, `instance` builds its `dagster.yaml` log handlers once, not per step.

    Each step's log manager asks the instance for its handlers, and the instance builds the
    `python_logs` ones through `logging.config.dictConfig` every time, which takes the logging
    module's lock and then, closing every existing handler, each handler's lock. A step thread
    that meanwhile emits a record holds its handler's lock and waits for the module's lock (a
    logger's level check): the two threads deadlock, the run hangs. The handlers are built here
    once, on the orchestrating thread, and every step of the run shares them, as the steps of
    one step process would.
    """
    handlers = list(instance.get_yaml_python_handlers())
    # An attribute of this object only: other instances of the process keep Dagster's method.
    instance.get_yaml_python_handlers = lambda: handlers  # type: ignore[method-assign]
    try:
        yield
    finally:
        del instance.get_yaml_python_handlers


class RunResources:
    """The run's resources, each set of them initialized once and shared by the steps needing it.

    `manager` stands in for Dagster's `resource_initialization_manager` in a step's execution
    context: the first step asking for a set of resource keys runs Dagster's initialization of
    that set (its events are the step's); the steps after it get the initialized objects without
    events. Initialization holds a lock, so concurrent first steps initialize a set once; one
    that fails keeps nothing, and the next step asking tries again. `teardown` ends every set
    initialized (Dagster's teardown of each, in reverse order), once the run's steps are done.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[frozenset[str], ScopedResourcesBuilder] = {}
        self._managers: list[EventGenerationManager[ScopedResourcesBuilder]] = []

    def manager(self, **kwargs: Any) -> EventGenerationManager[ScopedResourcesBuilder]:
        """The step's resources: `resource_initialization_manager`'s arguments, shared result."""
        keys = frozenset(cast("Iterable[str]", kwargs["resource_keys_to_init"]))
        return EventGenerationManager(self._setup(keys, kwargs), ScopedResourcesBuilder)

    def _setup(
        self, keys: frozenset[str], kwargs: Mapping[str, Any]
    ) -> Iterator[DagsterEvent | ScopedResourcesBuilder]:
        with self._lock:
            if keys not in self._ready:
                initialization = resource_initialization_manager(**kwargs)
                # Yielded as they come: a failure's events reach the orchestrator before it raises.
                yield from initialization.generate_setup_events()
                self._ready[keys] = initialization.get_object()
                self._managers.append(initialization)
            builder = self._ready[keys]
        yield builder
        # Nothing after the step: the resources outlive it (see `teardown`).

    def teardown(self) -> Iterator[DagsterEvent]:
        """Dagster's teardown of every set initialized, latest first; each set once."""
        with self._lock:
            managers, self._managers = self._managers[::-1], []
            self._ready.clear()
        for initialization in managers:
            yield from initialization.generate_teardown_events()


class RunPlans:
    """The single-step plans of a run's steps, cut from one full plan per dynamic-output state.

    `create_execution_plan` for one step builds the run's whole plan, resolving every mapped
    step and collect from the known dynamic outputs, and then cuts the step out of it: for a
    fan-out of N channels, N steps each paying for N steps, quadratic in the lineup (about 10 ms
    a step at 50 channels). The whole plan depends on the known state only through its dynamic
    mappings, so it is built once per mapping state and each step's plan is cut from it
    (`build_subset_plan`, as `create_execution_plan` does) with the step's own known state
    (its retry attempts, ready outputs and mappings), the plan the step would have got.
    """

    _KEPT = 4
    """Mapping states kept: they only grow during a run, so the latest are the ones asked for."""

    def __init__(
        self,
        job: ReconstructableJob,
        run_config: Mapping[str, object],
        repository_load_data: RepositoryLoadData | None,
    ) -> None:
        self._job = job.with_repository_load_data(repository_load_data)
        self._run_config = run_config
        self._repository_load_data = repository_load_data
        self._lock = threading.Lock()
        self._full: dict[object, ExecutionPlan] = {}
        self._definition: tuple[JobDefinition, ResolvedRunConfig] | None = None

    def for_step(self, step_key: str, known_state: KnownExecutionState) -> ExecutionPlan:
        """The plan `create_execution_plan(step_keys_to_execute=[step_key])` would build."""
        state = _mapping_state(known_state.dynamic_mappings)
        with self._lock:  # cutting reads (and Dagster may complete) the full plan's step maps
            if self._definition is None:
                job_def = self._job.get_definition()
                self._definition = job_def, ResolvedRunConfig.build(job_def, self._run_config)
            job_def, resolved_run_config = self._definition
            full = self._full.get(state)
            if full is None:
                full = ExecutionPlan.build(
                    job_def,
                    resolved_run_config,
                    known_state=known_state,
                    repository_load_data=self._repository_load_data,
                )
                self._full[state] = full
                while len(self._full) > self._KEPT:
                    del self._full[next(iter(self._full))]
            plan = full.build_subset_plan([step_key], job_def, resolved_run_config)
        return plan._replace(known_state=known_state)


def _mapping_state(mappings: Mapping[str, Mapping[str, Sequence[str] | None]]) -> object:
    """A hashable value equal for equal dynamic mappings."""
    return tuple(
        sorted(
            (
                step,
                tuple(
                    sorted(
                        (out, None if keys is None else tuple(keys)) for out, keys in outs.items()
                    )
                ),
            )
            for step, outs in mappings.items()
        )
    )


@dataclass(frozen=True)
class _StepWork:
    """What a step thread needs to execute its step: the child process command's fields."""

    job: ReconstructableJob
    dagster_run: DagsterRun
    run_config: Mapping[str, object]
    instance: DagsterInstance
    retries: RetryMode
    known_state: KnownExecutionState
    resources: RunResources
    plans: RunPlans


def _execute_step(work: _StepWork, step_key: str, token: int, out: _Outbox) -> None:
    """Execute `step_key` as a sub-plan of its own, every event and the end handed to `out`.

    As `execute_plan_iterator` does for a step process, with the run's shared resources.
    """
    try:
        plan = work.plans.for_step(step_key, work.known_state)
        job = work.job.with_repository_load_data(plan.repository_load_data)
        execution = ExecuteRunWithPlanIterable(
            execution_plan=plan,
            iterator=inner_plan_execution_iterator,
            execution_context_manager=PlanExecutionContextManager(
                job=job,
                execution_plan=plan,
                run_config=work.run_config,
                dagster_run=work.dagster_run,
                instance=work.instance,
                retry_mode=work.retries.for_inner_plan(),
                scoped_resources_builder_cm=work.resources.manager,
            ),
        )
        for event in execution:
            out.put((step_key, token, event))
    except BaseException:  # the orchestrator turns it into the step's retry or failure
        error = serializable_error_info_from_exc_info(sys.exc_info())
        out.put((step_key, token, _StepRaised(error)))
    finally:
        out.put((step_key, token, _ENDED))


class ThreadsExecutor(Executor):
    """Dagster's step orchestration with each step in a daemon thread of the run worker."""

    def __init__(
        self,
        retries: RetryMode,
        max_concurrent: int,
        stop_grace_seconds: float = STOP_GRACE_SECONDS,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        self._retries = retries
        self.max_concurrent = max_concurrent
        self.stop_grace_seconds = stop_grace_seconds

    @property
    def retries(self) -> RetryMode:
        return self._retries

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[DagsterEvent]:
        yield DagsterEvent.engine_event(
            plan_context,
            f"Executing steps in threads of the run worker (pid: {os.getpid()}), "
            f"at most {self.max_concurrent} at once",
            event_specific_data=EngineEventData.in_process(
                os.getpid(), execution_plan.step_keys_to_execute
            ),
        )
        if not isinstance(plan_context.instance.compute_log_manager, NoOpComputeLogManager):
            yield DagsterEvent.engine_event(
                plan_context,
                "Threads executor: this instance captures step stdout/stderr, which redirects the "
                "whole process's; with steps in threads their captured logs mix (Airwave's "
                "instance keeps none: NoOpComputeLogManager)",
                event_specific_data=EngineEventData(),
            )
        started = time.monotonic()
        with ExitStack() as stack:
            stack.enter_context(thread_bound_log_capture())
            stack.enter_context(yaml_handlers_once(plan_context.instance))
            # Every step's events are written from this process: over kept connections.
            stack.enter_context(
                kept_event_connections(plan_context.instance, self.max_concurrent + 1)
            )
            pools = stack.enter_context(
                InstanceConcurrencyContext(plan_context.instance, plan_context.dagster_run)
            )
            active = stack.enter_context(
                ActiveExecution(
                    execution_plan,
                    retry_mode=self.retries,
                    max_concurrent=self.max_concurrent,
                    instance_concurrency_context=pools,
                    step_dependency_config=self.step_dependency_config,
                )
            )
            resources = RunResources()
            plans = RunPlans(
                plan_context.reconstructable_job,
                plan_context.run_config,
                execution_plan.repository_load_data,
            )
            try:
                yield from self._orchestrate(plan_context, execution_plan, active, resources, plans)
                yield from resources.teardown()
            finally:
                # After a failure or an interruption: torn down all the same (the events of a
                # teardown are stored as they are made, not by being passed on).
                for _event in resources.teardown():
                    pass
        yield DagsterEvent.engine_event(
            plan_context,
            f"Threads executor: all steps done after {time.monotonic() - started:.1f} s",
            event_specific_data=EngineEventData.in_process(os.getpid()),
        )

    def _orchestrate(
        self,
        plan_context: PlanOrchestrationContext,
        execution_plan: ExecutionPlan,
        active: ActiveExecution,
        resources: RunResources,
        plans: RunPlans,
    ) -> Iterator[DagsterEvent]:
        """Start steps as slots free up, pass their events on, until the plan is done or stopped."""
        messages: _Outbox = queue.SimpleQueue()
        running = _Running()
        errors: list[SerializableErrorInfo] = []
        stop_deadline: float | None = None
        while (stop_deadline is None and not active.is_complete) or running:
            if stop_deadline is None and active.check_for_interrupts():
                stop_deadline = time.monotonic() + self.stop_grace_seconds
                active.mark_interrupted()
                yield DagsterEvent.engine_event(
                    plan_context,
                    f"Threads executor: termination requested; no step starts any more, the "
                    f"{len(running)} running get {self.stop_grace_seconds:.0f} s to finish",
                    EngineEventData.interrupted(running.keys()),
                )
            if stop_deadline is not None and running and time.monotonic() > stop_deadline:
                yield DagsterEvent.engine_event(
                    plan_context,
                    f"Threads executor: abandoning steps still running after "
                    f"{self.stop_grace_seconds:.0f} s: {running.keys()}; they end with the run "
                    f"worker",
                    EngineEventData.interrupted(running.keys()),
                )
                raise DagsterExecutionInterruptedError()
            if stop_deadline is None:
                yield from self._start_steps(
                    plan_context, execution_plan, active, messages, running, resources, plans
                )
            yield from self._drain(plan_context, active, messages, running, errors)
            yield from active.plan_events_iterator(plan_context)
        if stop_deadline is not None:
            yield DagsterEvent.engine_event(
                plan_context,
                "Threads executor: every running step finished after termination",
                EngineEventData(),
            )
            raise DagsterExecutionInterruptedError()
        if errors:
            raise DagsterSubprocessError(
                "Errors occurred while executing steps in threads:\n"
                + "\n".join(error.to_string() for error in errors),
                subprocess_error_infos=errors,
            )

    def _start_steps(
        self,
        plan_context: PlanOrchestrationContext,
        execution_plan: ExecutionPlan,
        active: ActiveExecution,
        messages: _Outbox,
        running: _Running,
        resources: RunResources,
        plans: RunPlans,
    ) -> Iterator[DagsterEvent]:
        steps = active.get_steps_to_execute(limit=self.max_concurrent - len(running))
        yield from active.concurrency_event_iterator(plan_context)
        if not steps:
            return
        work = _StepWork(
            job=plan_context.reconstructable_job,
            dagster_run=plan_context.dagster_run,
            run_config=plan_context.run_config,
            instance=plan_context.instance,
            retries=self.retries,
            known_state=active.get_known_state(),
            resources=resources,
            plans=plans,
        )
        for step in steps:
            # The dispatch of the step, as the multiprocess executor records it before its process.
            yield DagsterEvent.step_worker_starting(
                plan_context.for_step(step), f'Starting a thread for "{step.key}".', metadata={}
            )
            thread = threading.Thread(
                target=_execute_step,
                args=(work, step.key, running.start(step.key), messages),
                name=f"airwave-step {step.key}",
                # A hung step must not keep the run worker alive once its run has ended.
                daemon=True,
            )
            thread.start()

    def _drain(
        self,
        plan_context: PlanOrchestrationContext,
        active: ActiveExecution,
        messages: _Outbox,
        running: _Running,
        errors: list[SerializableErrorInfo],
    ) -> Iterator[DagsterEvent]:
        """Pass on what the step threads sent; wait briefly for the first message."""
        try:
            key, token, message = messages.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            return
        while True:
            yield from self._handle(plan_context, active, key, token, message, running, errors)
            try:
                key, token, message = messages.get_nowait()
            except queue.Empty:
                return

    def _handle(
        self,
        plan_context: PlanOrchestrationContext,
        active: ActiveExecution,
        key: str,
        token: int,
        message: _Message,
        running: _Running,
        errors: list[SerializableErrorInfo],
    ) -> Iterator[DagsterEvent]:
        if isinstance(message, _StepEnded):
            if running.end(key, token):
                active.verify_complete(plan_context, key)
            return
        if isinstance(message, _StepRaised):
            if token in running.init_failed:
                # Dagster raises after a resource-init failure's event, whose retry or failure
                # is already decided by the step's policy (below): not another error.
                return
            if not running.is_current(key, token) or key not in active._in_flight:
                # Its outcome is already recorded (the raise came after it).
                errors.append(message.error)
                return
            # As for a crashed step process: the step's retry policy decides retry or failure.
            step_context = plan_context.for_step(active.get_step_by_key(key))
            yield DagsterEvent.engine_event(
                step_context,
                f"Threads executor: the thread of step {key} raised",
                EngineEventData.engine_error(message.error),
            )
            outcome = self.log_failure_or_retry_event_after_error(
                step_context, message.error, active.get_known_state()
            )
            active.handle_event(outcome)
            yield outcome
            if outcome.is_step_failure:
                errors.append(message.error)
            return
        yield message
        active.handle_event(message)
        if message.is_resource_init_failure:
            running.init_failed.add(token)
            step_context = plan_context.for_step(active.get_step_by_key(key))
            error = message.engine_event_data.error
            assert isinstance(error, SerializableErrorInfo)
            outcome = self.log_failure_or_retry_event_after_error(
                step_context, error, active.get_known_state()
            )
            yield outcome
            active.handle_event(outcome)
