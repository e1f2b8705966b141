"""Non-streaming Messages calls from the real SDK: replies, tool loops, routing, validation."""

from __future__ import annotations

import json
import threading
from typing import Any

import anthropic
import pytest

from airwave_dagster.emulators.anthropic import LLMStub, ScriptError, text_reply, tool_use_reply
from tests.emulators.anthropic.conftest import API_KEY, MODEL, ClientFactory, user

PREVIEW_TOOL = {
    "name": "preview_filter",
    "description": "Count the items a filter matches.",
    "input_schema": {"type": "object", "properties": {"filter": {"type": "object"}}},
}
COMMIT_TOOL = {
    "name": "commit_channel",
    "description": "Save the channel.",
    "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
}


def test_plain_text_reply_reaches_the_sdk_as_a_message(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(text_reply("Hello from the stub"))

    message = client.messages.create(model=MODEL, max_tokens=256, messages=[user("hi")])

    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Hello from the stub"  # type: ignore[union-attr]
    assert message.model == MODEL
    assert message.stop_reason == "end_turn"
    assert message.id.startswith("msg_")
    assert message.usage.input_tokens >= 1 and message.usage.output_tokens >= 1
    assert message.usage.cache_creation_input_tokens == 0
    assert message.usage.cache_read_input_tokens == 0
    assert stub.remaining() == []


def test_recording_keeps_bodies_and_headers_but_never_the_key(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(text_reply("ok"))

    client.messages.create(
        model=MODEL, max_tokens=64, messages=[user("héllo")], extra_headers={"x-api-key": API_KEY}
    )

    (record,) = stub.requests
    assert record.path == "/v1/messages" and record.status == 200
    assert record.body == {"max_tokens": 64, "messages": [user("héllo")], "model": MODEL}
    assert "héllo".encode() in record.raw
    assert record.header("X-Stainless-Retry-Count") == "0"
    assert record.header("anthropic-version")
    assert record.header("authorization") == "<redacted>"
    assert record.header("x-api-key") == "<redacted>"
    assert record.entry == {"kind": "text", "text": "ok"}
    assert API_KEY not in repr(stub.requests)
    assert API_KEY not in json.dumps(record.headers)


def test_tool_use_reply_with_text_and_parallel_calls(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(
        {
            "kind": "tool_use",
            "text": "Let me check both.",
            "calls": [
                {
                    "name": "preview_filter",
                    "input": {"filter": {"genre": "Drama"}},
                    "id": "toolu_A",
                },
                {"name": "preview_filter", "input": {"filter": {"genre": "Comedy"}}},
            ],
        }
    )

    message = client.messages.create(
        model=MODEL, max_tokens=1024, messages=[user("build it")], tools=[PREVIEW_TOOL]
    )

    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
    first, second = message.content[1], message.content[2]
    assert isinstance(first, anthropic.types.ToolUseBlock)
    assert isinstance(second, anthropic.types.ToolUseBlock)
    assert first.id == "toolu_A" and first.input == {"filter": {"genre": "Drama"}}
    assert second.id.startswith("toolu_") and second.id != first.id
    assert message.stop_reason == "tool_use"


def _run_loop(client: anthropic.Anthropic, channel: str) -> list[str]:
    """A minimal agent loop: answer every tool call until the model stops asking."""
    messages: list[Any] = [user(f"Design channel {channel}")]
    tools_called: list[str] = []
    for _ in range(6):
        reply = client.messages.create(
            model=MODEL,
            max_tokens=2048,
            system="You design TV channels.",
            tools=[PREVIEW_TOOL, COMMIT_TOOL],
            messages=messages,
        )
        messages.append({"role": "assistant", "content": reply.content})
        calls = [block for block in reply.content if block.type == "tool_use"]
        if not calls:
            return tools_called
        tools_called.extend(call.name for call in calls)
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": '{"matched": 42}'}
                    for call in calls
                ],
            }
        )
    raise AssertionError("the loop did not finish")


def test_multi_turn_tool_loop_echoes_blocks_and_passes_validation(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(
        tool_use_reply("preview_filter", {"filter": {"genre": "Drama"}}, id="toolu_B1"),
        tool_use_reply("commit_channel", {"name": "Drama"}),
        text_reply("Done."),
    )

    assert _run_loop(client, "101") == ["preview_filter", "commit_channel"]

    second = stub.messages_requests()[1].body
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "id": "toolu_B1",
                "input": {"filter": {"genre": "Drama"}},
                "name": "preview_filter",
                "type": "tool_use",
            }
        ],
    }
    assert second["messages"][2]["content"][0]["tool_use_id"] == "toolu_B1"
    assert len(stub.logical_calls()) == 3 and stub.remaining() == []


