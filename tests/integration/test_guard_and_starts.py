"""Version guard, idempotent starts and cancel, against a running `airwave dev`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa
from dagster_shared import record

from airwave_dagster import run_tags, settings
from airwave_dagster.cli import launcher
from airwave_dagster.durability.versions import CODE_VERSION_TAG
from ops.lineup_import.ops import OP_VERSION
from resources.io_manager import stored_report
from tests.support import lineups
from tests.support.dagster_dev import AIRWAVE, REEXECUTE, Dev, wait_for
from tests.support.standalone import build_keys, claim_ledger, claims_held

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]


def _failed_runs(dev: Dev, slow_plex: Any) -> tuple[str, str]:
    """Two failed `import_lineup` runs (Plex down at their start): the first recorded as if its
    `build_channel` had been an older version (its job snapshot says `import-v0`), the second
    made by the current code."""
    config = {
        "ops": {
            "plan_import_lineup": {
                "config": {
                    "lineup": {
                        "inline": {"content": json.dumps(lineups.genre_lineup(2)), "name": "g"}
                    }
                }
            }
        }
    }
    slow_plex.configure(fail_all=True)
    run_ids = []
    try:
        with launcher.workspace(dev.instance) as context:
            job = launcher.remote_job(context, "import_lineup")
            location = context.get_code_location(launcher.LOCATION_NAME)
            repository = next(iter(location.get_repositories().values()))
            for old_build_version in ("import-v0", None):
                plan = location.get_execution_plan(
                    job, config, step_keys_to_execute=None, known_state=None, instance=dev.instance
                ).execution_plan_snapshot
                snapshot = job.job_snapshot
                if old_build_version is not None:
                    ops = [
                        record.copy(op, tags={**op.tags, CODE_VERSION_TAG: old_build_version})
                        if op.name == "build_channel"
                        else op
                        for op in snapshot.node_defs_snapshot.op_def_snaps
                    ]
                    snapshot = record.copy(
                        snapshot,
                        node_defs_snapshot=record.copy(
                            snapshot.node_defs_snapshot, op_def_snaps=ops
                        ),
                    )
                    plan = plan._replace(job_snapshot_id=snapshot.snapshot_id)
                run = dev.instance.create_run(
                    job_name="import_lineup",
                    run_id=None,
                    run_config=config,
                    resolved_op_selection=None,
                    step_keys_to_execute=None,
                    op_selection=None,
                    status=None,
                    root_run_id=None,
                    parent_run_id=None,
                    tags={**job.tags, "dagster/max_retries": "0"},
                    job_snapshot=snapshot,
                    execution_plan_snapshot=plan,
                    parent_job_snapshot=None,
                    remote_job_origin=job.get_remote_origin(),
                    job_code_origin=job.get_python_origin(),
                    asset_selection=None,
                    asset_check_selection=None,
                    asset_graph=repository.asset_graph,
                )
                dev.instance.submit_run(run.run_id, context)
                run_ids.append(run.run_id)
            for run_id in run_ids:
                finished = launcher.wait_for_run(dev.instance, run_id)
                assert finished.status == dg.DagsterRunStatus.FAILURE
    finally:
        slow_plex.configure(fail_all=False)
    return run_ids[0], run_ids[1]


def test_resume_is_refused_when_an_op_version_changed_and_allowed_otherwise(
    fresh: Dev, slow_plex: Any
) -> None:
    changed, unchanged = _failed_runs(fresh, slow_plex)

    refused = fresh.airwave("runs", "resume", changed)
    assert refused.returncode == 4  # conflict: the code changed under the run
    message = refused.stderr.replace("\n", " ")
    assert "build_channel" in message and "import-v0" in message and OP_VERSION in message
    assert "start a new run" in message

    graphql = fresh.graphql(REEXECUTE, {"parentRunId": changed})["launchRunReexecution"]
    assert graphql["__typename"] == "PythonError"
    assert "import-v0" in graphql["message"] and "build_channel" in graphql["message"]
    assert len(launcher.run_tree(fresh.instance, changed)) == 1, "no run was created"

    launched = fresh.graphql(REEXECUTE, {"parentRunId": unchanged})["launchRunReexecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    child = launched["run"]["runId"]
    assert launcher.wait_for_run(fresh.instance, child).status == dg.DagsterRunStatus.SUCCESS


def test_concurrent_starts_with_one_key_create_one_run(fresh: Dev, tmp_path: Path) -> None:
    files = [
        lineups.write(tmp_path, lineups.genre_lineup(2, first_number=300), "first.json"),
        lineups.write(tmp_path, lineups.genre_lineup(1, first_number=400), "second.json"),
    ]
    key = "nightly-2026-11-30"
    starts = [
        subprocess.Popen(
            [AIRWAVE, "import", str(path), "--idempotency-key", key],
            env=fresh.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in files
    ]
    outputs = [process.communicate(timeout=280) for process in starts]
    assert all(process.returncode == 0 for process in starts), outputs
    run_ids = {out.split()[-1] for out, _ in outputs}
    assert len(run_ids) == 1, outputs
    (run_id,) = run_ids
    tagged = fresh.instance.get_runs(filters=dg.RunsFilter(tags={run_tags.IDEMPOTENCY_TAG: key}))
    assert [r.run_id for r in tagged] == [run_id]

    forced = fresh.airwave("import", str(files[0]), "--idempotency-key", key, "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.split()[-1] != run_id
    for run in (run_id, forced.stdout.split()[-1]):
        launcher.wait_for_run(fresh.instance, run)


def test_the_derived_key_is_the_content_and_the_request() -> None:
    from airwave_dagster.run_tags import import_key

    content = json.dumps(lineups.genre_lineup(2)).encode()
    key = import_key(content, dry_run=False, select=None)
    assert key == import_key(bytes(content), dry_run=False, select=None)
    assert key != import_key(content, dry_run=True, select=None)
    assert key != import_key(content + b" ", dry_run=False, select=None)
    assert import_key(content, dry_run=False, select=[2, 1]) == import_key(
        content, dry_run=False, select=[1, 2]
    )


def _until_builds_start(dev: Dev, run_id: str) -> None:
    """Until the run's first build step has started."""
    wait_for(
        lambda: any(
            (e.dagster_event and (e.dagster_event.step_key or "").startswith("build_channel["))
            for e in dev.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
        ),
        120,
        "builds to start",
        poll=0.05,
    )


