"""A real `airwave dev` (webserver, daemon, code server) over the test database.

One server is shared by every test that asks for the `dev` or `fresh` fixture (registered in
`tests/conftest.py`): the UI test, the crash matrix, the version guard, cancel and the sensor.

Runs are launched through GraphQL exactly as the UI launches them, so they execute in the code
server with the project's `dagster.yaml`: the complete-resume instance, the guarded run queue,
run monitoring and automatic run retries are the production ones.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airwave_dagster import settings
from tests.support.homes import user_env
from tests.support.ports import free_port
from tests.support.schemas import empty_project_tables

AIRWAVE = str(Path(sys.executable).parent / "airwave")
STALE_SECONDS = "6"

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
REEXECUTE = """
mutation Reexecute($parentRunId: String!) {
  launchRunReexecution(reexecutionParams: {parentRunId: $parentRunId, strategy: FROM_FAILURE}) {
    __typename
    ... on LaunchRunSuccess { run { runId stepKeysToExecute } }
    ... on PythonError { message }
  }
}
"""
LOCATIONS = """
query { workspaceOrError { ... on Workspace { locationEntries { name
  locationOrLoadError { __typename } } } } }
"""
AUTOMATION = """
query { repositoryOrError(repositorySelector: {repositoryLocationName: "airwave",
  repositoryName: "__repository__"}) { ... on Repository {
    schedules { name id } sensors { name id } } } }
