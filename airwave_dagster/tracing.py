"""OpenTelemetry traces of runs: the trace context a run carries, and the spans of its work.

Off unless the standard `OTEL_*` variables name an OTLP endpoint (`configured`): then no tracer
provider is installed and every hook here returns after one cached check. On, each process that
touches a run (the CLI, the run worker, each step process, a celery worker) installs one provider
exporting OTLP/HTTP, configured by the SDK from the same variables (endpoint, headers, service
name, sampler).

A run's trace context is a W3C `traceparent` in its run tag `TRACEPARENT_TAG`, written by
whatever started it (`starting`). A re-execution copies its parent's tags, and its run worker
also reads the root run's tag, so every resume of a run joins the root run's trace. Processes
never pass span ids to each other: a run's span id is derived from its run id (`run_span_id`),
so a step process, a celery worker on another machine, or the resume of a run can name the run
span as a parent or a link knowing only the run. docs/observability.md describes every span.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from airwave_dagster.run_tags import TRACEPARENT_TAG

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.util.types import AttributeValue

SCOPE = "airwave_dagster"
DEFAULT_SERVICE_NAME = "airwave"
TRACEPARENT_ENV = "TRACEPARENT"
"""The caller's trace context, for a CLI command that is itself a step of a traced job."""
ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

_lock = threading.Lock()
_provider: TracerProvider | None = None
_decided = False
_forced: ContextVar[tuple[int | None, int | None]] = ContextVar(
    "airwave_forced_ids", default=(None, None)
)
"""(trace id, span id) the next span must take (`_ids`); None: a random one."""

_propagator = TraceContextTextMapPropagator()


def configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, and no exporter `none`."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_ENVS)


def enabled() -> bool:
    """Whether this process records spans (installs the provider on first call when configured)."""
    global _decided, _provider
    if _decided:
        return _provider is not None
    with _lock:
        if not _decided:
            if configured():
                _provider = _otlp_provider()
                trace.set_tracer_provider(_provider)
            _decided = True
    return _provider is not None


def _otlp_provider() -> TracerProvider:
    # Imported here: a process with tracing off never loads the SDK or the exporter.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: DEFAULT_SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(attributes), id_generator=new_id_generator())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def _preload() -> None:
    """Import the SDK and the exporter now, when tracing is configured.

    The multiprocess executor's forkserver imports the code location once and forks every step
    process from it; loaded there, these modules cost each step nothing.
    """
    import opentelemetry.exporter.otlp.proto.http.trace_exporter
    import opentelemetry.sdk.trace.export  # noqa: F401


if configured():
    _preload()


