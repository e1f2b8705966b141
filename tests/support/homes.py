"""A user's homes and database reads for tests that run the CLI or a server as a user would."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from airwave_dagster.cli import environment


def dagster_home(path: Path) -> Path:
    """`path` made a Dagster instance directory with the project's `dagster.yaml`."""
    path.mkdir(parents=True)
    (path / "dagster.yaml").write_bytes(environment.packaged_config("dagster.yaml"))
    return path


def user_env(root: Path, **variables: str) -> dict[str, str]:
    """This process's environment for a user whose homes live under `root`, plus `variables`.

    DAGSTER_HOME is `root/dagster_home` (made, with the project's `dagster.yaml`); AIRWAVE_HOME is
    `root/home` (made by the commands when they need it).
    """
    return {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home(root / "dagster_home")),
        "AIRWAVE_HOME": str(root / "home"),
        **variables,
    }


def query(database_url: str, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
    """The rows of one statement, on a connection opened and closed for it (no pool kept)."""
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(sql), dict(params or {})).all())
    finally:
        engine.dispose()
