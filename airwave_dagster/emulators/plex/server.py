"""HTTP plumbing of the Plex emulator: threads, auth, latency, faults and request accounting.

Reference: docs/reference/plex-emulator.md (the gotchas "GN" cited below).
"""

from __future__ import annotations

import json
import logging
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler
from types import FrameType, TracebackType
from typing import Any, cast

from airwave_dagster.emulators.http_server import TrackedThreadingServer
from airwave_dagster.emulators.plex.app import PlexApp, Request, Response, unquoted_path
from airwave_dagster.emulators.plex.dataset import EmulatedLibrary, build_library
from airwave_dagster.emulators.plex.query import decode_query
from airwave_dagster.emulators.plex.vocabulary import OPTIONAL_FIELDS

logger = logging.getLogger(__name__)

DEFAULT_TOKEN = "emulator-token"
STATS_PATH = "/__emulator/stats"
RESET_PATH = "/__emulator/stats/reset"


@dataclass(slots=True)
class EmulatorOptions:
    """Behaviour switches, changeable while the server runs (see `EmulatorHandle.configure`).

    Attributes:
        token: The only `X-Plex-Token` accepted; anything else gets 401.
        allow_without_token: Also answer requests that carry no token at all, as a real server
            does for clients in its "List of IP addresses and networks that are allowed without
            auth". A wrong token is still refused.
        latency_ms: Delay added before every answer, to make round trips count.
        fail_rate: Share of requests (0..1) answered 500, drawn from an RNG seeded by the library
            seed so a run's failure pattern repeats.
        fail_all: Answer every request 500 (a server that is up but broken).
        truncate_tags: Cut tag lists in listings the way real PMS does (G10); on by default.
            Off (`--full-listings`) is a permissive mode that real servers never offer.
    """

    token: str = DEFAULT_TOKEN
    allow_without_token: bool = False
    latency_ms: float = 0.0
    fail_rate: float = 0.0
    fail_all: bool = False
    truncate_tags: bool = True


@dataclass(slots=True)
class RequestStats:
    """Counts of requests served, in total, per request kind and per status."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _kinds: Counter[str] = field(default_factory=Counter)
    _statuses: Counter[str] = field(default_factory=Counter)

    def record(self, kind: str, status: int) -> None:
        """Count one answered request."""
        with self._lock:
            self._kinds[kind] += 1
            self._statuses[str(status)] += 1

    def snapshot(self) -> dict[str, Any]:
        """`{"total": n, "by_kind": {...}, "by_status": {...}}`, safe to serialise."""
        with self._lock:
            return {
                "total": sum(self._kinds.values()),
                "by_kind": dict(sorted(self._kinds.items())),
                "by_status": dict(sorted(self._statuses.items())),
            }

    def reset(self) -> None:
        """Forget every count."""
        with self._lock:
            self._kinds.clear()
            self._statuses.clear()


class EmulatorServer(TrackedThreadingServer):
    """The emulator's server: connection tracking (for `stop`) plus options, stats and faults."""

    allow_reuse_address = True
    label = "Plex emulator"

    def __init__(
        self,
        address: tuple[str, int],
        app: PlexApp,
        options: EmulatorOptions,
        stats: RequestStats,
        fault_seed: int,
    ) -> None:
        super().__init__(address, _Handler)
        self.app = app
        self.options = options
        self.stats = stats
        self._faults = random.Random(f"plex-emulator-faults-{fault_seed}")
        self._faults_lock = threading.Lock()

    def should_fail(self) -> bool:
        """Draw the next fault decision."""
        if self.options.fail_all:
            return True
        if self.options.fail_rate <= 0:
            return False
        with self._faults_lock:
            return self._faults.random() < self.options.fail_rate


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keeps connections alive; requests.Session reuses them, so Content-Length is a must.
    protocol_version = "HTTP/1.1"

    @property
    def emulator(self) -> EmulatorServer:
        return cast("EmulatorServer", self.server)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature
        logger.debug("%s " + format, self.address_string(), *args)

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path = unquoted_path(self.path)
        query = self.path.split("?", 1)[1] if "?" in self.path else ""
        if path.startswith("/__emulator/"):
            self._send(self._control(method, path))
            return
        response = self._answer(method, path, query)
        self.emulator.stats.record(response.kind, response.status)
        self._send(response)

    def _answer(self, method: str, path: str, query: str) -> Response:
        options = self.emulator.options
        if options.latency_ms > 0:
            time.sleep(options.latency_ms / 1000)
        if self.emulator.should_fail():
            return _text(500, "Injected failure", "fault")
        if method != "GET":
            return _text(405, "The emulator is read-only", "not_allowed")
        token = self.headers.get("X-Plex-Token")
        if token is None:
            token = next((t.value for t in decode_query(query) if t.name == "X-Plex-Token"), None)
        if token != options.token and not (token is None and options.allow_without_token):
            return _text(401, "Unauthorized", "unauthorized")
        try:
            return self.emulator.app.handle(Request(path, query, dict(self.headers.items())))
        except Exception:
            logger.exception("emulator failed on %s", self.path)
            return _text(500, "Emulator error", "error")

    def _control(self, method: str, path: str) -> Response:
        if method == "GET" and path == STATS_PATH:
            body = json.dumps(self.emulator.stats.snapshot()).encode()
            return Response(200, body, "application/json", "control")
        if method == "POST" and path == RESET_PATH:
            self.emulator.stats.reset()
            return Response(200, b'{"reset": true}', "application/json", "control")
        return _text(404, "Unknown emulator control", "control")

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(response.body)


