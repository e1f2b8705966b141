"""`airwave serve`: three supervised processes, a restart after a crash, a clean stop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from airwave_dagster.cli import serve, webserver
from tests.support import lineups
from tests.support.dagster_dev import wait_for
from tests.support.schemas import fresh_schema
from tests.support.served import AIRWAVE, Served, serve_env, serving_airwave

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

RUN_STATUS = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"


def _run_import(served: Served, channels: int) -> str:
    """An import launched through the served webserver, once it succeeded."""
    run_id = served.dev.launch_import(lineups.genre_lineup(channels))

    def finished() -> str | None:
        status = served.dev.graphql(RUN_STATUS, {"id": run_id})["runOrError"].get("status")
        return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

    assert wait_for(finished, 240, f"run {run_id} to finish", poll=1) == "SUCCESS"
    return run_id


@pytest.fixture
def plex() -> Iterator[Any]:
    from airwave_dagster.emulators.plex import start_emulator

    with start_emulator(items=400, seed=11) as handle:
        yield handle


SERVE_SCHEMA = "dagster_serve"


@pytest.fixture
def served(clean_db: str, plex: Any, tmp_path: Path) -> Iterator[Served]:
    fresh_schema(clean_db, SERVE_SCHEMA)
    env = serve_env(clean_db, SERVE_SCHEMA, plex, tmp_path / "home")
    with serving_airwave(env, tmp_path) as running:
        yield running


# Two real runs on a shared 2-core machine, plus three Dagster processes starting twice.
@pytest.mark.timeout(900)
def test_serve_restarts_a_dead_code_server_and_stops_everything_on_sigterm(
    served: Served, tmp_path: Path
) -> None:
    wait_for(served.ready_lines, 300, "the ready: line", poll=0.5)
    assert "Dagster UI on http://127.0.0.1:" in served.ready_lines()[0]
    roles = {role: served.role_process(role) for role in serve.ROLES}
    assert all(roles.values()), roles
    # Every log named in the module docstring exists under the home.
    for role in serve.ROLES:
        assert (served.dev.home / "logs" / f"{role}.log").exists()
    # The daemon is the project's: its run queue listens for runs to take (docs/deploy.md).
    daemon_log = served.dev.home / "logs" / "daemon.log"
    wait_for(lambda: "wake-ups on: listening" in daemon_log.read_text(), 60, "the daemon to listen")

    # Ready, it announces itself: the CLI submits over its GraphQL API, starting no code server
    # of its own, and the run its daemon dequeues succeeds.
    lineup = tmp_path / "two.json"
    lineup.write_text(json.dumps(lineups.genre_lineup(2)))
    imported = subprocess.run(
        [AIRWAVE, "import", str(lineup), "--wait"],
        env=served.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert imported.returncode == 0, imported.stderr
    assert f"(those of the webserver on port {served.dev.port})" in imported.stderr
    assert "SUCCESS" in imported.stdout
    announcement = served.dev.home / "dagster_home" / webserver.ANNOUNCEMENT
    assert json.loads(announcement.read_text())["pid"] == served.process.pid

    old = roles["code-server"]
    assert old is not None
    old.kill()

    def replaced() -> psutil.Process | None:
        now = served.role_process("code-server")
        return now if now is not None and now.pid != old.pid else None

    wait_for(replaced, 60, "a new code server process")
    stderr = tmp_path / "serve.stderr"
    # The supervisor says so once the new process started, an instant after it became visible.
    wait_for(lambda: "restarted code-server" in stderr.read_text(), 30, "the restart line")
    # The supervisor has the webserver reload the location from the new server; no test help.
    # Until that reload answered, the webserver may still list the location it had: a launch in
    # between can meet the workspace mid-swap.
    wait_for(lambda: "reloaded airwave in the webserver" in stderr.read_text(), 180, "the reload")
    base = f"http://127.0.0.1:{served.dev.port}"
    wait_for(lambda: serve.location_loaded(base), 180, "the location to load again", poll=1)
    _run_import(served, 3)

    everything = psutil.Process(served.process.pid).children(recursive=True)
    assert len(everything) >= 3
    os.kill(served.process.pid, signal.SIGTERM)
    assert served.process.wait(timeout=90) == 0
    _gone, alive = psutil.wait_procs(everything, timeout=30)
    assert not alive, [p.pid for p in alive]
    assert "stopped code-server, webserver, daemon" in (tmp_path / "serve.stderr").read_text()
    assert not announcement.exists()  # a stopped server is not offered to the next command


RUN_EVENTS = """
query($id: ID!) { runOrError(runId: $id) { ... on Run { status
  eventConnection { events { __typename ... on MessageEvent { message } } } } } }