"""
STOP_SCHEDULE = """
mutation Stop($id: String) { stopRunningSchedule(id: $id) { __typename } }
"""
STOP_SENSOR = """
mutation Stop($id: String) { stopSensor(id: $id) { __typename } }
"""
KEEP_RUNNING = {"lineup_upload_sensor"}
"""Automation left on in the shared server; the rest would write to the database mid-test."""
RELOAD = """
mutation { reloadRepositoryLocation(repositoryLocationName: "airwave") { __typename } }
"""


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, poll: float = 0.2) -> Any:
    """Poll `predicate` until it returns something truthy; fail naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class Dev:
    """A running `airwave dev` and what a test needs to drive it."""

    port: int
    home: Path
    env: dict[str, str]
    workdir: Path
    instance: Any

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as error:  # errors come back as 500 with a JSON payload
            payload = json.loads(error.read())
        if "data" not in payload or payload["data"] is None:
            raise AssertionError(f"GraphQL error: {payload}")
        return payload["data"]

    def launch_run(
        self,
        job: str,
        run_config: dict[str, Any],
        *,
        tags: dict[str, str] | None = None,
        executor: str | None = None,
    ) -> str:
        """Launch a run the way the UI's launchpad does; returns its id.

        `executor` sets the run's `execution.config.executor` (unset: the server's default).
        """
        if executor is not None:
            run_config = {**run_config, "execution": {"config": {"executor": executor}}}
        launched = self.graphql(
            LAUNCH,
            {
                "params": {
                    "selector": {
                        "repositoryLocationName": "airwave",
                        "repositoryName": "__repository__",
                        "jobName": job,
                    },
                    "runConfigData": run_config,
                    "executionMetadata": {
                        "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]
                    },
                }
            },
        )["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        return str(launched["run"]["runId"])

    def launch_import(
        self,
        lineup: dict[str, Any],
        *,
        tags: dict[str, str] | None = None,
        executor: str | None = None,
    ) -> str:
        """Launch `import_lineup` of `lineup` (inline) with `tags` (and `executor`)."""
        config = {"lineup": {"inline": {"content": json.dumps(lineup), "name": "crash.json"}}}
        return self.launch_run(
            "import_lineup",
            {"ops": {"plan_import_lineup": {"config": config}}},
            tags=tags,
            executor=executor,
        )

    def airwave(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [AIRWAVE, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="session")
def slow_plex() -> Iterator[Any]:
    """A small library behind 30 ms per request, so builds take long enough to crash mid-way."""
    from airwave_dagster.emulators.plex import start_emulator

    with start_emulator(items=600, seed=11, latency_ms=30) as handle:
        yield handle


@contextmanager
def serving(
    env: dict[str, str], home: Path, workdir: Path, *, load_seconds: float
) -> Iterator[Dev]:
    """`airwave dev` of `home` with `env`, on a free port, until the block ends.

    Yields once the airwave code location has loaded; stops the server with SIGTERM (SIGKILL
    after 30 s). The instance shared with the test reads the storage URL `env` names.
    """
    import dagster as dg

    port = free_port()
    log = (workdir / "dev.log").open("wb")
    process = subprocess.Popen(
        [AIRWAVE, "dev", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    previous = os.environ.get(settings.DAGSTER_PG_URL_ENV)
    if settings.DAGSTER_PG_URL_ENV in env:  # the instance reads it when it is built
        os.environ[settings.DAGSTER_PG_URL_ENV] = env[settings.DAGSTER_PG_URL_ENV]
    try:
        instance = dg.DagsterInstance.from_config(str(home))
    finally:
        if previous is not None:
            os.environ[settings.DAGSTER_PG_URL_ENV] = previous
    running = Dev(port=port, home=home, env=env, workdir=workdir, instance=instance)

    def loaded() -> bool:
        entries = running.graphql(LOCATIONS)["workspaceOrError"]["locationEntries"]
        return any(
            e["name"] == "airwave"
            and e["locationOrLoadError"]["__typename"] == "RepositoryLocation"
            for e in entries
        )

    try:
        wait_for(loaded, load_seconds, "the airwave code location to load", poll=0.5)
        yield running
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        instance.dispose()


@pytest.fixture(scope="session")
def dev(
    database_url: str, slow_plex: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dev]:
    """`airwave dev` on a free port, its instance shared with the test process."""

    workdir = tmp_path_factory.mktemp("dev")
    env = user_env(
        workdir,
        **{
            settings.PLEX_URL_ENV: slow_plex.url,
            settings.PLEX_TOKEN_ENV: slow_plex.token,
            "AIRWAVE_CLAIM_STALE_SECONDS": STALE_SECONDS,
            "AIRWAVE_INBOX": str(workdir / "inbox"),
            # Armed only by tests/integration/test_kill_points.py; while empty, nothing fires.
            settings.FAILPOINTS_DIR_ENV: str(workdir / "failpoints"),
        },
    )
    with serving(env, Path(env["DAGSTER_HOME"]), workdir, load_seconds=180) as running:
        _pause_background_automation(running)
        yield running


def _pause_background_automation(dev: Dev) -> None:
    """Stop the maintenance schedules and library sensors for this test server.

    They run by default in production; in a shared test server they would fire on their own
    clock and change rows under other tests. Their own tests run them explicitly.
    """
    repository = dev.graphql(AUTOMATION)["repositoryOrError"]
    for schedule in repository.get("schedules", []):
        if schedule["name"] not in KEEP_RUNNING:
            stopped = dev.graphql(STOP_SCHEDULE, {"id": schedule["id"]})["stopRunningSchedule"]
            assert stopped["__typename"] == "ScheduleStateResult", stopped
    for sensor in repository.get("sensors", []):
        if sensor["name"] not in KEEP_RUNNING:
            stopped = dev.graphql(STOP_SENSOR, {"id": sensor["id"]})["stopSensor"]
            assert stopped["__typename"] == "StopSensorMutationResult", stopped


@pytest.fixture
def fresh(dev: Dev, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Dev:
    """The running dev server over emptied application tables, its environment exported.

    Code servers the test process starts itself (through `airwave_dagster.cli.launcher`) then see
    the same instance, Plex and settings as the dev server.
    """

    for name in (
        "DAGSTER_HOME",
        "AIRWAVE_HOME",
        settings.PLEX_URL_ENV,
        settings.PLEX_TOKEN_ENV,
        "AIRWAVE_CLAIM_STALE_SECONDS",
        "AIRWAVE_INBOX",
    ):
        monkeypatch.setenv(name, dev.env[name])
    _settle(dev)
    empty_project_tables(database_url)
    return dev


def _settle(dev: Dev, *, timeout: float = 120.0) -> None:
    """End every run an earlier test left queued or running on the shared server.

    The server outlives each test: a run still building (or an automatic retry the daemon queues
    for a failed one) would otherwise write channels after this test emptied the tables.
    """
    import dagster as dg

    from airwave_dagster.cli import launcher

    unfinished = dg.RunsFilter(
        statuses=[
            dg.DagsterRunStatus.QUEUED,
            dg.DagsterRunStatus.NOT_STARTED,
            dg.DagsterRunStatus.STARTING,
            dg.DagsterRunStatus.STARTED,
            dg.DagsterRunStatus.CANCELING,
        ]
    )
    deadline = time.monotonic() + timeout
    while runs := dev.instance.get_runs(filters=unfinished):
        for run in runs:
            if run.status != dg.DagsterRunStatus.CANCELING:
                launcher.cancel(dev.instance, run.run_id, "left running by an earlier test")
        if time.monotonic() > deadline:
            raise AssertionError(f"runs of earlier tests did not end: {[r.run_id for r in runs]}")
        time.sleep(1.0)  # a canceled run's automatic retry, if any, is queued by then
