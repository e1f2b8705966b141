"""Faults and load, measured: ten imports through the run queue at once, and Postgres restarted.

Each test logs its figures (runs, channels expected and present, duplicate builds, leftover
claims) at WARNING, which is what `docs/durability.md`'s table quotes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa
import yaml

from airwave_dagster import settings
from airwave_dagster.cli import environment, launcher
from ops.lineup_import.job import IMPORT_CONCURRENCY
from resources.io_manager import stored_report
from tests.support import lineups
from tests.support.celery_workers import REDIS_URL, require_broker, start_workers, unique_queue
from tests.support.dagster_dev import STALE_SECONDS, Dev, serving, wait_for
from tests.support.homes import dagster_home, user_env
from tests.support.load import Sampler
from tests.support.own_postgres import OwnPostgres
from tests.support.schemas import fresh_schema
from tests.support.slow_start import checkout_on_pythonpath, instance_with_slow_worker_start
from tests.support.standalone import (
    CHANNELS,
    CHANNELS_WITH_CLAIMS,
    airwave,
    assert_exactly_once,
    build_keys,
    channel_number,
    claims_held,
    start_waiting_import,
)

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

LOG = logging.getLogger(__name__)

RUNS = 10
CONTENDED = 500
"""Runs 0-4 each put a different channel on this number: one wins it, the others are moved."""
SHARED = 510
"""Runs 5-9 each carry the same channel (same content) on this number: it is built once."""
DOWN_SECONDS = 3.0
"""How long the restarted cluster accepts no connection: longer than one reconnect attempt."""
LONG_DOWN_SECONDS = 90.0
"""An outage no run rides out: every event write of a step or of the run worker gives up after
dagster-postgres' connection retries (about 11 s), so a build's three attempts (retries 1 s,
then 3 s apart) and the run worker's own events all fail while the cluster is down. It was 45 s
until threads runs rode such an outage out to SUCCESS (3 of 4 runs, first with the changes of
2026-12-06 that cut a step's work: resources once per run, plans cut from the run's, an event in
one statement); the likely reason is fewer waits of about 11 s on failed writes before a third
attempt, which then starts after the outage. Not analysed further: a run that rides an outage
out is the better outcome; this test needs one that does not."""
CLI_BOUND_SECONDS = 300
"""The import must end this soon after the restart (step retries back off 1 s, then 3 s)."""
CAUSE = re.compile(r"connection to server|DB connection|server closed the connection")
"""What a failure caused by the outage must say: the driver's words, or dagster-postgres'."""
FAILED = {dg.DagsterEventType.STEP_FAILURE}
SLOW_START_SCHEMA = "dagster_slow_start"
"""The Dagster storage of the slow-start test's own `airwave dev`: no other daemon sees its runs."""


def _load_lineup(index: int) -> dict[str, Any]:
    """Two channels of its own, plus one on a number other runs want too."""

    def genre(name: str, number: int, genre: str, year: int, package: str | None) -> dict:
        return lineups.channel(
            number,
            name,
            [
                lineups.predicate(
                    ["movie"],
                    {
                        "type": "group",
                        "combinator": "and",
                        "children": [
                            lineups.condition("genre", "is", genre),
                            lineups.condition("year", "gte", str(year)),
                        ],
                    },
                )
            ],
            package_key=package,
        )

    package = f"load{index}"
    channels = [
        genre(
            f"Own {index}a",
            300 + 2 * index,
            lineups.GENRES[index % len(lineups.GENRES)],
            1950 + index,
            package,
        ),
        genre(
            f"Own {index}b",
            301 + 2 * index,
            lineups.GENRES[(index + 3) % len(lineups.GENRES)],
            1960,
            package,
        ),
    ]
    if index < RUNS // 2:
        channels.append(genre(f"Contended {index}", CONTENDED, "Drama", 1970 + index, package))
    else:
        channels.append(genre("Shared", SHARED, "Comedy", 1990, None))
    return lineups.lineup(channels, [{"key": package, "name": f"Load {index}"}])


def _max_concurrent_runs(dev: Dev) -> int:
    config = yaml.safe_load((dev.home / "dagster.yaml").read_text())
    return int(config["run_coordinator"]["config"]["max_concurrent_runs"])


def _finished(dev: Dev, run_ids: list[str]) -> bool:
    runs = [dev.instance.get_run_by_id(run_id) for run_id in run_ids]
    return all(run is not None and run.is_finished for run in runs)


