"""`airwave approve / reject / approvals show` as subprocesses against real runs of `ai_lineup`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airwave_dagster.settings import API_KEY_ENV, BASE_URL_ENV
from resources import tables as t
from resources.stores.approvals import ApprovalStore
from tests.fakes.scripted_model import ScriptedModel, is_planner, small_plan

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

AIRWAVE = str(Path(sys.executable).parent / "airwave")


def _airwave(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _status(env: dict[str, str], run_id: str) -> str:
    shown = _airwave(env, "runs", "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    status: str = json.loads(shown.stdout)["status"]
    return status


def _ai_names(store) -> set[str]:
    with store.engine.connect() as conn:
        return set(
            conn.execute(
                sa.select(t.channel.c.name).where(t.channel.c.ai_generated.is_(True))
            ).scalars()
        )


def _seed_previous_lineup(store, source_id: str) -> None:
    """A previous AI lineup of the source, as rows (a real one would take minutes to build here)."""
    with store.engine.begin() as conn:
        conn.execute(
            t.channel_package.insert().values(
                id="old-ai-pkg", key="old-ai", name="Old AI", ai_generated=True
            )
        )
        for number, name in ((1001, "Drama TV"), (1002, "Comedy TV"), (1003, "Action TV")):
            conn.execute(
                t.channel.insert().values(
                    id=f"old-{number}",
                    number=number,
                    name=name,
                    media_source_id=source_id,
                    package_id="old-ai-pkg",
                    ai_generated=True,
                )
            )


def _wait_for_interrupt(
    store,
    timeout: float = 600.0,
    waiting: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if waiting is not None and waiting.poll() is not None:
            output = log.read_text(errors="replace")[-3000:] if log else ""
            raise AssertionError(f"the lineup exited ({waiting.returncode}) first:\n{output}")
        with store.engine.connect() as conn:
            root = conn.execute(
                sa.select(t.interrupt.c.root_run_id).order_by(t.interrupt.c.created_at.desc())
            ).scalar()
        if root is not None:
            return ApprovalStore(store.engine).find(root)
        time.sleep(0.5)
    raise AssertionError("no interrupt was recorded")


@pytest.mark.timeout(900)
def test_plan_diff_then_eight_concurrent_approvals_have_one_winner(
    synced, store, stub, cli_env, tmp_path: Path
) -> None:
    env = {**cli_env, API_KEY_ENV: "stub-test-key", BASE_URL_ENV: stub.url}
    _seed_previous_lineup(store, synced)
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Horror")))

    # The user's terminal dies (kill -9) while the lineup waits: nothing holds the gate, so
    # the interrupt row survives and the approval still works.
    log = tmp_path / "lineup.log"
    with log.open("wb") as output:
        waiting = subprocess.Popen(
            [AIRWAVE, "lineup", "--provider", "anthropic", "--wait"],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    interrupt = _wait_for_interrupt(store, waiting=waiting, log=log)
    os.kill(waiting.pid, signal.SIGKILL)
    waiting.wait(timeout=30)
    run_id = interrupt.run_id

    shown = _airwave(env, "approvals", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "removed (1)" in shown.stdout and "Action TV" in shown.stdout
    assert "created (1)" in shown.stdout and "Horror TV" in shown.stdout
    assert "Drama TV" in shown.stdout and "Comedy TV" in shown.stdout
    assert _ai_names(store) == {"Drama TV", "Comedy TV", "Action TV"}
    assert not [r for r in stub.messages_requests() if r.body and not is_planner(r.body)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda _: _airwave(env, "approve", run_id, "--wait"), range(8)))

    codes = sorted(a.returncode for a in answers)
    assert codes == [0] + [4] * 7, [a.stderr for a in answers]
    losers = [a for a in answers if a.returncode == 4]
    assert all("conflict: already approved by " in a.stderr for a in losers)
    winner = next(a for a in answers if a.returncode == 0)
    assert "continuing as run" in winner.stdout and "SUCCESS" in winner.stdout
    assert _ai_names(store) == {"Drama TV", "Comedy TV", "Horror TV"}
    planner = [r for r in stub.messages_requests() if r.body and is_planner(r.body)]
    assert len(planner) == 1, "the approval must replay the plan, never call the planner again"
    resolved = ApprovalStore(store.engine).find(interrupt.root_run_id)
    assert resolved is not None and resolved.status == "approved"
    assert resolved.continuation_run_id is not None
    tree = _airwave(env, "runs", "show", run_id, "--json")
    assert tree.returncode == 0
    assert tree.stdout.count('"parent": "' + run_id + '"') == 1  # one continuation run
    assert json.loads(tree.stdout)["status"] == "SUCCESS"  # answered and continued
    assert _airwave(env, "approvals", "show", run_id).returncode == 4


@pytest.mark.timeout(900)
def test_reject_writes_nothing_and_cancel_closes_the_approval(synced, store, cli_env) -> None:
    _seed_previous_lineup(store, synced)
    before = _ai_names(store)

    stopped = _airwave(
        cli_env, "lineup", "--provider", "offline", "--limit", "2", "--approval", "required",
        "--wait",
    )  # fmt: skip
    assert stopped.returncode == 3, stopped.stderr
    run_id = _wait_for_interrupt(store).run_id
    assert _status(cli_env, run_id) == "SUSPENDED"  # waiting, not failed
    rejected = _airwave(cli_env, "reject", run_id, "--reason", "not tonight")
    assert rejected.returncode == 0, rejected.stderr
    assert _ai_names(store) == before
    assert _status(cli_env, run_id) == "CANCELED"
    late = _airwave(cli_env, "approve", run_id)
    assert late.returncode == 4 and "conflict: already rejected by" in late.stderr

    with store.engine.begin() as conn:
        conn.execute(t.interrupt.delete())
    stopped = _airwave(
        cli_env, "lineup", "--provider", "offline", "--limit", "2", "--approval", "required",
        "--wait",
    )  # fmt: skip
    assert stopped.returncode == 3
    run_id = _wait_for_interrupt(store).run_id
    canceled = _airwave(cli_env, "runs", "cancel", run_id, "--reason", "changed my mind")
    assert canceled.returncode == 0 and "canceled by" in canceled.stdout
    refused = _airwave(cli_env, "approve", run_id)
    assert refused.returncode == 4 and "conflict: already canceled by" in refused.stderr
    assert _status(cli_env, run_id) == "CANCELED"
    assert _ai_names(store) == before


@pytest.mark.timeout(900)
def test_approve_continues_a_lineup_on_the_embedded_emulator(cli_env, store) -> None:
    # No PLEX_URL: the commands start the home's emulator and must hand it to the runs they
    # launch, the continuation included (it once failed with "PLEX_URL is not set").
    env = {k: v for k, v in cli_env.items() if k not in ("PLEX_URL", "PLEX_TOKEN")}
    try:
        stopped = _airwave(
            env, "lineup", "--provider", "offline", "--limit", "1", "--approval", "required",
            "--wait",
        )  # fmt: skip
        assert stopped.returncode == 3, stopped.stderr
        run_id = _wait_for_interrupt(store).run_id
        approved = _airwave(env, "approve", run_id, "--wait")
        assert approved.returncode == 0, approved.stderr
        assert "continuing as run" in approved.stdout and "SUCCESS" in approved.stdout
        assert len(_ai_names(store)) == 1
    finally:
        _airwave(env, "db", "stop")
