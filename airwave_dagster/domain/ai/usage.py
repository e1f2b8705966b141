"""Token usage, prices and budget arithmetic for the AI lineup builder.

Reference: docs/reference/ai-lineup.md §9.

`Usage` keeps the four token counts the Messages API reports **separately**: `input_tokens` is
the *uncached* input (the API's own `input_tokens`), `cache_read_tokens` and `cache_write_tokens`
are the cached parts, so the total input is their sum (`Usage.total_input_tokens`; the reference
stored that total as "inputTokens"). `calls` counts API calls. `ModelUsage` sums `Usage` per model.
`cache_write_1h_tokens` is the part of the writes made with the 1-hour lifetime (the API's
`usage.cache_creation.ephemeral_1h_input_tokens`): those cost 2x the input price, 5-minute writes
1.25x, so the two are priced apart.

`PriceTable` maps a model id (exact, else the longest key that prefixes it, so dated ids such as
`claude-haiku-4-5-20251001` find `claude-haiku-4-5`) to a `ModelPrice` in USD per million tokens.
`cost_usd` prices a usage; an unknown model is *unpriced* (None) rather than silently free, and the
report says so. `DEFAULT_PRICES` is a plain mapping the runtime may replace or extend (for example
from the `genai-prices` package or run config) via `PriceTable.with_overrides`.

Budget helpers are plain arithmetic over USD: `remaining_budget`, `budget_exhausted`, and
`worst_case_call_cost` (what one more call could cost at most, for a pre-call check).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

CACHE_WRITE_MULTIPLIER = 1.25
"""Anthropic's 5-minute cache write price, relative to the input price."""

CACHE_WRITE_1H_MULTIPLIER = 2.0
"""Anthropic's 1-hour cache write price (`cache_control.ttl: "1h"`), relative to input."""

CACHE_READ_MULTIPLIER = 0.1
"""Anthropic's cache read price, relative to the input price."""


class Usage(BaseModel):
    """Tokens spent by one or more API calls of one model."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(default=0, ge=0, description="Uncached input tokens.")
    output_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(
        default=0, ge=0, description="Cache writes of either lifetime (5 minutes or 1 hour)."
    )
    cache_write_1h_tokens: int = Field(
        default=0,
        ge=0,
        description="The part of `cache_write_tokens` written with the 1-hour lifetime; priced "
        "apart (2x the input price, against 1.25x for 5-minute writes).",
    )
    calls: int = Field(default=0, ge=0, description="API calls counted in this usage.")

    @model_validator(mode="after")
    def _one_hour_writes_are_writes(self) -> Usage:
        if self.cache_write_1h_tokens > self.cache_write_tokens:
            raise ValueError("cache_write_1h_tokens is a part of cache_write_tokens")
        return self

    @property
    def cache_write_5m_tokens(self) -> int:
        """Cache writes with the default 5-minute lifetime."""
        return self.cache_write_tokens - self.cache_write_1h_tokens

    @property
    def total_input_tokens(self) -> int:
        """All input tokens, cached or not (the reference's `inputTokens`)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """Input (all of it) plus output."""
        return self.total_input_tokens + self.output_tokens

    @property
    def cache_read_ratio(self) -> float:
        """Share of all input tokens that were read from the prompt cache (0 when none)."""
        total = self.total_input_tokens
        return self.cache_read_tokens / total if total else 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens + other.cache_write_1h_tokens,
            calls=self.calls + other.calls,
        )

    @classmethod
    def from_api(cls, usage: Mapping[str, Any] | None, *, calls: int = 1) -> Usage:
        """Read the `usage` block of one Messages API response (as a dict).

        Missing or null counts are 0, so a partial block from a failed stream still counts.
        `cache_creation.ephemeral_1h_input_tokens` (the SDK's `CacheCreation`) is the 1-hour
        part of `cache_creation_input_tokens`; without the breakdown every write is a 5-minute
        one, the default lifetime.

        Args:
            usage: `response.usage.model_dump()` or the raw JSON block; None counts the call only.
            calls: How many API calls this block stands for.

        Returns:
            The usage.
        """
        block = usage or {}

        def count(name: str, within: Mapping[str, Any] = block) -> int:
            value = within.get(name)
            return int(value) if isinstance(value, int | float) and value > 0 else 0

        creation = block.get("cache_creation")
        split: Mapping[str, Any] = creation if isinstance(creation, Mapping) else {}
        one_hour = count("ephemeral_1h_input_tokens", split)
        five_minutes = count("ephemeral_5m_input_tokens", split)
        # The total normally equals the split's sum; never let a short total hide a write.
        writes = max(count("cache_creation_input_tokens"), one_hour + five_minutes)
        return cls(
            input_tokens=count("input_tokens"),
            output_tokens=count("output_tokens"),
            cache_read_tokens=count("cache_read_input_tokens"),
            cache_write_tokens=writes,
            cache_write_1h_tokens=one_hour,
            calls=calls,
        )


ModelUsage = dict[str, Usage]
"""Usage per model id."""


def add_usage(totals: Mapping[str, Usage], model: str, usage: Usage) -> ModelUsage:
    """A new per-model mapping with `usage` added to `model`'s entry (inputs are not changed)."""
    merged = dict(totals)
    merged[model] = merged.get(model, Usage()) + usage
    return merged


def merge_usage(parts: Iterable[Mapping[str, Usage]]) -> ModelUsage:
    """Sum several per-model mappings; models are sorted by id in the result (stable output)."""
    merged: ModelUsage = {}
    for part in parts:
        for model, usage in part.items():
            merged = add_usage(merged, model, usage)
    return {model: merged[model] for model in sorted(merged)}


def total_usage(by_model: Mapping[str, Usage]) -> Usage:
    """All models' usage summed."""
    total = Usage()
    for usage in by_model.values():
        total = total + usage
    return total


