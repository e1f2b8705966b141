"""HTTP side of the LLM stub: a threaded Messages-API server, its script queue and its records."""

from __future__ import annotations

import json
import logging
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from itertools import count
from types import FrameType, TracebackType
from typing import Any, cast

from airwave_dagster.emulators.anthropic.script import (
    MALFORMED_BODY,
    RATE_LIMIT_RETRY_AFTER,
    USAGE_FIELDS,
    Entry,
    ScriptError,
    check_entry,
    error_body,
    output_tokens,
    reply_blocks,
    stop_reason_of,
)
from airwave_dagster.emulators.anthropic.usage import PromptCache, total_tokens
from airwave_dagster.emulators.anthropic.validation import InvalidRequest, check_request
from airwave_dagster.emulators.http_server import TrackedThreadingServer

logger = logging.getLogger(__name__)

Responder = Callable[[dict[str, Any]], Entry | None]
"""Computes an entry from a request body when no scripted entry fits; None means "no answer"."""

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
REDACTED = "<redacted>"
# Headers that carry the API key: the SDK 2.x sends `Authorization: Bearer`, older clients
# `x-api-key`. Neither may reach a record, a log or a report.
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "proxy-authorization"})
CONTROL_PREFIX = "/__stub/"
STATS_PATH = "/__stub/stats"
SCRIPT_PATH = "/__stub/script"
TEXT_DELTA_CHARS = 8
JSON_DELTA_CHARS = 10


@dataclass(slots=True)
class StubRequest:
    """One request the stub received, with secrets redacted.

    Attributes:
        method: The HTTP method.
        path: The request path, e.g. `/v1/messages`.
        headers: Header names lower-cased (the SDK mixes `X-Stainless-…` and `x-stainless-…`);
            `authorization` and `x-api-key` values are replaced by `<redacted>`.
        raw: The body bytes exactly as sent.
        body: The parsed JSON body, or None when it did not parse.
        t: `time.monotonic()` when the request arrived.
        entry: The script entry played (None for validation errors, 404s, an exhausted script).
        status: The HTTP status answered.
        usage: The usage reported in a successful reply, else None.
    """

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    t: float
    entry: Entry | None = None
    status: int = 0
    usage: dict[str, int] | None = None

    def header(self, name: str) -> str | None:
        """A header's value, by case-insensitive name."""
        return self.headers.get(name.lower())

    @property
    def retry_count(self) -> int:
        """The SDK's attempt number within one logical call (0 for the first attempt)."""
        value = self.headers.get("x-stainless-retry-count", "0")
        return int(value) if value.isdigit() else 0

    @property
    def streamed(self) -> bool:
        """Whether the request asked for an SSE reply."""
        return isinstance(self.body, dict) and self.body.get("stream") is True


@dataclass(slots=True)
class _State:
    """Everything the handler threads share, behind one lock."""

    script: list[Entry]
    cache: PromptCache
    responder: Responder | None
    latency: float
    api_key: str | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    records: list[StubRequest] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    usage: Counter[str] = field(default_factory=Counter)
    replies: int = 0
    # Messages requests being answered now, and the most at once since the last reset: what a
    # concurrency limit on the callers (the `llm` pool) must keep down.
    in_flight: int = 0
    peak_in_flight: int = 0
    serial: Iterator[int] = field(default_factory=lambda: count(1))
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def next_id(self, prefix: str) -> str:
        """A new id, unique within this stub (`msg_stub_…`, `toolu_stub_…`, `req_stub_…`)."""
        with self.lock:
            return f"{prefix}_stub_{self.run_id}{next(self.serial):06d}"

    def take(self, body: dict[str, Any]) -> Entry | None:
        """Pop the first entry whose `match` occurs in the request's messages (FIFO)."""
        messages = json.dumps(body.get("messages"), ensure_ascii=False)
        with self.lock:
            for index, entry in enumerate(self.script):
                match = entry.get("match")
                if match is None or match in messages:
                    return self.script.pop(index)
        return None


class _Server(TrackedThreadingServer):
    """The stub's server: connection tracking (for `stop`) plus the stub's state."""

    label = "LLM stub"

    def __init__(self, address: tuple[str, int], state: _State) -> None:
        super().__init__(address, _Handler)
        self.state = state


