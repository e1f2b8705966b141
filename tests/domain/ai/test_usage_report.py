"""Tests for token usage, prices, budget arithmetic, the report and the prompts."""

from __future__ import annotations

import pytest

from airwave_dagster.domain.ai.numbering import assign_numbers
from airwave_dagster.domain.ai.plan import DroppedChannel, ExistingPackage, parse_plan
from airwave_dagster.domain.ai.prompts import (
    CONTEXT_HEADING,
    PLANNER_SYSTEM_PROMPT,
    WORKER_SYSTEM_PROMPT,
    render_channel_brief,
    render_planner_prompt,
)
from airwave_dagster.domain.ai.quality import lineup_quality
from airwave_dagster.domain.ai.report import (
    BUDGET_REASON,
    ChannelBuildResult,
    LineupReport,
    PackageSummary,
    build_report,
    render_markdown,
)
from airwave_dagster.domain.ai.tools import ChannelOutcome, FilterPreview
from airwave_dagster.domain.ai.usage import (
    ModelPrice,
    PriceTable,
    Usage,
    add_usage,
    budget_exhausted,
    cost_usd,
    merge_usage,
    remaining_budget,
    summarise_cost,
    total_usage,
    worst_case_call_cost,
)


def test_usage_reads_the_api_block_and_keeps_cache_tokens_separate() -> None:
    usage = Usage.from_api(
        {
            "input_tokens": 120,
            "output_tokens": 40,
            "cache_read_input_tokens": 3000,
            "cache_creation_input_tokens": None,
            "server_tool_use": None,
        }
    )
    assert (usage.input_tokens, usage.output_tokens) == (120, 40)
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.calls) == (3000, 0, 1)
    assert usage.total_input_tokens == 3120
    assert usage.cache_read_ratio == pytest.approx(3000 / 3120)
    assert Usage.from_api(None) == Usage(calls=1)


def test_one_hour_cache_writes_are_read_and_priced_apart() -> None:
    """Source: Anthropic's prompt-caching guide (pricing: 5-minute writes 1.25x the base input
    price, 1-hour writes 2x, reads 0.1x) and the SDK's `anthropic.types.Usage.cache_creation`
    (`CacheCreation.ephemeral_5m_input_tokens` / `ephemeral_1h_input_tokens`, the breakdown of
    `cache_creation_input_tokens` by lifetime)."""
    usage = Usage.from_api(
        {
            "input_tokens": 10,
            "output_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 3000,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 1000,
                "ephemeral_1h_input_tokens": 2000,
            },
        }
    )
    assert (usage.cache_write_tokens, usage.cache_write_1h_tokens) == (3000, 2000)
    assert usage.cache_write_5m_tokens == 1000
    assert usage.total_input_tokens == 3010
    price = ModelPrice(input=1, output=5)
    # 10 uncached at 1, 1,000 five-minute writes at 1.25, 2,000 one-hour writes at 2 ($/MTok).
    assert price.cost(usage) == pytest.approx((10 + 1000 * 1.25 + 2000 * 2) / 1e6)
    five_minutes = Usage(cache_write_tokens=3000)
    one_hour = Usage(cache_write_tokens=3000, cache_write_1h_tokens=3000)
    assert price.cost(one_hour) / price.cost(five_minutes) == pytest.approx(2 / 1.25)
    assert ModelPrice(input=1, output=5, cache_write_1h=3).cost(one_hour) == pytest.approx(9e-3)
    # Without the breakdown every write is a 5-minute one (the API's default lifetime).
    assert Usage.from_api({"cache_creation_input_tokens": 50}).cache_write_1h_tokens == 0
    assert (usage + usage).cache_write_1h_tokens == 4000
    with pytest.raises(ValueError, match="part of cache_write_tokens"):
        Usage(cache_write_tokens=1, cache_write_1h_tokens=2)


def test_usage_adds_up_per_model() -> None:
    a = Usage(input_tokens=10, output_tokens=1, calls=1)
    b = Usage(input_tokens=5, cache_write_tokens=100, calls=2)
    totals = add_usage({}, "haiku", a)
    totals = add_usage(totals, "haiku", b)
    totals = add_usage(totals, "opus", a)
    assert totals["haiku"] == Usage(
        input_tokens=15, output_tokens=1, cache_write_tokens=100, calls=3
    )
    merged = merge_usage([totals, {"haiku": a}])
    assert list(merged) == ["haiku", "opus"]
    assert merged["haiku"].calls == 4
    assert total_usage(merged).calls == 5


