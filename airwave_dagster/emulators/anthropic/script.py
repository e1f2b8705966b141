"""Script entries of the LLM stub: the kinds a test can queue, their checks, what they answer.

Reference: docs/reference/llm-stub.md (the "§N" cited below).
"""

from __future__ import annotations

import json
import math
from typing import Any

Entry = dict[str, Any]
"""One scripted reply, as plain JSON-able data (so a script can also live in a file)."""

KINDS = ("text", "tool_use", "error", "malformed")

USAGE_FIELDS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)

STOP_REASONS = frozenset(
    {
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "refusal",
        "pause_turn",
        "model_context_window_exceeded",
    }
)
"""The stop reasons the API documents (platform.claude.com/docs/en/build-with-claude/
handling-stop-reasons); `model_context_window_exceeded` ends a reply the context window cut off."""

RATE_LIMIT_RETRY_AFTER = "1"
"""`retry-after` (seconds) a 429 carries unless its entry sets one: the API sends it with every
rate-limit error (platform.claude.com/docs/en/api/rate-limits, "retry-after" header)."""

SPEND_LIMIT_CODE = "enforced_spend_limit_reached"
"""`error.details.error_code` of the 429 the API sends once the organization's spend limit is
reached (SDK type `anthropic.types.shared.EnforcedSpendLimitReachedError`)."""

# The error type the real API pairs with each status (§6); the SDK picks its exception
# class from the status alone, so this only fills the body's `error.type`.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_COMMON_KEYS = frozenset(
    {
        "kind",
        "match",
        "delay",
        "event_gap",
        "usage",
        "stream_error_after_block",
        "drop_after_block",
        "cut_json",
        "omit_message_stop",
        "stop_reason",
        "stop_sequence",
    }
)
_KIND_KEYS: dict[str, frozenset[str]] = {
    "text": frozenset({"text"}),
    "tool_use": frozenset({"name", "input", "id", "text", "calls"}),
    "error": frozenset({"status", "error_type", "message", "headers", "error_code"}),
    "malformed": frozenset(),
}

MALFORMED_BODY = b'{"id": "msg_trunc", "type": "message", "content": ['


class ScriptError(ValueError):
    """A script entry the stub cannot play; the message names the entry and the field."""


def text_reply(text: str, **options: Any) -> Entry:
    """An entry answering with one text block (options: `match`, `delay`, `usage`, ...)."""
    return check_entry({"kind": "text", "text": text, **options}, "text_reply()")


def tool_use_reply(name: str, tool_input: dict[str, Any], **options: Any) -> Entry:
    """An entry answering with one tool_use block (options: `text`, `id`, `match`, ...)."""
    return check_entry(
        {"kind": "tool_use", "name": name, "input": tool_input, **options}, "tool_use_reply()"
    )


def error_reply(status: int, message: str = "stub error", **options: Any) -> Entry:
    """An entry answering with an API error (options: `error_type`, `error_code`, `headers`…)."""
    return check_entry(
        {"kind": "error", "status": status, "message": message, **options}, "error_reply()"
    )


def spend_limit_reply(**options: Any) -> Entry:
    """The 429 of an organization past its spend limit (`error.details.error_code`)."""
    return error_reply(
        429,
        "You have reached your specified API usage limits.",
        error_code=SPEND_LIMIT_CODE,
        **options,
    )


def check_entry(entry: object, where: str) -> Entry:
    """Validate one entry and return a private copy of it.

    Checking at `add` time (not when a request arrives) makes a bad script fail in the test
    that wrote it, with the entry named, instead of as a confusing 500 inside the code under test.

    Raises:
        ScriptError: naming `where` and the offending field.
    """
    if not isinstance(entry, dict):
        raise ScriptError(f"{where}: an entry must be a dict, got {type(entry).__name__}")
    kind = entry.get("kind")
    if kind not in _KIND_KEYS:
        raise ScriptError(f"{where}.kind: must be one of {', '.join(KINDS)}, got {kind!r}")
    unknown = sorted(set(entry) - _COMMON_KEYS - _KIND_KEYS[kind])
    if unknown:
        raise ScriptError(f"{where}: unknown field(s) {', '.join(unknown)} for kind {kind!r}")
    try:
        copied: Entry = json.loads(json.dumps(entry))
    except (TypeError, ValueError) as error:
        raise ScriptError(f"{where}: not JSON-serialisable ({error})") from None
    _check_common(copied, where)
    if kind == "text":
        _require_str(copied, "text", where)
    elif kind == "tool_use":
        _check_tool_use(copied, where)
    elif kind == "error":
        _check_error(copied, where)
    return copied