def test_cancel_running_finished_and_canceled_runs(
    fresh: Dev, database_url: str, slow_plex: Any
) -> None:
    run_id = fresh.launch_import(lineups.genre_lineup(8))
    _until_builds_start(fresh, run_id)
    # Builds now wait 5 s per Plex request, so the run is still going when the cancel lands,
    # however long the CLI takes to start on a loaded machine (it finished first otherwise, at
    # load 7-10 with 2 s): the four builds of the second wave each need their listing and one
    # metadata request (the shows come with the items), 10 s at least.
    latency = slow_plex.options.latency_ms
    slow_plex.configure(latency_ms=5000)
    try:
        canceled = fresh.airwave("runs", "cancel", run_id, "--reason", "wrong lineup", "--json")
    finally:
        slow_plex.configure(latency_ms=latency)
    assert canceled.returncode == 0, canceled.stderr
    outcome = json.loads(canceled.stdout)
    assert outcome["status"] == "CANCELED" and outcome["changed"] is True
    run = fresh.instance.get_run_by_id(run_id)
    assert run.tags[run_tags.CANCEL_REASON_TAG] == "wrong lineup"
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        claims = conn.execute(
            sa.text("SELECT count(*) FROM airwave_dagster.channel_claim")
        ).scalar_one()
    engine.dispose()
    assert claims == 0
    again = fresh.airwave("runs", "cancel", run_id, "--json")
    assert json.loads(again.stdout) == {
        "run_id": run_id,
        "status": "CANCELED",
        "changed": False,
        "claims_released": 0,
        "approval_closed": False,
    }
    time.sleep(12)  # two monitoring/retry daemon intervals: a canceled run is never resumed
    assert len(launcher.run_tree(fresh.instance, run_id)) == 1

    done = fresh.launch_import(lineups.genre_lineup(1, first_number=900))
    assert launcher.wait_for_run(fresh.instance, done).status == dg.DagsterRunStatus.SUCCESS
    untouched = fresh.airwave("runs", "cancel", done)
    assert untouched.returncode == 0 and "already finished: SUCCESS" in untouched.stdout
    assert fresh.instance.get_run_by_id(done).status == dg.DagsterRunStatus.SUCCESS


