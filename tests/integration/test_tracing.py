"""One trace from the command that started an AI lineup, through a kill -9 and a resume.

The CLI, its code server, the run worker and every step process export OTLP/HTTP to a receiver
in this test (`tests/support/otlp.py`), as they would to a collector. The lineup is started with
`TRACEPARENT` set (as a CI job or a script that is itself traced would), killed whole mid
fan-out, and resumed with `airwave runs resume`; the test then reads the tree it received.
"""

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest

from airwave_dagster import settings, tracing
from airwave_dagster.emulators.plex import start_emulator
from airwave_dagster.run_tags import TRACEPARENT_TAG
from tests.fakes.scripted_model import ScriptedModel, small_plan
from tests.support import lineups
from tests.support.celery_workers import REDIS_URL, require_broker, start_workers, unique_queue
from tests.support.dagster_dev import AIRWAVE, wait_for
from tests.support.otlp import Receiver, otlp  # noqa: F401
from tests.support.standalone import airwave, build_keys, kill_tree

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.plex,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

PLEX_TOKEN = "plex-token-SECRET-4f1d9c"
API_KEY = "sk-ant-api03-SECRET-9e7b2a"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"
OTHER_CALLER = "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01"
GENRES = ("Drama", "Comedy", "Action", "Horror", "Thriller")
BUILD = "build_ai_channel["


@pytest.fixture(scope="module")
def secret_plex() -> Iterator[Any]:
    """The slow library of the crash tests, behind a token this test looks for in every byte."""
    with start_emulator(items=600, seed=11, latency_ms=30, token=PLEX_TOKEN) as handle:
        yield handle


@pytest.fixture
def traced(alone: dict[str, Any], secret_plex: Any, stub: Any, otlp: Receiver) -> dict[str, Any]:  # noqa: F811
    """`alone`'s CLI environment with tracing on, the secret Plex token and the stub's key."""
    env = {
        **alone["env"],
        settings.PLEX_URL_ENV: secret_plex.url,
        settings.PLEX_TOKEN_ENV: PLEX_TOKEN,
        settings.API_KEY_ENV: API_KEY,
        settings.BASE_URL_ENV: stub.url,
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url,
        "OTEL_SERVICE_NAME": "airwave-test",
        "OTEL_BSP_SCHEDULE_DELAY": "500",
    }
    return {**alone, "env": env}


