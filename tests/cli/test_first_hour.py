"""What a newcomer did in their first hour with the CLI, and what they must see (issue 27).

Each test repeats what the person did through the real `airwave` command, its own code server
and a real Dagster instance on Postgres.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._daemon.types import DaemonHeartbeat

from airwave_dagster import settings
from tests.support import lineups
from tests.support.schemas import fresh_schema

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

AIRWAVE = str(Path(sys.executable).parent / "airwave")


def _airwave(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _report(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_dry_run_answers_for_the_database_as_it_is_now(cli_env, store, tmp_path: Path) -> None:
    """Dry-run, import, dry-run again: the second dry-run is a new run that sees the import."""
    path = lineups.write(tmp_path, lineups.genre_lineup(2), "two.json")

    before = _report(_airwave(cli_env, "import", str(path), "--dry-run", "--json"))
    imported = _report(_airwave(cli_env, "import", str(path), "--json"))
    after = _report(_airwave(cli_env, "import", str(path), "--dry-run", "--json"))

    assert before["report"]["channels_created"] == 2  # "would create 2"
    assert imported["report"]["channels_created"] == 2 and store.counts()["channels"] == 2
    assert after["run_id"] != before["run_id"]
    assert after["report"]["channels_created"] == 0
    assert after["report"]["channels_skipped"] == 2  # both exist now


def test_a_queued_run_no_daemon_takes_is_launched_by_the_command(
    cli_env, store, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make dev` stopped with Ctrl-C leaves a daemon heartbeat that looks alive for a minute.

    The command saw it, queued its run, and showed "planning" for 15 minutes. Now it says
    "queued", finds within seconds that nothing takes the queue, and launches the run itself.
    The heartbeat here stays fresh the whole time (a daemon that beats but does not dequeue), so
    only the queue's own progress can tell.
    """
    dagster_url = fresh_schema(database_url, "dagster_cli_queue")
    env = {**cli_env, settings.DAGSTER_PG_URL_ENV: dagster_url}
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    monkeypatch.setenv(settings.DAGSTER_PG_URL_ENV, dagster_url)
    path = lineups.write(tmp_path, lineups.genre_lineup(1), "one.json")
    done_event = threading.Event()

    with dg.DagsterInstance.get() as instance:

        def beat() -> None:
            while not done_event.is_set():
                instance.add_daemon_heartbeat(
                    DaemonHeartbeat(
                        timestamp=time.time(),
                        daemon_type="QUEUED_RUN_COORDINATOR",
                        daemon_id="stuck",
                        errors=[],
                    )
                )
                done_event.wait(2.0)

        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        try:
            started = time.monotonic()
            done = _airwave(env, "import", str(path), "--dry-run", "--wait", "--json")
            took = time.monotonic() - started
        finally:
            done_event.set()
            beater.join()
            instance.wipe_daemon_heartbeats()

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "SUCCESS"
    assert "  queued" in done.stderr
    assert "the run-queue daemon is not taking runs" in done.stderr
    assert "launching it from this command" in done.stderr
    assert took < 240  # it hung for 15 minutes before
