"""Dagster instances of the tests, on the test Postgres (never Dagster's SQLite default)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dagster as dg

if TYPE_CHECKING:
    from airwave_dagster.durability.instance import AirwaveInstance


@contextmanager
def instance_on(postgres_url: str, **settings: Any) -> Iterator[dg.DagsterInstance]:
    """A test instance whose storage is at `postgres_url` (search path included), no telemetry.

    `settings` are further dagster.yaml keys (a run coordinator, a compute log manager).
    """
    overrides = {
        "storage": {"postgres": {"postgres_url": postgres_url}},
        "telemetry": {"enabled": False},
        **settings,
    }
    with dg.instance_for_test(overrides=overrides) as instance:
        yield instance


@contextmanager
def airwave_instance_on(postgres_url: str) -> Iterator[AirwaveInstance]:
    """`instance_on` with the project's instance class (durability/instance.py)."""
    from airwave_dagster.durability.instance import AirwaveInstance

    project_class = {"module": "airwave_dagster.durability.instance", "class": "AirwaveInstance"}
    with instance_on(postgres_url, instance_class=project_class) as instance:
        assert isinstance(instance, AirwaveInstance)
        yield instance
