"""What every op module shares: the versioned op, mapping keys, step identity, the executor."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, cast

import dagster as dg

from airwave_dagster import tracing
from airwave_dagster.run_tags import CODE_VERSION_TAG, TRACE_EXPORTED_TAG
from airwave_dagster.settings import Settings
from resources import heartbeats
from resources.pools import set_pool_limit
from resources.stores.claims import Claimant

LLM_POOL = "llm"
"""Dagster concurrency pool of every op that calls the model: one limit across runs and workers.

Its limit is `AIRWAVE_LLM_CONCURRENCY`, written into the instance when a run of a job that
declares the pool starts (`fan_out_executor(..., llm_pool=True)`); docs/scale-out.md.
"""


def versioned_op(version: str, **kwargs: Any) -> Callable[[Callable[..., Any]], dg.OpDefinition]:
    """`dg.op` with a code version, mirrored into the op's tags so each run records it.

    Dagster keeps op tags in the run's job snapshot but not code versions, and the version guard
    (`airwave_dagster.durability.versions`) compares these tags between a run and its resume.

    Each attempt of the op's step is a span when tracing is on (`traced`).

    Args:
        version: The code version of the op; bump it when its behaviour or output type changes.
        **kwargs: Passed to `dg.op` (name, out, retry_policy, …); extra tags are merged.
    """
    tags = {**kwargs.pop("tags", {}), CODE_VERSION_TAG: version}
    decorator = dg.op(code_version=version, tags=tags, **kwargs)

    def wrap(fn: Callable[..., Any]) -> dg.OpDefinition:
        return decorator(traced(fn))

    return wrap


def traced(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` inside its step attempt's span; Dagster sees `fn`'s own signature (`functools.wraps`).

    A step that a re-execution replays never runs its body, so it records nothing.
    """
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def steps(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with _step_span():
                yield from fn(*args, **kwargs)

        return steps

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        with _step_span():
            return fn(*args, **kwargs)

    return step


def _step_span() -> AbstractContextManager[None]:
    if not tracing.enabled():
        return nullcontext()
    context = dg.OpExecutionContext.get()
    run = context.run
    return tracing.step_span(
        run_id=run.run_id,
        step_key=step_key(context),
        attempt=context.retry_number + 1,
        tags=run.tags,
        root_run_id=run.root_run_id,
        root_tags=functools.partial(run_tags, context.instance),
    )


def _unexported_run(instance: dg.DagsterInstance, run_id: str) -> tuple[float, float] | None:
    """When `run_id` ran, if its run worker never marked its span exported (it died)."""
    record = instance.get_run_record_by_id(run_id)
    # The tag's value is the run that exported: a re-execution copies its parent's tags.
    if record is None or record.dagster_run.tags.get(TRACE_EXPORTED_TAG) == run_id:
        return None
    started = record.start_time or record.create_timestamp.timestamp()
    return started, record.end_time or time.time()


def run_tags(instance: dg.DagsterInstance, run_id: str) -> Mapping[str, str] | None:
    """The tags of `run_id` in `instance`; None when it has no such run."""
    found = instance.get_run_by_id(run_id)
    return None if found is None else found.tags


def mapping_key(number: int) -> str:
    """The dynamic-output mapping key of a channel number (Dagster allows `[A-Za-z0-9_]` only)."""
    return f"ch_{number}"


def step_key(context: dg.OpExecutionContext) -> str:
    """The step key as Dagster writes it: `build_channel[ch_101]` for a mapped step."""
    key = context.get_mapping_key()
    name = context.op_handle.name
    return f"{name}[{key}]" if key else name


def trace_identity(context: dg.OpExecutionContext) -> dict[str, Any]:
    """The columns that key a trace row: this run, this step, this attempt (1-based)."""
    return {
        "run_id": context.run_id,
        "step_key": step_key(context),
        "attempt": context.retry_number + 1,
    }


def claimant(context: dg.OpExecutionContext) -> Claimant:
    """This attempt of this step of this run, as the holder of a channel claim."""
    return Claimant(
        run_id=context.run_id, step_key=step_key(context), attempt=context.retry_number + 1
    )


def root_cause_failure(what: str, error: Exception) -> dg.Failure:
    """A retryable `dg.Failure` whose description is the error that actually stopped `what`.

    Once a retry policy gives up, Dagster's own step failure says only "Exceeded max_retries of
    N"; the description of a `Failure` is what it keeps as the step's user-facing message (the
    event log, the UI, `airwave runs show`). Raise the result `from error`.

    Args:
        what: The unit of work, e.g. "channel 204 (Drama)".
        error: The exception, e.g. a Plex error that names `PLEX_URL`, the HTTP status or timeout.
    """
    return dg.Failure(description=f"{what}: {type(error).__name__}: {error}"[:2000])


FORKSERVER_PRELOAD = (
    "airwave_dagster.definitions",
    "airwave_dagster.durability.instance",
    "dagster_postgres",
    "upath.core",
)
"""Imported once by the forkserver, so a step process forked from it does not import them.

The code location, and what a step imports to open the instance (`DagsterInstance.from_ref`):
the instance class, Postgres storage and the storage paths it loads (about 180 modules, measured
with `sys.modules`, that each step process imported for itself otherwise). `upath` itself loads
its classes (and `fsspec`) only when one is first used, so the preload names `upath.core`.
"""


def celery_app_args(settings: Settings) -> dict[str, Any]:
    """The celery app both sides use: the run worker that submits steps and `airwave worker`.

    Steps are acknowledged only when they finish (`task_acks_late`) and a worker that dies
    mid-step gives its message back (`task_reject_on_worker_lost`), so a SIGKILLed worker's step
    is redelivered to another worker instead of vanishing; the channel claim then makes the
    second attempt wait for, or take over, the dead one's build rather than repeat finished work.
    One step at a time per worker process (`worker_prefetch_multiplier: 1`) keeps a busy worker
    from hoarding steps an idle one could run.

    Raises:
        ValueError: `AIRWAVE_CELERY_BROKER_URL` is unset (named, never its value).
    """
    broker = settings.celery_broker_url
    if not broker:
        raise ValueError("AIRWAVE_EXECUTOR=celery needs AIRWAVE_CELERY_BROKER_URL (the broker)")
    # Redis keeps results itself; with RabbitMQ results travel back over the broker (rpc://).
    backend = broker if broker.startswith(("redis://", "rediss://")) else "rpc://"
    return {
        "broker": broker,
        "backend": backend,
        "include": [],
        "config_source": {
            "task_default_queue": settings.celery_queue,
            "task_acks_late": True,
            "task_reject_on_worker_lost": True,
            # A started task names its worker, so the run worker can see that worker vanish.
            "task_track_started": True,
            "worker_prefetch_multiplier": 1,
            "broker_connection_retry_on_startup": True,
            # Redis hands an unacknowledged step back only after this long; claims tolerate the
            # overlap (a live claim is waited for), the event log shows both attempts.
            "broker_transport_options": {"visibility_timeout": 3600},
        },
    }


def limit_llm_pool(instance: dg.DagsterInstance, settings: Settings) -> None:
    """Make the `llm` pool's limit in the instance `AIRWAVE_LLM_CONCURRENCY`.

    The pool's slots live in the event-log database, where every run worker claims them before
    it starts (multiprocess) or submits (celery) a pooled step; Dagster's `dagster.yaml` offers
    only a `default_limit` for every pool, so the limit is set here, by name. Setting the
    current value again changes nothing, and a lower value takes effect as held slots are freed.
    """
    set_pool_limit(instance, LLM_POOL, settings.llm_concurrency)


LLM_PRELOAD = ("anthropic",)
"""Added to `FORKSERVER_PRELOAD` for jobs with steps that call the model (`llm_pool`).

The code location no longer imports the Anthropic SDK (`resources.llm`): a run worker and an
import's steps do not need it, and it was nearly half of the location's load. A step that calls
the model still finds it imported, once per run, in its forkserver.
"""


def preload_modules(*, llm_pool: bool) -> list[str]:
    """What the step forkserver of a fan-out job imports before it forks any step."""
    return [*FORKSERVER_PRELOAD, *(LLM_PRELOAD if llm_pool else ())]


STEP_EXECUTORS = ("threads", "multiprocess", "celery")
"""The values of a fan-out run's `execution.config.executor`, as of AIRWAVE_EXECUTOR."""


def fan_out_executor(
    max_concurrent: int, start_method: str = "forkserver", *, llm_pool: bool = False
) -> dg.ExecutorDefinition:
    """The executor of a fan-out job: threads of the run worker, a process per step, or celery.

    The choice is made when a run starts, in its run worker: the run config's
    `execution.config.executor` when it names one, else `AIRWAVE_EXECUTOR` (the `airwave`
    commands export it for every Dagster process, so runs from the CLI, sensors and schedules all
    follow it). `threads` (the default) runs each step in a thread of the run worker, at most
    `max_concurrent` at once (ops/threads_executor.py: no process per step, about half the wall
    time of multiprocess, BENCHMARKS.md). `multiprocess` is the same window of step processes,
    forked from a forkserver that preloads the code location (docs/dagster-notes.md Q2); a step
    that dies takes only itself. Under celery the bound across runs and workers is the workers'
    own concurrency and the op pools (docs/scale-out.md). Under all three, steps in the `llm`
    pool also wait for one of its slots, shared with every other run.

    Args:
        max_concurrent: Steps running at once (multiprocess, threads): the default of the run
            config's `execution.config.max_concurrent`.
        start_method: Of multiprocess: "forkserver" (default) or "spawn" (benchmarks compare).
        llm_pool: The job has ops in `LLM_POOL`: set the pool's limit when a run starts.
    """
    method: Mapping[str, object] = (
        {"forkserver": {"preload_modules": preload_modules(llm_pool=llm_pool)}}
        if start_method == "forkserver"
        else {"spawn": {}}
    )
    multiprocess = {
        "max_concurrent": max_concurrent,
        "start_method": dict(method),
        "retries": {"enabled": {}},
    }

    @dg.executor(
        name="fan_out",
        requirements=dg.multiple_process_executor_requirements(),
        config_schema={
            "max_concurrent": dg.Field(
                dg.IntSource,
                default_value=max_concurrent,
                is_required=False,
                description="Steps of this run executing at once (multiprocess, threads; celery "
                "ignores it). Read when the run starts, so a resume may lower or raise it.",
            ),
            "executor": dg.Field(
                dg.Enum("StepExecutor", [dg.EnumValue(name) for name in STEP_EXECUTORS]),
                is_required=False,
                description="Where this run's steps execute: threads of the run worker, a "
                "process each (multiprocess), or celery workers. Unset: AIRWAVE_EXECUTOR "
                "(threads unless set). A resume or re-execution keeps its parent's choice.",
            ),
        },
    )
    def _fan_out(init_context: dg.InitExecutorContext) -> dg.Executor:
        settings = Settings.load()
        if llm_pool:
            limit_llm_pool(init_context.instance, settings)
        kind = str(init_context.executor_config.get("executor") or settings.executor)
        if kind == "celery":
            from dagster._core.execution.retries import RetryMode

            from ops.celery_executor import CeleryStepExecutor

            args = celery_app_args(settings)
            return HeartbeatExecutor(
                CeleryStepExecutor(
                    broker=args["broker"],
                    backend=args["backend"],
                    include=args["include"],
                    config_source=args["config_source"],
                    retries=RetryMode.ENABLED,
                )
            )
        bound = cast("int", init_context.executor_config["max_concurrent"])
        if bound < 1:
            raise dg.DagsterInvalidConfigError(
                f"execution.config.max_concurrent must be at least 1, got {bound}", [], bound
            )
        if kind == "threads":
            from dagster._core.execution.retries import RetryMode

            from ops.threads_executor import ThreadsExecutor

            return HeartbeatExecutor(
                ThreadsExecutor(retries=RetryMode.ENABLED, max_concurrent=bound), bound=bound
            )
        from dagster._core.definitions.executor_definition import (
            _core_multiprocess_executor_creation,
        )

        return HeartbeatExecutor(
            _core_multiprocess_executor_creation({**multiprocess, "max_concurrent": bound}),
            bound=bound,
        )

    return _fan_out


class TracedExecutor(dg.Executor):
    """An executor whose orchestration is the run's span (`tracing.run_span`), when tracing is on.

    Only the run worker calls `execute`; step processes and celery workers build the executor
    too but never orchestrate. Every other member is the wrapped executor's.
    """

    def __init__(self, wrapped: dg.Executor) -> None:
        self.wrapped = wrapped

    def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[Any]:
        run = plan_context.dagster_run
        with tracing.run_span(
            run_id=run.run_id,
            job_name=run.job_name,
            tags=run.tags,
            root_run_id=run.root_run_id,
            parent_run_id=run.parent_run_id,
            root_tags=functools.partial(run_tags, plan_context.instance),
            unexported=functools.partial(_unexported_run, plan_context.instance),
            exported=functools.partial(
                plan_context.instance.add_run_tags, run.run_id, {TRACE_EXPORTED_TAG: run.run_id}
            ),
        ):
            yield from self.wrapped.execute(plan_context, execution_plan)

    def __getattr__(self, name: str) -> Any:
        # The celery execution loop reads its executor's own members (`app_args()`, `broker`):
        # whatever this wrapper does not define is the wrapped executor's.
        if name in ("wrapped", "bound"):  # not set yet (copying, unpickling): never recurse
            raise AttributeError(name)
        return getattr(self.wrapped, name)

    @property
    def retries(self) -> Any:
        return self.wrapped.retries

    @property
    def step_dependency_config(self) -> Any:
        return self.wrapped.step_dependency_config


class HeartbeatExecutor(TracedExecutor):
    """A traced executor whose orchestration also writes run-worker heartbeats.

    The heartbeats are resources/heartbeats.py's: only the run worker beats, never a step process
    or a celery worker, since only it calls `execute`.
    """

    def __init__(self, wrapped: dg.Executor, bound: int | None = None) -> None:
        super().__init__(wrapped)
        self.bound = bound

    def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[Any]:
        if self.bound is not None:
            # In the run's log, so a resume with a lower `max_concurrent` shows it took effect.
            plan_context.log.info(f"fan-out executor: at most {self.bound} steps at once")
        with heartbeats.beating(plan_context.instance, plan_context.run_id):
            yield from super().execute(plan_context, execution_plan)


def traced_executor(
    definition: dg.ExecutorDefinition = dg.multi_or_in_process_executor,
) -> dg.ExecutorDefinition:
    """`definition` (Dagster's default executor), its orchestration the run's span.

    The default executor of the code location: jobs without the fan-out executor (the rollback,
    the approval answer, schedule pruning, the library asset jobs) get one span per run too,
    with the same config as Dagster's own.
    """
    create = definition.executor_creation_fn
    assert create is not None  # Dagster's executors all have one

    return dg.ExecutorDefinition(
        name=definition.name,
        config_schema=definition.config_schema.as_field(),
        requirements=definition.get_requirements,
        executor_creation_fn=lambda init_context: TracedExecutor(create(init_context)),
        description=definition.description,
    )
