"""Tracing overhead: the 50-channel import with OpenTelemetry off and on, side by side.

`tracing_section(...)` runs inside `bench/run.py` (its Plex emulator, database and lineup file).
Each import runs in a fresh Python process (`python -m bench.tracing LINEUP`), because whether a
process traces is decided once, when it first asks, and the multiprocess executor's forkserver
keeps the environment it started with. Off is the environment with no `OTEL_*` variable: the
code path every run takes by default. On exports every span over OTLP/HTTP to a receiver in this
process that decodes and counts them. The variants alternate (off, on, off, on) so a change in
the machine's load falls on both; the load average is recorded with the figures.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from statistics import mean
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROUNDS = 2
HEADING = "## Tracing overhead: the 50-channel import with OpenTelemetry off and on"


class _Counter(http.server.BaseHTTPRequestHandler):
    spans = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        count = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with _Counter.lock:
            _Counter.spans += count
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def _receiver() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _one(lineup: Path, otel: dict[str, str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-m", "bench.tracing", str(lineup)],
        env={**env, **otel},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"tracing benchmark import failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def tracing_section(lineup: Path) -> str:
    """Run the import `ROUNDS` times with tracing off and on, alternating; the Markdown."""
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    spans: list[int] = []
    with _receiver() as url:
        for _ in range(ROUNDS):
            runs["off"].append(_one(lineup, {}))
            before = _Counter.spans
            runs["on"].append(
                _one(lineup, {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_SERVICE_NAME": "bench"})
            )
            spans.append(_Counter.spans - before)
    load_after = os.getloadavg()
    off = mean(r["wall_s"] for r in runs["off"])
    on = mean(r["wall_s"] for r in runs["on"])
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        HEADING,
        "",
        f"Measured {when}. The production `import_lineup` (its default executor, at most 4 "
        "builds at once) in a fresh process per run, off and on alternating. Off: no "
        "`OTEL_*` variable, the default path (the hooks check a cached flag and return). On: "
        "`OTEL_EXPORTER_OTLP_ENDPOINT` at a receiver on 127.0.0.1 in the benchmark process, "
        "every span exported (`bench/tracing.py`).",
        "",
        "| round | tracing off | tracing on | spans exported (on) |",
        "|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {index + 1} | {runs['off'][index]['wall_s']:.1f} s "
        f"| {runs['on'][index]['wall_s']:.1f} s | {spans[index]} |"
        for index in range(ROUNDS)
    )
    lines += [
        f"| mean | {off:.1f} s | {on:.1f} s | |",
        "",
        f"On / off wall-time ratio: **{on / off:.2f}x**. Load average (1, 5, 15 min) before: "
        f"{', '.join(f'{v:.2f}' for v in load_before)}; after: "
        f"{', '.join(f'{v:.2f}' for v in load_after)} ({os.cpu_count()} cores).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    """One import of the lineup file in argv[1] (run by `tracing_section`); its figures as JSON."""
    import dagster as dg

    from airwave_dagster import settings
    from airwave_dagster.definitions import import_lineup_job
    from bench.run import _run_import

    with dg.DagsterInstance.get() as instance:
        figures = _run_import(
            instance,
            import_lineup_job,
            Path(sys.argv[1]),
            os.environ[settings.PLEX_URL_ENV],
            os.environ[settings.DATABASE_URL_ENV],
        )
    sys.stdout.write(json.dumps(figures) + "\n")


if __name__ == "__main__":
    main()
