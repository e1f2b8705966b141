"""Spend: every model call priced and charged to the run's Postgres ledger as it returns.

The ledger is shared by every step process of a lineup (and its resumes), so a budget holds
across the whole fan-out. Each call is priced on its own (`resources/prices.py`: genai-prices'
snapshot, long-context tiers chosen by that call's input, run-config overrides on top), and the
check before a call counts the worst case of that call: its estimated input uncached plus every
output token it may produce (`max_tokens`).
"""

from collections.abc import Mapping
from typing import Any

from airwave_dagster.domain.ai.usage import (
    ModelPrice,
    PriceTable,
    Usage,
    add_usage,
    budget_exhausted,
)
from ops.ai_lineup.checkpoints import AiLineupConfig, LineupSettings
from resources.llm import BudgetStop
from resources.prices import call_cost, is_priced, worst_case_call_cost
from resources.stores.ai import AiStore


def usage_columns(
    model: str | None,
    usage: Usage,
    prices: PriceTable,
    *,
    cost: float | None = None,
) -> dict[str, Any]:
    """Trace-row token and cost columns.

    Args:
        model: The model, None when no model was called.
        usage: ONE call's usage, unless `cost` is given (summed usage must not be priced: the
            tier of a call depends on that call's own input).
        prices: The run's overrides.
        cost: The already-summed per-call cost of several calls.
    """
    if cost is None and model is not None:
        cost = call_cost(model, usage, prices)
    return {
        "model": model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost_usd": cost,
    }


class Meter:
    """Charges every model call to the run's ledger the moment it returns, and sums it."""

    def __init__(
        self,
        ai: AiStore,
        settings: LineupSettings,
        phase: str,
        step: Mapping[str, Any],
        *,
        model: str,
        max_output_tokens: int,
        first_input_tokens: int = 0,
    ) -> None:
        """Meter calls of one step attempt.

        Args:
            ai: The AI store holding the ledger.
            settings: The run's settings (ledger id, prices, budget).
            phase: The phase charged ("plan", "build").
            step: The attempt's identity (`run_id`, `step_key`, `attempt`).
            model: The model this attempt calls (priced for the pre-call worst case).
            max_output_tokens: The `max_tokens` of its calls.
            first_input_tokens: Estimated input of the first call (later calls: the previous
                call's input plus its output, since a conversation only grows).
        """
        self.step = dict(step)
        self.ai = ai
        self.settings = settings
        self.phase = phase
        self.model = model
        self.max_output_tokens = max_output_tokens
        self.next_input_tokens = first_input_tokens
        self.by_model: dict[str, Usage] = {}
        self.cost_by_model: dict[str, float | None] = {}

    def __call__(self, model: str, usage: Usage) -> None:
        """Record one call (`UsageSink`)."""
        cost = call_cost(model, usage, self.settings.prices)
        self.by_model = add_usage(self.by_model, model, usage)
        before = self.cost_by_model.get(model, 0.0)
        self.cost_by_model[model] = None if cost is None or before is None else before + cost
        self.next_input_tokens = max(
            self.next_input_tokens, usage.total_input_tokens + usage.output_tokens
        )
        self.ai.charge(
            self.settings.ledger_id,
            **self.step,
            phase=self.phase,
            model=model,
            usage=usage,
            cost_usd=cost,
        )

    def span_notes(self, usage: Usage) -> dict[str, float | int | str | bool]:
        """A call's spend on its GenAI span, before `__call__` charges it (tracing on).

        `airwave.build.cost_usd` is this attempt's spend with the call; the budget is the run's.
        """
        notes: dict[str, float | int | str | bool] = {"airwave.phase": self.phase}
        cost = call_cost(self.model, usage, self.settings.prices)
        if cost is not None:
            notes["airwave.call.cost_usd"] = cost
            spent = list(self.cost_by_model.values())
            if None not in spent:
                notes["airwave.build.cost_usd"] = sum(c or 0.0 for c in spent) + cost
        if self.settings.budget_usd is not None:
            notes["airwave.run.budget_usd"] = self.settings.budget_usd
        return notes

    def next_call_worst_case(self) -> float:
        """The most the next call may cost (0 for a model without a price: no budget then)."""
        worst = worst_case_call_cost(
            self.model,
            self.settings.prices,
            input_tokens=self.next_input_tokens,
            max_output_tokens=self.max_output_tokens,
        )
        return worst or 0.0

    def exhausted(self) -> bool:
        """Whether the next call's worst case would take the ledger past the budget."""
        if self.settings.budget_usd is None:
            return False
        state = self.ai.ledger(self.settings.ledger_id)
        return budget_exhausted(
            state.budget_usd, state.spent_usd, next_cost=self.next_call_worst_case()
        )

    def check(self) -> None:
        """`before_call` hook: stop before a call that the budget could not pay for."""
        if self.exhausted():
            raise BudgetStop()


def price_table(config: AiLineupConfig) -> PriceTable:
    """The run config's price overrides only; every other model is priced by genai-prices."""
    return PriceTable(
        prices={
            model: ModelPrice(input=price.input, output=price.output)
            for model, price in config.prices.items()
        }
    )


def unpriced_budget_problem(settings: LineupSettings) -> str | None:
    """A budget can only be enforced over priced models: refuse before anything is spent."""
    if settings.provider != "anthropic" or settings.budget_usd is None:
        return None
    for model in (settings.planner_model, settings.worker_model):
        if not is_priced(model, settings.prices):
            return (
                f"budget_usd is set but model {model!r} has no price (neither genai-prices nor "
                "the run config knows it), so its spend could not be counted; add it under "
                "`prices` in the run config or drop the budget"
            )
    return None
