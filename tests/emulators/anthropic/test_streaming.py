"""SSE replies to `messages.stream` / `create(stream=True)`, and the SDK's max_tokens rule."""

from __future__ import annotations

import time

import anthropic
import httpx2
import pytest

from airwave_dagster.emulators.anthropic import LLMStub, text_reply, tool_use_reply
from tests.emulators.anthropic.conftest import MODEL, ClientFactory, user

PLAN_TOOL = {
    "name": "submit_plan",
    "description": "Return the lineup plan.",
    "input_schema": {"type": "object", "properties": {"packages": {"type": "array"}}},
}
PLAN = {
    "packages": [
        {"name": "Movies ✦", "channels": [{"number": 101, "name": "Noir"}, {"number": 102}]},
        {"name": "Kids", "channels": [{"number": 201, "name": "Cartoons"}]},
    ]
}


def _stream_plan(client: anthropic.Anthropic, max_tokens: int = 32_000) -> anthropic.types.Message:
    with client.messages.stream(
        model=MODEL,
        max_tokens=max_tokens,
        messages=[user("plan the lineup")],
        tools=[PLAN_TOOL],
        tool_choice={"type": "tool", "name": "submit_plan"},
    ) as stream:
        return stream.get_final_message()


def test_stream_of_a_forced_tool_assembles_the_input(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(tool_use_reply("submit_plan", PLAN, text="Here is the plan."))

    final = _stream_plan(client)

    assert [block.type for block in final.content] == ["text", "tool_use"]
    tool = final.content[1]
    assert isinstance(tool, anthropic.types.ToolUseBlock)
    assert tool.input == PLAN
    assert final.stop_reason == "tool_use"
    (record,) = stub.requests
    assert record.streamed
    assert record.header("x-stainless-helper-method") == "stream"
    assert record.usage is not None
    assert final.usage.output_tokens == record.usage["output_tokens"] > 1
    assert final.usage.input_tokens == record.usage["input_tokens"]


def test_text_stream_yields_the_text_in_pieces(stub: LLMStub, client: anthropic.Anthropic) -> None:
    stub.add(text_reply("The quick brown fox jumps over the lazy dog"))

    with client.messages.stream(model=MODEL, max_tokens=64, messages=[user("q")]) as stream:
        pieces = list(stream.text_stream)

    assert "".join(pieces) == "The quick brown fox jumps over the lazy dog"
    assert len(pieces) == 6  # 8-character deltas


def test_create_with_stream_true_yields_raw_events(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(tool_use_reply("submit_plan", {"packages": []}))

    events = list(
        client.messages.create(
            model=MODEL, max_tokens=64_000, messages=[user("q")], tools=[PLAN_TOOL], stream=True
        )
    )

    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == 1
    fragments = [
        event.delta.partial_json  # type: ignore[union-attr]
        for event in events
        if event.type == "content_block_delta"
    ]
    assert fragments[0] == "" and "".join(fragments) == '{"packages": []}'


def test_non_streaming_create_refuses_large_max_tokens_before_any_request(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(text_reply("ok"), text_reply("ok"), text_reply("ok"))

    with pytest.raises(ValueError, match="Streaming is required"):
        client.messages.create(model=MODEL, max_tokens=32_000, messages=[user("q")])
    assert stub.requests == []

    client.messages.create(model=MODEL, max_tokens=21_333, messages=[user("q")])
    client.messages.create(model=MODEL, max_tokens=32_000, messages=[user("q")], timeout=120)
    with client.messages.stream(model=MODEL, max_tokens=64_000, messages=[user("q")]) as stream:
        assert stream.get_final_text() == "ok"
    assert [record.body["max_tokens"] for record in stub.requests] == [21_333, 32_000, 64_000]


def test_mid_stream_error_is_a_status_200_api_error_and_not_retried(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    stub.add(tool_use_reply("submit_plan", PLAN, text="partial", stream_error_after_block=0))

    with pytest.raises(anthropic.APIStatusError) as caught:
        _stream_plan(client_for(stub, max_retries=2))

    assert caught.value.status_code == 200
    assert caught.value.type == "overloaded_error"
    assert len(stub.requests) == 1


def test_dropped_connection_mid_stream_surfaces_as_a_raw_protocol_error(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    stub.add(tool_use_reply("submit_plan", PLAN, text="partial", drop_after_block=0))

    with pytest.raises(httpx2.RemoteProtocolError):
        _stream_plan(client_for(stub, max_retries=2))
    assert len(stub.requests) == 1


def test_event_gaps_beyond_the_read_timeout_raise_read_timeout(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    stub.add(text_reply("slow tokens", event_gap=0.4))

    with pytest.raises(httpx2.ReadTimeout):
        _stream_plan(client_for(stub, timeout=0.2))


def test_small_event_gaps_pace_the_stream(stub: LLMStub, client: anthropic.Anthropic) -> None:
    stub.add(text_reply("0123456789abcdef", event_gap=0.05))

    started = time.monotonic()
    with client.messages.stream(model=MODEL, max_tokens=64, messages=[user("q")]) as stream:
        text = stream.get_final_text()

    # start, ping, block start, 2 deltas, block stop, delta, stop: 7 gaps.
    assert text == "0123456789abcdef"
    assert time.monotonic() - started >= 0.35


def test_cut_json_gives_a_partial_input_with_max_tokens(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(tool_use_reply("submit_plan", PLAN, cut_json=40, stop_reason="max_tokens"))

    final = _stream_plan(client)

    tool = final.content[0]
    assert isinstance(tool, anthropic.types.ToolUseBlock)
    assert final.stop_reason == "max_tokens"
    assert tool.input != PLAN
    assert isinstance(tool.input, dict) and tool.input["packages"][0]["name"] == "Movies ✦"


def test_missing_message_stop_still_completes(stub: LLMStub, client: anthropic.Anthropic) -> None:
    stub.add(text_reply("fine", omit_message_stop=True))

    with client.messages.stream(model=MODEL, max_tokens=64, messages=[user("q")]) as stream:
        assert stream.get_final_text() == "fine"


def test_async_client_streams_too(stub: LLMStub) -> None:
    import asyncio

    stub.add(tool_use_reply("submit_plan", PLAN))

    async def plan() -> anthropic.types.Message:
        async with anthropic.AsyncAnthropic(
            base_url=stub.url, api_key="test-key", max_retries=0
        ) as client:
            async with client.messages.stream(
                model=MODEL, max_tokens=32_000, messages=[user("q")], tools=[PLAN_TOOL]
            ) as stream:
                return await stream.get_final_message()

    final = asyncio.run(plan())

    assert final.content[0].input == PLAN  # type: ignore[union-attr]
    assert stub.requests[0].header("x-stainless-async") == "async:asyncio"