@pytest.mark.timeout(900)  # ten run workers start on a shared 2-core machine
def test_ten_imports_at_once_through_the_queue(fresh: Dev, database_url: str) -> None:
    bound = _max_concurrent_runs(fresh)
    wanted = [_load_lineup(i) for i in range(RUNS)]
    started = time.monotonic()
    run_ids = [fresh.launch_import(lineup) for lineup in wanted]
    with Sampler(fresh.instance, run_ids) as sampler:
        wait_for(lambda: _finished(fresh, run_ids), 780, "all ten runs to finish", poll=1.0)
    elapsed = time.monotonic() - started
    assert sampler.error is None, sampler.error
    peaks = sampler.peaks

    statuses = {run_id: fresh.instance.get_run_by_id(run_id).status for run_id in run_ids}
    assert set(statuses.values()) == {dg.DagsterRunStatus.SUCCESS}, statuses
    assert peaks.samples >= 10, peaks
    # The queue held them back: never more runs at once than the coordinator allows, and the
    # sampler did see the queue working at full width, not ten runs one after another.
    assert peaks.runs_in_progress <= bound, peaks
    assert peaks.runs_in_progress >= 2, peaks
    # The documented bound on builds: IMPORT_CONCURRENCY per run (docs/importer.md), so at most
    # max_concurrent_runs x IMPORT_CONCURRENCY across the queue.
    assert peaks.builds_in_flight_one_run <= IMPORT_CONCURRENCY, peaks
    assert peaks.builds_in_flight <= bound * IMPORT_CONCURRENCY, peaks
    assert peaks.builds_in_flight >= 2, peaks
    assert sampler.still_open() == {}, "a build started and never ended"

    reports = {}
    for run_id in run_ids:
        report = stored_report(fresh.instance, run_id, database_url)
        assert report is not None, run_id
        reports[run_id] = report
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(CHANNELS_WITH_CLAIMS)).all()
            work = Counter(
                conn.execute(
                    sa.text(
                        'SELECT "channelName" FROM public.import_trace '
                        """WHERE "runId" = ANY(:ids) AND phase = 'claim'"""
                    ),
                    {"ids": run_ids},
                ).scalars()
            )
    finally:
        engine.dispose()

    present = Counter(row.name for row in rows)
    by_name = {row.name: row for row in rows}
    assert len({row.number for row in rows}) == len(rows), "a number held by two channels"
    assert all(row.claim_run_id is None and row.enabled for row in rows), rows
    assert {name: n for name, n in present.items() if n > 1} == {}, "a channel exists twice"

    # Every channel of its own exists once, on its own number, whatever the others did.
    for index, lineup in enumerate(wanted):
        for channel in lineup["channels"][:2]:
            row = by_name.get(channel["name"])
            assert row is not None, f"run {index}: {channel['name']} is missing"
            assert row.number == channel["number"], (channel, row)

    # The same channel in five files: one row, at its number; the other files adopted or
    # skipped it (an identical channel already there uses no number).
    assert by_name["Shared"].number == SHARED
    shared = [c for report in reports.values() for c in report["channels"] if c["name"] == "Shared"]
    assert len(shared) == RUNS - RUNS // 2
    assert {c["status"] for c in shared} <= {"created", "skipped"}, shared

    # Five different channels wanting one number: each is either present once (on that number,
    # or moved to a free one and reported as renumbered) or reported as a number conflict.
    contended = {
        c["name"]: c
        for report in reports.values()
        for c in report["channels"]
        if c["name"].startswith("Contended")
    }
    assert len(contended) == RUNS // 2
    winners = [row for row in rows if row.name.startswith("Contended")]
    assert [row.number for row in winners].count(CONTENDED) == 1, winners
    conflicts = 0
    for name, result in contended.items():
        if result["status"] == "created":
            assert by_name[name].number == result["number"], (result, by_name[name])
            assert (result["number"] == CONTENDED) != result["number_reassigned"], result
        else:
            assert result["status"] == "failed", result
            assert "number" in (result["reason"] or ""), result
            assert name not in by_name, result
            conflicts += 1
    assert len(winners) + conflicts == RUNS // 2

    # No build ran twice: one claim per channel that was built.
    duplicates = sum(n - 1 for n in work.values() if n > 1)
    assert duplicates == 0, work
    assert set(work) == set(by_name), (work, sorted(by_name))
    LOG.warning(
        "ten queued imports: %d runs in %.0f s, peak %d runs in progress (bound %d), peak %d "
        "builds in flight (%d in one run, bound %d), %d samples; channels expected %d present %d "
        "(%d contended: %d renumbered, %d conflicts); duplicate builds %d; leftover claims %d",
        len(run_ids),
        elapsed,
        peaks.runs_in_progress,
        bound,
        peaks.builds_in_flight,
        peaks.builds_in_flight_one_run,
        IMPORT_CONCURRENCY,
        peaks.samples,
        2 * RUNS + 1 + RUNS // 2 - conflicts,
        len(by_name),
        RUNS // 2,
        sum(1 for row in winners if row.number != CONTENDED),
        conflicts,
        duplicates,
        sum(1 for row in rows if row.claim_run_id is not None),
    )


