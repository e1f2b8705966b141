"""The anthropic adapter against the stub's realistic defaults: every request it sends is one
the API accepts, and it handles the API's errors and cut-off replies as the API means them.

The stub validates as strictly as the API (unknown model ids, `max_tokens` above a model's
output cap, empty text blocks, tool results after other content) and caches with each model's
documented minimum; the real `anthropic` SDK talks to it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airwave_dagster.domain.ai.models import MAX_OUTPUT_TOKENS
from airwave_dagster.domain.ai.plan import plan_input_schema, sanitize_plan
from airwave_dagster.domain.ai.prompts import (
    CONTEXT_HEADING,
    PLANNER_SYSTEM_PROMPT,
    PLANNER_TOOL_DESCRIPTION,
    PLANNER_TOOL_NAME,
    WORKER_SYSTEM_PROMPT,
    render_channel_brief,
    render_planner_prompt,
)
from airwave_dagster.domain.ai.tools import tool_definitions_api
from airwave_dagster.domain.ai.usage import DEFAULT_PRICES
from airwave_dagster.emulators.anthropic import (
    LLMStub,
    error_reply,
    spend_limit_reply,
    text_reply,
    tool_use_reply,
)
from resources.llm import (
    PLANNER_MAX_TOKENS,
    LlmCallError,
    LlmClient,
    LlmResource,
    ToolOutcome,
)
from tests.fakes.scripted_model import small_plan

KEY_ENV = "AIRWAVE_TEST_LLM_KEY"
CONTEXT = f"{CONTEXT_HEADING}\n" + "genre: Drama (120 items), Comedy (80 items)\n" * 40
BRIEF = render_channel_brief(
    sanitize_plan(small_plan(), existing_package_keys=[]).plan.channels()[0][1]
)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stub() -> Iterator[LLMStub]:
    with LLMStub() as running:
        yield running


def _client(stub: LLMStub, *, max_retries: int = 2) -> LlmClient:
    resource = LlmResource(api_key_env_var=KEY_ENV, base_url=stub.url, max_retries=max_retries)
    return resource.get_client()


def _plan(client: LlmClient, model: str) -> Any:
    return client.plan(
        model=model,
        system=PLANNER_SYSTEM_PROMPT,
        content=[
            {
                "type": "text",
                "text": render_planner_prompt(CONTEXT, []),
                "cache_control": {"type": "ephemeral"},
            }
        ],
        tool={
            "name": PLANNER_TOOL_NAME,
            "description": PLANNER_TOOL_DESCRIPTION,
            "input_schema": plan_input_schema(),
        },
        max_tokens=PLANNER_MAX_TOKENS,
        on_usage=lambda model, usage: None,
    )


def _agent(client: LlmClient, model: str, executed: list[str] | None = None) -> Any:
    def execute(name: str, tool_input: Any) -> ToolOutcome:
        if executed is not None:
            executed.append(name)
        return ToolOutcome(content=json.dumps({"matched": 120}), terminal=name == "commit_channel")

    return client.run_agent(
        model=model,
        system=WORKER_SYSTEM_PROMPT,
        tools=tool_definitions_api(),
        context_block=CONTEXT,
        brief=BRIEF,
        execute=execute,
        on_usage=lambda model, usage: None,
    )


@pytest.mark.parametrize("model", sorted(DEFAULT_PRICES))
def test_every_request_the_product_sends_is_accepted_for_every_model(
    stub: LLMStub, model: str
) -> None:
    """The planner call, the worker loop (a tool result after a text-and-tool reply) and the
    prompt count pass the stub's API-strict validation for every model the product prices.

    Sources: Messages API reference (`max_tokens` may not exceed the model's maximum; text blocks
    must be non-empty; `tool_result` blocks first in their user turn) and the models overview
    for each model's output cap.
    """
    client = _client(stub, max_retries=0)
    stub.add(
        tool_use_reply(PLANNER_TOOL_NAME, small_plan()),
        tool_use_reply("preview_filter", {"filter": {}}, text="Checking the pool first."),
        tool_use_reply("commit_channel", {"filter": {}}),
    )

    plan = _plan(client, model)
    run = _agent(client, model)
    measured = client.measure_worker_prompt(
        model=model,
        system=WORKER_SYSTEM_PROMPT,
        tools=tool_definitions_api(),
        context_block=CONTEXT,
        brief=BRIEF,
    )

    assert plan.tool_input is not None
    assert run.stop == "terminal_tool" and run.calls == 2
    assert measured.prefix_tokens > 500 and measured.brief_tokens > 20
    assert [r.status for r in stub.requests] == [200] * 5
    planner_body = stub.requests[0].body
    assert planner_body["max_tokens"] == min(PLANNER_MAX_TOKENS, MAX_OUTPUT_TOKENS[model])


def test_an_unknown_model_is_refused_and_needs_the_operator(stub: LLMStub) -> None:
    """Source: API errors page: 404 `not_found_error` for a model id the API does not serve;
    the SDK does not retry a 404."""
    client = _client(stub)

    with pytest.raises(LlmCallError) as caught:
        _plan(client, "claude-imaginary-9")

    assert caught.value.needs_operator and not caught.value.transient
    assert "404" in str(caught.value) and "needs the operator" in str(caught.value)
    assert len(stub.requests) == 1


def test_a_spend_limit_is_not_retried_and_needs_the_operator(stub: LLMStub) -> None:
    """Source: SDK type `anthropic.types.shared.EnforcedSpendLimitReachedError` (a 429 whose
    `error.details.error_code` is `enforced_spend_limit_reached`): no wait cures it, so the
    product stops the SDK from retrying it and reports it as the operator's to fix."""
    stub.add(spend_limit_reply(), text_reply("never reached"))
    client = _client(stub, max_retries=2)

    with pytest.raises(LlmCallError) as caught:
        _agent(client, "claude-haiku-4-5")

    error = caught.value
    assert error.error_code == "enforced_spend_limit_reached"
    assert error.needs_operator and not error.transient
    assert "spend limit" in str(error) and "resume" in str(error)
    assert [r.status for r in stub.requests] == [429]  # not retried