def test_resume_cancel_running_finishes_a_run_still_in_progress_in_one_command(
    fresh: Dev, database_url: str, slow_plex: Any
) -> None:
    """A run still in progress (as one held up by a lost celery task) is resumed by one command:
    `runs resume --cancel-running` cancels it and resumes it; every channel ends built once."""
    lineup = lineups.genre_lineup(6, first_number=940)
    run_id = fresh.launch_import(lineup)
    _until_builds_start(fresh, run_id)
    # Builds wait 5 s per Plex request until the cancel lands, so the run is still in progress
    # when the command reaches it (the builds of the second wave need two requests each, 10 s);
    # the resume then builds at the usual latency.
    latency = slow_plex.options.latency_ms
    slow_plex.configure(latency_ms=5000)
    canceled = threading.Event()

    def restore_once_canceled() -> None:
        try:
            wait_for(
                lambda: fresh.instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.CANCELED,
                300,
                "the cancel",
                poll=0.2,
            )
            canceled.set()
        finally:
            slow_plex.configure(latency_ms=latency)

    watcher = threading.Thread(target=restore_once_canceled, daemon=True)
    watcher.start()
    resumed = fresh.airwave("runs", "resume", run_id, "--cancel-running", "--json", timeout=600)
    watcher.join(timeout=10)
    assert canceled.is_set(), "the run was not canceled"
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "SUCCESS", outcome
    first = fresh.instance.get_run_by_id(run_id)
    assert first.tags[run_tags.CANCEL_REASON_TAG].startswith("canceled to be resumed")
    child = fresh.instance.get_run_by_id(outcome["run_id"])
    assert child.parent_run_id == run_id
    report = stored_report(fresh.instance, outcome["run_id"], database_url)
    assert report is not None
    created = sorted(c["number"] for c in report["channels"] if c["status"] == "created")
    assert created == sorted(c["number"] for c in lineup["channels"])
    # No build the canceled run finished ran again; nothing is left claimed.
    finished = {
        int(key.split("[ch_")[1].rstrip("]"))
        for key in build_keys(fresh.instance, run_id, dg.DagsterEventType.STEP_SUCCESS)
    }
    work = claim_ledger(database_url, [run_id, child.run_id])
    assert not {n for n, count in work.items() if count > 1} & finished, (work, finished)
    assert claims_held(database_url, run_id) == claims_held(database_url, child.run_id) == 0
    again = fresh.airwave("runs", "resume", outcome["run_id"], "--cancel-running")
    assert again.returncode == 4 and "nothing to resume" in again.stderr, again.stderr


def _modules_loaded(importtime_stderr: str) -> set[str]:
    """Module names from `python -X importtime` lines ("import time: self | total | name")."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def test_starts_through_the_webserver_load_no_dagster(fresh: Dev, tmp_path: Path) -> None:
    """With `airwave dev` up, a start and a repeated start answer over GraphQL: neither loads
    Dagster, dagster-graphql, Alembic or SQLAlchemy (that is what makes them answer at once)."""
    path = lineups.write(tmp_path, lineups.genre_lineup(1, first_number=520), "fast.json")
    command = [sys.executable, "-X", "importtime", AIRWAVE, "import", str(path), "--dry-run"]
    answers = [
        subprocess.run(command, env=fresh.env, capture_output=True, text=True, timeout=120)
        for _ in range(2)
    ]
    for answer in answers:
        assert answer.returncode == 0, answer.stderr[-2000:]
        loaded = _modules_loaded(answer.stderr)
        assert "airwave_dagster.cli.starts" in loaded  # the parse sees the CLI's own modules
        heavy = {
            m
            for m in loaded
            if m.split(".")[0] in ("dagster", "dagster_graphql", "alembic", "sqlalchemy")
        }
        assert not heavy, sorted(heavy)[:10]
    first, again = (answer.stdout.split() for answer in answers)
    assert first[:2] == ["started", "run"] and again[:2] == ["existing", "run"], (first, again)
    assert first[-1] == again[-1]
    run = launcher.wait_for_run(fresh.instance, first[-1])
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert run.tags[run_tags.DRY_RUN_TAG] == "true"


def test_a_command_whose_settings_differ_from_the_servers_is_refused(
    fresh: Dev, tmp_path: Path
) -> None:
    """`PLEX_URL=… airwave import --dry-run` with `airwave dev` up resolved every pool against
    the server's emulator without a word (issue 27, item 3): now it is refused, and a command
    with no settings of its own says whose database and Plex its run uses."""
    path = lineups.write(tmp_path, lineups.genre_lineup(1, first_number=530), "elsewhere.json")
    before = len(fresh.instance.get_runs())
    mine = {
        **fresh.env,
        settings.PLEX_URL_ENV: "http://127.0.0.1:9",
        settings.PLEX_TOKEN_ENV: "my-own-plex-token",
    }

    refused = subprocess.run(
        [AIRWAVE, "import", str(path), "--dry-run"],
        env=mine, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert refused.returncode == 3, refused.stderr
    server_plex = fresh.env[settings.PLEX_URL_ENV]
    assert f"PLEX_URL is http://127.0.0.1:9, the server's is {server_plex}" in refused.stderr
    assert f"port {fresh.port}" in refused.stderr
    assert "my-own-plex-token" not in refused.stderr + refused.stdout
    assert len(fresh.instance.get_runs()) == before

    plain = {k: v for k, v in fresh.env.items() if k not in (settings.PLEX_URL_ENV, "PLEX_TOKEN")}
    accepted = subprocess.run(
        [AIRWAVE, "import", str(path), "--dry-run"],
        env=plain, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    assert f"Plex {server_plex} (those of the webserver on port {fresh.port})" in accepted.stderr
    run_id = accepted.stdout.split()[-1]
    assert launcher.wait_for_run(fresh.instance, run_id).status == dg.DagsterRunStatus.SUCCESS
