"""The approval gate's cost estimate against the ledger, under the stub's documented caching.

The stub caches as Anthropic's prompt-caching guide says (platform.claude.com/docs/en/
build-with-claude/prompt-caching): nothing below a model's minimum cacheable prefix (4,096 tokens
for Claude Haiku 4.5, 1,024 for Sonnet 4.6), and an entry readable only once the response that
wrote it has begun, so builds whose first calls go out together each pay a cache write. The
builds run through Dagster's multiprocess executor, several at once, with a time to first token
long enough for their first calls to overlap.

What a model writes is its own choice, which no estimate can know: the scripted worker here
writes about as much per turn as the estimate assumes (`BUILD_OUTPUT_TOKENS`), so the comparison
measures what the product can know: the prefix, the briefs, and how the cache will bill them.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from airwave_dagster.definitions import ai_lineup_job
from ops.ai_lineup.approval import BUILD_OUTPUT_TOKENS
from resources.stores.ai import AiStore
from tests.fakes.scripted_model import ScriptedModel, is_planner, small_plan
from tests.support.ai import lineup_config

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

FILLER = "I will check how large this pool is before committing it to the guide. " * 30
"""About 540 output tokens of prose before each tool call (the stub counts a quarter of the
JSON), which brings a worker turn to about `BUILD_OUTPUT_TOKENS`."""


class TalkativeModel(ScriptedModel):
    """The scripted planner and workers, with workers that explain themselves at length."""

    @staticmethod
    def worker_reply(body: dict[str, Any]) -> dict[str, Any]:
        entry = ScriptedModel.worker_reply(body)
        entry["text"] = FILLER
        return entry


def _run(instance: dg.DagsterInstance, run_config: dict[str, Any]) -> tuple[bool, str]:
    # The `synced` fixture wrote the snapshot rows; record them as the asset's state.
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="plex_library"))
    with dg.execute_job(
        dg.reconstructable(ai_lineup_job), instance=instance, run_config=run_config
    ) as result:
        return result.success, result.run_id


def _estimate(ai: AiStore, run_id: str) -> dict[str, Any]:
    rows = [r for r in ai.traces(run_id) if r["phase"] == "approval" and r["status"] == "ok"]
    assert len(rows) == 1
    return rows[0]["output"]["estimate"]


def _builds(ai: AiStore, run_id: str) -> list[dict[str, Any]]:
    return [r for r in ai.spend_rows(run_id) if r["phase"] == "build"]


def test_estimate_prices_a_prefix_below_the_workers_floor(
    synced, store, stub, dagster_instance
) -> None:
    """Claude Haiku 4.5 caches nothing under 4,096 tokens: every call pays its prefix in full."""
    stub.responder = TalkativeModel(small_plan())
    stub.latency = 1.0

    ok, run_id = _run(dagster_instance, lineup_config(stub, provider="anthropic"))

    assert ok
    ai = AiStore(store.engine)
    estimate = _estimate(ai, run_id)
    assert estimate["worker_model"] == "claude-haiku-4-5"
    assert estimate["prefix_measured"] is True
    assert estimate["cache_floor"] == 4096
    assert 1000 < estimate["prefix_tokens"] < 4096
    assert estimate["prefix_cached"] is False and estimate["cache_writes"] == 0
    builds = _builds(ai, run_id)
    assert len(builds) == 8
    assert all(r["cache_read_tokens"] == r["cache_write_tokens"] == 0 for r in builds)
    assert all(r["input_tokens"] > estimate["prefix_tokens"] for r in builds)
    outputs = [r["output_tokens"] for r in builds]
    assert all(abs(n - BUILD_OUTPUT_TOKENS) < 0.15 * BUILD_OUTPUT_TOKENS for n in outputs)
    ledger = float(sum(r["cost_usd"] for r in builds))
    assert ledger == pytest.approx(estimate["estimated_usd"], rel=0.05)
    report = next(r for r in ai.traces(run_id) if r["phase"] == "report")["output"]
    assert report["cache_read_ratio"] == 0.0


def test_estimate_prices_concurrent_first_writes(synced, store, stub, dagster_instance) -> None:
    """Sonnet 4.6 caches from 1,024 tokens; four builds starting together write it four times."""
    stub.responder = TalkativeModel(small_plan())
    stub.latency = 2.5

    ok, run_id = _run(
        dagster_instance,
        lineup_config(stub, provider="anthropic", worker_model="claude-sonnet-4-6"),
    )

    assert ok
    ai = AiStore(store.engine)
    estimate = _estimate(ai, run_id)
    assert estimate["cache_floor"] == 1024
    assert estimate["prefix_cached"] is True and estimate["cache_writes"] == 4
    builds = _builds(ai, run_id)
    writes = [r for r in builds if r["cache_write_tokens"]]
    reads = [r for r in builds if r["cache_read_tokens"]]
    # Each build's first call went out before any response had begun: four writes, then reads.
    assert len(writes) == 4 and len(reads) == 4
    assert {r["cache_write_tokens"] for r in writes} == {estimate["prefix_tokens"]}
    ledger = float(sum(r["cost_usd"] for r in builds))
    assert ledger == pytest.approx(estimate["estimated_usd"], rel=0.05)
    # The report's read share is the ledger's own: read tokens over all input, planner included.
    everything = ai.spend_rows(run_id)
    read = sum(r["cache_read_tokens"] for r in everything)
    total = sum(
        r["input_tokens"] + r["cache_read_tokens"] + r["cache_write_tokens"] for r in everything
    )
    report = next(r for r in ai.traces(run_id) if r["phase"] == "report")["output"]
    assert report["cache_read_ratio"] == pytest.approx(read / total, abs=1e-4)
    counts = [r for r in stub.requests if r.path.endswith("/count_tokens")]
    assert len(counts) == 2 and all(not is_planner(r.body) for r in counts)
