"""Executor benchmark: the 50-channel import on multiprocess, on threads and on two celery workers.

`executors_section(instance, run_import)` runs inside `bench/run.py`, with its Plex emulator (same
latency for every run), database and lineup file. The production `import_lineup` job runs four
times, one run after the other in this process (the run worker): first with
`AIRWAVE_EXECUTOR=multiprocess` (forkserver, at most 4 builds at once), then on threads (the
default: 4 step threads of this process), then on threads again with a new event-log
connection per event (Dagster's storage as it comes, side by side with the kept connections),
then with
`AIRWAVE_EXECUTOR=celery` on two `airwave worker` processes of concurrency 2 (also 4 builds at
once) over the machine's Redis. The workers are started before the celery run and are not part
of its wall time: being long-lived, they are
meant to save the process start of every step. Memory is the proportional set size (PSS) summed
over every process of a run (this process, its forkserver and step processes, the workers and
their pool children; not Postgres or the emulator), sampled every 0.25 s.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from statistics import mean
from typing import Any

import dagster as dg
import psutil

from airwave_dagster import settings

WORKERS = 2
WORKER_CONCURRENCY = 2
BROKER_URL = "redis://127.0.0.1:6379/14"
"""Redis database 14: the tests use 13; each benchmark run uses a queue of its own as well."""
SAMPLE_SECONDS = 0.25
TARGET_RATIO = 0.5
"""Issue 15's aim: celery's wall time at most half the multiprocess one."""


class MemorySampler:
    """Peak PSS summed over the process trees of `roots`, sampled on a thread."""

    def __init__(self, roots: list[int], exclude: set[int]) -> None:
        """Sample `roots` and their descendants, except the trees under `exclude`."""
        self._roots = roots
        self._exclude = exclude
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self.peak_bytes = 0
        self.samples = 0

    def _processes(self) -> Iterator[psutil.Process]:
        # Each process once: the workers are children of this process as well as roots.
        seen: set[int] = set(self._exclude)
        for pid in self._exclude:
            try:
                seen.update(c.pid for c in psutil.Process(pid).children(recursive=True))
            except psutil.NoSuchProcess:
                continue
        for root in self._roots:
            try:
                process = psutil.Process(root)
                tree = [process, *process.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for member in tree:
                if member.pid in seen:
                    continue
                seen.add(member.pid)
                try:
                    if member.name() == "postgres":  # a private server is shared, not a run's
                        continue
                except psutil.NoSuchProcess:
                    continue
                yield member

    def _total(self) -> int:
        total = 0
        for process in self._processes():
            try:
                total += process.memory_full_info().pss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue  # a step process that just ended
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._total())
            self.samples += 1
            self._stop.wait(SAMPLE_SECONDS)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def step_overheads(instance: dg.DagsterInstance, run_id: str) -> dict[str, float]:
    """Mean seconds per channel step from its dispatch to its start and to its success.

    Dispatch is when the step gets one of the 4 places and its execution begins:
    `STEP_WORKER_STARTING` (the multiprocess run worker starts a step process) or the "Executing
    steps … in celery worker" engine event (a worker took the task). The celery run worker submits
    every ready step at once, so its "Submitting celery task" events are followed by a wait for a
    free worker, which is capacity, not orchestration (the multiprocess run worker waits for a
    free place before it dispatches, and that wait is not counted either).
    """
    dispatched: dict[str, float] = {}
    started: dict[str, float] = {}
    succeeded: dict[str, float] = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        key = event.step_key if event is not None else None
        if event is None or key is None or not key.startswith("build_channel["):
            continue
        kind = event.event_type
        if kind == dg.DagsterEventType.STEP_WORKER_STARTING or (
            kind == dg.DagsterEventType.ENGINE_EVENT
            and "in celery worker" in (record.message or "")
        ):
            dispatched.setdefault(key, record.timestamp)
        elif kind == dg.DagsterEventType.STEP_START:
            started.setdefault(key, record.timestamp)
        elif kind == dg.DagsterEventType.STEP_SUCCESS:
            succeeded.setdefault(key, record.timestamp)
    keys = [k for k in dispatched if k in started and k in succeeded]
    return {
        "steps": float(len(keys)),
        "to_start_s": mean(started[k] - dispatched[k] for k in keys) if keys else 0.0,
        "to_success_s": mean(succeeded[k] - dispatched[k] for k in keys) if keys else 0.0,
    }


@contextmanager
def celery_workers(queue: str, log_dir: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`airwave worker` processes on `queue`, each in its own directory and home; stopped after."""
    airwave = str(Path(sys.executable).parent / "airwave")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(WORKERS):
            root = log_dir / f"worker{index}"
            (root / "home").mkdir(parents=True)
            env = {
                **os.environ,
                "HOME": str(root / "home"),
                settings.HOME_ENV: str(root / "airwave"),
            }
            env.pop(settings.DAGSTER_HOME_ENV, None)
            name = f"bench{index}-{queue}@{socket.gethostname()}"
            command = [airwave, "worker", "--concurrency", str(WORKER_CONCURRENCY)]
            command += ["--queue", queue, "--name", name]
            with (root / "worker.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        command,
                        env=env,
                        cwd=root,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        for index, process in enumerate(processes):
            log_path = log_dir / f"worker{index}" / "worker.log"
            deadline = time.monotonic() + 180
            while " ready." not in log_path.read_text(errors="replace"):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"celery worker {index} did not start:\n{log_path}")
                time.sleep(0.2)
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@contextmanager
def _celery_settings(queue: str) -> Iterator[None]:
    """Point this process's next runs (their fan_out executor) at the workers' queue."""
    with _exported(
        {settings.EXECUTOR_ENV: "celery", settings.CELERY_BROKER_ENV: BROKER_URL}
        | {settings.CELERY_QUEUE_ENV: queue}
    ):
        yield