def _text(status: int, message: str, kind: str) -> Response:
    body = f"<html><body><h1>{status} {message}</h1></body></html>".encode()
    return Response(status, body, "text/html;charset=utf-8", kind)


class EmulatorHandle:
    """A running emulator: where it listens, what it serves, and its request counters.

    Use it as a context manager, or call `stop()`.
    """

    def __init__(
        self, server: EmulatorServer, thread: threading.Thread, library: EmulatedLibrary
    ) -> None:
        self._server = server
        self._thread = thread
        self.library = library
        host, port = server.server_address[:2]
        self.host = str(host)
        self.port = int(port)

    @property
    def url(self) -> str:
        """The base URL to give `PlexServer`."""
        return f"http://{self.host}:{self.port}"

    @property
    def token(self) -> str:
        """The token the emulator accepts."""
        return self._server.options.token

    @property
    def options(self) -> EmulatorOptions:
        """A copy of the current behaviour switches."""
        return EmulatorOptions(**asdict(self._server.options))

    def configure(self, **changes: Any) -> None:
        """Change switches: `latency_ms`, `fail_rate`, `fail_all`, `truncate_tags`, `token`,
        `allow_without_token`."""
        for name, value in changes.items():
            if not hasattr(self._server.options, name):
                raise TypeError(f"unknown emulator option {name!r}")
            setattr(self._server.options, name, value)

    def stats(self) -> dict[str, Any]:
        """Requests served so far: total, per kind, per status."""
        return self._server.stats.snapshot()

    def reset_stats(self) -> None:
        """Zero the request counters."""
        self._server.stats.reset()

    def stop(self) -> None:
        """Stop serving and cut open connections."""
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> EmulatorHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_emulator(
    *,
    items: int = 2000,
    seed: int = 7,
    port: int = 0,
    host: str = "127.0.0.1",
    token: str = DEFAULT_TOKEN,
    latency_ms: float = 0,
    fail_rate: float = 0,
    truncate_tags: bool = True,
    missing_fields: Iterable[str] = (),
    allow_without_token: bool = False,
    library: EmulatedLibrary | None = None,
) -> EmulatorHandle:
    """Serve a synthetic library from a daemon thread and return at once.

    Args:
        items: Playable items (movies + episodes) to generate; ignored when `library` is given.
        seed: Dataset seed (and fault seed); ignored for the dataset when `library` is given.
        port: TCP port; 0 picks a free one (read it back from the handle).
        host: Interface to bind; loopback by default.
        token: The accepted `X-Plex-Token`.
        latency_ms: Delay added to every request.
        fail_rate: Share of requests answered 500.
        truncate_tags: Truncate tag lists in listings like real PMS (G10); False only for a
            permissive test.
        missing_fields: Filter fields this server lacks (from `vocabulary.OPTIONAL_FIELDS`):
            absent from its `<Meta>`, refused in searches, as an older server would.
        library: A library built earlier, to share one dataset between servers and tests.
        allow_without_token: Also answer requests without a token (see `EmulatorOptions`).

    Returns:
        The handle of the running server.
    """
    served = library if library is not None else build_library(items, seed)
    options = EmulatorOptions(
        token=token,
        allow_without_token=allow_without_token,
        latency_ms=latency_ms,
        fail_rate=fail_rate,
        truncate_tags=truncate_tags,
    )
    missing = frozenset(missing_fields)
    unknown = missing - OPTIONAL_FIELDS
    if unknown:
        raise ValueError(f"not optional filter fields: {', '.join(sorted(unknown))}")
    app = PlexApp(served, truncate_tags=lambda: options.truncate_tags, missing_fields=missing)
    server = EmulatorServer((host, port), app, options, RequestStats(), served.seed)
    # A short poll interval makes stop() quick; idle polling costs nothing measurable.
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name=f"plex-emulator-{server.server_address[1]}",
        daemon=True,
    )
    thread.start()
    return EmulatorHandle(server, thread, served)


def run_emulator(
    port: int,
    items: int,
    seed: int,
    latency_ms: float = 0,
    token: str = DEFAULT_TOKEN,
    host: str = "127.0.0.1",
    *,
    truncate_tags: bool = True,
    allow_without_token: bool = False,
) -> None:
    """Serve in the foreground until SIGINT or SIGTERM.

    Args:
        port: TCP port to listen on (0 picks a free one; the URL is logged).
        items: Playable items to generate.
        seed: Dataset seed.
        latency_ms: Delay added to every request.
        token: The accepted `X-Plex-Token`.
        host: Interface to bind.
        truncate_tags: Partial tag lists in listings, as real servers send (the default).
        allow_without_token: Also answer requests without a token (see `EmulatorOptions`).
    """
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    handle = start_emulator(
        items=items,
        seed=seed,
        port=port,
        host=host,
        token=token,
        latency_ms=latency_ms,
        truncate_tags=truncate_tags,
        allow_without_token=allow_without_token,
    )
    logger.info(
        "Plex emulator serving %d items (seed %d) at %s with token %r (built in %.1fs)",
        items,
        seed,
        handle.url,
        handle.token,
        time.monotonic() - started,
    )
    try:
        # A timed wait keeps the main thread responsive to signals on every platform.
        while not stop.wait(0.5):
            pass
    finally:
        handle.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        logger.info("Plex emulator stopped; %d requests served", handle.stats()["total"])