@pytest.fixture
def faults_env(
    own_postgres: OwnPostgres, slow_plex: Any, tmp_path: Path
) -> Iterator[dict[str, Any]]:
    """A user's `airwave import` environment whose only database is the test's own cluster."""
    env = user_env(
        tmp_path,
        **{
            settings.DATABASE_URL_ENV: own_postgres.url,
            settings.DAGSTER_PG_URL_ENV: environment.with_search_path(
                own_postgres.url, environment.DAGSTER_SCHEMA
            ),
            settings.PLEX_URL_ENV: slow_plex.url,
            settings.PLEX_TOKEN_ENV: slow_plex.token,
            "AIRWAVE_CLAIM_STALE_SECONDS": STALE_SECONDS,
        },
    )
    home = env["DAGSTER_HOME"]
    previous = os.environ.get(settings.DAGSTER_PG_URL_ENV)
    # The instance reads its storage URL from the environment when it is built.
    os.environ[settings.DAGSTER_PG_URL_ENV] = env[settings.DAGSTER_PG_URL_ENV]
    try:
        instance = dg.DagsterInstance.from_config(home)
    finally:
        if previous is None:
            del os.environ[settings.DAGSTER_PG_URL_ENV]
        else:
            os.environ[settings.DAGSTER_PG_URL_ENV] = previous
    yield {"env": env, "instance": instance, "tmp": tmp_path, "pg": own_postgres}
    instance.dispose()
    _kill_left_behind(home)


def _kill_left_behind(dagster_home: str) -> None:
    """SIGKILL any process of this test still running (its code server can outlive the outage:
    seen 36 minutes after the test, parent gone, ignoring SIGTERM). A run worker is found by its
    environment: the code server spawns it through multiprocessing, so its command line names
    no home (a celery run worker left spinning by the hang of issue 15 outlived its test so)."""
    import psutil

    for process in psutil.process_iter(["cmdline"]):
        if process.pid == os.getpid():
            continue
        try:
            ours = dagster_home in " ".join(process.info["cmdline"] or ())
            ours = ours or process.environ().get("DAGSTER_HOME") == dagster_home
            if ours:
                process.kill()
        except psutil.Error:
            continue


def _import_until_builds_in_flight(
    faults: dict[str, Any],
) -> tuple[subprocess.Popen[bytes], str, Path, set[int], set[int]]:
    """Start `airwave import --wait` on the test's cluster; return once builds are in flight."""
    instance = faults["instance"]
    cli, _, log = start_waiting_import(faults["env"], faults["tmp"], "faults.json")
    run = wait_for(lambda: next(iter(instance.get_runs(limit=1)), None), 180, "the import's run")

    def in_flight() -> bool:
        assert cli.poll() is None, log.read_text(errors="replace")[-3000:]
        done = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_SUCCESS)
        started = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_START)
        return len(done) >= 1 and bool(started - done)

    wait_for(in_flight, 240, "a build done and more in flight", poll=0.05)
    done = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_SUCCESS)
    started = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_START)
    return cli, run.run_id, log, _numbers(done), _numbers(started - done)


def _numbers(keys: set[str]) -> set[int]:
    return {int(key.split("[ch_")[1].rstrip("]")) for key in keys}


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@contextmanager
def _on_executor(faults_env: dict[str, Any], executor: str) -> Iterator[None]:
    """Run the test's imports on `executor`: for celery, two `airwave worker`s over Redis."""
    if executor != "celery":
        faults_env["env"] = {**faults_env["env"], settings.EXECUTOR_ENV: executor}
        yield
        return
    require_broker(REDIS_URL)
    queue = unique_queue()
    faults_env["env"] = {
        **faults_env["env"],
        settings.EXECUTOR_ENV: "celery",
        settings.CELERY_BROKER_ENV: REDIS_URL,
        settings.CELERY_QUEUE_ENV: queue,
    }
    workers = start_workers(faults_env["env"], faults_env["tmp"], 2, concurrency=2, queue=queue)
    try:
        yield
    finally:
        workers.stop()


