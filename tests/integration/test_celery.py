"""`import_lineup` on celery workers (AIRWAVE_EXECUTOR=celery) over the machine's real brokers.

The run is started by the CLI with no daemon (`alone`), its steps go to a queue of the test's
own, and `airwave worker` processes with their own working directory and home take them. Step
outputs, claims and the event log travel through Postgres only.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pytest

from airwave_dagster import settings
from tests.fakes.scripted_model import GENRES, ScriptedModel, calls_by_channel, small_plan
from tests.support import lineups
from tests.support.celery_workers import (
    AMQP_URL,
    REDIS_URL,
    require_broker,
    start_workers,
    unique_queue,
)
from tests.support.dagster_dev import AIRWAVE, wait_for
from tests.support.homes import query
from tests.support.standalone import (
    CHANNELS,
    airwave,
    assert_exactly_once,
    build_keys,
    channel_number,
    claims_held,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.plex,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(600),  # code server, run worker and two workers start on a busy machine
]


def _celery_env(alone: dict[str, Any], broker: str) -> dict[str, str]:
    require_broker(broker)
    return {
        **alone["env"],
        settings.EXECUTOR_ENV: "celery",
        settings.CELERY_BROKER_ENV: broker,
        settings.CELERY_QUEUE_ENV: unique_queue(),
    }


def _worker_of_each_step(instance: Any, run_id: str) -> dict[str, str]:
    """Step key → the celery worker that reported executing it (the last one, if several)."""
    taken: dict[str, str] = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        if event is None or "in celery worker" not in (record.message or ""):
            continue
        worker = event.engine_event_data.metadata.get("Celery worker")
        if event.step_key and worker is not None:
            taken[event.step_key] = str(worker.value)
    return taken


def test_an_import_on_two_celery_workers_builds_every_channel_once(
    alone: dict[str, Any], clean_db: str
) -> None:
    env = _celery_env(alone, REDIS_URL)
    workers = start_workers(
        env, alone["tmp"], 2, concurrency=2, queue=env[settings.CELERY_QUEUE_ENV]
    )
    try:
        path = lineups.write(alone["tmp"], lineups.genre_lineup(CHANNELS), "celery.json")
        done = airwave(env, "import", str(path), "--json")
    finally:
        workers.stop()

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "SUCCESS"
    assert outcome["report"]["channels_created"] == CHANNELS
    taken = _worker_of_each_step(alone["instance"], outcome["run_id"])
    builds = {key for key in taken if key.startswith("build_channel[")}
    assert len(builds) == CHANNELS, taken
    assert set(taken.values()) == set(workers.names), "both workers took steps"
    figures = assert_exactly_once(clean_db, [outcome["run_id"]], set(), set())
    assert figures["duplicate_builds"] == 0


@dataclass(frozen=True)
class KilledMidBuild:
    """What a command run through worker 0's death ended with."""

    run_ids: list[str]
    """The run, and the resume `runs resume` started if the run did not succeed by itself."""
    first_status: str
    done: set[int]
    """Channels whose build step had succeeded when the worker was killed."""
    in_flight: set[int]
    """Channels whose build was running on the killed worker."""
    healed_s: float
    """Seconds from the kill to the end of the command (the run's end)."""


def _kill_worker_mid_build(
    alone: dict[str, Any], env: dict[str, str], command: list[str], prefix: str, killed: Any
) -> KilledMidBuild:
    """Run `airwave COMMAND --json` on two workers; SIGKILL worker 0 while it runs a build.

    The kill comes once a build has succeeded and worker 0 is running another. `killed()` is
    called right after the kill. If the run did not succeed by itself, one `airwave runs
    resume` must finish it.
    """
    instance = alone["instance"]
    workers = start_workers(
        env, alone["tmp"], 2, concurrency=2, queue=env[settings.CELERY_QUEUE_ENV]
    )
    try:
        cli = subprocess.Popen(
            [AIRWAVE, *command, "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        run = wait_for(lambda: next(iter(instance.get_runs(limit=1)), None), 120, "the run")

        def victim_busy() -> set[str]:
            succeeded = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_SUCCESS, prefix)
            on_victim = {
                key
                for key, worker in _worker_of_each_step(instance, run.run_id).items()
                if worker == workers.names[0] and key.startswith(prefix)
            }
            return on_victim - succeeded if succeeded else set()

        in_flight = wait_for(victim_busy, 240, "a build running on worker 0", poll=0.05)
        done = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_SUCCESS, prefix)
        workers.kill(0)
        killed_at = time.monotonic()
        killed()
        stdout, stderr = cli.communicate(timeout=400)
        healed_s = time.monotonic() - killed_at
    finally:
        workers.stop()
    assert cli.returncode in (0, 1), stderr
    run_ids = [run.run_id]
    status = json.loads(stdout)["status"]
    if status != "SUCCESS":  # the documented fallback: one command finishes it
        resumed = airwave(env, "runs", "resume", run.run_id, "--wait", "--json")
        assert resumed.returncode == 0, resumed.stderr
        run_ids.append(json.loads(resumed.stdout)["run_id"])
    return KilledMidBuild(
        run_ids=run_ids,
        first_status=status,
        done={channel_number(key) for key in done},
        in_flight={channel_number(key) for key in in_flight},
        healed_s=healed_s,
    )