@contextmanager
def _exported(values: dict[str, str]) -> Iterator[None]:
    """`values` in this process's environment while the block runs (its runs read them)."""
    names = tuple(values)
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _measured(
    instance: dg.DagsterInstance,
    run_import: Callable[[], dict[str, Any]],
    roots: list[int],
    exclude: set[int],
) -> dict[str, Any]:
    cpu_before = time.process_time()
    with MemorySampler(roots, exclude) as memory:
        result = run_import()
    cpu = time.process_time() - cpu_before
    overheads = step_overheads(instance, result["run_id"])
    work = result["build_sum_s"] / max(result["channels"], 1)
    return {
        **result,
        **overheads,
        "work_s": work,
        "orchestration_s": overheads["to_success_s"] - work,
        "peak_mb": memory.peak_bytes / 2**20,
        "samples": memory.samples,
        # This process: the run worker (orchestration, and on threads every step's work too).
        "cpu_s": cpu,
    }


def executors_section(
    instance: dg.DagsterInstance, run_import: Callable[[], dict[str, Any]], exclude: set[int]
) -> str:
    """Run the comparison and return its BENCHMARKS.md section.

    Args:
        instance: The instance both runs are stored in.
        run_import: Runs the production import once (fresh database) and returns its figures:
            `run_id`, `wall_s`, `channels`, `build_sum_s` (Σ of the builds' own durations).
        exclude: Processes below this one that belong to neither run (the Plex emulator).
    """
    load_before = os.getloadavg()
    with _exported({settings.EXECUTOR_ENV: "multiprocess"}):
        multiprocess = _measured(instance, run_import, [os.getpid()], exclude)
    with _exported({settings.EXECUTOR_ENV: "threads"}):
        threads = _measured(instance, run_import, [os.getpid()], exclude)
        # Side by side: the same threads run with Dagster's storage as it comes, a new event-log
        # connection per event (the run worker is this process, so the patch reaches it).
        with _connection_per_event():
            per_event = _measured(instance, run_import, [os.getpid()], exclude)
    queue = f"airwave_bench_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        workers_started = time.perf_counter()
        # The workers read the broker and the queue from the environment they start with.
        with _celery_settings(queue), celery_workers(queue, Path(tmp)) as workers:
            workers_ready = time.perf_counter() - workers_started
            celery = _measured(
                instance, run_import, [os.getpid(), *(w.pid for w in workers)], exclude
            )
    load_after = os.getloadavg()
    return render_section(
        multiprocess, celery, workers_ready, load_before, load_after, threads, per_event=per_event
    )


@contextmanager
def _connection_per_event() -> Iterator[None]:
    """The threads executor without `kept_event_connections` while the block runs."""
    import ops.threads_executor as threads_executor

    kept = threads_executor.kept_event_connections
    threads_executor.kept_event_connections = lambda *_: nullcontext()  # type: ignore[assignment]
    try:
        yield
    finally:
        threads_executor.kept_event_connections = kept


