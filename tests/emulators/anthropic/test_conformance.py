"""The stub refuses and fails the way the real Messages API does, by default.

Each test names the public source of its rule. Nothing here needs an option: these are the
stub's defaults; the permissive switches (`min_cache_tokens=0`) are asked for by name elsewhere.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from airwave_dagster.emulators.anthropic import (
    LLMStub,
    error_reply,
    spend_limit_reply,
    text_reply,
    tool_use_reply,
)
from airwave_dagster.emulators.anthropic.models import MODELS
from tests.emulators.anthropic.conftest import MODEL, ClientFactory, user


def _refused(client: anthropic.Anthropic, **request: Any) -> anthropic.APIStatusError:
    request.setdefault("model", MODEL)
    request.setdefault("max_tokens", 64)
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(**request)
    return caught.value


def test_an_unknown_model_is_404(stub: LLMStub, client: anthropic.Anthropic) -> None:
    """Source: platform.claude.com/docs/en/api/errors: 404 `not_found_error` ("the requested
    resource was not found"), which the API answers for a model id it does not serve."""
    error = _refused(client, model="claude-sonnet-9-9", messages=[user("q")])

    assert isinstance(error, anthropic.NotFoundError)
    assert error.type == "not_found_error" and "claude-sonnet-9-9" in (error.api_message or "")
    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="claude-sonnet-9-9", messages=[user("q")])
    assert stub.stats()["replies"] == 0


def test_dated_and_latest_ids_are_served(stub: LLMStub, client: anthropic.Anthropic) -> None:
    """Source: models overview: each model has an alias and a dated snapshot id
    (`claude-haiku-4-5-20251001`)."""
    stub.add(text_reply("a"), text_reply("b"))

    for model in ("claude-haiku-4-5-20251001", "claude-3-5-haiku-latest"):
        reply = client.messages.create(model=model, max_tokens=8, messages=[user("q")])
        assert reply.content[0].type == "text"


@pytest.mark.parametrize(
    ("model", "cap"), [("claude-haiku-4-5", 64_000), ("claude-3-5-haiku", 8_192)]
)
def test_max_tokens_above_the_models_output_cap_is_400(
    client_for: ClientFactory, model: str, cap: int
) -> None:
    """Source: Messages API reference, `max_tokens`: "Different models have different maximum
    values for this parameter" (models overview, "Max output"); more is a 400."""
    with LLMStub([text_reply("ok")]) as stub:
        # A timeout lifts the SDK's own refusal of long non-streaming calls.
        client = client_for(stub, timeout=30)
        error = _refused(client, model=model, max_tokens=cap + 1, messages=[user("q")])
        ok = client.messages.create(model=model, max_tokens=cap, messages=[user("q")])

    assert isinstance(error, anthropic.BadRequestError)
    assert f"{cap + 1} > {cap}" in (error.api_message or "")
    assert ok.content[0].type == "text"


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_prompt_longer_than_the_context_window_is_400(
    client_for: ClientFactory, model: str
) -> None:
    """Source: models overview and context-windows guide (platform.claude.com/docs: 200K-token
    windows; 1M only with the `context-1m-2025-08-07` beta); the refusal as the API sends it,
    400 `invalid_request_error` "prompt is too long: N tokens > M maximum"
    (anthropics/claude-code#12186). The prompt's tokens are the ones `count_tokens` reports."""
    window = MODELS[model].context_window
    assert window == 200_000
    # The stub counts a quarter of a block's canonical JSON, so this text fills the window.
    long_text = "x" * (window * 4)
    with LLMStub([text_reply("ok")]) as stub:
        client = client_for(stub, timeout=30)
        counted = client.messages.count_tokens(model=model, messages=[user(long_text)])
        error = _refused(client, model=model, max_tokens=8, messages=[user(long_text)])
        fits = user("x" * ((window - 100) * 4))
        ok = client.messages.create(model=model, max_tokens=8, messages=[fits])

    assert counted.input_tokens > window
    assert isinstance(error, anthropic.BadRequestError)
    assert error.type == "invalid_request_error"
    assert error.api_message == (
        f"prompt is too long: {counted.input_tokens} tokens > {window} maximum"
    )
    assert ok.content[0].type == "text"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ([{"type": "text", "text": ""}], "non-whitespace"),
        ([{"type": "text", "text": "  \n"}], "non-whitespace"),
        ("", "non-empty"),
        ([], "non-empty"),
        (
            [{"type": "text", "text": "", "cache_control": {"type": "ephemeral"}}],
            "cache_control cannot be set for empty text blocks",
        ),
    ],
    ids=["empty block", "blank block", "empty string", "no blocks", "cached empty block"],
)
def test_empty_text_is_400(
    stub: LLMStub, client: anthropic.Anthropic, content: Any, fragment: str
) -> None:
    """Source: Messages API reference (content blocks); the API answers "text content blocks
    must be non-empty" / "must contain non-whitespace text", and "cache_control cannot be set
    for empty text blocks" for a marked empty block (anthropics/claude-code issues quoting it)."""
    error = _refused(client, messages=[{"role": "user", "content": content}])

    assert isinstance(error, anthropic.BadRequestError)
    assert fragment in (error.api_message or "")


