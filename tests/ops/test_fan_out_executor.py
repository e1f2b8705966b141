"""The fan-out executor follows the run config, else AIRWAVE_EXECUTOR, when a run starts, and
names what is missing."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import dagster as dg
import pytest
from dagster._core.executor.multiprocess import MultiprocessExecutor
from dagster_celery.executor import CeleryExecutor

from airwave_dagster import settings
from ops.ai_lineup.job import ai_lineup
from ops.celery_executor import CeleryStepExecutor
from ops.lineup_import.job import IMPORT_CONCURRENCY, import_lineup
from ops.steps import LLM_POOL, HeartbeatExecutor
from ops.threads_executor import ThreadsExecutor
from tests.support.instances import instance_on
from tests.support.schemas import fresh_schema


@pytest.fixture
def pool_instance(database_url: str) -> Iterator[dg.DagsterInstance]:
    """Dagster's storage on the test Postgres (its concurrency pools), emptied for each test."""
    with instance_on(fresh_schema(database_url, "dagster_pools")) as instance:
        yield instance


def _create(
    monkeypatch: pytest.MonkeyPatch,
    job: dg.JobDefinition = import_lineup,
    init_context: Any = None,
    max_concurrent: int | None = None,
    executor: str | None = None,
    **env: str,
) -> Any:
    for name in (
        settings.EXECUTOR_ENV,
        settings.CELERY_BROKER_ENV,
        settings.CELERY_QUEUE_ENV,
        settings.LLM_CONCURRENCY_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(settings.ENV_FILE_ENV, "/nonexistent/.env")
    # Of its init context the creation function reads the instance, only for a job with pooled
    # ops (import_lineup has none), and the executor config.
    default = job.executor_def.config_schema.as_field().default_value["max_concurrent"]
    bound = default if max_concurrent is None else max_concurrent
    config: dict[str, Any] = {"max_concurrent": bound}
    if executor is not None:
        config["executor"] = executor
    context = SimpleNamespace(
        instance=getattr(init_context, "instance", None), executor_config=config
    )
    executor = job.executor_def.executor_creation_fn(context)  # type: ignore[misc]
    # Every fan-out executor writes run-worker heartbeats around the executor it wraps.
    assert isinstance(executor, HeartbeatExecutor)
    return executor.wrapped


def test_threads_by_default_bounded_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    executor = _create(monkeypatch)

    assert isinstance(executor, ThreadsExecutor)
    assert executor.max_concurrent == IMPORT_CONCURRENCY
    assert executor.retries.enabled


def test_multiprocess_when_asked_with_the_run_configs_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executor = _create(monkeypatch, max_concurrent=3, **{settings.EXECUTOR_ENV: "multiprocess"})

    assert isinstance(executor, MultiprocessExecutor)
    assert executor._max_concurrent == 3


@pytest.mark.parametrize(
    ("environment", "configured", "expected"),
    [
        ("threads", "multiprocess", MultiprocessExecutor),
        ("multiprocess", "threads", ThreadsExecutor),
        ("celery", "threads", ThreadsExecutor),
    ],
)
def test_the_run_config_chooses_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, environment: str, configured: str, expected: type
) -> None:
    # No broker is set: a run that asks for threads never needs the environment's celery.
    executor = _create(monkeypatch, executor=configured, **{settings.EXECUTOR_ENV: environment})

    assert type(executor) is expected


@pytest.mark.parametrize("job", [import_lineup, ai_lineup])
def test_the_executor_config_accepts_the_three_names_and_refuses_others_by_path(
    job: dg.JobDefinition,
) -> None:
    from dagster._config import process_config

    schema = job.executor_def.config_schema.config_type
    for name in ("threads", "multiprocess", "celery"):
        processed = process_config(schema, {"executor": name})
        assert processed.success, processed.errors
        assert processed.value["executor"] == name
    refused = process_config(schema, {"executor": "thread"})
    assert not refused.success
    assert any("executor" in e.message and "thread" in e.message for e in refused.errors or [])


@pytest.mark.parametrize("job", [import_lineup, ai_lineup])
def test_the_run_config_may_set_its_own_bound(
    monkeypatch: pytest.MonkeyPatch, job: dg.JobDefinition, pool_instance: dg.DagsterInstance
) -> None:
    # ai_lineup sets its pool's limit in the instance.
    context = SimpleNamespace(instance=pool_instance)
    executor = _create(monkeypatch, job, context, max_concurrent=1)

    assert isinstance(executor, ThreadsExecutor)
    assert executor.max_concurrent == 1


def test_threads_when_asked_with_the_run_configs_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    executor = _create(monkeypatch, max_concurrent=2, **{settings.EXECUTOR_ENV: "threads"})

    assert isinstance(executor, ThreadsExecutor)
    assert executor.max_concurrent == 2
    assert executor.retries.enabled


def test_an_unknown_executor_is_refused_naming_the_choices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(settings.SettingsError, match="AIRWAVE_EXECUTOR") as refused:
        _create(monkeypatch, **{settings.EXECUTOR_ENV: "thread"})
    assert all(name in str(refused.value) for name in ("multiprocess", "threads", "celery"))


def test_a_bound_below_one_is_refused_with_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(dg.DagsterInvalidConfigError, match=r"execution\.config\.max_concurrent"):
        _create(monkeypatch, max_concurrent=0)


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
    # The subclass whose loop turns a step task that raised into the step's retry or failure.
    assert isinstance(executor, CeleryStepExecutor)
    assert executor.broker == "pyamqp://guest:guest@127.0.0.1:5672//"
    assert executor.backend == "rpc://"
    assert executor.config_source.task_default_queue == "builds"
    assert executor.config_source.task_acks_late is True


def test_celery_without_a_broker_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="AIRWAVE_CELERY_BROKER_URL"):
        _create(monkeypatch, **{settings.EXECUTOR_ENV: "celery"})


def test_only_the_model_calling_ops_are_in_the_llm_pool() -> None:
    pooled = {node.name for node in ai_lineup.graph.nodes if node.definition.pools}

    assert pooled == {"plan_lineup", "build_ai_channel"}
    assert all(
        node.definition.pool == LLM_POOL for node in ai_lineup.graph.nodes if node.name in pooled
    )
    assert not any(node.definition.pools for node in import_lineup.graph.nodes)


@pytest.mark.parametrize("executor", ["multiprocess", "celery"])
def test_an_ai_lineup_run_start_sets_the_pool_limit_from_the_settings(
    monkeypatch: pytest.MonkeyPatch, executor: str, pool_instance: dg.DagsterInstance
) -> None:
    context = SimpleNamespace(instance=pool_instance)
    env = {
        settings.EXECUTOR_ENV: executor,
        settings.CELERY_BROKER_ENV: "redis://127.0.0.1:6379/13",
    }
    _create(monkeypatch, ai_lineup, context, **env)
    assert pool_instance.event_log_storage.get_concurrency_info(LLM_POOL).slot_count == 6

    _create(monkeypatch, ai_lineup, context, **env, **{settings.LLM_CONCURRENCY_ENV: "2"})
    assert pool_instance.event_log_storage.get_concurrency_info(LLM_POOL).slot_count == 2


def test_a_pool_limit_below_one_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(settings.SettingsError, match=settings.LLM_CONCURRENCY_ENV):
        _create(monkeypatch, ai_lineup, None, **{settings.LLM_CONCURRENCY_ENV: "0"})