def new_id_generator() -> Any:
    """The SDK's random ids, except where `_ids` fixes the next span's (run spans)."""
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class _Fixable(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            return _forced.get()[0] or super().generate_trace_id()

        def generate_span_id(self) -> int:
            return _forced.get()[1] or super().generate_span_id()

    return _Fixable()


@contextmanager
def _ids(trace_id: int | None, span_id: int | None) -> Iterator[None]:
    token = _forced.set((trace_id, span_id))
    try:
        yield
    finally:
        _forced.reset(token)


def tracer() -> trace.Tracer:
    """This project's tracer (a no-op one while tracing is off)."""
    if not enabled() or _provider is None:
        return trace.NoOpTracer()
    return _provider.get_tracer(SCOPE)


def flush() -> None:
    """Export what this process recorded: before a step process or a command exits."""
    if _provider is not None:
        _provider.force_flush()


# -- trace context on runs ------------------------------------------------------------------------


def traceparent(context: SpanContext) -> str:
    """`context` as a W3C traceparent header value."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def parse_traceparent(value: str | None) -> SpanContext | None:
    """The remote span context of a traceparent value; None when absent or malformed."""
    if not value:
        return None
    carried = trace.get_current_span(_propagator.extract({"traceparent": value.strip()}))
    context = carried.get_span_context()
    return context if context.is_valid else None


def run_span_id(run_id: str) -> int:
    """The span id of `run_id`'s run span: every process derives it from the run id alone."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def _trace_id_of_run(run_id: str) -> int:
    """A trace id for a run group no starter traced: its root run id (a UUID) as 128 bits."""
    try:
        return uuid.UUID(run_id).int or 1
    except ValueError:
        return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big") or 1


def _caller() -> SpanContext | None:
    return parse_traceparent(os.environ.get(TRACEPARENT_ENV))


@contextmanager
def starting(
    name: str,
    attributes: Mapping[str, AttributeValue],
    *,
    join: str | None = None,
    from_environment: bool = True,
) -> Iterator[dict[str, str]]:
    """A span around starting a run; yields the tags that record it on the run.

    The span continues `TRACEPARENT` when `from_environment` (the CLI; a sensor or a daemon
    inherits whatever its shell had, which is no caller of its own). `join` is a run's recorded
    traceparent: the span then joins that run's trace, linking to the caller instead. With
    tracing off, a caller's or joined context is still recorded, so processes that trace
    continue it.
    """
    caller = _caller() if from_environment else None
    parent = parse_traceparent(join) or caller
    if not enabled():
        yield {} if parent is None else {TRACEPARENT_TAG: traceparent(parent)}
        return
    links = [Link(caller)] if caller is not None and parent is not caller else None
    span = tracer().start_span(
        name, context=_under(parent), kind=SpanKind.CLIENT, attributes=attributes, links=links
    )
    with _ended(span):
        yield {TRACEPARENT_TAG: traceparent(span.get_span_context())}


def _under(parent: SpanContext | None) -> Context:
    """A context whose span is `parent`; an empty one (a new trace) without."""
    if parent is None:
        return Context()
    return trace.set_span_in_context(trace.NonRecordingSpan(parent), Context())


def _failed(span: trace.Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}"))


@contextmanager
def _ended(span: trace.Span, *, current: bool = True) -> Iterator[None]:
    """The block inside `span` (the current span when `current`); then `span` ends, exported.

    A block that raises marks the span failed. The export happens here, not in a later batch:
    the process may end right after (a step process, a celery worker, the CLI).
    """
    try:
        if current:
            with trace.use_span(
                span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                yield
        else:
            yield
    except BaseException as error:
        _failed(span, error)
        raise
    finally:
        span.end()
        flush()


RootTags = Callable[[str], Mapping[str, str] | None]
"""The tags of a run by id (the root run's traceparent is read only when this run has none)."""


def _run_parent(
    run_id: str, tags: Mapping[str, str], root_run_id: str | None, root_tags: RootTags
) -> tuple[int, SpanContext | None]:
    """The trace id of the run's group and the context its run span is a child of.

    The root run's traceparent wins (its re-executions join its trace even when a tag was
    dropped); a group nobody traced takes its root run id as trace id and has no parent.
    """
    recorded = tags.get(TRACEPARENT_TAG)
    if root_run_id and root_run_id != run_id:
        recorded = (root_tags(root_run_id) or {}).get(TRACEPARENT_TAG) or recorded
    parent = parse_traceparent(recorded)
    if parent is not None:
        return parent.trace_id, parent
    return _trace_id_of_run(root_run_id or run_id), None


def _run_context(
    run_id: str, tags: Mapping[str, str], root_run_id: str | None, root_tags: RootTags
) -> SpanContext:
    """The run span's context as another process names it (a parent of its step spans)."""
    trace_id, parent = _run_parent(run_id, tags, root_run_id, root_tags)
    flags = parent.trace_flags if parent is not None else TraceFlags(TraceFlags.SAMPLED)
    return SpanContext(trace_id, run_span_id(run_id), is_remote=True, trace_flags=flags)


RunWindow = Callable[[str], tuple[float, float] | None]
"""When a run ran (epoch seconds), if its run span was never exported (its worker died)."""


@contextmanager
def run_span(
    *,
    run_id: str,
    job_name: str,
    tags: Mapping[str, str],
    root_run_id: str | None,
    parent_run_id: str | None,
    root_tags: RootTags,
    unexported: RunWindow = lambda run_id: None,
    exported: Callable[[], None] = lambda: None,
) -> Iterator[None]:
    """The span of one run (or one resume of it), in its run worker, around its orchestration.

    Not made current: the run worker's steps run in processes of their own, which name this
    span as their parent by its derived id (`step_span`). A resume links to the run it resumes,
    and records that run's span itself when `unexported` says its worker died before it could
    (so the steps the dead run finished keep a parent); `exported` marks this run's as sent.
    """
    if not enabled():
        yield
        return
    trace_id, parent = _run_parent(run_id, tags, root_run_id, root_tags)
    links = None
    if parent_run_id:
        resumed = SpanContext(trace_id, run_span_id(parent_run_id), is_remote=True)
        links = [Link(resumed, {"airwave.link": "resumes"})]
        if (window := unexported(parent_run_id)) is not None:
            _dead_run(trace_id, parent, parent_run_id, job_name, window, run_id)
    attributes: dict[str, AttributeValue] = {
        "airwave.run.id": run_id,
        "airwave.run.job": job_name,
        "airwave.run.root_id": root_run_id or run_id,
        "airwave.run.resume": parent_run_id is not None,
    }
    if parent_run_id:
        attributes["airwave.run.parent_id"] = parent_run_id
    with _ids(trace_id, run_span_id(run_id)):
        span = tracer().start_span(
            f"run {job_name}", context=_under(parent), attributes=attributes, links=links
        )
    try:
        # Not made current: the run worker's executor yields events between its steps, and a
        # current span would leak into whatever consumes them.
        with _ended(span, current=False):
            yield
    finally:
        exported()


def _dead_run(
    trace_id: int,
    parent: SpanContext | None,
    run_id: str,
    job_name: str,
    window: tuple[float, float],
    recorded_by: str,
) -> None:
    """The span a dead run worker never ended, recorded by the run that resumes it."""
    attributes: dict[str, AttributeValue] = {
        "airwave.run.id": run_id,
        "airwave.run.job": job_name,
        "airwave.run.recorded_by": recorded_by,
    }
    with _ids(trace_id, run_span_id(run_id)):
        span = tracer().start_span(
            f"run {job_name}",
            context=_under(parent),
            attributes=attributes,
            start_time=int(window[0] * 1e9),
        )
    span.set_status(Status(StatusCode.ERROR, "its run worker died before it ended this span"))
    span.end(end_time=int(window[1] * 1e9))


@contextmanager
def step_span(
    *,
    run_id: str,
    step_key: str,
    attempt: int,
    tags: Mapping[str, str],
    root_run_id: str | None,
    root_tags: RootTags,
) -> Iterator[None]:
    """The span of one attempt of one step, a child of its run's span, flushed when it ends.

    The step's process may end right after (multiprocess executor, celery worker), so what it
    recorded is exported here, not left to a batch that would die with it.
    """
    if not enabled():
        yield
        return
    run = _run_context(run_id, tags, root_run_id, root_tags)
    attributes: dict[str, AttributeValue] = {
        "airwave.run.id": run_id,
        "airwave.step.key": step_key,
        "airwave.step.attempt": attempt,
    }
    span = tracer().start_span(
        f"step {step_key}",
        context=_under(run),
        attributes=attributes,
    )
    with _ended(span):
        yield


# -- small hooks in the work ----------------------------------------------------------------------


def note(attributes: Mapping[str, AttributeValue]) -> None:
    """Add attributes to the current span (a step's claim outcome, a model call's cost)."""
    if enabled():
        trace.get_current_span().set_attributes(attributes)


@contextmanager
def span(name: str, attributes: Mapping[str, AttributeValue]) -> Iterator[None]:
    """A child span of the current one around a block (a commit transaction)."""
    if not enabled():
        yield
        return
    with tracer().start_as_current_span(name, attributes=attributes):
        yield


def http_session() -> Any:
    """A requests session whose responses are recorded as client spans (the Plex client's).

    Each span has the method, the URL path (never the query, where a token could travel; request
    headers are not read), the status and the time until the response's headers arrived. A
    request made where no span is current (no step, no command) records nothing.
    """
    import requests

    session = requests.Session()
    if enabled():
        session.hooks["response"].append(_record_response)
    return session


def _record_response(response: Any, *args: Any, **kwargs: Any) -> Any:
    if not trace.get_current_span().get_span_context().is_valid:
        return response
    end = time.time_ns()
    url = urlsplit(response.request.url)
    method = str(response.request.method or "GET").upper()
    attributes: dict[str, AttributeValue] = {
        "http.request.method": method,
        "url.path": url.path or "/",
        "server.address": url.hostname or "",
        "http.response.status_code": int(response.status_code),
    }
    if url.port:
        attributes["server.port"] = url.port
    started = end - int(response.elapsed.total_seconds() * 1e9)
    span = tracer().start_span(
        f"plex {method}", kind=SpanKind.CLIENT, attributes=attributes, start_time=started
    )
    if response.status_code >= 400:
        span.set_status(Status(StatusCode.ERROR))
        span.set_attribute("error.type", str(response.status_code))
    span.end(end_time=end)
    return response