def test_prices_match_exact_ids_then_the_longest_prefix() -> None:
    table = PriceTable()
    price = table.price_of("claude-haiku-4-5-20251001")
    assert price == ModelPrice(input=1, output=5)
    assert table.price_of("claude-opus-4-1-20250805") == ModelPrice(input=15, output=75)
    assert table.price_of("claude-opus-4-7") == ModelPrice(input=5, output=25)
    assert table.price_of("gpt-5") is None
    custom = table.with_overrides({"claude-haiku-4-5-2025": ModelPrice(input=2, output=10)})
    assert custom.price_of("claude-haiku-4-5-20251001") == ModelPrice(input=2, output=10)
    assert table.price_of("claude-haiku-4-5-20251001") == ModelPrice(input=1, output=5)


def test_cost_prices_uncached_cached_and_written_tokens_differently() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
    )
    # haiku: 1 in + 5 out + 0.1 read + 1.25 write
    assert cost_usd("claude-haiku-4-5", usage) == pytest.approx(7.35)
    explicit = PriceTable(prices={"m": ModelPrice(input=1, output=2, cache_read=0, cache_write=3)})
    assert cost_usd("m", usage, explicit) == pytest.approx(6.0)
    assert cost_usd("mystery-model", usage) is None


def test_unpriced_models_are_listed_not_counted_as_free() -> None:
    summary = summarise_cost(
        {
            "claude-haiku-4-5": Usage(output_tokens=200_000),
            "local-llama": Usage(output_tokens=10**9),
        }
    )
    assert summary.total_usd == pytest.approx(1.0)
    assert summary.unpriced_models == ("local-llama",)
    assert summary.by_model_usd["local-llama"] is None


def test_budget_arithmetic() -> None:
    assert remaining_budget(None, 5.0) is None
    assert remaining_budget(1.0, 0.25) == 0.75
    assert remaining_budget(1.0, 3.0) == 0.0
    assert not budget_exhausted(None, 10**6)
    assert budget_exhausted(1.0, 1.0)
    assert not budget_exhausted(1.0, 0.5)
    assert budget_exhausted(1.0, 0.5, next_cost=0.6)
    assert budget_exhausted(0.0, 0.0)
    worst = worst_case_call_cost("claude-haiku-4-5", input_tokens=100_000, max_output_tokens=4096)
    assert worst == pytest.approx(0.1 + 4096 * 5 / 1e6)
    assert worst_case_call_cost("unknown", input_tokens=1, max_output_tokens=1) is None


PLAN = parse_plan(
    {
        "packages": [
            {
                "key": "films",
                "name": "Films",
                "channels": [
                    {
                        "key": k,
                        "name": k.title(),
                        "description": f"{k} films",
                        "theme": f"Only {k}",
                        "targetPoolSize": 25,
                        "mediaTypes": ["movie"],
                        "filter": {"type": "condition", "field": "genre", "op": "is", "value": k},
                    }
                    for k in ("noir", "western", "musical")
                ],
            }
        ]
    }
)


def _results() -> list[ChannelBuildResult]:
    numbered = assign_numbers(PLAN, []).channels
    created = ChannelOutcome(
        status="created",
        channel_id="c1",
        number=1001,
        pool=FilterPreview(total_items=40, total_runtime_hours=70.4),
        model_calls=4,
        tool_calls=3,
        usage={"claude-haiku-4-5": Usage(input_tokens=100, cache_read_tokens=900, calls=4)},
    )
    return [
        ChannelBuildResult.of(numbered[0], PLAN.packages[0].channels[0], created),
        ChannelBuildResult.without_build(
            numbered[2], PLAN.packages[0].channels[2], "skipped", BUDGET_REASON
        ),
        ChannelBuildResult.of(
            numbered[1],
            PLAN.packages[0].channels[1],
            ChannelOutcome(status="failed", reason="ConnectionError: Plex is unreachable"),
        ),
    ]


def _report() -> LineupReport:
    return build_report(
        source_id="src",
        provider="anthropic",
        packages=[
            PackageSummary(key="films", name="Films", package_id="p1", action="created"),
            PackageSummary(
                key="kids", name="Kids", package_id="p2", action="reused", removed_empty=False
            ),
            PackageSummary(
                key="empty", name="Empty", package_id="p3", action="created", removed_empty=True
            ),
        ],
        results=_results(),
        channels_planned=5,
        usage_by_model={
            "claude-opus-4-7": Usage(input_tokens=10_000, output_tokens=8_000, calls=2),
            "claude-haiku-4-5": Usage(input_tokens=100, cache_read_tokens=900, calls=4),
            "home-made": Usage(output_tokens=5, calls=1),
        },
        dropped=[DroppedChannel(package_key="films", channel_key="x", name="X", reason="emptied")],
        budget_usd=0.25,
        duration_seconds=12.34,
    )


