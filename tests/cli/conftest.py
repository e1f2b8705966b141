"""The environment of a user running `airwave` commands: own homes, own Dagster storage."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from airwave_dagster import settings
from tests.support.homes import user_env
from tests.support.schemas import fresh_schema

CLI_SCHEMA = "dagster_cli"
"""Dagster's storage for these tests. The session's shared `airwave dev` (tests/integration)
keeps its daemon heartbeat in the default schema; a CLI that saw it there would queue its runs
for that daemon, which launches them from its own code server with its own environment."""


@pytest.fixture(scope="session")
def cli_dagster_url(database_url: str) -> str:
    """A Dagster schema of its own for the CLI tests, emptied once per session."""
    return fresh_schema(database_url, CLI_SCHEMA)


@pytest.fixture
def cli_env(store, plex_emulator, cli_dagster_url: str, tmp_path: Path) -> dict[str, str]:
    """A fresh DAGSTER_HOME and AIRWAVE_HOME on the test database and the Plex emulator.

    No model key: the tests that want the anthropic provider add the stub's.
    """
    env = user_env(tmp_path, **{settings.DAGSTER_PG_URL_ENV: cli_dagster_url})
    env.pop(settings.API_KEY_ENV, None)
    return env


@pytest.fixture
def restored_environ() -> Iterator[None]:
    """os.environ as it was before the test: in-process commands export what they resolved."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
