"""The crash matrix at exact points inside a channel build, for both jobs and both executors.

Failpoints (`airwave_dagster/failpoints.py`) SIGKILL the process that reaches them: right after
the number is claimed, after the work but before the commit, inside the commit transaction, and
after the commit but before the step stored its output.

On multiprocess that process is the build's step process. A point armed for as many attempts as
the build's retry policy allows kills every attempt of that channel, so its step fails and the
run fails; `airwave runs resume` (or the UI's re-execute from failure, the same complete resume)
then finishes it. One run carries one kill point per channel, beside channels nothing touches, so
each point's outcome is read off its own channel.

On threads (the default) it is the run worker, with every build in flight: each point ends one
run, and re-executions from failure follow until one succeeds. Each killed run is judged on the
channel whose point killed it, and builds it abandoned in flight may repeat their work once per
run that abandoned them, never a committed one.

Every case asserts: each planned channel exists once, enabled, unclaimed, with its definitions and
its first schedule window; a kill inside the commit transaction left nothing of it behind; work
repeated only for the attempts that were killed before they committed, and (AI) no model call
repeated for a build that had committed.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster import failpoints, settings
from airwave_dagster.cli import launcher
from ops.ai_lineup.build_ops import build_ai_channel
from ops.lineup_import.ops import build_channel
from resources.io_manager import stored_report
from tests.fakes.scripted_model import ScriptedModel, calls_by_channel, is_planner, small_plan
from tests.support import lineups
from tests.support.ai import lineup_config
from tests.support.dagster_dev import REEXECUTE, Dev, wait_for
from tests.support.homes import query
from tests.support.standalone import build_keys, channel_number, claim_ledger

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.plex,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(600),  # each killed attempt waits for its claim to go stale (6 s)
]

LOG = logging.getLogger(__name__)
NO_AUTO_RESUME = {"dagster/max_retries": "0"}
"""The daemon never resumes a run failed by its steps; this keeps it from resuming these too."""


def _attempts(op: dg.OpDefinition) -> int:
    policy = op.retry_policy
    return 1 + (policy.max_retries if policy else 0)


@pytest.fixture
def failpoint_dir(fresh: Dev) -> Iterator[Path]:
    """The dev server's failpoint directory, disarmed before and after the test."""
    directory = Path(fresh.env[settings.FAILPOINTS_DIR_ENV])
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _arm(directory: Path, kills: dict[int, tuple[str, int]]) -> None:
    for number, (point, times) in kills.items():
        failpoints.arm(directory, point, key=number, times=times)


def _assert_fired(directory: Path, kills: dict[int, tuple[str, int]], run_worker: int) -> None:
    """Each point fired exactly as armed, in step processes (never the run worker)."""
    fired = failpoints.fired(directory)
    assert Counter((name, int(key)) for name, key, _ in fired) == Counter(
        {(point, number): times for number, (point, times) in kills.items()}
    ), fired
    pids = [pid for _, _, pid in fired]
    assert len(set(pids)) == len(pids), "every firing killed a different process"
    assert run_worker not in pids
    assert not [p for p in directory.iterdir() if "@" in p.name], "charges left unfired"


def _channels(database_url: str) -> dict[int, Any]:
    """Each channel row with its definition and schedule counts, by number."""
    rows = query(
        database_url,
        "SELECT c.number, c.enabled, k.run_id AS claim_run_id, "
        "(SELECT count(*) FROM public.channel_definition d "
        ' WHERE d."channelId" = c.id) AS definitions, '
        "(SELECT count(*) FROM public.schedule_item s "
        ' WHERE s."channelId" = c.id) AS slots '
        "FROM public.channel c "
        "LEFT JOIN airwave_dagster.channel_claim k ON k.channel_id = c.id ORDER BY c.number",
    )
    return {row.number: row for row in rows}


def _run_worker(dev: Dev, run_id: str) -> int:
    from airwave_dagster.durability.run_launcher import worker_pid

    pid = worker_pid(dev.instance, run_id)
    assert pid is not None
    return int(pid)