class ModelPrice(BaseModel):
    """USD per million tokens of one model."""

    model_config = ConfigDict(frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(
        default=None, ge=0, description="Default: input * 0.1 (Anthropic's cache read price)."
    )
    cache_write: float | None = Field(
        default=None, ge=0, description="Default: input * 1.25 (5-minute cache write)."
    )
    cache_write_1h: float | None = Field(
        default=None, ge=0, description="Default: input * 2 (1-hour cache write)."
    )

    @property
    def effective_cache_read(self) -> float:
        """The cache read price, explicit or derived from the input price."""
        return self.input * CACHE_READ_MULTIPLIER if self.cache_read is None else self.cache_read

    @property
    def effective_cache_write(self) -> float:
        """The cache write price, explicit or derived from the input price."""
        if self.cache_write is None:
            return self.input * CACHE_WRITE_MULTIPLIER
        return self.cache_write

    @property
    def effective_cache_write_1h(self) -> float:
        """The 1-hour cache write price, explicit or derived from the input price."""
        if self.cache_write_1h is None:
            return self.input * CACHE_WRITE_1H_MULTIPLIER
        return self.cache_write_1h

    def cost(self, usage: Usage) -> float:
        """USD for `usage` at this price; 1-hour and 5-minute cache writes priced apart."""
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.effective_cache_read
            + usage.cache_write_5m_tokens * self.effective_cache_write
            + usage.cache_write_1h_tokens * self.effective_cache_write_1h
        ) / 1_000_000


DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-fable-5": ModelPrice(input=10, output=50),
    "claude-opus-4-8": ModelPrice(input=5, output=25),
    "claude-opus-4-7": ModelPrice(input=5, output=25),
    "claude-opus-4-6": ModelPrice(input=5, output=25),
    "claude-opus-4-5": ModelPrice(input=5, output=25),
    "claude-opus-4-1": ModelPrice(input=15, output=75),
    "claude-opus-4": ModelPrice(input=15, output=75),
    "claude-sonnet-5": ModelPrice(input=3, output=15),
    "claude-sonnet-4-6": ModelPrice(input=3, output=15),
    "claude-sonnet-4-5": ModelPrice(input=3, output=15),
    "claude-sonnet-4": ModelPrice(input=3, output=15),
    "claude-3-7-sonnet": ModelPrice(input=3, output=15),
    "claude-haiku-4-5": ModelPrice(input=1, output=5),
    "claude-3-5-haiku": ModelPrice(input=0.8, output=4),
    "claude-3-haiku": ModelPrice(input=0.25, output=1.25),
}
"""Model id prefix → price, USD per million tokens (the reference's table plus older models)."""


class PriceTable(BaseModel):
    """Prices by model id prefix; see the module docstring for the lookup rule."""

    model_config = ConfigDict(frozen=True)

    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))

    def price_of(self, model: str) -> ModelPrice | None:
        """The price of `model`: exact id, else the longest key prefixing it, else None."""
        if model in self.prices:
            return self.prices[model]
        matches = [key for key in self.prices if model.startswith(key)]
        return self.prices[max(matches, key=len)] if matches else None

    def with_overrides(self, overrides: Mapping[str, ModelPrice]) -> PriceTable:
        """A table whose entries are replaced or extended by `overrides`."""
        return PriceTable(prices={**self.prices, **overrides})


def cost_usd(model: str, usage: Usage, table: PriceTable | None = None) -> float | None:
    """USD spent by `usage` of `model`, or None when the model has no price.

    Args:
        model: The model id the API reported.
        usage: Its tokens.
        table: Prices; the defaults when None.

    Returns:
        The cost, or None for an unpriced model.
    """
    price = (table or PriceTable()).price_of(model)
    return None if price is None else price.cost(usage)


class CostSummary(BaseModel):
    """The cost of a per-model usage: priced total plus what could not be priced."""

    model_config = ConfigDict(frozen=True)

    total_usd: float
    by_model_usd: dict[str, float | None]
    unpriced_models: tuple[str, ...] = ()


def summarise_cost(by_model: Mapping[str, Usage], table: PriceTable | None = None) -> CostSummary:
    """Price every model's usage; unpriced models are listed and excluded from the total."""
    prices = table or PriceTable()
    by_model_usd: dict[str, float | None] = {}
    for model in sorted(by_model):
        by_model_usd[model] = cost_usd(model, by_model[model], prices)
    unpriced = tuple(model for model, usd in by_model_usd.items() if usd is None)
    total = sum(usd for usd in by_model_usd.values() if usd is not None)
    return CostSummary(total_usd=total, by_model_usd=by_model_usd, unpriced_models=unpriced)


def remaining_budget(budget_usd: float | None, spent_usd: float) -> float | None:
    """USD left (never negative), or None when there is no budget."""
    if budget_usd is None:
        return None
    return max(0.0, budget_usd - spent_usd)


def budget_exhausted(budget_usd: float | None, spent_usd: float, *, next_cost: float = 0.0) -> bool:
    """Whether spending `next_cost` more would go past the budget (no budget: never).

    A budget is exhausted once the spend reaches it, so a zero budget allows no call at all.
    """
    if budget_usd is None:
        return False
    if spent_usd >= budget_usd:
        return True
    return spent_usd + next_cost > budget_usd


def worst_case_call_cost(
    model: str, *, input_tokens: int, max_output_tokens: int, table: PriceTable | None = None
) -> float | None:
    """The most one call can cost: all input uncached at full price, all output tokens used.

    Returns:
        USD, or None when the model is unpriced.
    """
    return cost_usd(
        model, Usage(input_tokens=input_tokens, output_tokens=max_output_tokens, calls=1), table
    )
