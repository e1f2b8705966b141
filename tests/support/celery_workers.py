"""Celery workers for the tests: `airwave worker` processes with their own directory and home.

Each test gets a queue name of its own, so workers of another checkout (or of another test) on the
same broker never take its steps; Redis DB 13 is this project's test database on the machine's
Redis. The brokers on 127.0.0.1 are required: a test fails, never skips, when one is missing.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.dagster_dev import AIRWAVE, wait_for

REDIS_URL = "redis://127.0.0.1:6379/13"
AMQP_URL = "pyamqp://guest:guest@127.0.0.1:5672//"


def require_broker(url: str) -> None:
    """Fail (never skip) when the broker of `url` does not answer on 127.0.0.1."""
    port = 6379 if url.startswith("redis://") else 5672
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def unique_queue() -> str:
    """A queue name no other test or checkout uses."""
    return f"airwave_test_{uuid.uuid4().hex[:10]}"


@dataclass
class Workers:
    """Running `airwave worker` processes (each the leader of its own process group)."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def kill(self, index: int) -> None:
        """SIGKILL worker `index` and every process of its group (its pool children)."""
        process = self.processes[index]
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=30)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=20)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


def start_workers(
    env: dict[str, str], tmp: Path, count: int, *, concurrency: int, queue: str
) -> Workers:
    """Start `count` workers, each in its own working directory with its own HOME/AIRWAVE_HOME."""
    workers = Workers()
    for index in range(count):
        root = tmp / f"worker{index}"
        (root / "home").mkdir(parents=True)
        name = f"w{index}-{queue}@127.0.0.1"
        worker_env = {
            **env,
            "HOME": str(root / "home"),
            "AIRWAVE_HOME": str(root / "airwave"),
        }
        worker_env.pop("DAGSTER_HOME", None)  # a worker needs no instance directory of its own
        log = (root / "worker.log").open("wb")
        workers.processes.append(
            subprocess.Popen(
                [
                    AIRWAVE,
                    "worker",
                    "--concurrency",
                    str(concurrency),
                    "--queue",
                    queue,
                    "--name",
                    name,
                ],
                env=worker_env,
                cwd=root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        workers.names.append(name)
    for index, _ in enumerate(workers.processes):
        log_path = tmp / f"worker{index}" / "worker.log"

        def ready(
            path: Path = log_path, process: subprocess.Popen[bytes] = workers.processes[index]
        ):
            assert process.poll() is None, path.read_text(errors="replace")[-3000:]
            return " ready." in path.read_text(errors="replace")

        wait_for(ready, 120, f"celery worker {index} to be ready", poll=0.5)
    return workers