@pytest.mark.parametrize("broker", [AMQP_URL, REDIS_URL], ids=["rabbitmq", "redis"])
def test_a_worker_killed_mid_build_heals_within_three_minutes_repeating_no_finished_build(
    alone: dict[str, Any], clean_db: str, broker: str
) -> None:
    # RabbitMQ gives an unacknowledged step back when its worker's connection drops, Redis only
    # after its visibility timeout (an hour): on both, the run worker sees the worker gone
    # (ops/celery_executor.py) and retries its steps, so the run succeeds by itself.
    env = _celery_env(alone, broker)
    path = lineups.write(alone["tmp"], lineups.genre_lineup(CHANNELS), "celery.json")

    killed = _kill_worker_mid_build(
        alone, env, ["import", str(path)], "build_channel[", lambda: None
    )

    figures = assert_exactly_once(clean_db, killed.run_ids, killed.done, killed.in_flight)
    print(  # noqa: T201 (the fault's figures, for the closing note)
        f"celery worker SIGKILL ({broker.split(':')[0]}): runs {len(killed.run_ids)}, channels "
        f"{CHANNELS}/{figures['channels']}, duplicate builds {figures['duplicate_builds']}, "
        f"first run {killed.first_status} {killed.healed_s:.0f} s after the kill"
    )
    assert killed.first_status == "SUCCESS" and len(killed.run_ids) == 1
    assert killed.healed_s <= 180


def test_ai_lineup_with_a_worker_killed_mid_build_pays_no_finished_build_twice(
    alone: dict[str, Any], clean_db: str, stub: Any
) -> None:
    """`airwave lineup` against the Messages-API stub; worker 0 SIGKILLed with a build in flight."""
    env = {
        **_celery_env(alone, AMQP_URL),
        settings.API_KEY_ENV: "stub-key",
        settings.BASE_URL_ENV: stub.url,
    }
    stub.responder = ScriptedModel(small_plan(GENRES[:5]))
    stub.latency = 0.4  # per model call: a build is still in flight when its worker dies
    paid: Counter[str] = Counter()

    def count_and_reset() -> None:
        paid.update(calls_by_channel(stub))
        stub.reset_requests()

    killed = _kill_worker_mid_build(
        alone, env, ["lineup", "--provider", "anthropic"], "build_ai_channel[", count_and_reset
    )

    names = _channel_names(clean_db)
    finished = {names[number] for number in killed.done}
    after = calls_by_channel(stub)
    # A build that had finished before the kill is never paid again; the killed one may be.
    assert finished and not finished & set(after), (finished, after)
    one_build = {paid[name] for name in finished}
    assert len(one_build) == 1 and one_build.pop() >= 2, paid
    assert sorted(names.values()) == sorted(f"{genre} TV" for genre in GENRES[:5])
    assert sum(claims_held(clean_db, run_id) for run_id in killed.run_ids) == 0
    print(  # noqa: T201 (the fault's figures, for the closing note)
        f"celery worker SIGKILL (ai_lineup): runs {len(killed.run_ids)}, channels "
        f"5/{len(names)}, finished at the kill {sorted(finished)}, in flight on the killed "
        f"worker {sorted(killed.in_flight)}, model calls before {dict(paid)}, after "
        f"{dict(after)}, first run {killed.first_status}"
    )


def _channel_names(database_url: str) -> dict[int, str]:
    """Enabled channels by number (each number once: it is the table's unique key)."""
    rows = query(
        database_url, "SELECT number, name FROM public.channel WHERE enabled ORDER BY number"
    )
    return {row.number: row.name for row in rows}
