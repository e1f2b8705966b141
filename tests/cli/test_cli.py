"""The `airwave` CLI end to end: runs it creates are real instance runs the UI can re-execute."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from airwave_dagster import settings
from airwave_dagster.domain.lineup_file import parse_lineup
from resources import migrations
from tests.support import lineups

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

AIRWAVE = str(Path(sys.executable).parent / "airwave")


def _airwave(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_import_json_creates_a_ui_reexecutable_run(
    cli_env, store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = lineups.write(tmp_path, lineups.genre_lineup(3), "three.json")

    done = _airwave(cli_env, "import", str(path), "--json")

    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["status"] == "SUCCESS"
    assert output["report"]["channels_created"] == 3
    assert store.counts()["channels"] == 3
    monkeypatch.setenv("DAGSTER_HOME", cli_env["DAGSTER_HOME"])
    monkeypatch.setenv(settings.DAGSTER_PG_URL_ENV, cli_env[settings.DAGSTER_PG_URL_ENV])
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(output["run_id"])
        assert run is not None and run.job_name == "import_lineup"
        # A remote origin is what lets the UI (GraphQL) re-execute the run.
        assert run.remote_job_origin is not None
        assert run.remote_job_origin.location_name == "airwave"
        # The Plex token and the database URL enter as environment variables only.
        secret = cli_env[settings.PLEX_TOKEN_ENV]
        assert secret not in json.dumps(run.run_config) + json.dumps(dict(run.tags))
        for record in instance.all_logs(run.run_id):
            assert secret not in record.message
            assert secret not in repr(record.dagster_event)
    listed = _airwave(cli_env, "runs", "list")
    assert output["run_id"] in listed.stdout
    shown = _airwave(cli_env, "runs", "show", output["run_id"], "--json")
    assert json.loads(shown.stdout)["status"] == "SUCCESS"

    exported = _airwave(cli_env, "export")
    assert exported.returncode == 0, exported.stderr
    parsed = parse_lineup(exported.stdout.encode(), source="export")
    assert [c.number for c in parsed.channels] == [100, 101, 102]


def test_refused_file_exits_non_zero_naming_the_problem(cli_env, store, tmp_path: Path) -> None:
    data = lineups.genre_lineup(2)
    data["version"] = 2
    path = lineups.write(tmp_path, data, "future.json")

    done = _airwave(cli_env, "import", str(path), "--wait")

    assert done.returncode == 3  # input refused, checked before anything starts
    assert "future.json" in done.stderr
    assert "$.version" in done.stderr
    assert store.counts()["channels"] == 0


def test_schema_and_db_upgrade(cli_env) -> None:
    schema = _airwave(cli_env, "schema")
    assert schema.returncode == 0, schema.stderr
    document = json.loads(schema.stdout)
    assert {"version", "packages", "channels"} <= set(document["properties"])

    upgraded = _airwave(cli_env, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"at revision {', '.join(sorted(migrations.heads()))}" in upgraded.stdout


def test_plex_emulator_verb_serves_until_terminated(cli_env) -> None:
    import socket
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [AIRWAVE, "plex-emulator", "--port", str(port), "--items", "100", "--latency-ms", "1"],
        env=cli_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/__emulator/stats", timeout=2
                ) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the emulator never answered"
                time.sleep(0.2)
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
