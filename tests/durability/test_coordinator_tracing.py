"""The queue gives a trace context to a first run that has none (a UI, GraphQL or schedule launch).

It continues the launching request's `traceparent` header. Real parts: the project's
`AirwaveRunCoordinator` on the test Postgres (tests/support/coordinator.py) and the OpenTelemetry
SDK with its in-memory exporter (no process boundary is involved).
"""

from __future__ import annotations

import dagster as dg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from airwave_dagster import tracing
from airwave_dagster.durability.coordinator import TRACEPARENT_HEADER
from airwave_dagster.run_tags import TRACEPARENT_TAG
from tests.support.coordinator import submit

pytestmark = [pytest.mark.postgres]

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_launch_from_a_traced_client_continues_its_trace(
    queue_instance: dg.DagsterInstance, spans: InMemorySpanExporter
) -> None:
    run = submit(queue_instance, headers={TRACEPARENT_HEADER: CALLER})
    (span,) = spans.get_finished_spans()
    assert span.name == "submit import_lineup"
    assert span.parent is not None and span.parent.span_id == 0xB7AD6B7169203331
    assert span.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert span.attributes is not None and span.attributes["airwave.run.id"] == run.run_id
    # The run carries the submit span, so its run worker's span is that span's child.
    assert run.tags[TRACEPARENT_TAG] == tracing.traceparent(span.context)


def test_a_launch_without_a_caller_starts_its_own_trace(
    queue_instance: dg.DagsterInstance, spans: InMemorySpanExporter
) -> None:
    run = submit(queue_instance)
    (span,) = spans.get_finished_spans()
    assert span.parent is None
    assert run.tags[TRACEPARENT_TAG] == tracing.traceparent(span.context)


def test_tracing_off_records_only_the_callers_context(
    queue_instance: dg.DagsterInstance, off: None
) -> None:
    assert submit(queue_instance, headers={TRACEPARENT_HEADER: CALLER}).tags[TRACEPARENT_TAG] == (
        CALLER
    )
    assert TRACEPARENT_TAG not in submit(queue_instance).tags
    malformed = submit(queue_instance, headers={TRACEPARENT_HEADER: "00-nonsense"})
    assert TRACEPARENT_TAG not in malformed.tags


def test_a_started_or_reexecuted_run_keeps_the_trace_it_has(
    queue_instance: dg.DagsterInstance, spans: InMemorySpanExporter
) -> None:
    cli = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    started = submit(queue_instance, tags={TRACEPARENT_TAG: cli})
    assert started.tags[TRACEPARENT_TAG] == cli
    resumed = submit(queue_instance, headers={TRACEPARENT_HEADER: CALLER}, parent=started)
    assert TRACEPARENT_TAG not in resumed.tags  # it joins its root run's trace (tracing.py)
    assert spans.get_finished_spans() == ()