"""


def _forkserver_of(code_server: psutil.Process) -> psutil.Process | None:
    """The code server's forkserver child (Python's `multiprocessing.forkserver`), if it runs."""
    for child in code_server.children():
        try:
            if "multiprocessing.forkserver" in " ".join(child.cmdline()):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def _worker_pid(served: Served, run_id: str) -> int | None:
    """The pid the run's worker reported in its first engine event, once it did."""
    run = served.dev.graphql(RUN_EVENTS, {"id": run_id})["runOrError"]
    for event in run["eventConnection"]["events"]:
        match = re.fullmatch(r"Started process for run \(pid: (\d+)\)\.", event.get("message", ""))
        if match:
            return int(match.group(1))
    return None


@pytest.mark.timeout(600)
def test_serve_forks_run_workers_from_the_code_servers_preloaded_forkserver(
    served: Served, plex: Any
) -> None:
    # 150 ms a request: a 2-channel import's run lasts seconds, long enough to see its worker.
    plex.configure(latency_ms=150)
    served.wait_ready(300)
    code_server = served.role_process("code-server")
    assert code_server is not None
    # Started in advance, before any run asks for a worker, with the code location to preload.
    forkserver = wait_for(lambda: _forkserver_of(code_server), 60, "the code server's forkserver")
    assert "airwave_dagster.definitions" in " ".join(forkserver.cmdline())

    run_id = served.dev.launch_import(lineups.genre_lineup(2))
    pid = wait_for(lambda: _worker_pid(served, run_id), 120, "the run worker's pid")
    # The worker is the forkserver's child, not a fresh interpreter the code server spawned.
    try:
        parent = psutil.Process(pid).ppid()
    except psutil.NoSuchProcess:
        pytest.fail(f"run worker {pid} ended before it could be looked at (Plex at 150 ms)")
    assert parent == forkserver.pid
    assert psutil.Process(pid).cmdline() == forkserver.cmdline()  # forked, not exec'd

    # The forkserver dies mid-run (killed, or the out-of-memory killer's choice): the worker it
    # forked runs on, and the code server does not take it for dead.
    forkserver.kill()
    assert psutil.Process(pid).is_running(), "the run ended before its forkserver was killed"
    assert _finished(served, run_id) == "SUCCESS"

    # The next run's start brings a forkserver up again, preloaded as before.
    second = served.dev.launch_import(lineups.genre_lineup(1))
    wait_for(lambda: _worker_pid(served, second), 180, "the second run's worker")
    replacement = _forkserver_of(code_server)
    assert replacement is not None and replacement.pid != forkserver.pid
    assert "airwave_dagster.definitions" in " ".join(replacement.cmdline())
    assert _finished(served, second) == "SUCCESS"


def _finished(served: Served, run_id: str) -> str:
    def status() -> str | None:
        value = served.dev.graphql(RUN_STATUS, {"id": run_id})["runOrError"].get("status")
        return value if value in ("SUCCESS", "FAILURE", "CANCELED") else None

    return str(wait_for(status, 240, f"run {run_id} to finish", poll=1))


def test_serve_refuses_a_remote_bind_without_allow_remote() -> None:
    result = subprocess.run(
        [AIRWAVE, "serve", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "no authentication" in result.stderr


def test_dev_refuses_a_remote_bind_without_allow_remote() -> None:
    result = subprocess.run(
        [AIRWAVE, "dev", "--host", "192.0.2.1"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "refusing to bind 192.0.2.1" in result.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False), ("nas", False)],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert serve.is_loopback(host) is loopback


def test_grpc_workspace_names_the_code_server() -> None:
    workspace = json.loads(serve.grpc_workspace("127.0.0.1", 4266))
    assert workspace == {
        "load_from": [
            {"grpc_server": {"host": "127.0.0.1", "port": 4266, "location_name": "airwave"}}
        ]
    }


def test_backoff_grows_and_is_bounded(tmp_path: Path) -> None:
    service = serve.Service("x", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "x.log")
    delays = []
    now = time.monotonic()
    for _ in range(10):
        service.restart_at = None
        service.process = None
        service.poll(now)
        assert service.restart_at is not None
        delays.append(service.restart_at - now)
    assert delays[0] == pytest.approx(0.5)
    assert delays == sorted(delays)
    assert max(delays) == pytest.approx(30.0)
