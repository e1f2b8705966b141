"""`airwave import` refuses a bad file locally, before Postgres, the emulator or a run exist."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airwave_dagster.cli.console import ExitCode
from bench import hostile_lineups

AIRWAVE = str(Path(sys.executable).parent / "airwave")


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    """No database, no Plex, an empty Dagster home: anything the CLI started would show here."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRWAVE_", "PLEX_", "DAGSTER_"))
    }
    (tmp_path / "dagster_home").mkdir()
    return {
        **env,
        "AIRWAVE_HOME": str(tmp_path / "home"),
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
    }


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (json.dumps({"version": 2, "packages": [], "channels": []}).encode(), "$.version"),
        (b"{not json", "not valid JSON"),
        (hostile_lineups.deep_filter_children(), "at least 1,000 problems"),
    ],
    ids=["wrong-version", "not-json", "400k-bad-filter-nodes"],
)
def test_a_refused_file_answers_fast_with_exit_3_and_starts_nothing(
    bare_env: dict[str, str], tmp_path: Path, content: bytes, words: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [AIRWAVE, "import", str(path), "--wait"],
        env=bare_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    assert done.returncode == ExitCode.INPUT_REFUSED == 3, done.stderr
    assert "bad.json" in done.stderr
    assert words in done.stderr
    assert "input refused" in done.stderr
    assert len(done.stderr) <= 20_000
    # Nothing was started: no private Postgres, no instance files, no run.
    assert not Path(bare_env["AIRWAVE_HOME"]).exists()
    assert list(Path(bare_env["DAGSTER_HOME"]).iterdir()) == []
    # Under a second of work (interpreter start included); wall time on a shared, loaded
    # machine says more about the other processes, so it only gets a loose bound.
    assert cpu < 2.0, cpu
    assert elapsed < 30, elapsed


def test_a_usage_error_keeps_click_exit_code_2(bare_env: dict[str, str]) -> None:
    done = subprocess.run(
        [AIRWAVE, "import"], env=bare_env, capture_output=True, text=True, timeout=60, check=False
    )

    assert done.returncode == 2


def test_a_broken_permissions_file_stops_every_command_with_exit_3(
    bare_env: dict[str, str], tmp_path: Path
) -> None:
    policy = tmp_path / "permissions.yaml"
    policy.write_text("roles:\n  admin: ['*']\nprincipals:\n  alice: [admn]\n")
    done = subprocess.run(
        [AIRWAVE, "runs", "list"],
        env={**bare_env, "AIRWAVE_PERMISSIONS": str(policy)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == ExitCode.INPUT_REFUSED, done.stderr
    assert str(policy) in done.stderr
    assert "principals.alice[0]: unknown role 'admn' (roles: admin)" in done.stderr
    assert not Path(bare_env["AIRWAVE_HOME"]).exists()  # nothing was started
