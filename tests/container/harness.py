"""Helpers shared by the container tests: images, commands, ports, and the logs a stack leaves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
IMAGE = "airwave-dagster:test"
POSTGRES_IMAGE = "airwave-test-postgres:15"
AIRWAVE = str(Path(sys.executable).parent / "airwave")
RUN = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"


def run(*argv: str, env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    """Run a command to completion; its stdout, or an assertion naming its output's tail."""
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout


def compose_command() -> list[str]:
    """Docker's v2 plugin where it exists, else Debian's docker-compose (v1.29: same files)."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    return ["docker", "compose"] if plugin.returncode == 0 else ["docker-compose"]


def save_logs(compose: list[str], env: dict[str, str], services: list[str], into: Path) -> None:
    """Keep the compose logs and every service's process logs (`down -v` removes the home)."""
    logs = subprocess.run([*compose, "logs", "--no-color"], env=env, capture_output=True)
    (into / "compose.log").write_bytes(logs.stdout + logs.stderr)
    for service in services:
        ids = subprocess.run(
            [*compose, "ps", "-q", service], env=env, capture_output=True, text=True
        ).stdout.split()
        for container in ids:
            subprocess.run(
                ["docker", "cp", f"{container}:/data/home/logs", str(into / service)],
                check=False,
            )
