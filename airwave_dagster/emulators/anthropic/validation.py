"""Request checks that refuse what the real API refuses (400 or 404, no entry consumed).

Sources: the Messages API reference (platform.claude.com/docs/en/api/messages: `max_tokens`
"may not exceed the model's maximum", content block rules) and the errors page
(platform.claude.com/docs/en/api/errors: 404 `not_found_error` for an unknown model); the
messages of empty-block and tool-result refusals follow what the API answers (reported in
anthropics/anthropic-sdk-python and anthropics/claude-code issues). A prompt longer than the
model's context window is refused as the API refuses it: 400 `invalid_request_error`, "prompt is
too long: N tokens > M maximum" (as reported in anthropics/claude-code#12186), its tokens counted
as `count_tokens` counts them. `count_tokens` itself is not refused.
"""

from __future__ import annotations

import re
from typing import Any

from airwave_dagster.emulators.anthropic.models import find_model
from airwave_dagster.emulators.anthropic.usage import (
    MAX_BREAKPOINTS,
    count_breakpoints,
    total_tokens,
)

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class InvalidRequest(ValueError):
    """A request the real API would refuse with 400 `invalid_request_error`."""

    status = 400


class UnknownModel(InvalidRequest):
    """A model id the API does not serve: 404 `not_found_error`."""

    status = 404


def check_request(body: object, *, needs_max_tokens: bool = True) -> dict[str, Any]:
    """Return the body when it is a well-formed Messages request, else raise `InvalidRequest`.

    Args:
        body: The parsed JSON body.
        needs_max_tokens: False for `count_tokens`, which takes no `max_tokens`.
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    required = ["model", "messages"] + (["max_tokens"] if needs_max_tokens else [])
    for name in required:
        if name not in body:
            raise InvalidRequest(f"{name}: Field required")
    if not isinstance(body["model"], str) or not body["model"]:
        raise InvalidRequest("model: must be a non-empty string")
    spec = find_model(body["model"])
    if spec is None:
        raise UnknownModel(f"model: {body['model']}")
    if needs_max_tokens:
        max_tokens = body["max_tokens"]
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidRequest(f"max_tokens: must be an integer >= 1, got {max_tokens!r}")
        if max_tokens > spec.max_output_tokens:
            raise InvalidRequest(
                f"max_tokens: {max_tokens} > {spec.max_output_tokens}, which is the maximum "
                f"allowed number of output tokens for {body['model']}"
            )
    _check_system(body.get("system"))
    tool_names = _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"), tool_names)
    _check_messages(body["messages"])
    found = count_breakpoints(body)
    if found > MAX_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )
    if needs_max_tokens:
        # The window holds the prompt; a prompt that alone overflows it is refused before any
        # output (an answer cut by the window is the `model_context_window_exceeded` stop).
        tokens = total_tokens(body)
        if tokens > spec.context_window:
            raise InvalidRequest(
                f"prompt is too long: {tokens} tokens > {spec.context_window} maximum"
            )
    return body


def _check_system(system: object) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise InvalidRequest("system: must be a string or a list of text blocks")
    for index, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise InvalidRequest(f"system.{index}: must be a text block")
        _check_text(block, f"system.{index}")


def _check_text(block: dict[str, Any], where: str) -> None:
    """Text blocks must carry text; a cache mark on an empty one is refused on its own terms."""
    if block.get("type") != "text":
        return
    text = block.get("text")
    if not isinstance(text, str):
        raise InvalidRequest(f"{where}.text: Field required")
    if text.strip():
        return
    if block.get("cache_control") is not None:
        raise InvalidRequest(
            f"{where}.cache_control: cache_control cannot be set for empty text blocks"
        )
    raise InvalidRequest(f"{where}: text content blocks must contain non-whitespace text")


def _check_tools(tools: object) -> set[str]:
    if tools is None:
        return set()
    if not isinstance(tools, list):
        raise InvalidRequest("tools: must be a list")
    names: set[str] = set()
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidRequest(f"tools.{index}: must be an object")
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise InvalidRequest(
                f"tools.{index}.name: String should match pattern '{TOOL_NAME.pattern}'"
            )
        if name in names:
            raise InvalidRequest(f"tools: Tool names must be unique ({name!r} repeats)")
        names.add(name)
    return names


def _check_tool_choice(choice: object, tool_names: set[str]) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict):
        raise InvalidRequest("tool_choice: must be an object")
    if choice.get("type") == "tool" and choice.get("name") not in tool_names:
        raise InvalidRequest(f"tool_choice.name: tool {choice.get('name')!r} not found in tools")


def _blocks(message: dict[str, Any], block_type: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if block.get("type") == block_type]


def _check_messages(messages: object) -> None:
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: must be a non-empty list")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequest(f"messages.{index}: must be an object")
        if message.get("role") not in ("user", "assistant"):
            raise InvalidRequest(
                f"messages.{index}.role: must be 'user' or 'assistant', got {message.get('role')!r}"
            )
        content = message.get("content")
        if isinstance(content, list):
            if not content and message.get("role") == "user":
                raise InvalidRequest(f"messages.{index}: user messages must have non-empty content")
            for position, block in enumerate(content):
                if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                    raise InvalidRequest(
                        f"messages.{index}.content.{position}: must be a block with a type"
                    )
                _check_text(block, f"messages.{index}.content.{position}")
            _check_results_first(content, index)
        elif not isinstance(content, str):
            raise InvalidRequest(f"messages.{index}.content: must be a string or a list of blocks")
        elif not content.strip():
            raise InvalidRequest(f"messages.{index}: text content blocks must be non-empty")
    if messages[0]["role"] != "user":
        raise InvalidRequest('messages.0.role: the first message must use the "user" role')
    for index, message in enumerate(messages):
        if message["role"] == "assistant":
            _check_answered(messages, index)
        else:
            _check_results(messages, index)


def _check_results_first(content: list[dict[str, Any]], index: int) -> None:
    """In a user turn, `tool_result` blocks come first: nothing may precede them."""
    seen_other = False
    for position, block in enumerate(content):
        if block.get("type") == "tool_result":
            if seen_other:
                raise InvalidRequest(
                    f"messages.{index}.content.{position}: `tool_result` blocks must come "
                    "before any other content in a user message"
                )
        else:
            seen_other = True


def _check_answered(messages: list[dict[str, Any]], index: int) -> None:
    asked = [block.get("id") for block in _blocks(messages[index], "tool_use")]
    if not asked:
        return
    following = messages[index + 1] if index + 1 < len(messages) else None
    answered = set()
    if following is not None and following["role"] == "user":
        answered = {block.get("tool_use_id") for block in _blocks(following, "tool_result")}
    missing = [tool_id for tool_id in asked if tool_id not in answered]
    if missing:
        raise InvalidRequest(
            f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {', '.join(map(str, missing))}. Each `tool_use` block must have "
            "a corresponding `tool_result` block in the next message."
        )


def _check_results(messages: list[dict[str, Any]], index: int) -> None:
    results = _blocks(messages[index], "tool_result")
    if not results:
        return
    previous = messages[index - 1] if index > 0 else None
    offered = set()
    if previous is not None and previous["role"] == "assistant":
        offered = {block.get("id") for block in _blocks(previous, "tool_use")}
    for block in results:
        if block.get("tool_use_id") not in offered:
            raise InvalidRequest(
                f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {block.get('tool_use_id')}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