class _Handler(BaseHTTPRequestHandler):
    # Keep-alive like the real API; every JSON reply therefore carries Content-Length.
    protocol_version = "HTTP/1.1"

    @property
    def state(self) -> _State:
        return cast("_Server", self.server).state

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature
        logger.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.startswith(CONTROL_PREFIX):
            self._control(method, self.path.split("?", 1)[0], raw)
            return
        record = StubRequest(
            method=method,
            path=self.path.split("?", 1)[0],
            headers=_redacted(self.headers.items()),
            raw=raw,
            body=_parse(raw),
            t=time.monotonic(),
        )
        with self.state.lock:
            self.state.records.append(record)
        try:
            self._route(record)
        except (BrokenPipeError, ConnectionResetError):
            logger.debug("client hung up on %s", record.path)
            self.close_connection = True

    def _control(self, method: str, path: str, raw: bytes) -> None:
        """Out-of-band control for a stub in another process: counters and more script."""
        status = 404
        payload: dict[str, Any] = {"error": f"unknown stub control {method} {path}"}
        if method == "GET" and path == STATS_PATH:
            status, payload = 200, _stats(self.state)
        elif method == "POST" and path == SCRIPT_PATH:
            try:
                entries = json.loads(raw or b"null")
                if not isinstance(entries, list):
                    raise ScriptError("the body must be a JSON list of entries")
                with self.state.lock:
                    start = len(self.state.script)
                checked = [
                    check_entry(entry, f"script[{start + index}]")
                    for index, entry in enumerate(entries)
                ]
            except (ScriptError, ValueError) as error:
                status, payload = 400, {"error": str(error)}
            else:
                with self.state.lock:
                    self.state.script.extend(checked)
                status, payload = 200, {"added": len(checked)}
        body = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, record: StubRequest) -> None:
        path = record.path.rstrip("/")
        if record.method != "POST" or path not in (MESSAGES_PATH, COUNT_TOKENS_PATH):
            self._error(record, 404, f"{record.method} {record.path} is not served by the stub")
            return
        if path != MESSAGES_PATH:
            self._answer(record, path)
            return
        with self.state.lock:
            self.state.in_flight += 1
            self.state.peak_in_flight = max(self.state.peak_in_flight, self.state.in_flight)
        try:
            self._answer(record, path)
        finally:
            with self.state.lock:
                self.state.in_flight -= 1

    def _answer(self, record: StubRequest, path: str) -> None:
        if path != MESSAGES_PATH and self.state.latency > 0:
            time.sleep(self.state.latency)
        problem = self._refusal(record)
        if problem is not None:
            self._error(record, *problem)
            return
        try:
            body = check_request(record.body, needs_max_tokens=path == MESSAGES_PATH)
        except InvalidRequest as error:
            self._error(record, error.status, str(error))
            return
        if path == COUNT_TOKENS_PATH:
            self._json(record, 200, json.dumps({"input_tokens": total_tokens(body)}).encode())
            return
        entry = self._entry_for(record, body)
        if entry is not None:
            self._play(record, body, entry)

    def _refusal(self, record: StubRequest) -> tuple[int, str] | None:
        authorization = self.headers.get("Authorization", "")
        bearer = authorization[7:] if authorization.lower().startswith("bearer ") else None
        given = self.headers.get("x-api-key") or bearer
        if not given:
            return 401, "missing API key: send `Authorization: Bearer <key>` or `x-api-key`"
        if self.state.api_key is not None and given != self.state.api_key:
            return 401, "invalid x-api-key"
        if not record.header("anthropic-version"):
            return 400, "anthropic-version: header is required"
        if record.body is None:
            return 400, "the request body is not valid JSON"
        return None

    def _entry_for(self, record: StubRequest, body: dict[str, Any]) -> Entry | None:
        entry = self.state.take(body)
        if entry is not None:
            return entry
        responder = self.state.responder
        if responder is None:
            self._error(record, 500, "stub script exhausted", headers={"x-should-retry": "false"})
            return None
        try:
            # A copy, so a hook that edits what it is given cannot rewrite the record.
            computed = responder(json.loads(json.dumps(body)))
            entry = None if computed is None else check_entry(computed, "responder()")
        except Exception as error:
            # The test's own hook failed: make the SDK fail at once with the cause in its message.
            logger.exception("LLM stub responder failed")
            self._error(
                record,
                500,
                f"stub responder failed: {type(error).__name__}: {error}",
                headers={"x-should-retry": "false"},
            )
            return None
        if entry is None:
            self._error(
                record, 500, "stub responder had no answer", headers={"x-should-retry": "false"}
            )
        return entry

    def _play(self, record: StubRequest, body: dict[str, Any], entry: Entry) -> None:
        record.entry = entry
        if entry.get("delay"):
            time.sleep(float(entry["delay"]))
        if entry["kind"] == "error":
            status = int(entry["status"])
            headers = dict(entry.get("headers") or {})
            if status == 429 and not {"retry-after", "retry-after-ms"} & {
                name.lower() for name in headers
            }:
                headers["retry-after"] = RATE_LIMIT_RETRY_AFTER
            self._error(
                record,
                status,
                str(entry.get("message", "stub error")),
                error_type=entry.get("error_type"),
                error_code=entry.get("error_code"),
                headers=headers,
            )
            return
        if entry["kind"] == "malformed":
            self._json(record, 200, MALFORMED_BODY)
            return
        blocks = reply_blocks(entry, lambda: self.state.next_id("toolu"))
        # The cache is looked up as the request arrives; what it writes becomes readable only
        # when the response begins, after the model's time to first token (`latency`).
        charge = self.state.cache.begin(body)
        if self.state.latency > 0:
            time.sleep(self.state.latency)
        self.state.cache.publish(charge)
        flat = {
            **charge.usage,
            "output_tokens": output_tokens(blocks),
            **entry.get("usage", {}),
        }
        usage: dict[str, Any] = {name: flat[name] for name in USAGE_FIELDS}
        record.usage = dict(usage)
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": charge.usage["ephemeral_5m_input_tokens"],
            "ephemeral_1h_input_tokens": charge.usage["ephemeral_1h_input_tokens"],
        }
        with self.state.lock:
            self.state.replies += 1
            self.state.usage.update(record.usage)
        message = {
            "id": self.state.next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": stop_reason_of(entry, blocks),
            "stop_sequence": entry.get("stop_sequence"),
            "usage": usage,
        }
        if body.get("stream") is True:
            self._stream(record, entry, message)
        else:
            self._json(record, 200, json.dumps(message, ensure_ascii=False).encode())

    def _stream(self, record: StubRequest, entry: Entry, message: dict[str, Any]) -> None:
        self._status(record, 200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", self.state.next_id("req"))
        self.end_headers()
        gap = float(entry.get("event_gap", 0))
        events = _sse_events(entry, message)
        for number, (name, data) in enumerate(events):
            if number and gap:
                time.sleep(gap)
            if name == "drop":
                # No terminating chunk: the client sees the socket close mid-stream.
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            payload = f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _error(
        self,
        record: StubRequest,
        status: int,
        message: str,
        *,
        error_type: str | None = None,
        error_code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        request_id = self.state.next_id("req")
        payload = error_body(status, error_type, message, request_id, error_code)
        self._json(record, status, payload, headers=headers, request_id=request_id)

    def _json(
        self,
        record: StubRequest,
        status: int,
        payload: bytes,
        *,
        headers: dict[str, str] | None = None,
        request_id: str | None = None,
    ) -> None:
        self._status(record, status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", request_id or self.state.next_id("req"))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _status(self, record: StubRequest, status: int) -> None:
        # The record is complete before the first byte goes out, so a test that reads it right
        # after the SDK returns never sees a half-filled one.
        record.status = status
        with self.state.lock:
            self.state.statuses[status] += 1
        self.send_response(status)


def _sse_events(entry: Entry, message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of one reply, with `drop` standing for "close the socket here"."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    blocks: list[dict[str, Any]] = message["content"]
    last = len(blocks) - 1
    error_after = entry.get("stream_error_after_block")
    drop_after = entry.get("drop_after_block")
    for index, block in enumerate(blocks):
        events.extend(_block_events(index, block, entry.get("cut_json")))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        if error_after is not None and index == min(int(error_after), last):
            error = {"type": "overloaded_error", "message": "Overloaded"}
            events.append(("error", {"type": "error", "error": error}))
            return events
        if drop_after is not None and index == min(int(drop_after), last):
            events.append(("drop", {}))
            return events
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    if not entry.get("omit_message_stop"):
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def _block_events(
    index: int, block: dict[str, Any], cut_json: int | None
) -> list[tuple[str, dict[str, Any]]]:
    def delta(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {
            "type": "content_block_delta",
            "index": index,
            "delta": payload,
        }

    if block["type"] == "text":
        opened: dict[str, Any] = {"type": "text", "text": ""}
        text = block["text"]
        pieces = [
            delta({"type": "text_delta", "text": text[at : at + TEXT_DELTA_CHARS]})
            for at in range(0, len(text), TEXT_DELTA_CHARS)
        ]
    else:
        opened = {**block, "input": {}}
        document = json.dumps(block["input"], ensure_ascii=False)
        if cut_json is not None:
            document = document[:cut_json]
        # The real API opens with an empty fragment; the SDK re-parses the joined text each time.
        pieces = [delta({"type": "input_json_delta", "partial_json": ""})] + [
            delta(
                {"type": "input_json_delta", "partial_json": document[at : at + JSON_DELTA_CHARS]}
            )
            for at in range(0, len(document), JSON_DELTA_CHARS)
        ]
    start = {"type": "content_block_start", "index": index, "content_block": opened}
    return [("content_block_start", start), *pieces]


def _stats(state: _State) -> dict[str, Any]:
    cached = len(state.cache)
    with state.lock:
        messages = [r for r in state.records if r.path.rstrip("/") == MESSAGES_PATH]
        return {
            "requests": len(state.records),
            "logical_calls": sum(1 for record in messages if record.retry_count == 0),
            "replies": state.replies,
            "by_status": dict(sorted(state.statuses.items())),
            "usage": {name: state.usage.get(name, 0) for name in USAGE_FIELDS},
            "remaining": len(state.script),
            "cached_prefixes": cached,
            "in_flight": state.in_flight,
            "peak_in_flight": state.peak_in_flight,
        }


def _redacted(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {
        name.lower(): REDACTED if name.lower() in SECRET_HEADERS else value for name, value in items
    }


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


class LLMStub:
    """A running Messages-API stub: its URL, script queue, request records and counters.

    Use it as a context manager, or call `stop()`. Every method is safe to call from any thread
    while the SDK is talking to the server.
    """

    def __init__(
        self,
        script: Iterable[Entry] = (),
        *,
        responder: Responder | None = None,
        min_cache_tokens: int | None = None,
        latency: float = 0.0,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """Bind, start serving from a daemon thread, and return at once.

        Args:
            script: Entries played first-in first-out (see `script.py` for the kinds).
            responder: Called with the request body when no scripted entry fits; returns an
                entry, or None to answer "exhausted".
            min_cache_tokens: None (the default) caches as the real API does, from each model's
                documented minimum (1,024-4,096 tokens, `models.MODELS`); a number is one floor
                for every model, a permissive option (0 caches even tiny test prompts).
            latency: Seconds before a Messages reply begins (the model's time to first token);
                cache entries a request writes become readable only after it.
            api_key: When set, any other key gets 401; when None any non-empty key is accepted.
            host: Interface to bind; loopback by default.
            port: TCP port; 0 picks a free one.

        Raises:
            ScriptError: when an entry is malformed (nothing is started then).
        """
        entries = [check_entry(entry, f"script[{index}]") for index, entry in enumerate(script)]
        if latency < 0:
            raise ValueError(f"latency must be >= 0 seconds, got {latency}")
        self._state = _State(
            script=entries,
            cache=PromptCache(min_cache_tokens),
            responder=responder,
            latency=latency,
            api_key=api_key,
        )
        self._server = _Server((host, port), self._state)
        bound_host, bound_port = self._server.server_address[:2]
        self.host = str(bound_host)
        self.port = int(bound_port)
        # A short poll interval keeps stop() quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"llm-stub-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The `base_url` to give `anthropic.Anthropic`."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """Same as `url` (the name the SDK uses)."""
        return self.url

    @property
    def latency(self) -> float:
        """Seconds added before answering every Messages request."""
        return self._state.latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"latency must be >= 0 seconds, got {seconds}")
        self._state.latency = seconds

    @property
    def responder(self) -> Responder | None:
        """The hook used when no scripted entry fits."""
        return self._state.responder

    @responder.setter
    def responder(self, hook: Responder | None) -> None:
        self._state.responder = hook

    def add(self, *entries: Entry) -> None:
        """Queue entries after the ones already waiting; all are checked before any is queued."""
        start = len(self.remaining())
        checked = [
            check_entry(entry, f"script[{start + index}]") for index, entry in enumerate(entries)
        ]
        with self._state.lock:
            self._state.script.extend(checked)

    def remaining(self) -> list[Entry]:
        """Copies of the entries not played yet, in order."""
        with self._state.lock:
            return [json.loads(json.dumps(entry)) for entry in self._state.script]

    def clear_script(self) -> None:
        """Drop every entry not played yet."""
        with self._state.lock:
            self._state.script.clear()

    @property
    def requests(self) -> list[StubRequest]:
        """Every request received so far (any path), oldest first."""
        with self._state.lock:
            return list(self._state.records)

    def messages_requests(self) -> list[StubRequest]:
        """Requests to `/v1/messages`, retries included."""
        return [record for record in self.requests if record.path.rstrip("/") == MESSAGES_PATH]

    def logical_calls(self) -> list[StubRequest]:
        """First attempts only: one per SDK call, however often the SDK retried it."""
        return [record for record in self.messages_requests() if record.retry_count == 0]

    def reset_cache(self) -> None:
        """Forget every cached prompt prefix (the next call pays the cache write again)."""
        self._state.cache.reset()

    def reset_requests(self) -> None:
        """Forget recorded requests and zero the counters (the script and the cache stay).

        The peak of concurrent Messages requests restarts from those in flight now.
        """
        with self._state.lock:
            self._state.records.clear()
            self._state.statuses.clear()
            self._state.usage.clear()
            self._state.replies = 0
            self._state.peak_in_flight = self._state.in_flight

    @property
    def in_flight(self) -> int:
        """Messages requests being answered now (latency and scripted delays included)."""
        with self._state.lock:
            return self._state.in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most Messages requests answered at once since the stub started or was reset."""
        with self._state.lock:
            return self._state.peak_in_flight

    def stats(self) -> dict[str, Any]:
        """Counters: requests, logical calls, replies, statuses, summed usage, cached prefixes."""
        return _stats(self._state)

    def stop(self) -> None:
        """Stop serving and cut open connections; safe to call twice."""
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LLMStub:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_llm_stub(
    script: Iterable[Entry] = (),
    *,
    responder: Responder | None = None,
    min_cache_tokens: int | None = None,
    latency: float = 0.0,
    api_key: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> LLMStub:
    """Start a stub (same arguments as `LLMStub`); the house name for server starters."""
    return LLMStub(
        script,
        responder=responder,
        min_cache_tokens=min_cache_tokens,
        latency=latency,
        api_key=api_key,
        host=host,
        port=port,
    )


def run_llm_stub(
    *,
    port: int,
    host: str = "127.0.0.1",
    script: Iterable[Entry] = (),
    default_text: str | None = None,
    latency: float = 0.0,
    min_cache_tokens: int | None = None,
) -> None:
    """Serve in the foreground until SIGINT or SIGTERM.

    Args:
        port: TCP port (0 picks a free one; the URL is logged).
        host: Interface to bind.
        script: Entries to play first.
        default_text: When given, every request the script does not cover gets this text.
        latency: Seconds added to every Messages request.
        min_cache_tokens: One floor for every model; None (default): each model's documented one.
    """
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    responder: Responder | None = None
    if default_text is not None:
        answer = default_text

        def responder(body: dict[str, Any]) -> Entry:
            return {"kind": "text", "text": answer}

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    stub = LLMStub(
        script,
        responder=responder,
        latency=latency,
        min_cache_tokens=min_cache_tokens,
        host=host,
        port=port,
    )
    logger.info("LLM stub serving the Messages API at %s", stub.url)
    try:
        # A timed wait keeps the main thread responsive to signals.
        while not stop.wait(0.5):
            pass
    finally:
        stub.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        logger.info("LLM stub stopped: %s", json.dumps(stub.stats()))


__all__ = [
    "LLMStub",
    "Responder",
    "ScriptError",
    "StubRequest",
    "run_llm_stub",
    "start_llm_stub",
]