def test_a_killed_and_resumed_lineup_is_one_trace(
    traced: dict[str, Any],
    stub: Any,
    otlp: Receiver,  # noqa: F811
) -> None:
    instance = traced["instance"]
    stub.responder = ScriptedModel(small_plan(GENRES))
    stub.latency = 0.4  # builds stay in flight long enough to be killed there
    log = traced["tmp"] / "lineup.log"
    with log.open("wb") as output:
        cli = subprocess.Popen(
            [AIRWAVE, "lineup", "--provider", "anthropic", "--budget-usd", "5", "--json"],
            env={**traced["env"], tracing.TRACEPARENT_ENV: CALLER},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        run = wait_for(lambda: next(iter(instance.get_runs(limit=1)), None), 120, "the run")

        def in_flight() -> bool:
            assert cli.poll() is None, log.read_text(errors="replace")[-3000:]
            done = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_SUCCESS, BUILD)
            started = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_START, BUILD)
            return len(done) >= 1 and bool(started - done)

        wait_for(in_flight, 240, "a build done and more in flight", poll=0.05)
        kill_tree(cli.pid)
    finally:
        cli.wait(timeout=30)
    time.sleep(1.0)
    first = run.run_id
    done_before, started_before = (
        {e.step_key for e in instance.all_logs(first, of_type=kind) if e.step_key}
        for kind in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_START)
    )
    assert instance.get_run_by_id(first).tags[TRACEPARENT_TAG].split("-")[1] == CALLER_TRACE

    resumed = airwave(
        {**traced["env"], tracing.TRACEPARENT_ENV: OTHER_CALLER},
        "runs",
        "resume",
        first,
        "--wait",
        "--json",
    )

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "SUCCESS", outcome
    second = outcome["run_id"]
    ran_again = {
        e.step_key
        for e in instance.all_logs(second, of_type=dg.DagsterEventType.STEP_START)
        if e.step_key
    }
    otlp.wait_for("run ai_lineup", 2)
    (run_span,) = (s for s in otlp.named("run ") if s.attributes["airwave.run.id"] == second)
    otlp.wait_for("step report_lineup")
    time.sleep(1.0)  # the last batches of the resume's processes
    tree = otlp.tree(CALLER_TRACE)
    print(tree)  # noqa: T201 (docs/observability.md shows one)
    (traced["tmp"] / "tree.txt").write_text(tree)

    # One trace: the start, the killed run's steps, the resume command, the resumed run.
    assert {span.trace_id for span in otlp.spans} == {CALLER_TRACE}, tree
    (start,) = otlp.named("start ai_lineup")
    assert start.parent_id == CALLER.split("-")[2]
    (resume,) = otlp.named("resume ai_lineup")
    assert resume.parent_id == start.span_id, tree  # the root run's recorded traceparent
    assert resume.links == [OTHER_CALLER.split("-")[2]]
    # The killed run's worker never ended its span: the resume recorded it, with the id every
    # process derives from the run id, so the steps the dead run finished keep their parent.
    runs = {span.attributes["airwave.run.id"]: span for span in otlp.named("run ")}
    assert set(runs) == {first, second}, tree
    assert runs[first].attributes["airwave.run.recorded_by"] == second and runs[first].error
    assert runs[first].span_id == f"{tracing.run_span_id(first):016x}"
    assert runs[first].parent_id == run_span.parent_id == start.span_id
    assert run_span.links == [f"{tracing.run_span_id(first):016x}"]
    steps = otlp.named("step ")
    by_run: dict[str, set[str]] = {first: set(), second: set()}
    for span in steps:
        run_id = span.attributes["airwave.run.id"]
        by_run[run_id].add(span.attributes["airwave.step.key"])
        assert span.parent_id == f"{tracing.run_span_id(run_id):016x}", span
    assert done_before <= by_run[first], (done_before, by_run[first])
    # The resume recorded exactly the steps it ran: nothing for the replayed ones.
    assert by_run[second] == ran_again, (by_run[second], ran_again)
    assert not by_run[second] & done_before
    builds = [s for s in steps if s.attributes["airwave.step.key"].startswith(BUILD)]
    outcomes = {s.attributes["airwave.claim.outcome"] for s in builds}
    assert outcomes <= {"claimed", "took_over", "adopted"}, tree
    # A build the killed run committed but never reported is adopted: it pays the model nothing.
    adopted = {s.span_id for s in builds if s.attributes["airwave.claim.outcome"] == "adopted"}
    assert not [s for s in otlp.named("anthropic.") if s.parent_id in adopted], tree
    assert all(isinstance(s.attributes["airwave.channel.number"], int) for s in builds)
    assert all(s.attributes["airwave.step.attempt"] >= 1 for s in builds)

    # The SDK's own GenAI spans, under their step, with tokens, the cost and the budget.
    step_ids = {s.span_id for s in steps}
    model_calls = otlp.named("anthropic.messages.create")
    # A build killed in flight exported its model calls, never its own span.
    killed_parents = {s.parent_id for s in model_calls} - step_ids
    assert len(killed_parents) <= len(started_before - done_before), tree
    assert [s for s in model_calls if s.parent_id in step_ids], tree
    planner = [s for s in steps if s.attributes["airwave.step.key"] == "plan_lineup"]
    (planned,) = planner  # streamed: the SDK ends its span as it is read; the step has the cost
    assert planned.attributes["airwave.call.cost_usd"] > 0, planned
    assert planned.attributes["airwave.run.budget_usd"] == 5.0, planned
    for call in (
        s for s in model_calls if s.attributes["gen_ai.request.model"] != "claude-opus-4-8"
    ):
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0
        assert call.attributes["gen_ai.usage.output_tokens"] > 0
        assert call.attributes["airwave.call.cost_usd"] > 0
        assert call.attributes["airwave.build.cost_usd"] >= call.attributes["airwave.call.cost_usd"]
        assert call.attributes["airwave.run.budget_usd"] == 5.0
    plex = otlp.named("plex GET")
    assert plex and all("?" not in s.attributes["url.path"] for s in plex)
    assert {s.attributes["http.response.status_code"] for s in plex} == {200}
    commits = otlp.named("commit channel")
    assert {s.parent_id for s in commits} <= step_ids and commits
    # No secret in any byte that left a process.
    sent = b"".join(otlp.bodies)
    assert PLEX_TOKEN.encode() not in sent and API_KEY.encode() not in sent
    assert b"SECRET" not in sent


def test_celery_workers_export_their_steps_into_the_runs_trace(
    traced: dict[str, Any],
    otlp: Receiver,  # noqa: F811
) -> None:
    require_broker(REDIS_URL)
    env = {
        **traced["env"],
        settings.EXECUTOR_ENV: "celery",
        settings.CELERY_BROKER_ENV: REDIS_URL,
        settings.CELERY_QUEUE_ENV: unique_queue(),
    }
    # The workers name themselves, so each span says which process exported it.
    workers = start_workers(
        {**env, "OTEL_SERVICE_NAME": "airwave-worker"},
        traced["tmp"],
        2,
        concurrency=2,
        queue=env[settings.CELERY_QUEUE_ENV],
    )
    try:
        path = lineups.write(traced["tmp"], lineups.genre_lineup(4), "celery.json")
        done = airwave({**env, tracing.TRACEPARENT_ENV: CALLER}, "import", str(path), "--json")
    finally:
        workers.stop()

    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    (run,) = otlp.wait_for("run import_lineup")
    executed = build_keys(traced["instance"], run_id, dg.DagsterEventType.STEP_SUCCESS, "")
    steps = otlp.wait_for("step ", len(executed))
    print(otlp.tree(CALLER_TRACE))  # noqa: T201
    assert {span.trace_id for span in otlp.spans} == {CALLER_TRACE}
    assert run.service == "airwave-test" and run.span_id == f"{tracing.run_span_id(run_id):016x}"
    assert {s.attributes["airwave.step.key"] for s in steps} == executed
    assert all(s.parent_id == run.span_id and s.service == "airwave-worker" for s in steps)
    builds = [s for s in steps if s.attributes["airwave.step.key"].startswith("build_channel[")]
    assert len(builds) == 4 and all(
        s.attributes["airwave.claim.outcome"] == "claimed" for s in builds
    )
    assert b"SECRET" not in b"".join(otlp.bodies)
