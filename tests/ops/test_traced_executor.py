"""Every job's run is one span: the default executor of the code location is traced too.

Real parts: Dagster's own executor (`execute_job`, a step process per op) on the test Postgres;
the run span is recorded in this process (the orchestrator) by the SDK's in-memory exporter.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from airwave_dagster.definitions import defs
from ops.steps import traced_executor
from tests.support.instances import instance_on
from tests.support.schemas import fresh_schema

pytestmark = [pytest.mark.postgres]


@dg.op
def _one() -> int:
    return 1


@dg.job(executor_def=traced_executor())
def traced_job() -> None:
    _one()


def _execute(database_url: str, run_config: dict[str, Any]) -> dg.ExecuteJobResult:
    with instance_on(fresh_schema(database_url, "dagster_traced")) as instance:
        with dg.execute_job(
            dg.reconstructable(traced_job), instance=instance, run_config=run_config
        ) as result:
            assert result.success
            return result


@pytest.mark.parametrize("mode", ["multiprocess", "in_process"])
def test_a_run_on_the_default_executor_is_one_span_with_dagsters_config(
    database_url: str, spans: InMemorySpanExporter, mode: str
) -> None:
    result = _execute(database_url, {"execution": {"config": {mode: {}}}})
    (run,) = [span for span in spans.get_finished_spans() if span.name == "run traced_job"]
    assert run.attributes is not None and run.attributes["airwave.run.id"] == result.run_id


def test_every_job_of_the_code_location_has_a_traced_executor() -> None:
    untraced = [
        job.name
        for job in defs.resolve_all_job_defs()
        if job.executor_def is dg.multi_or_in_process_executor
        or job.executor_def.name not in ("fan_out", dg.multi_or_in_process_executor.name)
    ]
    assert not untraced
