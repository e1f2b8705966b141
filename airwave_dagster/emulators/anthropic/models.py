"""The models the LLM stub serves, with the limits the real API enforces for each.

Sources (read 2026-12):

- minimum cacheable prefix: Anthropic's prompt-caching guide
  (platform.claude.com/docs/en/build-with-claude/prompt-caching, "Cache limitations"), as quoted in
  anthropics/anthropic-sdk-python#1194: 4,096 tokens for Claude Opus 4.6, Opus 4.5 and Haiku 4.5;
  1,024 for Sonnet 4.6, Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4 and Sonnet 3.7; 2,048 for Haiku 3.5
  and Haiku 3. The newer models' floors (Opus 4.7: 2,048; Opus 4.8 and Sonnet 5: 1,024) come from
  the same page's later revision as summarised in public write-ups; Fable 5 is reported as both
  512 and 2,048, and the stub takes the stricter 2,048.
- maximum output tokens: the models overview
  (platform.claude.com/docs/en/about-claude/models/overview). Where a newer model's figure was not
  found, the stub assumes its predecessor's; such rows say so.
- context window: the same overview and the context-windows guide
  (platform.claude.com/docs/en/build-with-claude/context-windows): 200,000 tokens for every model
  served here. Sonnet 4, 4.5 and 4.6 and Opus 4.6 reach 1M tokens only with the
  `context-1m-2025-08-07` beta header, which the product never sends and the stub does not honour;
  for Opus 4.7/4.8, Sonnet 5 and Fable 5 no figure was found and the stub assumes the standard
  200,000 (stricter than a larger window, so a request it accepts fits).

A model id not listed here (alias or dated id) is answered 404 `not_found_error`, as the API does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What the stub enforces for one model.

    Attributes:
        min_cache_tokens: Shortest prefix the cache writes or reads; below it nothing is cached.
        max_output_tokens: The largest `max_tokens` a request may ask for.
        context_window: Input plus output tokens the model can hold.
    """

    min_cache_tokens: int
    max_output_tokens: int
    context_window: int = 200_000
    """The standard window (the 1M-token windows are beta opt-ins the product never asks for)."""


MODELS: dict[str, ModelSpec] = {
    "claude-fable-5": ModelSpec(2_048, 128_000),  # assumed: Opus 4.6's output cap
    "claude-opus-4-8": ModelSpec(1_024, 128_000),  # assumed: Opus 4.6's output cap
    "claude-opus-4-7": ModelSpec(2_048, 128_000),  # assumed: Opus 4.6's output cap
    "claude-opus-4-6": ModelSpec(4_096, 128_000),
    "claude-opus-4-5": ModelSpec(4_096, 64_000),
    "claude-opus-4-1": ModelSpec(1_024, 32_000),
    "claude-opus-4": ModelSpec(1_024, 32_000),
    "claude-sonnet-5": ModelSpec(1_024, 64_000),  # assumed: Sonnet 4.6's output cap
    "claude-sonnet-4-6": ModelSpec(1_024, 64_000),
    "claude-sonnet-4-5": ModelSpec(1_024, 64_000),
    "claude-sonnet-4": ModelSpec(1_024, 64_000),
    "claude-3-7-sonnet": ModelSpec(1_024, 64_000),
    "claude-haiku-4-5": ModelSpec(4_096, 64_000),
    "claude-3-5-haiku": ModelSpec(2_048, 8_192),
    "claude-3-haiku": ModelSpec(2_048, 4_096),
}
"""Model aliases; a dated id (`claude-haiku-4-5-20251001`) is its alias plus `-YYYYMMDD`."""


def find_model(model: str) -> ModelSpec | None:
    """The spec of an alias or dated model id, or None when the API would not know it."""
    if model in MODELS:
        return MODELS[model]
    alias, _, date = model.rpartition("-")
    if len(date) == 8 and date.isdigit() and alias in MODELS:
        return MODELS[alias]
    # "claude-3-5-haiku-latest" style aliases are also served by the API.
    if model.endswith("-latest") and model.removesuffix("-latest") in MODELS:
        return MODELS[model.removesuffix("-latest")]
    return None