def _check_common(entry: Entry, where: str) -> None:
    if "match" in entry:
        _require_str(entry, "match", where)
    for name in ("delay", "event_gap"):
        value = entry.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ScriptError(f"{where}.{name}: must be a number of seconds >= 0, got {value!r}")
    for name in ("stream_error_after_block", "drop_after_block", "cut_json"):
        value = entry.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ScriptError(f"{where}.{name}: must be an integer >= 0, got {value!r}")
    if not isinstance(entry.get("omit_message_stop", False), bool):
        raise ScriptError(f"{where}.omit_message_stop: must be true or false")
    stop_reason = entry.get("stop_reason")
    if stop_reason is not None and stop_reason not in STOP_REASONS:
        raise ScriptError(
            f"{where}.stop_reason: must be one of {', '.join(sorted(STOP_REASONS))}, "
            f"got {stop_reason!r}"
        )
    if "stop_sequence" in entry:
        _require_str(entry, "stop_sequence", where)
    usage = entry.get("usage", {})
    if not isinstance(usage, dict):
        raise ScriptError(f"{where}.usage: must be a dict of token counts")
    for name, value in usage.items():
        if name not in USAGE_FIELDS:
            raise ScriptError(f"{where}.usage.{name}: unknown; use {', '.join(USAGE_FIELDS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ScriptError(f"{where}.usage.{name}: must be an integer >= 0, got {value!r}")


def _check_tool_use(entry: Entry, where: str) -> None:
    if "text" in entry:
        _require_str(entry, "text", where)
    if "calls" in entry:
        if "name" in entry or "input" in entry or "id" in entry:
            raise ScriptError(f"{where}: give either `calls` or `name`/`input`/`id`, not both")
        calls = entry["calls"]
        if not isinstance(calls, list) or not calls:
            raise ScriptError(f"{where}.calls: must be a non-empty list of {{name, input, id?}}")
        for index, call in enumerate(calls):
            if not isinstance(call, dict):
                raise ScriptError(f"{where}.calls[{index}]: must be a dict")
            extra = sorted(set(call) - {"name", "input", "id"})
            if extra:
                raise ScriptError(f"{where}.calls[{index}]: unknown field(s) {', '.join(extra)}")
            _check_call(call, f"{where}.calls[{index}]")
    else:
        _check_call(entry, where)


def _check_call(call: dict[str, Any], where: str) -> None:
    _require_str(call, "name", where)
    if not isinstance(call.get("input"), dict):
        raise ScriptError(f"{where}.input: must be a dict (the tool's arguments)")
    if "id" in call:
        _require_str(call, "id", where)


def _check_error(entry: Entry, where: str) -> None:
    status = entry.get("status")
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise ScriptError(f"{where}.status: must be an HTTP error status 400..599, got {status!r}")
    for name in ("error_type", "message"):
        if name in entry:
            _require_str(entry, name, where)
    headers = entry.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(key, str) and isinstance(value, str | int | float)
        for key, value in headers.items()
    ):
        raise ScriptError(f"{where}.headers: must map header names to strings")
    entry["headers"] = {key: str(value) for key, value in headers.items()}


def _require_str(entry: dict[str, Any], name: str, where: str) -> None:
    if not isinstance(entry.get(name), str):
        raise ScriptError(f"{where}.{name}: must be a string, got {entry.get(name)!r}")


def reply_blocks(entry: Entry, next_tool_id: Any) -> list[dict[str, Any]]:
    """The content blocks a reply entry produces, with only the keys the real API sends.

    Extra keys would be echoed back on every later turn of an agent loop (§3.3).

    Args:
        entry: A checked `text` or `tool_use` entry.
        next_tool_id: Called with no arguments for each tool_use block that has no scripted id.
    """
    if entry["kind"] == "text":
        return [{"type": "text", "text": entry["text"]}]
    blocks: list[dict[str, Any]] = []
    if "text" in entry:
        blocks.append({"type": "text", "text": entry["text"]})
    calls = entry.get("calls") or [entry]
    blocks.extend(
        {
            "type": "tool_use",
            "id": call.get("id") or next_tool_id(),
            "name": call["name"],
            "input": call["input"],
        }
        for call in calls
    )
    return blocks


def stop_reason_of(entry: Entry, blocks: list[dict[str, Any]]) -> str:
    """The scripted stop reason, else `tool_use` when a tool is called, else `end_turn`."""
    scripted = entry.get("stop_reason")
    if isinstance(scripted, str):
        return scripted
    return "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"


def output_tokens(blocks: list[dict[str, Any]]) -> int:
    """A deterministic stand-in for the reply's token count: a quarter of its JSON length."""
    text = json.dumps(blocks, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return max(1, math.ceil(len(text) / 4))


def error_body(
    status: int,
    error_type: str | None,
    message: str,
    request_id: str,
    error_code: str | None = None,
) -> bytes:
    """The JSON body of an API error, shaped like the real API's (`details` when coded)."""
    error: dict[str, Any] = {
        "type": error_type or ERROR_TYPES.get(status, "api_error"),
        "message": message,
    }
    if error_code is not None:
        error["details"] = {"error_code": error_code}
    payload = {"type": "error", "error": error, "request_id": request_id}
    return json.dumps(payload, ensure_ascii=False).encode()