def test_a_rate_limit_is_retried_after_the_time_it_names(stub: LLMStub) -> None:
    """Source: rate-limits page: a 429 carries `retry-after` (seconds); the SDK waits that long
    and retries. The product keeps it transient: a resume may succeed."""
    stub.add(error_reply(429, "slow down"), tool_use_reply("commit_channel", {"filter": {}}))
    client = _client(stub, max_retries=2)

    started = time.monotonic()
    run = _agent(client, "claude-haiku-4-5")

    assert run.stop == "terminal_tool"
    assert [r.status for r in stub.requests] == [429, 200]
    assert time.monotonic() - started >= 0.9


def test_rate_limits_beyond_the_retries_stay_transient(stub: LLMStub) -> None:
    stub.add(*[error_reply(429, "slow down", headers={"retry-after-ms": "1"})] * 2)
    client = _client(stub, max_retries=1)

    with pytest.raises(LlmCallError) as caught:
        _agent(client, "claude-haiku-4-5")

    assert caught.value.transient and not caught.value.needs_operator
    assert "needs the operator" not in str(caught.value)


def test_a_reply_cut_off_by_the_context_window_runs_no_tool(stub: LLMStub) -> None:
    """Source: handling-stop-reasons page: `model_context_window_exceeded` ends a reply the
    context window cut off; its tool input may be incomplete, so nothing of it is executed."""
    stub.add(
        tool_use_reply(
            "commit_channel", {"filter": {}}, stop_reason="model_context_window_exceeded"
        )
    )
    executed: list[str] = []

    run = _agent(_client(stub), "claude-sonnet-4-6", executed)

    assert run.stop == "model_context_window_exceeded"
    assert executed == []


def test_a_cut_off_plan_is_reported_with_its_stop_reason(stub: LLMStub) -> None:
    stub.add(
        tool_use_reply(PLANNER_TOOL_NAME, small_plan(), stop_reason="model_context_window_exceeded")
    )

    reply = _plan(_client(stub), "claude-opus-4-8")

    assert reply.stop_reason == "model_context_window_exceeded"
