"""The tracing hooks in one process, recorded by the SDK's in-memory exporter.

The trace across processes (CLI, run worker, step processes, a resume, celery workers) is
asserted over OTLP/HTTP in tests/integration/test_tracing.py.
"""

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from airwave_dagster import tracing
from airwave_dagster.run_tags import TRACEPARENT_TAG
from ops.steps import versioned_op

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_configured_only_by_an_otlp_endpoint() -> None:
    assert not tracing.configured({})
    assert not tracing.configured({"OTEL_SERVICE_NAME": "airwave"})
    assert tracing.configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing.configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert not tracing.configured({**endpoint, "OTEL_TRACES_EXPORTER": "none"})
    assert not tracing.configured({**endpoint, "OTEL_SDK_DISABLED": "true"})


def test_off_nothing_is_hooked(off: None) -> None:
    """Off (no endpoint): no response hook on the Plex session, a no-op tracer, no ids."""
    assert tracing.http_session().hooks["response"] == []
    assert not tracing.enabled()
    with tracing.span("commit channel", {}):
        tracing.note({"airwave.channel.number": 1})


def test_a_start_continues_the_callers_trace(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tracing.TRACEPARENT_ENV, CALLER)

    with tracing.starting("start import_lineup", {"airwave.run.job": "import_lineup"}) as tags:
        pass

    (span,) = spans.get_finished_spans()
    recorded = tracing.parse_traceparent(tags[TRACEPARENT_TAG])
    assert recorded is not None
    assert f"{span.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert span.parent is not None and f"{span.parent.span_id:016x}" == "b7ad6b7169203331"
    assert (recorded.trace_id, recorded.span_id) == (span.context.trace_id, span.context.span_id)


