"""Tracing on in the test process, recorded by the SDK's in-memory exporter; or off.

Registered in tests/conftest.py. Traces across processes go over OTLP/HTTP instead
(tests/support/otlp.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from airwave_dagster import tracing


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process, into memory; off again afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=tracing.new_id_generator())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "_provider", provider)
    monkeypatch.setattr(tracing, "_decided", True)
    monkeypatch.delenv(tracing.TRACEPARENT_ENV, raising=False)
    yield exporter
    provider.shutdown()


@pytest.fixture
def off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tracing off in this process, whatever its environment says."""
    monkeypatch.setattr(tracing, "_provider", None)
    monkeypatch.setattr(tracing, "_decided", True)