def test_responder_answers_tool_loops_from_the_request(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    seen: list[int] = []

    def worker(body: dict[str, Any]) -> dict[str, Any]:
        turns = len(body["messages"])
        seen.append(turns)
        if turns == 1:
            return {"kind": "tool_use", "name": "preview_filter", "input": {"filter": {}}}
        if turns == 3:
            return {"kind": "tool_use", "name": "commit_channel", "input": {"name": "X"}}
        return {"kind": "text", "text": f"finished after {turns} turns"}

    stub.responder = worker

    assert _run_loop(client, "102") == ["preview_filter", "commit_channel"]
    assert seen == [1, 3, 5]


def test_script_entries_win_over_the_responder(stub: LLMStub, client: anthropic.Anthropic) -> None:
    stub.responder = lambda body: {"kind": "text", "text": "computed"}
    stub.add(text_reply("scripted"))

    texts = [
        client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")]).content[0].text  # type: ignore[union-attr]
        for _ in range(2)
    ]

    assert texts == ["scripted", "computed"]


def test_failing_responder_fails_the_call_at_once_with_the_cause(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    def broken(body: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("no plan for this brief")

    stub.responder = broken

    with pytest.raises(anthropic.InternalServerError, match="no plan for this brief"):
        client_for(stub, max_retries=2).messages.create(
            model=MODEL, max_tokens=16, messages=[user("q")]
        )
    assert len(stub.requests) == 1  # x-should-retry: false stops the SDK's retries


def test_match_routes_concurrent_loops_to_their_own_replies(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    channels = ["Noir", "Westerns", "Cartoons"]
    # Interleaved on purpose: FIFO alone would hand replies to the wrong loop.
    for step in range(3):
        for channel in channels:
            if step == 0:
                stub.add(
                    tool_use_reply("preview_filter", {"filter": {"c": channel}}, match=channel)
                )
            elif step == 1:
                stub.add(tool_use_reply("commit_channel", {"name": channel}, match=channel))
            else:
                stub.add(text_reply(f"{channel} done", match=channel))
    results: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def run(channel: str) -> None:
        try:
            results[channel] = _run_loop(client, channel)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(channel,)) for channel in channels]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    assert results == {channel: ["preview_filter", "commit_channel"] for channel in channels}
    assert stub.remaining() == [] and len(stub.logical_calls()) == 9
    for record in stub.messages_requests():
        channel = record.body["messages"][0]["content"].split()[-1]
        entry = record.entry
        assert entry is not None and entry["match"] == channel


def test_the_peak_of_concurrent_messages_requests_is_recorded(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    stub.latency = 0.5
    stub.responder = lambda body: {"kind": "text", "text": "ok"}
    clients = [client_for(stub) for _ in range(3)]
    threads = [
        threading.Thread(
            target=c.messages.create,
            kwargs={"model": MODEL, "max_tokens": 8, "messages": [user("q")]},
        )
        for c in clients
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    client_for(stub).messages.count_tokens(model=MODEL, messages=[user("q")])

    assert stub.peak_in_flight == 3 and stub.in_flight == 0
    assert stub.stats()["peak_in_flight"] == 3
    stub.reset_requests()
    assert stub.peak_in_flight == 0


@pytest.mark.parametrize(
    ("messages", "extra", "problem"),
    [
        (
            [
                user("go"),
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "preview_filter", "input": {}}
                    ],
                },
                user("forgot the result"),
            ],
            {"tools": [PREVIEW_TOOL]},
            "without `tool_result`",
        ),
        (
            [
                user("go"),
                {"role": "assistant", "content": "thinking"},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_X", "content": "1"}],
                },
            ],
            {},
            "unexpected `tool_use_id`",
        ),
        ([{"role": "assistant", "content": "hi"}], {}, "first message"),
        (
            [user("go")],
            {"tools": [PREVIEW_TOOL], "tool_choice": {"type": "tool", "name": "nope"}},
            "tool_choice.name",
        ),
        ([user("go")], {"tools": [{**PREVIEW_TOOL, "name": "bad name!"}]}, "tools.0.name"),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": str(n), "cache_control": {"type": "ephemeral"}}
                        for n in range(5)
                    ],
                }
            ],
            {},
            "maximum of 4 blocks with cache_control",
        ),
    ],
    ids=[
        "unanswered-tool-use",
        "orphan-tool-result",
        "assistant-first",
        "unknown-tool-choice",
        "bad-tool-name",
        "five-breakpoints",
    ],
)
def test_agent_loop_bugs_get_400_and_consume_no_entry(
    stub: LLMStub,
    client: anthropic.Anthropic,
    messages: list[dict[str, Any]],
    extra: dict[str, Any],
    problem: str,
) -> None:
    stub.add(text_reply("kept"))

    with pytest.raises(anthropic.BadRequestError, match=problem) as caught:
        client.messages.create(model=MODEL, max_tokens=64, messages=messages, **extra)

    assert caught.value.type == "invalid_request_error"
    assert stub.remaining() == [{"kind": "text", "text": "kept"}]


