"""Model prices from the maintained `genai-prices` snapshot, per call, run-config overrides on top.

This adapter sits in `resources/`, not in the domain: `genai_prices` imports an HTTP client
(`httpx2`, for its optional price auto-update) at package import, and its snapshot is data about
the outside world that changes between releases. The domain keeps the arithmetic it owns
(`Usage`, `ModelPrice`, `PriceTable` for explicit overrides, budget helpers) and never learns
where default prices come from.

Prices apply to ONE call: long-context tiers are chosen by that call's total input tokens, so
summed usage must never be priced here (a hundred 5k-token calls are not one 500k-token call).
The bundled snapshot is used as installed (no auto-update thread): a run's costs then depend
only on the locked package version.
"""

from __future__ import annotations

from decimal import Decimal

import genai_prices

from airwave_dagster.domain.ai.usage import PriceTable, Usage

PROVIDER_ID = "anthropic"
"""Every model this project calls is an Anthropic model (the Messages API)."""


def snapshot_call_cost(model: str, usage: Usage) -> Decimal | None:
    """One call's price from genai-prices, or None when the snapshot does not know the model.

    Args:
        model: The model id the API reported (dated ids match their family).
        usage: One call's tokens; `input_tokens` is the uncached part, as everywhere here.
    """
    # genai-prices counts `input_tokens` as ALL input, cached parts included, and picks the
    # tier from that total.
    calls_usage = genai_prices.Usage(
        input_tokens=usage.total_input_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        # A part of cache_write_tokens that genai-prices bills at the model's 1-hour write price.
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
        output_tokens=usage.output_tokens,
    )
    try:
        calculation = genai_prices.calc_price(calls_usage, model, provider_id=PROVIDER_ID)
    except LookupError:
        return None
    return calculation.total_price


def call_cost(model: str, usage: Usage, overrides: PriceTable) -> float | None:
    """USD of one call: a run-config override when one matches the model, else genai-prices.

    Returns:
        The cost, or None for a model neither source prices (reported as unpriced).
    """
    price = overrides.price_of(model)
    if price is not None:
        return price.cost(usage)
    cost = snapshot_call_cost(model, usage)
    return None if cost is None else float(cost)


def is_priced(model: str, overrides: PriceTable) -> bool:
    """Whether calls of `model` can be priced (by an override or by the snapshot)."""
    return call_cost(model, Usage(input_tokens=1, calls=1), overrides) is not None


def worst_case_call_cost(
    model: str, overrides: PriceTable, *, input_tokens: int, max_output_tokens: int
) -> float | None:
    """The most the next call can cost: all its input as a cache write, every output token.

    A 5-minute cache write (1.25 times the input price) is the dearest way input is billed
    here: a call whose prefix is written, possibly again by a concurrent first call, pays it.
    The product never asks for the 1-hour lifetime (2 times the input price); if it ever does,
    this worst case must price its prefix as a 1-hour write (`Usage.cache_write_1h_tokens`).

    Returns:
        USD, or None when the model is unpriced.
    """
    usage = Usage(cache_write_tokens=input_tokens, output_tokens=max_output_tokens, calls=1)
    return call_cost(model, usage, overrides)