@pytest.mark.timeout(900)  # a CLI, its code server, run worker (and workers) on a shared machine
@pytest.mark.parametrize("executor", ["threads", "multiprocess", "celery"])
def test_postgres_restarted_mid_run_then_resumed_is_exactly_once(
    faults_env: dict[str, Any], executor: str
) -> None:
    """A restart of a few seconds: the run rides it out (step retries) or fails and is resumed.

    Under celery this hung in the full suite: a step task that raised (its worker could not write
    an event) stopped dagster-celery's loop from starting retries that came due, and the run
    worker spun forever (ops/celery_executor.py).
    """
    with _on_executor(faults_env, executor):
        _restart_mid_run_and_check(faults_env, executor, DOWN_SECONDS, must_fail=False)


@pytest.mark.timeout(900)  # as above, plus the resume
@pytest.mark.parametrize("executor", ["threads", "celery"])
def test_postgres_down_too_long_fails_the_run_then_resume_is_exactly_once(
    faults_env: dict[str, Any], executor: str
) -> None:
    """An outage longer than any retry: the run ends FAILURE on its own, naming the cause, the
    CLI waits it out and exits 1, and `airwave runs resume` finishes it exactly once."""
    with _on_executor(faults_env, executor):
        _restart_mid_run_and_check(faults_env, executor, LONG_DOWN_SECONDS, must_fail=True)


