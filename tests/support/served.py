"""`airwave serve` as a user starts it, for the tests of the supervisor and of the web front."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from airwave_dagster import settings
from airwave_dagster.cli import environment, serve
from tests.support.dagster_dev import Dev, wait_for
from tests.support.ports import free_port

AIRWAVE = str(Path(sys.executable).parent / "airwave")


class Served:
    """A running `airwave serve`: its process, port and environment, its stdout line by line."""

    def __init__(
        self,
        process: subprocess.Popen[str],
        port: int,
        env: Mapping[str, str],
        stderr: Path,
    ) -> None:
        self.process = process
        self.port = port
        self.env = dict(env)
        self.stderr = stderr
        home = Path(env["AIRWAVE_HOME"])
        self.dev = Dev(port=port, home=home, env={}, workdir=home, instance=None)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def ready_lines(self) -> list[str]:
        """The `ready:` lines printed so far (one per start of the webserver)."""
        return [line for line in self.lines if line.startswith("ready:")]

    def wait_ready(self, timeout: float) -> None:
        """Until the first `ready:` line; fails with the server's stderr if it exits first."""
        wait_for(
            lambda: bool(self.ready_lines()) or self.process.poll() is not None,
            timeout,
            "airwave serve to be ready",
            poll=0.5,
        )
        assert self.process.poll() is None, self.stderr.read_text()[-3000:]

    def role_process(self, role: str) -> psutil.Process | None:
        """The direct child running `role` (its argv names the Dagster entry point)."""
        modules = {
            "code-server": serve.CODE_SERVER_MODULE,
            "webserver": serve.WEBSERVER_MODULE,
            "daemon": serve.DAEMON_MODULE,
        }
        marker = modules.get(role, role)
        for child in psutil.Process(self.process.pid).children():
            try:
                if any(marker in part for part in child.cmdline()):
                    return child
            except psutil.NoSuchProcess:
                continue
        return None

    def kill(self) -> None:
        """SIGKILL the supervisor and everything below it, if it still runs."""
        if self.process.poll() is not None:
            return
        # Children first: each runs in its own session, out of reach of killpg.
        for child in psutil.Process(self.process.pid).children(recursive=True):
            child.kill()
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def serve_env(
    database_url: str, schema: str, plex: Any, home: Path, **extra: str
) -> dict[str, str]:
    """This process's environment for an `airwave serve` of `home` on `database_url` and `plex`.

    Dagster's storage goes to `schema` of the database: the suite's shared `airwave dev` runs a
    daemon too, and two daemons on one instance dequeue each other's runs.
    """
    return {
        **os.environ,
        "AIRWAVE_HOME": str(home),
        settings.DATABASE_URL_ENV: database_url,
        settings.DAGSTER_PG_URL_ENV: environment.with_search_path(database_url, schema),
        settings.PLEX_URL_ENV: plex.url,
        settings.PLEX_TOKEN_ENV: plex.token,
        **extra,
    }


@contextmanager
def serving_airwave(env: Mapping[str, str], logs: Path) -> Iterator[Served]:
    """`airwave serve` with `env` (its AIRWAVE_HOME; no DAGSTER_HOME) on free loopback ports.

    Its stderr goes to `logs/serve.stderr`. Killed, with every child, when the block ends.
    """
    port = free_port()
    environ = {name: value for name, value in env.items() if name != "DAGSTER_HOME"}
    stderr = logs / "serve.stderr"
    process = subprocess.Popen(
        [AIRWAVE, "serve", "--port", str(port), "--code-server-port", str(free_port())],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=stderr.open("w"),
        text=True,
        start_new_session=True,
    )
    served = Served(process, port, environ, stderr)
    try:
        yield served
    finally:
        served.kill()
