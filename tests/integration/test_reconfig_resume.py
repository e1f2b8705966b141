"""Resuming a failed import with edited config: accepted where safe, refused where it would lie.

One failed run per test, made cheaply: a failpoint kills every attempt of one channel's build
(`build.claimed@101`), so the plan, the packages and the other builds completed and the run
failed. Then:

- a change to the completed plan's config (`dry_run`) is refused with exit 4, naming the path and
  the op, and no run is created; a value the job's schema rejects is refused with exit 3;
- a lower executor bound (`execution.config.max_concurrent: 1`) is accepted: the resume runs the
  failed build under the new bound (the run worker's log says so), succeeds, and carries the
  changed path in its tags, which `airwave runs show` prints.

The first test goes through the webserver of `airwave dev` (the CLI's path when one runs), the
second through a code server of the test's own (`launcher.CodeServerTarget`, the CLI's path
without one).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster import failpoints, settings
from airwave_dagster.cli import launcher, starts
from airwave_dagster.run_tags import CONFIG_CHANGED_TAG, PLAN_IMPORT_OP
from ops.lineup_import.ops import build_channel
from tests.support import lineups
from tests.support.dagster_dev import Dev
from tests.support.standalone import build_keys

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.plex,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(400),  # each killed attempt waits for its claim to go stale (6 s)
]

KILLED = "build_channel[ch_101]"
LOWER_BOUND = {"execution": {"config": {"max_concurrent": 1}}}
DRY_RUN = {"ops": {PLAN_IMPORT_OP: {"config": {"dry_run": True}}}}
NOT_A_NUMBER = {"execution": {"config": {"max_concurrent": "one"}}}


@pytest.fixture
def failpoint_dir(fresh: Dev) -> Iterator[Path]:
    """The dev server's failpoint directory, disarmed before and after the test."""
    directory = Path(fresh.env[settings.FAILPOINTS_DIR_ENV])
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _failed_import(dev: Dev, failpoint_dir: Path) -> str:
    """A failed import of channels 100-102 whose build of 101 died at every attempt.

    On multiprocess: the failpoint kills the build's step process, so the step fails and the
    run fails after the other builds finished (on threads it would kill the run worker)."""
    policy = build_channel.retry_policy
    attempts = 1 + (policy.max_retries if policy else 0)
    failpoints.arm(failpoint_dir, failpoints.BUILD_CLAIMED, key=101, times=attempts)
    run_id = dev.launch_import(
        lineups.genre_lineup(3, first_number=100),
        tags={"dagster/max_retries": "0"},
        executor="multiprocess",
    )
    run = launcher.wait_for_run(dev.instance, run_id)
    assert run.status == dg.DagsterRunStatus.FAILURE, run.status
    failed = build_keys(dev.instance, run_id, dg.DagsterEventType.STEP_FAILURE)
    assert failed == {KILLED}, failed
    return run_id


def _write(tmp_path: Path, name: str, edit: dict[str, Any]) -> str:
    path = tmp_path / name
    # JSON for one, YAML for the others: `--config` reads both.
    path.write_text(json.dumps(edit) if name.endswith(".json") else _yaml(edit))
    return str(path)


def _yaml(edit: dict[str, Any]) -> str:
    import yaml

    return str(yaml.safe_dump(edit))


def _bound_logged(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The fan-out executor's own words on its bound, from the run's log."""
    return [
        record.user_message
        for record in instance.all_logs(run_id)
        if "steps at once" in (record.user_message or "")
    ]


def test_the_cli_resumes_with_a_lower_bound_and_refuses_a_completed_ops_change(
    fresh: Dev, failpoint_dir: Path, tmp_path: Path
) -> None:
    run_id = _failed_import(fresh, failpoint_dir)
    assert _bound_logged(fresh.instance, run_id) == ["fan-out executor: at most 4 steps at once"]

    refused = fresh.airwave(
        "runs", "resume", run_id, "--config", _write(tmp_path, "d.yaml", DRY_RUN)
    )

    assert refused.returncode == 4, refused.stdout + refused.stderr
    message = " ".join(refused.stderr.split())
    assert f"ops.{PLAN_IMPORT_OP}.config.dry_run: already used by {PLAN_IMPORT_OP}" in message
    assert "Start a new run" in message
    invalid = fresh.airwave(
        "runs", "resume", run_id, "--config", _write(tmp_path, "n.yaml", NOT_A_NUMBER)
    )
    assert invalid.returncode == 3, invalid.stdout + invalid.stderr
    assert "max_concurrent" in invalid.stderr and "invalid" in invalid.stderr
    assert len(launcher.run_tree(fresh.instance, run_id)) == 1, "nothing was started"

    resumed = fresh.airwave(
        "runs",
        "resume",
        run_id,
        "--config",
        _write(tmp_path, "lower.json", LOWER_BOUND),
        "--wait",
        "--json",
    )

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "SUCCESS", outcome
    child = fresh.instance.get_run_by_id(outcome["run_id"])
    assert child.parent_run_id == run_id
    # The edit changes the bound; the parent's choice of executor is kept.
    assert child.run_config["execution"] == {
        "config": {"executor": "multiprocess", "max_concurrent": 1}
    }
    assert child.run_config["ops"] == fresh.instance.get_run_by_id(run_id).run_config["ops"]
    assert child.tags[CONFIG_CHANGED_TAG] == "execution.config.max_concurrent"
    assert build_keys(fresh.instance, child.run_id, dg.DagsterEventType.STEP_START) == {KILLED}
    assert _bound_logged(fresh.instance, child.run_id) == [
        "fan-out executor: at most 1 steps at once"
    ]
    shown = fresh.airwave("runs", "show", child.run_id, "--json")
    assert json.loads(shown.stdout)["config_changed"] == ["execution.config.max_concurrent"]
    text = fresh.airwave("runs", "show", child.run_id)
    assert "config changed from its parent: execution.config.max_concurrent" in text.stdout


def test_a_code_server_resume_takes_the_same_rule(fresh: Dev, failpoint_dir: Path) -> None:
    run_id = _failed_import(fresh, failpoint_dir)

    with launcher.workspace(fresh.instance) as context:
        target = launcher.CodeServerTarget(fresh.instance, context)
        with pytest.raises(starts.LaunchRefused, match=f"already used by {PLAN_IMPORT_OP}"):
            starts.resume(target, run_id, DRY_RUN)
        with pytest.raises(starts.ConfigInvalid, match="max_concurrent"):
            starts.resume(target, run_id, NOT_A_NUMBER)
        assert len(launcher.run_tree(fresh.instance, run_id)) == 1, "nothing was started"

        child = starts.resume(target, run_id, LOWER_BOUND)

    finished = launcher.wait_for_run(fresh.instance, child.run_id)
    assert finished.status == dg.DagsterRunStatus.SUCCESS
    assert finished.tags[CONFIG_CHANGED_TAG] == "execution.config.max_concurrent"
    assert build_keys(fresh.instance, child.run_id, dg.DagsterEventType.STEP_START) == {KILLED}
    assert _bound_logged(fresh.instance, child.run_id) == [
        "fan-out executor: at most 1 steps at once"
    ]
