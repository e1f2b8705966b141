"""`AIRWAVE_EXECUTOR=threads`: each step in a thread of the run worker, Dagster's orchestration.

Real parts: the fan-out executor as jobs declare it (`fan_out_executor`), Dagster's own step
execution, retries, pools and re-execution, on the test Postgres. The orchestrating process is
this one (`execute_job`), so it is the run worker whose threads run the steps; the cancel test
runs its run worker as a child process, since only a process can be interrupted.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster import OpExecutionContext
from dagster._core.execution.api import create_execution_plan
from dagster._core.execution.plan.state import KnownExecutionState

from airwave_dagster import settings
from ops.steps import fan_out_executor
from ops.threads_executor import RunPlans
from resources.plex import PlexResource
from resources.pools import set_pool_limit
from tests.support.instances import instance_on
from tests.support.schemas import fresh_schema

pytestmark = [pytest.mark.postgres]

POOL = "threads_test_pool"
WIDTH = 6
_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def threads_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's runs choose the threads executor (read when each run starts)."""
    monkeypatch.setenv(settings.EXECUTOR_ENV, "threads")
    monkeypatch.setenv(settings.ENV_FILE_ENV, "/nonexistent/.env")


@pytest.fixture
def instance(database_url: str) -> Iterator[dg.DagsterInstance]:
    """Dagster's storage in a schema of its own, no compute logs (as Airwave's instance)."""
    no_compute_logs = {
        "module": "dagster._core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
    with instance_on(
        fresh_schema(database_url, "dagster_threads"), compute_logs=no_compute_logs
    ) as created:
        yield created


@dg.op(out=dg.DynamicOut(int))
def fan(context: OpExecutionContext) -> Iterator[dg.DynamicOutput[int]]:
    """WIDTH mapped steps, as the import plans one build step per channel."""
    for index in range(WIDTH):
        yield dg.DynamicOutput(index, mapping_key=f"ch_{index}")


@dg.op
def build(context: OpExecutionContext, index: int) -> dict[str, Any]:
    """Where and when this step ran; logs a line of its own through Dagster's Python logger."""
    began = time.time()
    dg.get_dagster_logger().info(f"built from step {context.get_mapping_key()}")
    time.sleep(0.4)
    return {
        "pid": os.getpid(),
        "thread": threading.get_ident(),
        "began": began,
        "ended": time.time(),
    }


@dg.op
def gather(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return results


@dg.job(executor_def=fan_out_executor(3, start_method="spawn"))
def fan_job() -> None:
    gather(fan().map(build).collect())


@dg.op(pool=POOL)
def pooled_build(context: OpExecutionContext, index: int) -> dict[str, Any]:
    began = time.time()
    time.sleep(0.3)
    return {"began": began, "ended": time.time()}


@dg.job(executor_def=fan_out_executor(4, start_method="spawn"))
def pooled_job() -> None:
    gather(fan().map(pooled_build).collect())


@dg.op(retry_policy=dg.RetryPolicy(max_retries=2))
def flaky(context: OpExecutionContext) -> int:
    """Fails its first attempt, as a build whose Plex request timed out once."""
    if context.retry_number == 0:
        raise RuntimeError("transient: the first attempt fails")
    return context.retry_number


@dg.job(executor_def=fan_out_executor(2, start_method="spawn"))
def flaky_job() -> None:
    flaky()


@dg.op(config_schema={"fail_file": str})
def build_unless_marked(context: OpExecutionContext, index: int) -> int:
    """Fails while its mark exists: the step a resume from failure has to run again."""
    if Path(context.op_config["fail_file"]).with_suffix(f".{index}").exists():
        raise RuntimeError(f"step {index} is marked to fail")
    return index


@dg.op
def gather_numbers(results: list[int]) -> list[int]:
    return results


@dg.job(executor_def=fan_out_executor(3, start_method="spawn"))
def resumable_job() -> None:
    gather_numbers(fan().map(build_unless_marked).collect())


@dg.op
def hang(context: OpExecutionContext) -> None:
    """Never returns by itself: a step blocked where no interrupt reaches it."""
    Path(os.environ["THREADS_TEST_STARTED"]).write_text(context.run_id)
    threading.Event().wait()


@dg.job(executor_def=fan_out_executor(2, start_method="spawn"))
def hung_job() -> None:
    hang()


@dg.op
def client_of(plex: PlexResource, index: int) -> tuple[int, int]:
    """Which client this step's Plex resource hands out (no request is made)."""
    time.sleep(0.2)  # the steps overlap
    return index, id(plex.get_client())


@dg.op
def clients_seen(seen: list[tuple[int, int]]) -> list[int]:
    return sorted({client for _, client in seen})


@dg.job(
    executor_def=fan_out_executor(3, start_method="spawn"),
    resource_defs={"plex": PlexResource(base_url="http://127.0.0.1:9", token="t")},
)
def plex_clients_job() -> None:
    clients_seen(fan().map(client_of).collect())


LIFECYCLE: list[tuple[str, str]] = []
"""What the counted resources did in this process: (event, resource), in order."""
FAIL_FIRST_INIT: list[bool] = []
"""Non-empty: the next initialization of `tracked` fails (and empties it)."""


@dg.resource
def tracked(init_context: dg.InitResourceContext) -> Iterator[object]:
    """A resource whose initializations and teardowns are recorded, failing once when asked."""
    LIFECYCLE.append(("init", "tracked"))
    if FAIL_FIRST_INIT:
        FAIL_FIRST_INIT.clear()
        raise ConnectionError("the database is restarting")
    made = object()
    yield made
    LIFECYCLE.append(("teardown", "tracked"))


@dg.resource
def other(init_context: dg.InitResourceContext) -> Iterator[object]:
    LIFECYCLE.append(("init", "other"))
    yield object()
    LIFECYCLE.append(("teardown", "other"))


@dg.op(required_resource_keys={"tracked"}, retry_policy=dg.RetryPolicy(max_retries=1))
def uses_tracked(context: OpExecutionContext, index: int) -> int:
    time.sleep(0.1)  # the steps overlap
    return id(context.resources.tracked)


@dg.op(required_resource_keys={"other"})
def uses_other(context: OpExecutionContext, seen: list[int]) -> list[int]:
    return sorted(set(seen))


@dg.job(
    executor_def=fan_out_executor(3, start_method="spawn"),
    resource_defs={"tracked": tracked, "other": other},
)
def tracked_job() -> None:
    uses_other(fan().map(uses_tracked).collect())


def _events(
    instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType
) -> list[dg.DagsterEvent]:
    return [r.dagster_event for r in instance.all_logs(run_id, of_type=kind) if r.dagster_event]


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    points = sorted([(b, 1) for b, _ in intervals] + [(e, -1) for _, e in intervals])
    most = current = 0
    for _, change in points:
        current += change
        most = max(most, current)
    return most


def test_each_step_runs_in_a_thread_of_the_run_worker_with_its_own_events(
    threads_env: None, instance: dg.DagsterInstance
) -> None:
    with dg.execute_job(dg.reconstructable(fan_job), instance=instance) as result:
        assert result.success
        built = result.output_for_node("gather")
        run_id = result.run_id
    assert {b["pid"] for b in built} == {os.getpid()}, "no step process"
    assert len({b["thread"] for b in built}) > 1, "steps ran on threads of their own"
    keys = {f"build[ch_{i}]" for i in range(WIDTH)}
    for kind in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS):
        seen = [e.step_key for e in _events(instance, run_id, kind) if e.step_key in keys]
        assert sorted(seen) == sorted(keys), f"one {kind.value} per step"
    # Every step's log capture saw its own thread's line, never another step's.
    for record in instance.all_logs(run_id):
        if record.user_message.startswith("built from step"):
            assert record.step_key == f"build[{record.user_message.split()[-1]}]", record
    lines = [r for r in instance.all_logs(run_id) if r.user_message.startswith("built from")]
    assert len(lines) == WIDTH
    # At most max_concurrent (3) at once, and the window was used.
    most = _most_at_once([(b["began"], b["ended"]) for b in built])
    assert 2 <= most <= 3, most


def test_the_steps_of_a_run_share_one_plex_client_and_runs_do_not(
    threads_env: None, instance: dg.DagsterInstance
) -> None:
    """The run's sections, filter vocabulary and shows are read once for all its steps."""
    seen = []
    for _ in range(2):
        with dg.execute_job(dg.reconstructable(plex_clients_job), instance=instance) as result:
            assert result.success
            seen.append(result.output_for_node("clients_seen"))
    assert [len(clients) for clients in seen] == [1, 1], seen
    assert seen[0] != seen[1], "a second run reuses the first run's client"


def test_a_run_config_bound_holds(threads_env: None, instance: dg.DagsterInstance) -> None:
    config = {"execution": {"config": {"max_concurrent": 1}}}
    with dg.execute_job(
        dg.reconstructable(fan_job), instance=instance, run_config=config
    ) as result:
        assert result.success
        built = result.output_for_node("gather")
    assert _most_at_once([(b["began"], b["ended"]) for b in built]) == 1


def test_a_pool_limit_holds_across_the_threads(
    threads_env: None, instance: dg.DagsterInstance
) -> None:
    set_pool_limit(instance, POOL, 2)
    with dg.execute_job(dg.reconstructable(pooled_job), instance=instance) as result:
        assert result.success
        built = result.output_for_node("gather")
        run_id = result.run_id
    assert _most_at_once([(b["began"], b["ended"]) for b in built]) == 2
    blocked = [
        r.step_key
        for r in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
        if r.user_message.startswith(f"Step blocked by limit for pool {POOL}")
    ]
    assert blocked, "steps past the pool's limit waited for a slot"


def test_a_step_that_fails_once_is_retried_under_its_policy(
    threads_env: None, instance: dg.DagsterInstance
) -> None:
    with dg.execute_job(dg.reconstructable(flaky_job), instance=instance) as result:
        assert result.success
        assert result.output_for_node("flaky") == 1
        run_id = result.run_id
    retried = _events(instance, run_id, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    assert [e.step_key for e in retried] == ["flaky"]
    restarted = _events(instance, run_id, dg.DagsterEventType.STEP_RESTARTED)
    assert [e.step_key for e in restarted] == ["flaky"]


def test_a_resume_from_failure_runs_only_the_failed_step(
    threads_env: None, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    mark = tmp_path / "fail"
    mark.with_suffix(".4").touch()
    config = {"ops": {"build_unless_marked": {"config": {"fail_file": str(mark)}}}}
    with dg.execute_job(
        dg.reconstructable(resumable_job), instance=instance, run_config=config
    ) as first:
        assert not first.success
        failed_run = first.run_id
    failed = _events(instance, failed_run, dg.DagsterEventType.STEP_FAILURE)
    assert [e.step_key for e in failed] == ["build_unless_marked[ch_4]"]
    mark.with_suffix(".4").unlink()
    options = dg.ReexecutionOptions.from_failure(failed_run, instance)
    with dg.execute_job(
        dg.reconstructable(resumable_job),
        instance=instance,
        run_config=config,
        reexecution_options=options,
    ) as resumed:
        assert resumed.success
        assert sorted(resumed.output_for_node("gather_numbers")) == list(range(WIDTH))
        started = _events(instance, resumed.run_id, dg.DagsterEventType.STEP_START)
    assert {e.step_key for e in started} == {"build_unless_marked[ch_4]", "gather_numbers"}


_HUNG_RUN = """
import sys
import dagster as dg
from tests.ops.test_threads_executor import hung_job
from tests.support.instances import instance_on

no_compute_logs = {
    "module": "dagster._core.storage.noop_compute_log_manager",
    "class": "NoOpComputeLogManager",
}
with instance_on(sys.argv[1], compute_logs=no_compute_logs) as instance:
    with dg.execute_job(dg.reconstructable(hung_job), instance=instance) as result:
        print("RUN", result.run_id, result.dagster_run.status.value, flush=True)
"""


def test_an_interrupted_run_with_a_hung_step_ends_after_the_grace(
    database_url: str, tmp_path: Path
) -> None:
    """The run is terminated as Dagster terminates one (marked CANCELING, its worker
    interrupted): the hung step cannot be, so after the grace period the run ends canceled
    without it and the run worker's process exits."""
    from ops.threads_executor import STOP_GRACE_SECONDS

    url = fresh_schema(database_url, "dagster_threads_hung")
    started = tmp_path / "started"
    env = {
        **os.environ,
        settings.EXECUTOR_ENV: "threads",
        settings.ENV_FILE_ENV: "/nonexistent/.env",
        "THREADS_TEST_STARTED": str(started),
    }
    worker = subprocess.Popen(
        [sys.executable, "-c", _HUNG_RUN, url],
        cwd=_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (started.exists() and started.read_text()):
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "the hung step never started"
            time.sleep(0.1)
        with instance_on(url) as instance:
            run = instance.get_run_by_id(started.read_text())
            assert run is not None
            instance.report_run_canceling(run)
        interrupted = time.monotonic()
        worker.send_signal(signal.SIGINT)
        out, err = worker.communicate(timeout=STOP_GRACE_SECONDS + 30)
        took = time.monotonic() - interrupted
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert STOP_GRACE_SECONDS - 1 <= took <= STOP_GRACE_SECONDS + 30, took
    with instance_on(url) as instance:
        (run,) = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.CANCELED, (run.status, out, err[-3000:])
        messages = [r.user_message for r in instance.all_logs(run.run_id)]
    assert any("abandoning steps still running" in m and "hang" in m for m in messages)


def test_a_run_initializes_each_set_of_resources_once_and_tears_it_down_at_the_end(
    threads_env: None, instance: dg.DagsterInstance
) -> None:
    """As on the in-process executor: the run's steps share resources, each set built once."""
    LIFECYCLE.clear()
    with dg.execute_job(dg.reconstructable(tracked_job), instance=instance) as result:
        assert result.success
        shared = result.output_for_node("uses_other")
        run_id = result.run_id
    assert len(shared) == 1, "every mapped step got the same `tracked` object"
    # `fan` needs no resource; WIDTH steps need `tracked`, one needs `other`: two sets, built
    # once each, torn down at the end, latest first. (What follows is the result object's own
    # resources, built to read the outputs.)
    assert LIFECYCLE[:4] == [
        ("init", "tracked"),
        ("init", "other"),
        ("teardown", "other"),
        ("teardown", "tracked"),
    ], LIFECYCLE
    # In the event log: one initialization per set ({io_manager} for `fan`, with `tracked` for
    # the mapped steps, with `other` for the last), each by the first step needing it.
    started = [
        (e.step_key or "").split("[")[0]
        for e in _events(instance, run_id, dg.DagsterEventType.RESOURCE_INIT_STARTED)
        if e.step_key  # not the result's reads
    ]
    assert sorted(started) == ["fan", "uses_other", "uses_tracked"], started


def test_a_failed_resource_initialization_is_the_steps_and_is_retried(
    threads_env: None, instance: dg.DagsterInstance
) -> None:
    """A set that failed to initialize keeps nothing: the retried step (or the next) builds it."""
    LIFECYCLE.clear()
    FAIL_FIRST_INIT.append(True)
    with dg.execute_job(dg.reconstructable(tracked_job), instance=instance) as result:
        assert result.success
        assert len(result.output_for_node("uses_other")) == 1
        run_id = result.run_id
    # The failed init, the retried step's init, its teardown (then the result's own reads).
    tracked_events = [event for event, name in LIFECYCLE if name == "tracked"]
    assert tracked_events[:3] == ["init", "init", "teardown"], LIFECYCLE
    failures = _events(instance, run_id, dg.DagsterEventType.RESOURCE_INIT_FAILURE)
    assert len(failures) == 1 and failures[0].step_key.startswith("uses_tracked[")
    assert "the database is restarting" in str(failures[0].event_specific_data)
    retried = _events(instance, run_id, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    assert [e.step_key for e in retried] == [failures[0].step_key]


def test_a_steps_plan_cut_from_the_runs_plan_is_the_one_dagster_builds_for_it() -> None:
    """`RunPlans` gives each step the plan `create_execution_plan` builds for that step alone."""
    job = dg.reconstructable(fan_job)
    mappings = {"fan": {"result": [f"ch_{i}" for i in range(WIDTH)]}}
    states = [
        KnownExecutionState(),
        KnownExecutionState(dynamic_mappings=mappings),
        KnownExecutionState(previous_retry_attempts={"build[ch_2]": 1}, dynamic_mappings=mappings),
    ]
    plans = RunPlans(job, {}, None)
    for state, keys in zip(
        states,
        [["fan"], ["build[ch_0]", "build[ch_5]"], ["build[ch_2]", "gather"]],
        strict=True,
    ):
        for key in keys:
            cut = plans.for_step(key, state)
            built = create_execution_plan(job, {}, step_keys_to_execute=[key], known_state=state)
            assert cut.step_keys_to_execute == built.step_keys_to_execute == [key]
            assert cut.known_state == built.known_state == state
            assert cut.get_step_by_key(key) == built.get_step_by_key(key)
            assert cut.executable_map == built.executable_map
            assert cut.resolvable_map == built.resolvable_map
            assert cut.artifacts_persisted == built.artifacts_persisted
