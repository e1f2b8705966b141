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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airwave_dagster.cli import serve
from tests.container.harness import (
    IMAGE,
    POSTGRES_IMAGE,
    ROOT,
    RUN,
    compose_command,
    run,
    save_logs,
)
from tests.support import lineups
from tests.support.dagster_dev import Dev, wait_for
from tests.support.ports import free_port

pytestmark = [pytest.mark.container, pytest.mark.slow]

CHANNELS = 12
log = logging.getLogger(__name__)


@pytest.fixture
def stack(images: dict[str, float], plex: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    project = f"airwave-test-{os.getpid()}"
    password = secrets.token_hex(12)
    env = {
        **os.environ,
        "AIRWAVE_IMAGE": IMAGE,
        "POSTGRES_IMAGE": POSTGRES_IMAGE,
        "POSTGRES_PASSWORD": password,
        "POSTGRES_PORT": str(free_port()),
        "AIRWAVE_UI_PORT": str(free_port()),
        "AIRWAVE_CODE_SERVER_PORT": str(free_port()),
        "PLEX_URL": plex,
        "PLEX_TOKEN": "emulator-token",
    }
    compose = [*compose_command(), "-p", project, "-f", str(ROOT / "compose.yaml")]
    started = time.monotonic()
    run(*compose, "up", "-d", "--no-build", env=env, timeout=600)
    base = f"http://127.0.0.1:{env['AIRWAVE_UI_PORT']}"
    try:
        wait_for(lambda: serve.location_loaded(base), 600, "the code location in the UI", poll=2)
        wait_for(lambda: serve.daemon_healthy(base), 300, "a healthy daemon", poll=2)
        ready_seconds = time.monotonic() - started
        log.warning("compose start to ready: %.1f s", ready_seconds)
        yield {"env": env, "compose": compose, "base": base, "ready_seconds": ready_seconds}
    finally:
        save_logs(compose, env, ["code-server", "daemon", "webserver"], tmp_path)
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
    run(*compose, "restart", "daemon", env=env, timeout=300)
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
