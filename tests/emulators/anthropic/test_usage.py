"""The usage and prompt-cache model, directly and as the SDK reports it."""

from __future__ import annotations

import threading
from typing import Any

import anthropic
import pytest

from airwave_dagster.emulators.anthropic import LLMStub, PromptCache, text_reply, tool_use_reply
from airwave_dagster.emulators.anthropic.usage import estimate_tokens, segments, total_tokens
from tests.emulators.anthropic.conftest import MODEL, ClientFactory, user

EPHEMERAL = {"type": "ephemeral"}
CONTEXT = "Library facts: " + "Film noir, westerns and cartoons. " * 300  # about 10 KB
TOOLS = [{"name": "preview_filter", "input_schema": {"type": "object"}}]


def _request(brief: str, system: str = "You design channels.", **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "system": system,
        "tools": TOOLS,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": CONTEXT, "cache_control": EPHEMERAL},
                    {"type": "text", "text": brief},
                ],
            }
        ],
        **extra,
    }


def test_tokens_are_a_quarter_of_the_canonical_json() -> None:
    assert estimate_tokens("") == 1
    assert estimate_tokens({"b": 1, "a": "x"}) == estimate_tokens({"a": "x", "b": 1}) == 4
    assert total_tokens({"messages": [user("abcdefghij")]}) == 3  # '"abcdefghij"' is 12 chars


def test_segments_follow_cache_order_and_ignore_the_marker() -> None:
    body = _request("brief")
    parts = segments(body)

    assert [part.key.split(":", 1)[0] for part in parts] == ["tool", "system", "user", "user"]
    assert [part.breakpoint for part in parts] == [False, False, True, False]
    assert "cache_control" not in parts[2].key
    top_level = segments({**body, "cache_control": EPHEMERAL})
    assert top_level[-1].breakpoint


def test_first_call_writes_later_calls_read() -> None:
    cache = PromptCache()

    first = cache.charge(_request("Channel 101: noir"))
    second = cache.charge(_request("Channel 102: westerns, a longer brief than the first"))

    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] > 2000
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0
    assert second["input_tokens"] > first["input_tokens"]
    total = total_tokens(_request("Channel 101: noir"))
    assert sum(first.values()) == total


def test_a_changed_prefix_or_model_misses() -> None:
    cache = PromptCache()
    written = cache.charge(_request("a"))["cache_creation_input_tokens"]

    other_system = cache.charge(_request("a", system="You design radio stations."))
    other_model = cache.charge({**_request("a"), "model": "claude-opus-4-6"})

    assert other_system["cache_read_input_tokens"] == 0
    assert other_system["cache_creation_input_tokens"] > written
    assert other_model["cache_read_input_tokens"] == 0


def test_no_breakpoint_means_no_cache_fields() -> None:
    cache = PromptCache()
    body = {"model": MODEL, "messages": [user(CONTEXT)]}

    for _ in range(2):
        usage = cache.charge(body)
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
        assert usage["input_tokens"] == total_tokens(body)


def test_min_cache_tokens_keeps_short_prefixes_uncached() -> None:
    cache = PromptCache(min_cache_tokens=100_000)

    for _ in range(2):
        usage = cache.charge(_request("a"))
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
    assert len(cache) == 0
    with pytest.raises(ValueError, match="min_cache_tokens"):
        PromptCache(min_cache_tokens=-1)


def test_a_moved_breakpoint_still_reads_the_earlier_prefix() -> None:
    cache = PromptCache()
    first_turn = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "turn one " * 200, "cache_control": EPHEMERAL}],
        }
    ]
    first = cache.charge({"model": MODEL, "messages": first_turn})
    later = [
        {"role": "user", "content": [{"type": "text", "text": "turn one " * 200}]},
        {"role": "assistant", "content": [{"type": "text", "text": "reply"}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": "turn two", "cache_control": EPHEMERAL}],
        },
    ]

    second = cache.charge({"model": MODEL, "messages": later})

    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] > 0  # the new, longer prefix is written


def test_reset_forgets_the_cache() -> None:
    cache = PromptCache()
    cache.charge(_request("a"))
    cache.reset()

    assert cache.charge(_request("a"))["cache_read_input_tokens"] == 0


def test_sdk_sees_create_read_and_override_usage(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    stub.add(
        tool_use_reply("preview_filter", {"filter": {}}),
        text_reply("second"),
        text_reply("scripted usage", usage={"input_tokens": 7, "output_tokens": 5}),
    )
    call = _request("Channel 101")
    del call["model"], call["max_tokens"]

    first = client.messages.create(model=MODEL, max_tokens=1024, **call).usage
    second = client.messages.create(model=MODEL, max_tokens=1024, **call).usage
    with client.messages.stream(model=MODEL, max_tokens=32_000, **call) as stream:
        third = stream.get_final_message().usage

    assert first.cache_creation_input_tokens and first.cache_read_input_tokens == 0
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    assert (third.input_tokens, third.output_tokens) == (7, 5)
    assert third.cache_read_input_tokens == first.cache_creation_input_tokens
    assert stub.stats()["usage"]["cache_read_input_tokens"] == 2 * (
        first.cache_creation_input_tokens or 0
    )
    context_blocks = [record.body["messages"][0]["content"][0] for record in stub.requests]
    assert all(block == context_blocks[0] for block in context_blocks)


def test_errors_do_not_touch_the_cache(stub: LLMStub, client: anthropic.Anthropic) -> None:
    stub.add({"kind": "error", "status": 529}, text_reply("ok"))
    call = _request("x")
    del call["model"], call["max_tokens"]

    with pytest.raises(anthropic.OverloadedError):
        client.messages.create(model=MODEL, max_tokens=64, **call)
    usage = client.messages.create(model=MODEL, max_tokens=64, **call).usage

    assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens


def test_identical_concurrent_first_calls_pay_one_write(client_for: ClientFactory) -> None:
    with LLMStub([text_reply(str(n)) for n in range(4)]) as stub:
        client = client_for(stub)
        call = _request("same")
        del call["model"], call["max_tokens"]
        usages: list[Any] = []

        def ask() -> None:
            usages.append(client.messages.create(model=MODEL, max_tokens=64, **call).usage)

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)

    writes = [usage for usage in usages if usage.cache_creation_input_tokens]
    assert len(usages) == 4 and len(writes) == 1
    assert stub.stats()["cached_prefixes"] == 1