def test_max_tokens_must_be_a_positive_integer(stub: LLMStub, client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        client.messages.create(model=MODEL, max_tokens=0, messages=[user("q")])


def test_exhausted_script_fails_loudly_without_retries(
    stub: LLMStub, client_for: ClientFactory
) -> None:
    with pytest.raises(anthropic.InternalServerError, match="stub script exhausted"):
        client_for(stub, max_retries=2).messages.create(
            model=MODEL, max_tokens=16, messages=[user("q")]
        )
    assert len(stub.requests) == 1


def test_count_tokens_totals_the_prompt_without_touching_the_cache(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    # Above claude-sonnet-4-6's 1,024-token minimum, so the first reply writes the cache.
    system = [{"type": "text", "text": "x" * 6000, "cache_control": {"type": "ephemeral"}}]
    counted = client.messages.count_tokens(model=MODEL, system=system, messages=[user("q")])
    stub.add(text_reply("ok"))
    reply = client.messages.create(model=MODEL, max_tokens=8, system=system, messages=[user("q")])

    usage = reply.usage
    paid = usage.input_tokens + (usage.cache_creation_input_tokens or 0)
    assert counted.input_tokens == paid > 1024
    assert usage.cache_creation_input_tokens and usage.cache_creation_input_tokens > 1024


def test_unknown_paths_get_404_and_missing_key_gets_401(stub: LLMStub) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as missing_path:
        urllib.request.urlopen(f"{stub.url}/v1/complete", data=b"{}", timeout=5)
    assert missing_path.value.code == 404
    assert json.loads(missing_path.value.read())["error"]["type"] == "not_found_error"

    keyless = urllib.request.Request(
        f"{stub.url}/v1/messages", data=b"{}", headers={"anthropic-version": "2026-10-21"}
    )
    with pytest.raises(urllib.error.HTTPError) as no_key:
        urllib.request.urlopen(keyless, timeout=5)
    assert no_key.value.code == 401
    assert no_key.value.headers["request-id"].startswith("req_")


def test_a_configured_key_rejects_others(client_for: ClientFactory) -> None:
    with LLMStub([text_reply("never")], api_key="the-right-key") as strict:
        with pytest.raises(anthropic.AuthenticationError):
            client_for(strict).messages.create(model=MODEL, max_tokens=8, messages=[user("q")])
        assert len(strict.remaining()) == 1


def test_bad_entries_are_refused_with_the_field_named(stub: LLMStub) -> None:
    with pytest.raises(ScriptError, match=r"script\[0\]\.kind"):
        stub.add({"kind": "poem"})
    with pytest.raises(ScriptError, match=r"script\[1\].*unknown field\(s\) colour"):
        stub.add(text_reply("fine"), {"kind": "text", "text": "x", "colour": "red"})
    with pytest.raises(ScriptError, match=r"script\[0\]\.status"):
        LLMStub([{"kind": "error", "status": 200}])
    assert stub.remaining() == []  # a refused batch queues nothing


@pytest.mark.parametrize(
    ("answer", "problem"),
    [({"kind": "poem"}, r"responder\(\)\.kind"), (None, "responder had no answer")],
)
def test_responder_without_a_valid_answer_fails_the_call(
    stub: LLMStub, client: anthropic.Anthropic, answer: dict[str, Any] | None, problem: str
) -> None:
    stub.responder = lambda body: answer

    with pytest.raises(anthropic.InternalServerError, match=problem):
        client.messages.create(model=MODEL, max_tokens=16, messages=[user("q")])