def test_a_resume_joins_the_root_runs_trace_and_links_its_caller(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = "00-11111111111111111111111111111111-2222222222222222-01"
    monkeypatch.setenv(tracing.TRACEPARENT_ENV, CALLER)

    with tracing.starting("resume ai_lineup", {}, join=root):
        pass

    (span,) = spans.get_finished_spans()
    assert span.context.trace_id == int("1" * 32, 16)
    assert span.parent is not None and span.parent.span_id == int("2" * 16, 16)
    assert [f"{link.context.trace_id:032x}" for link in span.links] == [CALLER.split("-")[1]]


def test_with_tracing_off_a_caller_is_still_recorded_on_the_run(
    off: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tracing.starting("start x", {}) as tags:
        assert tags == {}
    monkeypatch.setenv(tracing.TRACEPARENT_ENV, CALLER)
    with tracing.starting("start x", {}) as tags:
        assert tags == {TRACEPARENT_TAG: CALLER}
    monkeypatch.setenv(tracing.TRACEPARENT_ENV, "00-not-a-trace")
    with tracing.starting("start x", {}) as tags:
        assert tags == {}


def test_run_and_step_spans_join_without_passing_ids(spans: InMemorySpanExporter) -> None:
    """The run worker and a step process derive the run span's id from the run id alone."""
    with tracing.starting("start ai_lineup", {}) as tags:
        pass
    root_id, resume_id = (
        "5f0c9a4e-0000-4000-8000-000000000001",
        "5f0c9a4e-0000-4000-8000-000000000002",
    )
    runs = {root_id: tags}
    resumed_tags = dict(tags)  # Dagster copies the parent's tags to a re-execution

    marked: list[str] = []
    with tracing.run_span(
        run_id=resume_id,
        job_name="ai_lineup",
        tags=resumed_tags,
        root_run_id=root_id,
        parent_run_id=root_id,
        root_tags=runs.get,
        unexported={root_id: (1_700_000_000.0, 1_700_000_060.0)}.get,
        exported=lambda: marked.append(resume_id),
    ):
        with tracing.step_span(
            run_id=resume_id,
            step_key="build_ai_channel[ch_1002]",
            attempt=2,
            tags=resumed_tags,
            root_run_id=root_id,
            root_tags=runs.get,
        ):
            tracing.note({"airwave.claim.outcome": "claimed", "airwave.channel.number": 1002})
            with tracing.span("commit channel", {"airwave.channel.number": 1002}):
                pass

    dead, run = (s for s in spans.get_finished_spans() if s.name == "run ai_lineup")
    by_name = {span.name: span for span in spans.get_finished_spans()}
    start = by_name["start ai_lineup"]
    assert marked == [resume_id]
    # The dead root run's span, recorded by its resume: its derived id, its own times.
    assert dead.context.span_id == tracing.run_span_id(root_id)
    assert dead.parent is not None and dead.parent.span_id == start.context.span_id
    assert (dead.start_time, dead.end_time) == (1_700_000_000 * 10**9, 1_700_000_060 * 10**9)
    assert not dead.status.is_ok
    step, commit = by_name["step build_ai_channel[ch_1002]"], by_name["commit channel"]
    assert {s.context.trace_id for s in by_name.values()} == {start.context.trace_id}
    assert run.parent is not None and run.parent.span_id == start.context.span_id
    assert run.context.span_id == tracing.run_span_id(resume_id)
    assert [link.context.span_id for link in run.links] == [tracing.run_span_id(root_id)]
    assert run.attributes is not None and run.attributes["airwave.run.resume"] is True
    assert step.parent is not None and step.parent.span_id == run.context.span_id
    assert step.attributes is not None
    assert step.attributes["airwave.step.attempt"] == 2
    assert step.attributes["airwave.claim.outcome"] == "claimed"
    assert commit.parent is not None and commit.parent.span_id == step.context.span_id


def test_an_untraced_run_group_shares_its_root_runs_trace(spans: InMemorySpanExporter) -> None:
    root_id = "5f0c9a4e-0000-4000-8000-000000000001"
    for run_id, parent in ((root_id, None), ("5f0c9a4e-0000-4000-8000-000000000002", root_id)):
        with tracing.run_span(
            run_id=run_id,
            job_name="import_lineup",
            tags={},
            root_run_id=parent,
            parent_run_id=parent,
            root_tags=lambda _: {},
        ):
            pass

    first, second = spans.get_finished_spans()
    assert first.context.trace_id == second.context.trace_id == int(root_id.replace("-", ""), 16)
    assert first.parent is None and second.parent is None


class _Plex(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404 if self.path.startswith("/missing") else 200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


def test_http_spans_have_no_query_and_no_headers(spans: InMemorySpanExporter) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Plex)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    session = tracing.http_session()
    try:
        session.get(f"{base}/identity?X-Plex-Token=tok-SECRET-1")  # no current span: nothing
        with tracing.span("step", {}):
            session.get(f"{base}/library/sections?X-Plex-Token=tok-SECRET-1")
            session.get(f"{base}/missing", headers={"X-Plex-Token": "tok-SECRET-1"})
    finally:
        server.shutdown()

    requests = [s for s in spans.get_finished_spans() if s.name.startswith("plex")]
    assert [(s.name, dict(s.attributes or {})["url.path"]) for s in requests] == [
        ("plex GET", "/library/sections"),
        ("plex GET", "/missing"),
    ]
    assert [dict(s.attributes or {})["http.response.status_code"] for s in requests] == [200, 404]
    assert "SECRET" not in repr([s.to_json() for s in spans.get_finished_spans()])


def test_an_ops_step_span_wraps_its_body(
    spans: InMemorySpanExporter,
) -> None:
    @versioned_op("1")
    def plan(context: dg.OpExecutionContext) -> int:
        tracing.note({"airwave.channel.number": 7})
        return 7

    @versioned_op("1", out=dg.DynamicOut(int))
    def fan_out(number: int) -> Iterator[dg.DynamicOutput[int]]:
        yield dg.DynamicOutput(number, mapping_key=f"ch_{number}")

    @dg.job(executor_def=dg.in_process_executor)
    def tiny() -> None:
        fan_out(plan())

    instance = dg.DagsterInstance.ephemeral()
    result = tiny.execute_in_process(instance=instance, tags={TRACEPARENT_TAG: CALLER})
    assert result.success

    names = sorted(s.name for s in spans.get_finished_spans())
    assert names == ["step fan_out", "step plan"]
    plan_span = next(s for s in spans.get_finished_spans() if s.name == "step plan")
    assert plan_span.attributes is not None and plan_span.attributes["airwave.channel.number"] == 7
    assert plan_span.parent is not None
    assert plan_span.parent.span_id == tracing.run_span_id(result.run_id)
    assert f"{plan_span.context.trace_id:032x}" == CALLER.split("-")[1]
