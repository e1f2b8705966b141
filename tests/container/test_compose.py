"""The image and compose stack: build, start, import over GraphQL, restart the daemon mid-run.

Marked `container`: not part of `make test` (it builds an image); `make test-container` runs it.
No registry is reachable on the machines this runs on, so the base image is built from Debian
packages (`tests/container/base_image.sh`) and Postgres is a test-only stand-in image
(`tests/container/postgres/`) with the official image's variables. Every container uses host
networking and binds 127.0.0.1: test traffic never leaves loopback.
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airwave_dagster.cli import serve
from tests.support import lineups
from tests.support.dagster_dev import Dev, wait_for

pytestmark = [pytest.mark.container, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
IMAGE = "airwave-dagster:test"
POSTGRES_IMAGE = "airwave-test-postgres:15"
AIRWAVE = str(Path(sys.executable).parent / "airwave")
CHANNELS = 12
RUN = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
log = logging.getLogger(__name__)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(*argv: str, env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout


def _compose() -> list[str]:
    # Docker's v2 plugin where it exists, else Debian's docker-compose (v1.29: same file).
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    return ["docker", "compose"] if plugin.returncode == 0 else ["docker-compose"]


@pytest.fixture(scope="module")
def images() -> dict[str, float]:
    base = _run(str(HERE / "base_image.sh")).strip().splitlines()[-1]
    started = time.monotonic()
    _run(
        "docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}",
        "-t", IMAGE, str(ROOT),
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )  # fmt: skip
    build_seconds = time.monotonic() - started
    _run(
        "docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}",
        "-t", POSTGRES_IMAGE, str(HERE / "postgres"),
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )  # fmt: skip
    size = int(_run("docker", "image", "inspect", IMAGE, "--format", "{{.Size}}").strip())
    log.warning("image %s: %.0f MB, built in %.1f s", IMAGE, size / 1e6, build_seconds)
    return {"build_seconds": build_seconds, "size_bytes": size}


@pytest.fixture
def plex(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [AIRWAVE, "plex-emulator", "--port", str(port), "--items", "600", "--seed", "11"],
        stdout=(tmp_path / "plex.log").open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "AIRWAVE_HOME": str(tmp_path / "host-home")},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: serve._http_get(f"{url}/__emulator/stats"), 60, "the emulator")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def stack(images: dict[str, float], plex: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    project = f"airwave-test-{os.getpid()}"
    password = secrets.token_hex(12)
    env = {
        **os.environ,
        "AIRWAVE_IMAGE": IMAGE,
        "POSTGRES_IMAGE": POSTGRES_IMAGE,
        "POSTGRES_PASSWORD": password,
        "POSTGRES_PORT": str(_free_port()),
        "AIRWAVE_UI_PORT": str(_free_port()),
        "AIRWAVE_CODE_SERVER_PORT": str(_free_port()),
        "PLEX_URL": plex,
        "PLEX_TOKEN": "emulator-token",
    }
    compose = [*_compose(), "-p", project, "-f", str(ROOT / "compose.yaml")]
    started = time.monotonic()
    _run(*compose, "up", "-d", "--no-build", env=env, timeout=600)
    base = f"http://127.0.0.1:{env['AIRWAVE_UI_PORT']}"
    try:
        wait_for(lambda: serve.location_loaded(base), 600, "the code location in the UI", poll=2)
        wait_for(lambda: serve.daemon_healthy(base), 300, "a healthy daemon", poll=2)
        ready_seconds = time.monotonic() - started
        log.warning("compose start to ready: %.1f s", ready_seconds)
        yield {"env": env, "compose": compose, "base": base, "ready_seconds": ready_seconds}
    finally:
        logs = subprocess.run([*compose, "logs", "--no-color"], env=env, capture_output=True)
        (tmp_path / "compose.log").write_bytes(logs.stdout + logs.stderr)
        # The processes' own logs live in the home volume, which `down -v` removes.
        for service in ("code-server", "daemon", "webserver"):
            ids = subprocess.run(
                [*compose, "ps", "-q", service], env=env, capture_output=True, text=True
            ).stdout.split()
            for container in ids:
                subprocess.run(
                    ["docker", "cp", f"{container}:/data/home/logs", str(tmp_path / service)],
                    check=False,
                )
        subprocess.run([*compose, "down", "-v", "--timeout", "30"], env=env, check=False)


# The budget covers the fixtures: an image build (minutes when uv.lock or pyproject.toml changed)
# and the stack's first start on a shared machine.
@pytest.mark.timeout(3600)
def test_import_survives_a_daemon_restart_mid_run(stack: dict[str, Any]) -> None:
    env, compose = stack["env"], stack["compose"]
    port = int(env["AIRWAVE_UI_PORT"])
    dev = Dev(port=port, home=Path("/nonexistent"), env={}, workdir=Path("."), instance=None)
    run_id = dev.launch_import(lineups.genre_lineup(CHANNELS))

    def status() -> str:
        return str(dev.graphql(RUN, {"id": run_id})["runOrError"].get("status"))

    wait_for(lambda: status() == "STARTED", 300, "the run to start", poll=1)
    _run(*compose, "restart", "daemon", env=env, timeout=300)
    assert status() in ("STARTED", "SUCCESS"), "the daemon restart must not end the run"
    wait_for(lambda: serve.daemon_healthy(stack["base"]), 300, "the daemon back", poll=2)
    final = wait_for(
        lambda: status() if status() in ("SUCCESS", "FAILURE", "CANCELED") else None,
        900,
        "the run to finish",
        poll=2,
    )
    assert final == "SUCCESS"
    url = (
        f"postgresql+psycopg2://airwave:{env['POSTGRES_PASSWORD']}@127.0.0.1:"
        f"{env['POSTGRES_PORT']}/airwave"
    )
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT number, enabled FROM public.channel")).all()
    finally:
        engine.dispose()
    planned = sorted(c["number"] for c in lineups.genre_lineup(CHANNELS)["channels"])
    assert sorted(r.number for r in rows) == planned
    assert all(r.enabled for r in rows)
    log.warning("daemon restarted mid-run: run %s %s with %d/%d channels", run_id, final,
                len(rows), len(planned))  # fmt: skip
