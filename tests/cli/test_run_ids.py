"""Run ids as the UI shows them (8 characters) work in every command that takes one.

The runs are added straight to the CLI tests' Dagster storage, so no run is executed; each
command answers from the storage (and exits) before it would start a code server.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from click.testing import CliRunner, Result

from airwave_dagster.cli import console, main
from airwave_dagster.cli.ai_lineup import run_lineup
from airwave_dagster.cli.console import ExitCode
from airwave_dagster.cli.lineup_files import run_import
from airwave_dagster.cli.starts import RunInfo
from airwave_dagster.cli.webserver import Webserver, WebserverTarget
from airwave_dagster.data import DEMO_LINEUP
from tests.support.instances import instance_on

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def add_run(cli_dagster_url: str) -> Iterator[object]:
    """Add a finished run with a chosen id to the storage the CLI tests' commands read."""
    import dagster as dg

    with instance_on(cli_dagster_url) as instance:

        def add(run_id: str, status: str = "FAILURE") -> str:
            instance.add_run(
                dg.DagsterRun(
                    job_name="ai_lineup", run_id=run_id, status=dg.DagsterRunStatus(status)
                )
            )
            return run_id

        yield add


def _ids(count: int) -> tuple[str, list[str]]:
    """`count` run ids sharing their first 8 characters (fresh for every test), and that prefix."""
    prefix = uuid.uuid4().hex[:8]
    return prefix, [f"{prefix}-0000-4000-8000-{n:012d}" for n in range(count)]


def _airwave(env: Mapping[str, str], *args: str) -> Result:
    os.environ.clear()
    os.environ.update(env)
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_runs_show_finds_the_run_by_the_prefix_the_ui_shows(
    cli_env, add_run, restored_environ
) -> None:
    prefix, (run_id,) = _ids(1)
    add_run(run_id)

    shown = _airwave(cli_env, "runs", "show", prefix)

    assert shown.exit_code == 0, shown.stderr
    assert f"run {run_id} (ai_lineup): FAILURE" in shown.stdout


def test_an_ambiguous_prefix_lists_the_candidates_and_exits_2(
    cli_env, add_run, restored_environ
) -> None:
    prefix, run_ids = _ids(2)
    for run_id in run_ids:
        add_run(run_id)

    for args in (
        ("runs", "show", prefix),
        ("runs", "cancel", prefix),
        ("runs", "resume", prefix),
        ("runs", "reexecute", "--all", prefix),
        ("approve", prefix),
        ("reject", prefix, "--reason", "no"),
        ("approvals", "show", prefix),
    ):
        answered = _airwave(cli_env, *args)

        assert answered.exit_code == ExitCode.USAGE == 2, (args, answered.stderr)
        assert "ambiguous" in answered.stderr, args
        for run_id in run_ids:
            assert run_id in answered.stderr, args


def test_a_whole_id_is_not_ambiguous_and_an_unknown_prefix_is_no_run(
    cli_env, add_run, restored_environ
) -> None:
    _prefix, run_ids = _ids(2)
    for run_id in run_ids:
        add_run(run_id)

    whole = _airwave(cli_env, "runs", "show", run_ids[1])
    unknown = _airwave(cli_env, "runs", "show", "0" * 7 + "g")

    assert whole.exit_code == 0, whole.stderr
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert "no run 0000000g" in unknown.stderr


def test_cancel_takes_a_prefix(cli_env, add_run, restored_environ) -> None:
    prefix, (run_id,) = _ids(1)
    add_run(run_id, status="SUCCESS")

    canceled = _airwave(cli_env, "runs", "cancel", prefix)

    assert canceled.exit_code == 0, canceled.stderr
    assert f"run {run_id} already finished: SUCCESS" in canceled.stdout


def test_reject_and_approvals_show_take_a_prefix(
    cli_env, add_run, stores, restored_environ
) -> None:
    prefix, (run_id,) = _ids(1)
    add_run(run_id)
    stores.approvals.open_interrupt(
        root_run_id=run_id, run_id=run_id, gate_id="plan", payload={}, expires_at=None
    )

    shown = _airwave(cli_env, "approvals", "show", prefix)
    rejected = _airwave(cli_env, "reject", prefix, "--reason", "not this one")

    assert shown.exit_code == 0, shown.stderr
    assert f"of run tree {run_id}: open" in shown.stdout
    assert rejected.exit_code == 0, rejected.stderr
    assert "rejected" in rejected.stdout
    assert stores.approvals.find(run_id).status == "rejected"


@dataclass(frozen=True)
class _TakingWebserver(Webserver):
    """A webserver of this home that takes every submission (no HTTP, nothing runs)."""

    runs: dict[str, RunInfo] = field(default_factory=dict)

    def submit(self, job_name: str, run_config: Mapping[str, Any], tags: Mapping[str, str]) -> str:
        run_id = str(uuid.uuid4())
        self.runs[run_id] = RunInfo(run_id=run_id, status="QUEUED", job_name=job_name)
        return run_id

    def run(self, run_id: str) -> RunInfo | None:
        return self.runs.get(run_id)

    def tagged(self, key: str, value: str) -> RunInfo | None:
        return None

    def group(self, run_id: str) -> list[RunInfo]:
        return [self.runs[run_id]] if run_id in self.runs else []


def test_import_and_lineup_print_the_run_page_of_the_webserver_that_took_them(
    clean_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    server = _TakingWebserver(port=3456)
    target = WebserverTarget(server)

    imported = run_import(
        target, DEMO_LINEUP, dry_run=True, select=None, wait=False, as_json=False, force=True
    )
    built = run_lineup(target, provider="offline", wait=False)

    assert imported == built == 0
    err = capsys.readouterr().err
    assert len(server.runs) == 2
    for run_id in server.runs:
        assert f"http://127.0.0.1:3456/runs/{run_id}" in err


def test_without_a_webserver_the_run_page_is_make_devs() -> None:
    assert console.run_page("83ed262d-x") == "http://127.0.0.1:3000/runs/83ed262d-x"