def test_an_empty_system_block_is_400(stub: LLMStub, client: anthropic.Anthropic) -> None:
    error = _refused(client, system=[{"type": "text", "text": ""}], messages=[user("q")])

    assert isinstance(error, anthropic.BadRequestError)
    assert (error.api_message or "").startswith("system.0")


def test_text_before_a_tool_result_is_400(stub: LLMStub, client: anthropic.Anthropic) -> None:
    """Source: tool-use guide ("Handle tool calls"): in the user message answering a tool use,
    `tool_result` blocks must come first; text goes after them, else the API answers 400."""
    asked = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}],
    }
    text_first = {
        "role": "user",
        "content": [
            {"type": "text", "text": "here you go"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
        ],
    }
    results_first = {"role": "user", "content": list(reversed(text_first["content"]))}
    tools = [{"name": "look", "input_schema": {"type": "object"}}]

    error = _refused(client, tools=tools, messages=[user("q"), asked, text_first])
    stub.add(text_reply("ok"))
    ok = client.messages.create(
        model=MODEL, max_tokens=8, tools=tools, messages=[user("q"), asked, results_first]
    )

    assert isinstance(error, anthropic.BadRequestError)
    assert "tool_result" in (error.api_message or "")
    assert ok.content[0].type == "text"


def test_a_rate_limit_carries_retry_after(stub: LLMStub, client_for: ClientFactory) -> None:
    """Source: platform.claude.com/docs/en/api/rate-limits: a 429 response includes a
    `retry-after` header with the seconds to wait; the SDK honours it before retrying."""
    stub.add(error_reply(429, "Number of request tokens has exceeded your rate limit"))
    client = client_for(stub, max_retries=0)

    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(model=MODEL, max_tokens=8, messages=[user("q")])

    assert caught.value.response.headers.get("retry-after") == "1"


def test_a_spend_limit_429_names_its_code(stub: LLMStub, client_for: ClientFactory) -> None:
    """Source: SDK type `anthropic.types.shared.EnforcedSpendLimitReachedError` (status 429,
    `error.details.error_code == "enforced_spend_limit_reached"`)."""
    from anthropic.types.shared import EnforcedSpendLimitReachedError

    stub.add(spend_limit_reply())
    client = client_for(stub, max_retries=0)

    with pytest.raises(EnforcedSpendLimitReachedError) as caught:
        client.messages.create(model=MODEL, max_tokens=8, messages=[user("q")])

    assert caught.value.status_code == 429
    assert caught.value.error_code == "enforced_spend_limit_reached"


def test_the_context_window_stop_reason(stub: LLMStub, client: anthropic.Anthropic) -> None:
    """Source: platform.claude.com/docs/en/build-with-claude/handling-stop-reasons:
    `model_context_window_exceeded` (Sonnet 4.5 and later) ends a reply the window cut off."""
    stub.add(
        tool_use_reply("look", {"q": "x"}, stop_reason="model_context_window_exceeded"),
    )

    reply = client.messages.create(
        model=MODEL,
        max_tokens=8,
        tools=[{"name": "look", "input_schema": {"type": "object"}}],
        messages=[user("q")],
    )

    assert reply.stop_reason == "model_context_window_exceeded"