def _restart_mid_run_and_check(
    faults_env: dict[str, Any], executor: str, down_seconds: float, *, must_fail: bool
) -> None:
    instance, env, pg = faults_env["instance"], faults_env["env"], faults_env["pg"]
    cli, run_id, log, done, in_flight = _import_until_builds_in_flight(faults_env)
    try:
        old_pid = pg.pid()
        down = pg.restart(down_seconds=down_seconds)
        assert pg.pid() != old_pid, "the cluster did not restart"
        # No hang: the import ends on its own, in bounded time, whether the run survived the
        # outage (step retries) or failed.
        try:
            exit_code = cli.wait(timeout=CLI_BOUND_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"`airwave import --wait` still running {CLI_BOUND_SECONDS} s after the restart:\n"
                + log.read_text(errors="replace")[-4000:]
            ) from None
        ended = time.monotonic()
    finally:
        _stop(cli)
    output = log.read_text(errors="replace")
    run = instance.get_run_by_id(run_id)
    assert run is not None
    assert run.is_finished, f"run {run_id} {run.status} after the CLI exited:\n{output[-3000:]}"
    retried = build_keys(instance, run_id, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    failed_steps = {
        e.step_key
        for e in (r.dagster_event for r in instance.all_logs(run_id, of_type=FAILED))
        if e is not None
    }
    run_ids = [run_id]
    cause = ""
    resume_seconds = 0.0
    if run.status == dg.DagsterRunStatus.SUCCESS:
        assert not must_fail, f"the run rode out {down:.0f} s without Postgres:\n{output[-3000:]}"
        assert exit_code == 0, output[-3000:]
    else:
        assert run.status == dg.DagsterRunStatus.FAILURE, run.status
        assert exit_code == 1, output[-3000:]
        # Failed cleanly: the run's failure, as the CLI printed it, says why in the database
        # driver's (or dagster-postgres') words, not only "An exception was thrown during
        # execution".
        messages = launcher.failure_messages(instance, run_id)
        named = [m for m in messages if CAUSE.search(m)]
        assert named, f"the failure does not name the outage: {messages}"
        assert named[0].splitlines()[0] in output, output[-3000:]
        cause = named[0].splitlines()[0][:300]
        resumed = airwave(env, "runs", "resume", run_id, "--wait", "--json")
        resume_seconds = time.monotonic() - ended
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        outcome = json.loads(resumed.stdout)
        assert outcome["status"] == "SUCCESS", outcome
        run_ids.append(outcome["run_id"])
    planned = sorted(c["number"] for c in lineups.genre_lineup(CHANNELS)["channels"])
    # Work may repeat for builds in flight at the restart and for any attempt the outage failed.
    # On threads a freed slot starts the next build at once, inside the outage, and the events
    # of its failed attempt may be lost with Postgres: there, what must hold is that no build
    # finished before the outage ran again.
    failed_attempts = {
        channel_number(key) for key in retried | failed_steps if key.startswith("build_channel[")
    }
    may_repeat = set(planned) - done if executor == "threads" else in_flight | failed_attempts
    figures = assert_exactly_once(pg.url, run_ids, done, may_repeat, ledger_complete=False)
    report = stored_report(instance, run_ids[-1], pg.url)
    assert report is not None
    assert sorted(c["number"] for c in report["channels"] if c["status"] == "created") == planned
    leftover = sum(claims_held(pg.url, r) for r in run_ids)
    assert leftover == 0
    LOG.warning(
        "postgres restart (%s): down %.1f s with %d builds done and %s in flight; "
        "first run %s (exit %d; build retries %s; failed steps %s; cause %r); runs %d "
        "(resume took %.0f s); channels expected %d present %d; duplicate builds %d; "
        "leftover claims %d",
        executor,
        down,
        len(done),
        sorted(in_flight),
        run.status.value,
        exit_code,
        sorted(retried),
        sorted(k for k in failed_steps if k),
        cause,
        len(run_ids),
        resume_seconds,
        len(planned),
        figures["channels"],
        figures["duplicate_builds"],
        leftover,
    )


def _messages(instance: Any, run_id: str) -> list[str]:
    return [record.message or "" for record in instance.all_logs(run_id)]


def _story(instance: Any, run_id: str) -> str:
    """The run's event log, one line per message, with the cause of any engine error."""
    lines = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        data = event.engine_event_data if event is not None and event.is_engine_event else None
        error = data.error if data is not None else None
        cause = ""
        while error is not None:
            cause += f" <- {error.message.strip()[:300]}"
            error = error.cause
        if record.message or cause:
            lines.append(f"  {record.message}{cause}")
    return "\n".join(lines)


@pytest.mark.timeout(900)  # its own webserver, daemon and code server on a shared machine
def test_a_start_that_times_out_is_served_once_not_launched_twice(
    clean_db: str, slow_plex: Any, tmp_path: Path
) -> None:
    """The daemon's start_run deadline (DAGSTER_GRPC_TIMEOUT_SECONDS) shorter than a worker's
    start, as on a loaded machine: the run must still run in exactly one worker and succeed.

    Before the launcher's fix the queue requeued the run after the timeout although the code
    server had started its worker; that worker then found the run QUEUED, ignored itself as a
    duplicate and exited, the code server marked the run FAILURE, and run retries started a
    second run (seen here). Under load, with the worker already running when the queue launched
    the run again, the same ended with the run FAILURE while its first worker still executed it
    (seen in the ten-runs test).
    """
    fresh_schema(clean_db, SLOW_START_SCHEMA)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "AIRWAVE_HOME": str(tmp_path / "home"),
        "AIRWAVE_INBOX": str(tmp_path / "inbox"),
        settings.DATABASE_URL_ENV: clean_db,
        settings.DAGSTER_PG_URL_ENV: environment.with_search_path(clean_db, SLOW_START_SCHEMA),
        settings.PLEX_URL_ENV: slow_plex.url,
        settings.PLEX_TOKEN_ENV: slow_plex.token,
        "AIRWAVE_CLAIM_STALE_SECONDS": STALE_SECONDS,
        # Every gRPC call of these processes, start_run included, gives up after 1 s, and a
        # run worker takes 5 s longer than usual to report itself: every start times out.
        "DAGSTER_GRPC_TIMEOUT_SECONDS": "1",
    }
    home = dagster_home(Path(env["DAGSTER_HOME"]))
    instance_with_slow_worker_start(home)
    with serving(checkout_on_pythonpath(env), home, tmp_path, load_seconds=240) as dev:
        run_id = dev.launch_import(lineups.genre_lineup(3, first_number=700))
        wait_for(
            lambda: (r := dev.instance.get_run_by_id(run_id)) is not None and r.is_finished,
            600,
            "the run to finish",
            poll=1.0,
        )
        run = dev.instance.get_run_by_id(run_id)
        messages = _messages(dev.instance, run_id)
        story = _story(dev.instance, run_id)
    timed_out = [m for m in messages if m == "Unexpected error in IPC client"]
    workers = [m for m in messages if m.startswith("Started process for run")]
    LOG.warning(
        "start_run timeouts: %d; run workers started: %d; run %s",
        len(timed_out),
        len(workers),
        run.status.value,
    )
    assert timed_out, "no start_run timed out: the test did not reproduce the fault"
    assert run.status == dg.DagsterRunStatus.SUCCESS, f"run {run.status.value}:\n{story}"
    assert len(workers) == 1, story
    # The launcher asked and did not requeue: the start was judged served.
    assert [m for m in messages if "start_run failed in the client but was served" in m], story
    assert not [m for m in messages if "marked as failed from outside" in m]