def render_section(
    multiprocess: dict[str, Any],
    celery: dict[str, Any],
    workers_ready: float,
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
    threads: dict[str, Any] | None = None,
    measured: str | None = None,
    per_event: dict[str, Any] | None = None,
) -> str:
    """The BENCHMARKS.md section of one comparison's figures (`measured`: when, default now)."""
    when = measured or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    ratio = celery["wall_s"] / multiprocess["wall_s"]
    verdict = (
        "meets" if ratio <= TARGET_RATIO else "misses"
    ) + f" the issue's aim of ≤ {TARGET_RATIO:.1f}x"
    rows = [
        f"| {name} | {m['wall_s']:.1f} s | {m['channels']} | {m['to_start_s']:.2f} s "
        f"| {m['work_s']:.2f} s | {m['orchestration_s']:.2f} s | {m['peak_mb']:.0f} MB "
        f"| {m['cpu_s']:.1f} s |"
        for name, m in (
            ("multiprocess (forkserver, 4 at once)", multiprocess),
            *([("threads (default; of the run worker, 4 at once)", threads)] if threads else []),
            *([("threads, a new event-log connection per event", per_event)] if per_event else []),
            (f"celery ({WORKERS} workers of {WORKER_CONCURRENCY}, Redis)", celery),
        )
    ]
    threads_line = (
        [
            "threads / multiprocess wall-time ratio: "
            f"**{threads['wall_s'] / multiprocess['wall_s']:.3f}x**; orchestration / step "
            f"{threads['orchestration_s']:.2f} s vs "
            f"{multiprocess['orchestration_s']:.2f} s.",
            "",
        ]
        if threads
        else []
    )
    if threads:
        threads_line += [
            f"On threads the run worker is the whole run: it used {threads['cpu_s']:.1f} s of "
            f"CPU in {threads['wall_s']:.1f} s ({threads['cpu_s'] / threads['wall_s']:.0%} of "
            "one core). Its Python code runs one thread at a time (the GIL), so while that "
            "share is near 100 % the run is bound by this one process's CPU, not by Plex or "
            "Postgres: a shorter run needs less CPU per channel (or more processes: multiprocess, "
            "celery), not more threads.",
            "",
        ]
    if threads and per_event:
        threads_line += [
            "Threads with the run worker's event-log connections kept (`kept_event_connections`, "
            "resources/event_storage.py) / with a new connection per event, as Dagster's "
            f"Postgres storage comes: **{threads['wall_s'] / per_event['wall_s']:.3f}x** wall "
            f"time; orchestration / step {threads['orchestration_s']:.2f} s vs "
            f"{per_event['orchestration_s']:.2f} s.",
            "",
        ]
    samples = ", ".join(
        str(run["samples"]) for run in (multiprocess, threads, per_event, celery) if run
    )
    lines = [
        "## import_lineup on multiprocess, threads and celery: 50 channels, same emulator latency",
        "",
        f"Measured {when} on {os.cpu_count()} "
        f"cores. Reproduce with `make bench` (everything) or `.venv/bin/python -m bench.run "
        f"--only executors` (this section). The runs in one process, multiprocess first, "
        f"{'then threads, ' if threads else ''}"
        f"{'then threads with a connection per event, ' if per_event else ''}celery last; the "
        f"celery workers ({WORKERS}, concurrency {WORKER_CONCURRENCY} each) started in "
        f"{workers_ready:.1f} s before their run and are not in its wall time.",
        "",
        "| executor | wall time | channels | dispatch → step start | build work / step "
        "| orchestration / step | peak memory (PSS, all processes) | CPU of the run worker |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        *threads_line,
        f"celery / multiprocess wall-time ratio: **{ratio:.3f}x** ({verdict}). Load average "
        f"(1, 5, 15 min) before: {load_before[0]:.2f}, {load_before[1]:.2f}, "
        f"{load_before[2]:.2f}; after: {load_after[0]:.2f}, {load_after[1]:.2f}, "
        f"{load_after[2]:.2f}.",
        "",
        "Orchestration / step is the mean time from a build step's dispatch (the multiprocess "
        "run worker starts its process; a celery worker takes its task) to its STEP_SUCCESS "
        "event, minus the mean of the builds' own work (their trace rows): process start or "
        "task set-up (the worker builds the step's execution plan), loading the step's inputs, "
        "resources, event writes. Dispatch → step start is the part before the step's code "
        "runs. Time a step waits for one of the 4 places is not in either figure (celery "
        "submits every ready step at once and they wait on the queue; multiprocess waits "
        "before it dispatches). The celery run worker looks for finished tasks once a "
        "second (dagster-celery's loop): that wait is in the wall time, not in the per-step "
        "figures. Peak memory sums PSS (shared pages divided among the processes sharing them) "
        "over every process of the run, sampled every "
        f"{SAMPLE_SECONDS} s ({samples} samples).",
        "",
    ]
    return "\n".join(lines)
