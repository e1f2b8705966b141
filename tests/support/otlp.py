"""A small OTLP/HTTP trace receiver on 127.0.0.1, for tests that follow a trace across processes.

No collector can be installed here; this one decodes what the SDK's exporter sends
(`ExportTraceServiceRequest`, protobuf, `POST /v1/traces`), keeps every raw body (the secret
checks read each byte that left a process) and the spans, and prints them as a tree.
"""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Span:
    """One received span, its ids as hex as a traceparent writes them."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attributes: dict[str, Any]
    links: list[str]
    service: str
    error: bool

    @property
    def seconds(self) -> float:
        return (self.end - self.start) / 1e9


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _span(span: Any, resource: Any) -> Span:
    service = next((_value(a.value) for a in resource if a.key == "service.name"), "")
    return Span(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        name=span.name,
        start=span.start_time_unix_nano,
        end=span.end_time_unix_nano,
        attributes={a.key: _value(a.value) for a in span.attributes},
        links=[link.span_id.hex() for link in span.links],
        service=str(service),
        error=span.status.code == 2,
    )


@dataclass
class Receiver:
    """What the receiver got: raw request bodies and the decoded spans."""

    url: str = ""
    bodies: list[bytes] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        received = [
            _span(span, resource.resource.attributes)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.lock:
            self.bodies.append(body)
            self.spans.extend(received)

    def named(self, prefix: str) -> list[Span]:
        with self.lock:
            return [span for span in self.spans if span.name.startswith(prefix)]

    def wait_for(self, prefix: str, count: int = 1, timeout: float = 30) -> list[Span]:
        """The spans named `prefix…` once at least `count` arrived (exporters batch)."""
        deadline = time.monotonic() + timeout
        while len(found := self.named(prefix)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(found)} of {count} {prefix!r} spans arrived")
            time.sleep(0.2)
        return found

    def tree(self, trace_id: str) -> str:
        """The trace as indented text, children by start time.

        Each span shows its duration and the attributes that say what it was; a row of Plex
        requests under one span is one line. Spans whose parent never arrived (a process
        killed before it ended that span) are listed under that parent's id.
        """
        with self.lock:
            spans = sorted((s for s in self.spans if s.trace_id == trace_id), key=lambda s: s.start)
        ids = {s.span_id for s in spans}
        children: dict[str, list[Span]] = {}
        for span in spans:
            children.setdefault(span.parent_id, []).append(span)
        lines = [f"trace {trace_id}"]

        def show(group: list[Span], depth: int) -> None:
            for row in _rows(group):
                span, indent = row[0], "  " * depth
                if len(row) > 1:
                    total = sum(s.seconds for s in row)
                    lines.append(f"{indent}{span.name} x{len(row)} [{total:.3f}s in all]")
                    continue
                error = " ERROR" if span.error else ""
                links = f" links={','.join(span.links)}" if span.links else ""
                lines.append(
                    f"{indent}{span.name} [{span.seconds:.3f}s]{error}{links}{_label(span)}"
                )
                show(children.get(span.span_id, []), depth + 1)

        for parent, group in children.items():
            if parent not in ids:
                lines.append(f"(parent {parent or 'none'}, not received)")
                show(group, 1)
        return "\n".join(lines)


SHOWN = (
    "airwave.run.id",
    "airwave.run.recorded_by",
    "airwave.step.attempt",
    "airwave.claim.outcome",
    "airwave.channel.number",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "airwave.call.cost_usd",
    "airwave.build.cost_usd",
    "airwave.run.budget_usd",
)


def _label(span: Span) -> str:
    shown = [
        f"{key.split('.', 1)[1]}={span.attributes[key]:.6g}"
        if isinstance(span.attributes[key], float)
        else f"{key.split('.', 1)[1]}={span.attributes[key]}"
        for key in SHOWN
        if key in span.attributes
    ]
    return f" {' '.join(shown)}" if shown else ""


def _rows(group: list[Span]) -> Iterator[list[Span]]:
    """The spans of `group` one by one, a run of same-named Plex requests together."""
    index = 0
    while index < len(group):
        span, count = group[index], 1
        while (
            span.name.startswith("plex ")
            and index + count < len(group)
            and group[index + count].name == span.name
        ):
            count += 1
        yield group[index : index + count]
        index += count


class _Handler(http.server.BaseHTTPRequestHandler):
    receiver: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        self.receiver.take(body)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def otlp() -> Iterator[Receiver]:
    """A receiver on a free port of 127.0.0.1; `url` is its OTEL_EXPORTER_OTLP_ENDPOINT."""
    receiver = Receiver()
    handler = type("Handler", (_Handler,), {"receiver": receiver})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()
