"""`airwave dev`: the Dagster UI serves the code location and launches runs with typed config."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from airwave_dagster import environment
from tests import lineups

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
STATUS = """
query Status($runId: ID!) { runOrError(runId: $runId) { ... on Run { status } } }
"""
LOCATIONS = """
query { workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename } } } } }
"""


def _graphql(port: int, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["data"]


def _wait(predicate, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def dagster_dev(store, plex_emulator, tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(environment.project_root() / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, "DAGSTER_HOME": str(home), "AIRWAVE_HOME": str(tmp_path / "home")}
    log = (tmp_path / "dev.log").open("wb")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "airwave"), "dev", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_ui_launches_an_import_with_typed_config(dagster_dev: int, store) -> None:
    port = dagster_dev

    def loaded() -> bool:
        entries = _graphql(port, LOCATIONS)["workspaceOrError"]["locationEntries"]
        return any(
            e["name"] == "airwave"
            and e["locationOrLoadError"]["__typename"] == "RepositoryLocation"
            for e in entries
        )

    _wait(loaded, 120, "the airwave code location to load")
    config = {
        "lineup_json": json.dumps(lineups.genre_lineup(2)),
        "lineup_name": "from-the-ui.json",
        "dry_run": True,
    }
    launched = _graphql(
        port,
        LAUNCH,
        {
            "params": {
                "selector": {
                    "repositoryLocationName": "airwave",
                    "repositoryName": "__repository__",
                    "jobName": "import_lineup",
                },
                "runConfigData": {"ops": {"plan_import_lineup": {"config": config}}},
            }
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]

    def finished() -> str | None:
        status = _graphql(port, STATUS, {"runId": run_id})["runOrError"]["status"]
        return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

    assert _wait(finished, 180, "the run to finish") == "SUCCESS"
    report = next(r for r in store.traces(run_id) if r["phase"] == "report")["output"]
    assert report["lineup_name"] == "from-the-ui.json"
    assert report["dry_run"] is True
    assert store.counts()["channels"] == 0
