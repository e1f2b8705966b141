"""What the product knows about each Anthropic model: cache floor, output cap, expected build calls.

Sources (read 2026-12; restated here, not shared with the LLM stub, so a wrong figure on one side
shows up as a failing test instead of agreeing with itself):

- minimum cacheable prefix: Anthropic's prompt-caching guide
  (platform.claude.com/docs/en/build-with-claude/prompt-caching, "Cache limitations", quoted in
  anthropics/anthropic-sdk-python#1194). Below it a request succeeds but nothing is written or
  read, and every call pays the whole prefix at the input price.
- maximum output tokens: the models overview (platform.claude.com/docs/en/about-claude/models/
  overview); a request asking for more is refused with 400.

`expected_build_calls` turns a measured prefix into the calls a lineup's builds are expected to
make, each priced on its own by the caller: a prefix below the worker's floor is never cached; above
it, the first call of every build that starts before the first writer's response has begun pays a
cache write (up to the build concurrency: those calls all go out together), and every later call
reads the prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

from airwave_dagster.domain.ai.usage import Usage

MIN_CACHEABLE_TOKENS: dict[str, int] = {
    "claude-fable-5": 2_048,
    "claude-opus-4-8": 1_024,
    "claude-opus-4-7": 2_048,
    "claude-opus-4-6": 4_096,
    "claude-opus-4-5": 4_096,
    "claude-opus-4-1": 1_024,
    "claude-opus-4": 1_024,
    "claude-sonnet-5": 1_024,
    "claude-sonnet-4-6": 1_024,
    "claude-sonnet-4-5": 1_024,
    "claude-sonnet-4": 1_024,
    "claude-3-7-sonnet": 1_024,
    "claude-haiku-4-5": 4_096,
    "claude-3-5-haiku": 2_048,
    "claude-3-haiku": 2_048,
}
"""Model id prefix → the shortest prefix the prompt cache writes or reads, in tokens."""

UNKNOWN_MODEL_FLOOR = 4_096
"""Assumed for a model missing above: the largest documented floor, so nothing is assumed cached."""

MAX_OUTPUT_TOKENS: dict[str, int] = {
    "claude-fable-5": 128_000,
    "claude-opus-4-8": 128_000,
    "claude-opus-4-7": 128_000,
    "claude-opus-4-6": 128_000,
    "claude-opus-4-5": 64_000,
    "claude-opus-4-1": 32_000,
    "claude-opus-4": 32_000,
    "claude-sonnet-5": 64_000,
    "claude-sonnet-4-6": 64_000,
    "claude-sonnet-4-5": 64_000,
    "claude-sonnet-4": 64_000,
    "claude-3-7-sonnet": 64_000,
    "claude-haiku-4-5": 64_000,
    "claude-3-5-haiku": 8_192,
    "claude-3-haiku": 4_096,
}
"""Model id prefix → the largest `max_tokens` a request may ask for (newest models: assumed to be
their predecessor's figure where none was published)."""


def _lookup(table: dict[str, int], model: str) -> int | None:
    if model in table:
        return table[model]
    matches = [key for key in table if model.startswith(key)]
    return table[max(matches, key=len)] if matches else None


def min_cacheable_tokens(model: str) -> int:
    """The model's minimum cacheable prefix (dated ids find their alias)."""
    found = _lookup(MIN_CACHEABLE_TOKENS, model)
    return UNKNOWN_MODEL_FLOOR if found is None else found


def output_cap(model: str, wanted: int) -> int:
    """`wanted` capped at the model's output limit (unknown models keep `wanted`)."""
    limit = _lookup(MAX_OUTPUT_TOKENS, model)
    return wanted if limit is None else min(wanted, limit)


def expected_build_calls(
    *,
    prefix_tokens: int,
    brief_tokens: Sequence[int],
    floor: int,
    concurrency: int,
    calls_per_build: int,
    output_tokens: int,
    tool_result_tokens: int,
) -> list[Usage]:
    """The usage of every call the builds are expected to make, in build order.

    Args:
        prefix_tokens: The worker's shared prefix (tools, system, context block), as
            `count_tokens` measured it.
        brief_tokens: Each build's channel brief, in build order.
        floor: The worker model's minimum cacheable prefix.
        concurrency: Builds started together; each of the first `concurrency` first calls
            goes out before any response has begun, so each pays its own cache write.
        calls_per_build: Model calls per build.
        output_tokens: Output per call.
        tool_result_tokens: What a tool result adds to the conversation of the next call.

    Returns:
        One `Usage` per call (price each on its own).
    """
    cached = prefix_tokens >= floor
    writers = min(max(concurrency, 1), len(brief_tokens))
    calls: list[Usage] = []
    for build, brief in enumerate(brief_tokens):
        for turn in range(calls_per_build):
            rest = brief + turn * (output_tokens + tool_result_tokens)
            if not cached:
                usage = Usage(input_tokens=prefix_tokens + rest, output_tokens=output_tokens)
            elif build < writers and turn == 0:
                usage = Usage(
                    input_tokens=rest, cache_write_tokens=prefix_tokens, output_tokens=output_tokens
                )
            else:
                usage = Usage(
                    input_tokens=rest, cache_read_tokens=prefix_tokens, output_tokens=output_tokens
                )
            calls.append(usage.model_copy(update={"calls": 1}))
    return calls
