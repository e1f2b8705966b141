"""Local services under concurrency: parallel commands on a fresh home start one emulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from airwave_dagster.cli import environment

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.slow]

AIRWAVE = str(Path(sys.executable).parent / "airwave")


def _emulators(home: Path) -> list[psutil.Process]:
    """Every live emulator process started for this home (its log is open under the home)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "airwave_dagster.emulators.plex" not in cmdline:
            continue
        try:
            if any(f.path.startswith(str(home)) for f in process.open_files()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_three_parallel_commands_start_one_emulator_and_db_stop_leaves_none(
    database_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "AIRWAVE_HOME": str(home), "AIRWAVE_DATABASE_URL": database_url}
    for name in ("PLEX_URL", "PLEX_TOKEN", "DAGSTER_HOME"):
        env.pop(name, None)
    # Exactly what `airwave import`, `lineup`, `demo` and `dev` run first (console.prepare with
    # plex=True), in three fresh processes, without launching a run after it.
    bootstrap = "from airwave_dagster.cli import console; console.prepare(plex=True)"
    commands = [
        subprocess.Popen(
            [sys.executable, "-c", bootstrap],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    for command in commands:
        _out, err = command.communicate(timeout=240)
        assert command.returncode == 0, err.decode()[-2000:]
    running = _emulators(home)
    assert len(running) == 1, [p.pid for p in running]
    state = json.loads((home / environment.EMULATOR_STATE).read_text())
    assert state["pid"] == running[0].pid
    # The recorded identity (pid + create time) is the live process.
    assert environment.recorded_process(state) is not None

    stopped = subprocess.run(
        [AIRWAVE, "db", "stop"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped the Plex emulator" in stopped.stdout
    psutil.wait_procs(running, timeout=15)
    assert not _emulators(home)
    assert not (home / environment.EMULATOR_STATE).exists()


def test_a_reused_pid_is_never_signalled(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        home = tmp_path / "home"
        home.mkdir()
        create_time = psutil.Process(bystander.pid).create_time()
        # The pid the state records now belongs to another process (an older create time).
        state = {"url": "http://127.0.0.1:9", "token": "t", "pid": bystander.pid,
                 "create_time": create_time - 100}  # fmt: skip
        (home / environment.EMULATOR_STATE).write_text(json.dumps(state))
        assert environment.stop_plex_emulator(home) is False
        assert bystander.poll() is None, "an unrelated process was signalled"
        state["create_time"] = create_time
        (home / environment.EMULATOR_STATE).write_text(json.dumps(state))
        assert environment.stop_plex_emulator(home) is True
        assert bystander.wait(timeout=15) is not None
    finally:
        bystander.kill()
        bystander.wait()


def test_a_deep_home_keeps_its_database_in_the_home_and_says_where_once(tmp_path: Path) -> None:
    """A checkout too deep for a Unix socket kept the whole cluster in /tmp (issue 27, item 10).

    Now the data stays under the home (a reboot's tmp cleaner cannot take it), only the socket
    moves to a short directory, the first start says so once, and `db stop` stops it.
    """
    home = tmp_path.joinpath(*["a-rather-long-folder-name"] * 4, "home")
    home.mkdir(parents=True)
    assert len(str(home / "pg" / ".s.PGSQL.5432")) > 107
    env = {**os.environ, "AIRWAVE_HOME": str(home)}
    for name in ("AIRWAVE_DATABASE_URL", "DAGSTER_HOME", "PLEX_URL", "PLEX_TOKEN"):
        env.pop(name, None)
    start = (
        "from airwave_dagster.cli import environment; import psycopg2; "
        "url = environment.start_private_postgres(environment.airwave_home()); "
        "psycopg2.connect(environment.libpq_dsn(url)).close()"
    )
    try:
        first = subprocess.run(
            [sys.executable, "-c", start], env=env, capture_output=True, text=True, timeout=240
        )
        second = subprocess.run(
            [sys.executable, "-c", start], env=env, capture_output=True, text=True, timeout=240
        )
        assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
        pgdata = home / "pg"
        assert pgdata.is_dir() and not pgdata.is_symlink()
        assert (pgdata / "PG_VERSION").exists()
        assert f"data in {pgdata}" in first.stderr
        assert "socket in" in first.stderr and "too long for a socket" in first.stderr
        assert "private PostgreSQL" not in second.stderr  # said once
    finally:
        stopped = subprocess.run(
            [AIRWAVE, "db", "stop"], env=env, capture_output=True, text=True, timeout=120
        )
    assert "stopped the private PostgreSQL" in stopped.stdout, stopped.stderr
    assert not (home / "pg" / "postmaster.pid").exists()