def test_the_report_aggregates_results_spend_and_budget() -> None:
    report = _report()
    assert (report.packages_planned, report.packages_created, report.packages_reused) == (3, 2, 1)
    assert report.packages_removed_empty == 1
    assert (report.channels_planned, report.channels_selected, report.channels_built) == (5, 3, 1)
    assert [r.key for r in report.skipped] == ["musical"]
    assert report.skipped[0].reason == "budget"
    assert report.failed[0].reason == "ConnectionError: Plex is unreachable"
    assert report.built[0].pool_items == 40 and report.built[0].pool_hours == 70.4
    opus = 10_000 * 5 / 1e6 + 8_000 * 25 / 1e6
    haiku = 100 / 1e6 + 900 * 0.1 / 1e6
    assert report.total_usd == pytest.approx(opus + haiku)
    assert report.unpriced_models == ("home-made",)
    assert report.budget_exhausted
    assert report.cache_read_ratio == pytest.approx(900 / 11_000, abs=1e-4)
    assert LineupReport.model_validate_json(report.model_dump_json()) == report
    dumped = report.model_dump(mode="json")
    assert (dumped["packages_created"], dumped["channels_built"]) == (2, 1)
    assert dumped["budget_exhausted"] is True


def test_the_markdown_report_names_everything_a_user_needs() -> None:
    text = render_markdown(_report())
    assert "3 planned, 2 created, 1 reused, 1 removed as empty" in text
    assert "5 planned, 3 selected, 1 built, 1 skipped, 1 failed, 1 dropped" in text
    assert "of a $0.25 budget — budget exhausted" in text
    assert "Unpriced models (not in the total): home-made" in text
    assert "| claude-opus-4-7 | 2 | 10000 | 8000 | 0 | 0 | $0.2500 |" in text
    assert "| home-made | 1 | 0 | 5 | 0 | 0 | unpriced |" in text
    assert "- 1003 Musical: budget" in text
    assert "- 1002 Western: ConnectionError: Plex is unreachable" in text
    assert "- X (x): emptied" in text
    assert "| 1001 | Noir | 40 | 70.4 | 4 |" in text


def test_prompts_are_static_and_the_brief_carries_the_channel() -> None:
    assert "submit_lineup" in PLANNER_SYSTEM_PROMPT
    assert "commit_channel or give_up exactly once" in WORKER_SYSTEM_PROMPT
    assert CONTEXT_HEADING.endswith(":")
    brief = render_channel_brief(PLAN.packages[0].channels[0])
    assert brief.splitlines()[0] == "CHANNEL: Noir"
    assert "Target pool size: about 25 items" in brief
    assert brief.endswith('{"field":"genre","op":"is","type":"condition","value":"noir"}')
    prompt = render_planner_prompt(
        "CONTEXT", [ExistingPackage(key="kids", name="Kids", origin="preset")]
    )
    assert prompt.startswith("CONTEXT\n\nEXISTING PACKAGES")
    assert 'kids — "Kids" (preset, 0 channels)' in prompt


def test_the_duration_is_working_time_with_the_approval_wait_beside_it() -> None:
    # Issue 27.11: a 28-second run stopped 532.8 s at the gate was reported as 560.8 s.
    report = _report().model_copy(update={"duration_seconds": 28.0, "approval_wait_seconds": 532.8})
    assert "- Duration: 28.0 s working, plus 532.8 s waiting for approval" in (
        render_markdown(report)
    )
    assert "- Duration: 12.3 s working\n" in render_markdown(_report())


def test_a_quality_section_over_fewer_channels_than_were_built_says_so() -> None:
    # Noir is built but its filter cannot be answered on the snapshot: not measured.
    quality = lineup_quality([], []).model_copy(update={"unmeasured": ("Noir",)})
    text = render_markdown(_report().model_copy(update={"quality": quality}))
    assert "### Lineup quality (0 of the 1 built channels)" in text
    assert "1 built channel(s) not measured" in text and ": Noir" in text
    measured = lineup_quality([], [])
    assert "### Lineup quality\n" in render_markdown(
        _report().model_copy(update={"quality": measured.model_copy(update={"channels": 1})})
    )
