"""Spend: every model call priced and charged to the run's Postgres ledger as it returns.

The ledger is shared by every step process of a lineup (and its resumes), so a budget holds
across the whole fan-out.
"""

from collections.abc import Mapping
from typing import Any

from airwave_dagster.domain.ai.usage import (
    ModelPrice,
    PriceTable,
    Usage,
    add_usage,
    budget_exhausted,
    cost_usd,
)
from ops.ai_lineup.checkpoints import AiLineupConfig, LineupSettings
from resources.llm import BudgetStop
from resources.stores.ai import AiStore


def usage_columns(model: str | None, usage: Usage, prices: PriceTable) -> dict[str, Any]:
    return {
        "model": model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost_usd": None if model is None else cost_usd(model, usage, prices),
    }


class Meter:
    """Charges every model call to the run's ledger the moment it returns, and sums it."""

    def __init__(
        self, ai: AiStore, settings: LineupSettings, phase: str, step: Mapping[str, Any]
    ) -> None:
        """Meter calls of one step attempt.

        Args:
            ai: The AI store holding the ledger.
            settings: The run's settings (ledger id, prices, budget).
            phase: The phase charged ("plan", "build").
            step: The attempt's identity (`run_id`, `step_key`, `attempt`).
        """
        self.step = dict(step)
        self.ai = ai
        self.settings = settings
        self.phase = phase
        self.by_model: dict[str, Usage] = {}

    def __call__(self, model: str, usage: Usage) -> None:
        """Record one call (`UsageSink`)."""
        self.by_model = add_usage(self.by_model, model, usage)
        self.ai.charge(
            self.settings.ledger_id,
            **self.step,
            phase=self.phase,
            model=model,
            usage=usage,
            cost_usd=cost_usd(model, usage, self.settings.prices),
        )

    def exhausted(self) -> bool:
        """Whether the ledger (all processes of the lineup) has reached the budget."""
        if self.settings.budget_usd is None:
            return False
        state = self.ai.ledger(self.settings.ledger_id)
        return budget_exhausted(state.budget_usd, state.spent_usd)

    def check(self) -> None:
        """`before_call` hook: stop before a call once the budget is spent."""
        if self.exhausted():
            raise BudgetStop()


def price_table(config: AiLineupConfig) -> PriceTable:
    overrides = {
        model: ModelPrice(input=price.input, output=price.output)
        for model, price in config.prices.items()
    }
    return PriceTable().with_overrides(overrides)


def unpriced_budget_problem(settings: LineupSettings) -> str | None:
    """A budget can only be enforced over priced models: refuse before anything is spent."""
    if settings.provider != "anthropic" or settings.budget_usd is None:
        return None
    for model in (settings.planner_model, settings.worker_model):
        if settings.prices.price_of(model) is None:
            return (
                f"budget_usd is set but model {model!r} has no price, so its spend could not "
                "be counted; add it under `prices` in the run config or drop the budget"
            )
    return None
