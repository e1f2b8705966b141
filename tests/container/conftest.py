"""Fixtures of the container tests: the two images (built once per session) and a Plex emulator."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airwave_dagster.cli import serve
from tests.container.harness import AIRWAVE, HERE, IMAGE, POSTGRES_IMAGE, ROOT, run
from tests.support.dagster_dev import wait_for
from tests.support.ports import free_port

log = logging.getLogger(__name__)


@pytest.fixture(scope="session")
def images() -> dict[str, float]:
    """Build the project's image and the test Postgres image; build time and image size."""
    base = run(str(HERE / "base_image.sh")).strip().splitlines()[-1]
    started = time.monotonic()
    run(
        "docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}",
        "-t", IMAGE, str(ROOT),
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )  # fmt: skip
    build_seconds = time.monotonic() - started
    run(
        "docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base}",
        "-t", POSTGRES_IMAGE, str(HERE / "postgres"),
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )  # fmt: skip
    size = int(run("docker", "image", "inspect", IMAGE, "--format", "{{.Size}}").strip())
    log.warning("image %s: %.0f MB, built in %.1f s", IMAGE, size / 1e6, build_seconds)
    return {"build_seconds": build_seconds, "size_bytes": size}


@pytest.fixture
def plex(tmp_path: Path) -> Iterator[str]:
    """The Plex emulator on a loopback port of the host (600 items), as its URL."""
    port = free_port()
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
