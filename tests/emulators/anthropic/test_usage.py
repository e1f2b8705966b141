"""The usage and prompt-cache model, directly and as the SDK reports it."""

from __future__ import annotations

import threading
from typing import Any

import anthropic
import pytest

from airwave_dagster.domain.ai.usage import Usage
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
    paid = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    assert sum(first[name] for name in paid) == total
    assert first["ephemeral_5m_input_tokens"] == first["cache_creation_input_tokens"]


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
            "content": [{"type": "text", "text": CONTEXT, "cache_control": EPHEMERAL}],
        }
    ]
    first = cache.charge({"model": MODEL, "messages": first_turn})
    later = [
        {"role": "user", "content": [{"type": "text", "text": CONTEXT}]},
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


def test_concurrent_first_calls_each_pay_a_write(client_for: ClientFactory) -> None:
    """An entry is readable only once the response that wrote it has begun.

    Source: Anthropic's prompt-caching guide ("a cache entry only becomes available after the
    first response begins"; concurrent requests sent before that do not hit it), at
    platform.claude.com/docs/en/build-with-claude/prompt-caching.
    """
    with LLMStub([text_reply(str(n)) for n in range(5)], latency=0.4) as stub:
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
        later = client.messages.create(model=MODEL, max_tokens=64, **call).usage

    assert len(usages) == 4
    assert all(u.cache_creation_input_tokens and not u.cache_read_input_tokens for u in usages)
    assert later.cache_read_input_tokens == usages[0].cache_creation_input_tokens
    assert not later.cache_creation_input_tokens
    assert stub.stats()["cached_prefixes"] == 1


@pytest.mark.parametrize(
    ("model", "floor"),
    [
        ("claude-haiku-4-5", 4096),
        ("claude-haiku-4-5-20251001", 4096),
        ("claude-opus-4-5", 4096),
        ("claude-opus-4-6", 4096),
        ("claude-sonnet-4-6", 1024),
        ("claude-sonnet-4-5", 1024),
        ("claude-opus-4-1", 1024),
        ("claude-3-5-haiku", 2048),
    ],
)
def test_each_model_has_its_documented_minimum_cacheable_prefix(model: str, floor: int) -> None:
    """Below a model's minimum nothing is written or read, and no error is raised.

    Source: prompt-caching guide, "Cache limitations" (4,096 tokens for Opus 4.6, Opus 4.5 and
    Haiku 4.5; 1,024 for Sonnet 4.6/4.5, Opus 4.1/4, Sonnet 4/3.7; 2,048 for Haiku 3.5/3), as
    quoted in anthropics/anthropic-sdk-python#1194.
    """

    def body(tokens: int) -> dict[str, Any]:
        # A quarter of the block's canonical JSON, `{"text":"…","type":"text"}` (25 more chars).
        text = "x" * (tokens * 4 - 25)
        block = {"type": "text", "text": text, "cache_control": EPHEMERAL}
        return {"model": model, "messages": [{"role": "user", "content": [block]}]}

    cache = PromptCache()
    below = body(floor - 1)
    at = body(floor)
    assert total_tokens(below) == floor - 1 and total_tokens(at) == floor

    for _ in range(2):
        usage = cache.charge(below)
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
        assert usage["input_tokens"] == floor - 1
    assert cache.charge(at)["cache_creation_input_tokens"] == floor
    assert cache.charge(at)["cache_read_input_tokens"] == floor


def test_entries_live_five_minutes_from_last_use() -> None:
    """Source: prompt-caching guide: the default lifetime is 5 minutes, "refreshed for no
    additional cost each time the cached content is used"."""
    now = [1000.0]
    cache = PromptCache(clock=lambda: now[0])
    assert cache.charge(_request("a"))["cache_creation_input_tokens"]
    now[0] += 290
    assert cache.charge(_request("a"))["cache_read_input_tokens"]  # refreshed at +290 s
    now[0] += 290
    assert cache.charge(_request("a"))["cache_read_input_tokens"]  # 580 s after the write
    now[0] += 301
    expired = cache.charge(_request("a"))
    assert expired["cache_read_input_tokens"] == 0 and expired["cache_creation_input_tokens"]


def test_one_hour_entries_are_reported_as_one_hour_writes(
    stub: LLMStub, client: anthropic.Anthropic
) -> None:
    """Source: prompt-caching guide, "1-hour cache duration": `"ttl": "1h"` keeps the entry an
    hour and is billed at the 1-hour write price, reported in `usage.cache_creation`
    (`ephemeral_1h_input_tokens`; SDK type `anthropic.types.CacheCreation`)."""
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    hour = {"type": "ephemeral", "ttl": "1h"}
    body = _request("a")
    body["messages"][0]["content"][0]["cache_control"] = hour
    written = cache.charge(body)
    assert written["ephemeral_1h_input_tokens"] == written["cache_creation_input_tokens"] > 0
    assert written["ephemeral_5m_input_tokens"] == 0
    now[0] += 50 * 60
    assert cache.charge(body)["cache_read_input_tokens"] == written["cache_creation_input_tokens"]
    now[0] += 61 * 60
    assert cache.charge(body)["cache_read_input_tokens"] == 0

    stub.add(text_reply("ok"))
    call = {k: v for k, v in body.items() if k not in ("model", "max_tokens")}
    usage = client.messages.create(model=MODEL, max_tokens=64, **call).usage
    assert usage.cache_creation is not None
    assert usage.cache_creation.ephemeral_1h_input_tokens == usage.cache_creation_input_tokens
    assert usage.cache_creation.ephemeral_5m_input_tokens == 0
    # What the product charges to its ledger from this response: the 1-hour part kept apart.
    charged = Usage.from_api(usage.model_dump())
    assert charged.cache_write_1h_tokens == charged.cache_write_tokens > 0
