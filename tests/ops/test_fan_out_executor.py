"""The fan-out executor follows AIRWAVE_EXECUTOR when a run starts, and names what is missing."""

from __future__ import annotations

from typing import Any

import pytest
from dagster._core.executor.multiprocess import MultiprocessExecutor
from dagster_celery.executor import CeleryExecutor

from airwave_dagster import settings
from ops.lineup_import.job import IMPORT_CONCURRENCY, import_lineup


def _create(monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    for name in (settings.EXECUTOR_ENV, settings.CELERY_BROKER_ENV, settings.CELERY_QUEUE_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(settings.ENV_FILE_ENV, "/nonexistent/.env")
    # The creation function reads only the settings, not its init context.
    return import_lineup.executor_def.executor_creation_fn(None)  # type: ignore[arg-type, misc]


def test_multiprocess_by_default_bounded_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    executor = _create(monkeypatch)

    assert isinstance(executor, MultiprocessExecutor)
    assert executor._max_concurrent == IMPORT_CONCURRENCY


def test_celery_when_asked_on_the_named_broker_and_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    executor = _create(
        monkeypatch,
        **{
            settings.EXECUTOR_ENV: "celery",
            settings.CELERY_BROKER_ENV: "pyamqp://guest:guest@127.0.0.1:5672//",
            settings.CELERY_QUEUE_ENV: "builds",
        },
    )

    assert isinstance(executor, CeleryExecutor)
    assert executor.broker == "pyamqp://guest:guest@127.0.0.1:5672//"
    assert executor.backend == "rpc://"
    assert executor.config_source.task_default_queue == "builds"
    assert executor.config_source.task_acks_late is True


def test_celery_without_a_broker_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="AIRWAVE_CELERY_BROKER_URL"):
        _create(monkeypatch, **{settings.EXECUTOR_ENV: "celery"})