def _resume(dev: Dev, run_id: str) -> dict[str, Any]:
    resumed = dev.airwave("runs", "resume", run_id, "--wait", "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "SUCCESS", outcome
    return dict(outcome)


def _assert_left_by_the_kills(rows: dict[int, Any], kills: dict[int, tuple[str, int]]) -> None:
    """Before the resume: what each killed build left in the database."""
    for number, (point, _) in kills.items():
        row = rows.get(number)
        if point == failpoints.BUILD_COMMITTED:
            # Committed before the kill: complete; the retry adopted it.
            assert row is not None and row.enabled and row.claim_run_id is None, row
            assert row.definitions >= 1 and row.slots > 0, row
            continue
        # Killed before its commit took effect: the dead attempt's claim, nothing else. Inside
        # the transaction, the definitions, schedule and enabling died with the connection.
        assert row is not None and not row.enabled and row.claim_run_id is not None, (point, row)
        assert row.definitions == 0 and row.slots == 0, (point, row)


def _assert_complete(rows: dict[int, Any], planned: list[int]) -> None:
    assert sorted(rows) == planned, "every planned channel exactly once"
    for number, row in rows.items():
        assert row.enabled and row.claim_run_id is None, row
        assert row.definitions >= 1, f"channel {number} has no definitions"
        assert row.slots > 0, f"channel {number} has no schedule"


def test_import_killed_at_each_point_of_a_build_then_resumed(
    fresh: Dev, failpoint_dir: Path, database_url: str
) -> None:
    attempts = _attempts(build_channel)
    lineup = lineups.genre_lineup(6, first_number=100)
    planned = sorted(c["number"] for c in lineup["channels"])
    kills = {
        101: (failpoints.BUILD_CLAIMED, attempts),
        102: (failpoints.BUILD_BEFORE_COMMIT, attempts),
        103: (failpoints.BUILD_IN_COMMIT, attempts),
        104: (failpoints.BUILD_COMMITTED, 1),
    }
    _arm(failpoint_dir, kills)

    run_id = fresh.launch_import(lineup, tags=NO_AUTO_RESUME, executor="multiprocess")
    first = launcher.wait_for_run(fresh.instance, run_id)

    assert first.status == dg.DagsterRunStatus.FAILURE, first.status
    failed = build_keys(fresh.instance, run_id, dg.DagsterEventType.STEP_FAILURE, "build_channel[")
    assert failed == {"build_channel[ch_101]", "build_channel[ch_102]", "build_channel[ch_103]"}
    _assert_fired(failpoint_dir, kills, _run_worker(fresh, run_id))
    _assert_left_by_the_kills(_channels(database_url), kills)

    resumed = _resume(fresh, run_id)

    child = resumed["run_id"]
    # The resume ran the three failed builds; the finished ones were replayed, not executed.
    assert (
        build_keys(fresh.instance, child, dg.DagsterEventType.STEP_START, "build_channel[")
        == failed
    )
    rows = _channels(database_url)
    _assert_complete(rows, planned)
    work = claim_ledger(database_url, [run_id, child])
    expected = {number: 1 for number in planned}
    for number, (point, times) in kills.items():
        if point != failpoints.BUILD_COMMITTED:
            expected[number] = times + 1  # each killed attempt had claimed; the resume built it
    assert dict(work) == expected, work
    report = stored_report(fresh.instance, run_id, database_url)
    assert report is not None
    by_number = {c["number"]: c for c in report["channels"]}
    assert sorted(by_number) == planned
    assert all(c["status"] == "created" for c in by_number.values()), by_number
    assert "adopted" in (by_number[104]["reason"] or ""), by_number[104]
    LOG.warning(
        "kill points (import): %s; runs 2; channels expected %d present %d; work per channel %s; "
        "leftover claims %d",
        {f"{p}@{n}": t for n, (p, t) in kills.items()},
        len(planned),
        len(rows),
        dict(work),
        sum(1 for row in rows.values() if row.claim_run_id is not None),
    )


def test_import_on_threads_killed_at_each_point_then_re_executed_until_done(
    fresh: Dev, failpoint_dir: Path, database_url: str
) -> None:
    lineup = lineups.genre_lineup(6, first_number=100)
    planned = sorted(c["number"] for c in lineup["channels"])
    kills = {
        101: (failpoints.BUILD_CLAIMED, 1),
        102: (failpoints.BUILD_BEFORE_COMMIT, 1),
        103: (failpoints.BUILD_IN_COMMIT, 1),
        104: (failpoints.BUILD_COMMITTED, 1),
    }
    _arm(failpoint_dir, kills)

    runs = [fresh.launch_import(lineup, tags=NO_AUTO_RESUME, executor="threads")]
    abandoned: Counter[int] = Counter()
    while True:
        final = launcher.wait_for_run(fresh.instance, runs[-1])
        if final.status == dg.DagsterRunStatus.SUCCESS:
            break
        assert final.status == dg.DagsterRunStatus.FAILURE, final.status
        fired = failpoints.fired(failpoint_dir)
        assert len(fired) == len(runs), f"run {len(runs)} ended without its own kill: {fired}"
        point, key, pid = fired[-1]
        # The point killed this run's worker (the builds are its threads).
        assert int(pid) == _run_worker(fresh, runs[-1]), (fired, runs)
        _assert_left_by_the_kills(_channels(database_url), {int(key): (point, 1)})
        started = build_keys(fresh.instance, runs[-1], dg.DagsterEventType.STEP_START)
        done = build_keys(fresh.instance, runs[-1], dg.DagsterEventType.STEP_SUCCESS)
        abandoned.update(channel_number(key) for key in started - done)
        assert len(runs) <= len(kills), f"more failed runs than kill points: {runs}"
        launched = fresh.graphql(REEXECUTE, {"parentRunId": runs[-1]})["launchRunReexecution"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        runs.append(str(launched["run"]["runId"]))

    assert len(runs) == len(kills) + 1, runs
    assert Counter((name, int(key)) for name, key, _ in failpoints.fired(failpoint_dir)) == Counter(
        {(point, number): 1 for number, (point, _) in kills.items()}
    )
    assert not [p for p in failpoint_dir.iterdir() if "@" in p.name], "charges left unfired"
    rows = _channels(database_url)
    _assert_complete(rows, planned)
    work = claim_ledger(database_url, runs)
    assert sorted(work) == planned, work
    for number in planned:
        # Work repeats only for a build a killed run abandoned before it committed. Channel 104
        # committed, then its own point killed the worker: the next run adopted it, no new claim.
        own_kill_committed = 1 if kills.get(number, ("",))[0] == failpoints.BUILD_COMMITTED else 0
        bound = 1 + abandoned[number] - own_kill_committed
        assert 1 <= work[number] <= bound, (number, dict(work), dict(abandoned))
    for number in (101, 102, 103):
        # Killed before its commit took effect: the killed attempt and the one that built it.
        assert work[number] >= 2, (number, dict(work))
    report = stored_report(fresh.instance, runs[-1], database_url)
    assert report is not None
    by_number = {c["number"]: c for c in report["channels"]}
    assert sorted(by_number) == planned
    assert all(c["status"] == "created" for c in by_number.values()), by_number
    LOG.warning(
        "kill points (import, threads): %s; runs %d; channels expected %d present %d; work per "
        "channel %s; abandoned in flight %s; leftover claims %d",
        {f"{p}@{n}": t for n, (p, t) in kills.items()},
        len(runs),
        len(planned),
        len(rows),
        dict(work),
        dict(abandoned),
        sum(1 for row in rows.values() if row.claim_run_id is not None),
    )


AI_GENRES = ("Drama", "Comedy", "Action", "Horror", "Thriller")
AI_CHANNELS = {1001: "Drama TV", 1002: "Comedy TV", 1003: "Action TV", 1101: "Horror TV"}
AI_CHANNELS[1102] = "Thriller TV"
"""How the job numbers small_plan(AI_GENRES): package Moods from 1001, package Thrills from 1101.
The job syncs the dev server's Plex library itself (the tables are empty)."""


def test_ai_lineup_killed_at_each_point_of_a_build_then_resumed(
    fresh: Dev, failpoint_dir: Path, stub: Any, database_url: str
) -> None:
    attempts = _attempts(build_ai_channel)
    stub.responder = ScriptedModel(small_plan(AI_GENRES))
    kills = {
        1001: (failpoints.BUILD_CLAIMED, attempts),
        1002: (failpoints.BUILD_BEFORE_COMMIT, attempts),
        1003: (failpoints.BUILD_IN_COMMIT, attempts),
        1101: (failpoints.BUILD_COMMITTED, 1),
    }
    names = AI_CHANNELS
    untouched = names[1102]
    _arm(failpoint_dir, kills)

    run_id = fresh.launch_run(
        "ai_lineup",
        lineup_config(stub, provider="anthropic"),
        tags=NO_AUTO_RESUME,
        executor="multiprocess",
    )
    first = launcher.wait_for_run(fresh.instance, run_id)

    assert first.status == dg.DagsterRunStatus.FAILURE, first.status
    failed = build_keys(
        fresh.instance, run_id, dg.DagsterEventType.STEP_FAILURE, "build_ai_channel["
    )
    assert failed == {f"build_ai_channel[ch_{n}]" for n in (1001, 1002, 1003)}, failed
    _assert_fired(failpoint_dir, kills, _run_worker(fresh, run_id))
    _assert_left_by_the_kills(_channels(database_url), kills)
    before = calls_by_channel(stub)
    one_build = before[untouched]
    assert one_build >= 2, before  # the scripted worker previews, then commits
    # Killed right after its claim: no model call was made for the channel.
    assert before[names[1001]] == 0, before
    # Killed after the agent's calls (before or inside the commit): every attempt paid.
    assert before[names[1002]] == attempts * one_build, before
    assert before[names[1003]] == attempts * one_build, before
    # Committed, then killed: the retry adopted the channel without calling the model.
    assert before[names[1101]] == one_build, before
    stub.reset_requests()

    resumed = _resume(fresh, run_id)

    after = calls_by_channel(stub)
    assert not [r for r in stub.logical_calls() if r.body and is_planner(r.body)], "re-planned"
    # Only the three builds that never committed called the model again, once each.
    assert after == Counter({names[n]: one_build for n in (1001, 1002, 1003)}), after
    rows = _channels(database_url)
    _assert_complete(rows, sorted(AI_CHANNELS))
    child = resumed["run_id"]
    assert (
        build_keys(fresh.instance, child, dg.DagsterEventType.STEP_START, "build_ai_channel[")
        == failed
    )
    LOG.warning(
        "kill points (ai_lineup): %s; runs 2; channels expected 5 present %d; model calls per "
        "channel before the resume %s, in the resume %s (one build = %d calls); duplicate model "
        "calls of committed builds 0; leftover claims %d",
        {f"{p}@{n}": t for n, (p, t) in kills.items()},
        len(rows),
        dict(before),
        dict(after),
        one_build,
        sum(1 for row in rows.values() if row.claim_run_id is not None),
    )


def test_ai_lineup_run_worker_killed_mid_fan_out_pays_no_finished_build_twice(
    fresh: Dev, stub: Any, database_url: str
) -> None:
    import os
    import signal

    stub.responder = ScriptedModel(small_plan(AI_GENRES))
    stub.latency = 0.4  # per model call: builds stay in flight long enough to be caught there
    run_id = fresh.launch_run("ai_lineup", lineup_config(stub, provider="anthropic"))
    prefix = "build_ai_channel["

    def builds_in_flight() -> bool:
        done = build_keys(fresh.instance, run_id, dg.DagsterEventType.STEP_SUCCESS, prefix)
        started = build_keys(fresh.instance, run_id, dg.DagsterEventType.STEP_START, prefix)
        return len(done) >= 1 and bool(started - done)

    wait_for(builds_in_flight, 240, "a build done and more in flight", poll=0.05)
    worker = _run_worker(fresh, run_id)
    os.kill(worker, signal.SIGKILL)
    done = build_keys(fresh.instance, run_id, dg.DagsterEventType.STEP_SUCCESS, prefix)
    paid = calls_by_channel(stub)
    stub.reset_requests()

    # The daemon sees the dead worker, marks the run failed and resumes it (run retries).
    final = launcher.follow(fresh.instance, run_id)

    assert final.status == dg.DagsterRunStatus.SUCCESS, final.status
    tree = launcher.run_tree(fresh.instance, run_id)
    assert len(tree) >= 2, "the run was resumed"
    finished = {AI_CHANNELS[channel_number(key)] for key in done}
    after = calls_by_channel(stub)
    # Builds that had finished before the kill: paid once, never called again.
    assert not finished & set(after), (finished, after)
    one_build = {paid[name] for name in finished}
    assert len(one_build) == 1 and one_build.pop() >= 2, paid
    rows = _channels(database_url)
    _assert_complete(rows, sorted(AI_CHANNELS))
    LOG.warning(
        "run worker SIGKILL (ai_lineup): runs %d; channels expected 5 present %d; finished at "
        "the kill %s; model calls before the kill %s, after %s; duplicate model calls of "
        "finished builds 0; leftover claims %d",
        len(tree),
        len(rows),
        sorted(finished),
        dict(paid),
        dict(after),
        sum(1 for row in rows.values() if row.claim_run_id is not None),
    )
