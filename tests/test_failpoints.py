"""Failpoints: inert unless armed; an armed one kills the process reaching it, as often as armed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from airwave_dagster import failpoints, settings

REACH = (
    "from airwave_dagster import failpoints\n"
    "failpoints.reach(failpoints.BUILD_IN_COMMIT, key=103)\n"
    "print('survived')\n"
)


def _reach(directory: Path | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != settings.FAILPOINTS_DIR_ENV}
    if directory is not None:
        env[settings.FAILPOINTS_DIR_ENV] = str(directory)
    return subprocess.run(
        [sys.executable, "-c", REACH], env=env, capture_output=True, text=True, check=False
    )


def test_unset_or_unarmed_nothing_happens(tmp_path: Path) -> None:
    assert _reach(None).stdout == "survived\n"
    assert _reach(tmp_path / "not-made-yet").stdout == "survived\n"
    failpoints.arm(tmp_path, failpoints.BUILD_IN_COMMIT, key=104)  # another channel
    failpoints.arm(tmp_path, failpoints.BUILD_COMMITTED)  # another point
    assert _reach(tmp_path).stdout == "survived\n"
    assert failpoints.fired(tmp_path) == []


def test_an_armed_point_kills_as_often_as_armed_then_disarms(tmp_path: Path) -> None:
    failpoints.arm(tmp_path, failpoints.BUILD_IN_COMMIT, key=103, times=2)
    outcomes = [_reach(tmp_path) for _ in range(3)]
    assert [o.returncode for o in outcomes] == [-signal.SIGKILL, -signal.SIGKILL, 0]
    assert [o.stdout for o in outcomes] == ["", "", "survived\n"]
    fired = failpoints.fired(tmp_path)
    assert [(name, key) for name, key, _ in fired] == [(failpoints.BUILD_IN_COMMIT, "103")] * 2
    assert len({pid for _, _, pid in fired}) == 2
    assert not (tmp_path / f"{failpoints.BUILD_IN_COMMIT}@103").exists()


def test_an_unkeyed_arming_fires_for_any_key(tmp_path: Path) -> None:
    failpoints.arm(tmp_path, failpoints.BUILD_IN_COMMIT)
    assert _reach(tmp_path).returncode == -signal.SIGKILL
    assert failpoints.fired(tmp_path)[0][:2] == (failpoints.BUILD_IN_COMMIT, "103")


def test_arming_an_unknown_point_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown failpoint 'build\.nowhere'"):
        failpoints.arm(tmp_path, "build.nowhere")
