"""One channel build outside Dagster: duplicate starts, Plex failing mid-build, budget checks."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from airwave_dagster.domain.ai.context import SharedContext
from airwave_dagster.domain.ai.numbering import assign_numbers
from airwave_dagster.domain.ai.plan import sanitize_plan
from airwave_dagster.domain.ai.tools import PoolRules
from airwave_dagster.domain.ai.usage import PriceTable, Usage
from ops.ai_lineup.channel_build import BuildDeps, run_build
from ops.ai_lineup.checkpoints import BuildTask, LineupSettings
from resources import tables as t
from resources.ai_toolbox import library_sizes
from resources.llm import LlmResource
from resources.plex import PlexClient
from resources.prices import call_cost
from resources.stores.ai import AiStore
from resources.stores.claims import ChannelClaims, Claimant
from resources.stores.rows import keyed
from tests.fakes.scripted_model import ScriptedModel, small_plan
from tests.support.ai import STUB_KEY_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.plex]


def _tasks(synced: str, provider: str) -> list[BuildTask]:
    plan = sanitize_plan(small_plan(("Drama", "Comedy"))).plan
    numbering = assign_numbers(plan, [])
    settings = LineupSettings(
        provider=provider,  # type: ignore[arg-type]
        planner_model="claude-opus-4-8",
        worker_model="claude-haiku-4-5",
        limit=0,
        budget_usd=None,
        confirm_wipe=False,
        rules=PoolRules(),
        planner_attempts=1,
        prices=PriceTable(),
        ledger_id="ledger-test",
        source_id=synced,
        started_at=datetime.now(UTC),
    )
    return [
        BuildTask(settings=settings, channel=plan.channel(n.key), numbered=n)
        for n in numbering.channels
    ]


def _deps(store, plex: PlexClient, attempt: int = 1) -> BuildDeps:
    source = store.find_source(plex.base_url)
    return BuildDeps(
        store=store,
        ai=AiStore(store.engine),
        claims=ChannelClaims(store.engine),
        plex=plex,
        claimant=Claimant(run_id="run-test", step_key="build_ai_channel[ch_1001]", attempt=attempt),
        run_id="run-test",
        library_items=library_sizes(store, source) if source else {"movie": 1, "show": 1},
    )


SHARED = SharedContext.of("LIBRARY CONTEXT\n" + "genre: Drama, Comedy\n" * 50)


def _channels(store) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        return [keyed(r, t.channel) for r in conn.execute(sa.select(t.channel))]


def test_duplicate_starts_of_one_build_do_the_model_work_once(
    synced, store, plex_emulator, stub
) -> None:
    stub.responder = ScriptedModel(small_plan())
    stub.latency = 0.3  # the first attempt is still working when the second starts
    task = _tasks(synced, "anthropic")[0]
    client = LlmResource(api_key_env_var=STUB_KEY_ENV, base_url=stub.url).get_client()
    results: dict[int, Any] = {}

    def build(attempt: int) -> None:
        plex = PlexClient(plex_emulator.url, plex_emulator.token)
        results[attempt] = run_build(
            task,
            SHARED,
            _deps(store, plex, attempt),
            llm=client,
            meter=lambda model, usage: None,
            exhausted=lambda: False,
        )[0]

    first = threading.Thread(target=build, args=(1,))
    first.start()
    while not stub.requests:  # the first attempt holds the claim and talks to the model
        threading.Event().wait(0.02)
    second = threading.Thread(target=build, args=(2,))
    second.start()
    first.join(60)
    second.join(60)

    assert results[1].status == "created" and results[1].model_calls == 2
    assert results[2].status == "created" and results[2].model_calls == 0
    assert results[2].channel_id == results[1].channel_id
    assert "adopted" in (results[2].reason or "")
    assert len(stub.logical_calls()) == 2  # one build's preview + commit, not two
    rows = _channels(store)
    assert len(rows) == 1 and rows[0]["enabled"] and ChannelClaims(store.engine).open_claims() == []


def test_plex_failing_mid_build_fails_that_build_and_releases_its_claim(
    synced, store, plex_emulator
) -> None:
    down, up = _tasks(synced, "offline")
    dead = PlexClient("http://127.0.0.1:9", "secret-plex-token", timeout=2)

    failed, extra = run_build(
        down, SHARED, _deps(store, dead), llm=None, meter=lambda m, u: None, exhausted=lambda: False
    )

    assert failed.status == "failed"
    assert "unavailable" in (failed.reason or "").lower()
    assert "secret-plex-token" not in (failed.reason or "")
    assert [step["tool"] for step in extra["trace"] if step["kind"] == "call"] == ["preview_filter"]
    assert _channels(store) == []  # the claim is gone
    built, _ = run_build(
        up,
        SHARED,
        _deps(store, PlexClient(plex_emulator.url, plex_emulator.token)),
        llm=None,
        meter=lambda m, u: None,
        exhausted=lambda: False,
    )
    assert built.status == "created"
    assert [c["number"] for c in _channels(store)] == [up.numbered.number]


def test_a_build_after_the_budget_is_spent_is_skipped_without_a_claim(
    synced, store, plex_emulator, stub
) -> None:
    task = _tasks(synced, "anthropic")[0]
    client = LlmResource(api_key_env_var=STUB_KEY_ENV, base_url=stub.url).get_client()

    result, _ = run_build(
        task,
        SHARED,
        _deps(store, PlexClient(plex_emulator.url, plex_emulator.token)),
        llm=client,
        meter=lambda m, u: None,
        exhausted=lambda: True,
    )

    assert (result.status, result.reason, result.model_calls) == ("skipped", "budget", 0)
    assert stub.requests == [] and _channels(store) == []


def test_the_ledger_adds_concurrent_charges_atomically(store) -> None:
    ai = AiStore(store.engine)
    ai.open_ledger("ledger-concurrent", 100.0)
    usage = Usage(input_tokens=10, output_tokens=5, calls=1)

    def charge() -> None:
        for _ in range(20):
            ai.charge(
                "ledger-concurrent",
                run_id="r",
                step_key="s",
                attempt=1,
                phase="build",
                model="m",
                usage=usage,
                cost_usd=0.25,
            )

    threads = [threading.Thread(target=charge) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    state = ai.ledger("ledger-concurrent")
    assert state.calls == 80
    assert state.spent_usd == pytest.approx(20.0)
    assert not state.exhausted
    assert len(ai.spend_rows("ledger-concurrent")) == 80


def test_the_ledger_prices_one_hour_cache_writes_apart(store) -> None:
    """Source: Anthropic's prompt-caching guide (1-hour writes cost 2x the base input price,
    5-minute writes 1.25x) and the SDK's `Usage.cache_creation` (`CacheCreation`), which splits
    `cache_creation_input_tokens` by lifetime. The ledger keeps the split, so the same spend
    row is priced the same way again (genai-prices' `cache_write_1h_tokens`)."""
    ai = AiStore(store.engine)
    ai.open_ledger("ledger-1h", None)
    model = "claude-haiku-4-5"
    hour = Usage(cache_write_tokens=4000, cache_write_1h_tokens=4000, output_tokens=10, calls=1)
    minutes = Usage(cache_write_tokens=4000, output_tokens=10, calls=1)
    costs = {
        name: call_cost(model, usage, PriceTable(prices={}))
        for name, usage in (("hour", hour), ("minutes", minutes))
    }
    assert costs["hour"] is not None and costs["minutes"] is not None
    # Haiku 4.5: $1/MTok input, so $2 and $1.25 per MTok written, plus $5/MTok output.
    assert costs["hour"] == pytest.approx((4000 * 2 + 10 * 5) / 1e6)
    assert costs["minutes"] == pytest.approx((4000 * 1.25 + 10 * 5) / 1e6)
    for usage, cost in ((hour, costs["hour"]), (minutes, costs["minutes"])):
        ai.charge(
            "ledger-1h",
            run_id="r",
            step_key="s",
            attempt=1,
            phase="build",
            model=model,
            usage=usage,
            cost_usd=cost,
        )

    rows = ai.spend_rows("ledger-1h")
    assert [r["cache_write_1h_tokens"] for r in rows] == [4000, 0]
    assert ai.usage_by_model("ledger-1h")[model] == hour + minutes
    assert ai.ledger("ledger-1h").spent_usd == pytest.approx(costs["hour"] + costs["minutes"])


def test_trace_rows_are_capped_and_never_fail_the_caller(store) -> None:
    ai = AiStore(store.engine)

    ai.record_trace(
        run_id="run-cap",
        step_name="buildChannel",
        phase="build",
        status="ok",
        trace=[{"sample": "x" * 250_000}],
    )
    ai.record_trace(run_id="run-cap", step_name="broken", phase="build", status=None)

    rows = ai.traces("run-cap")
    assert len(rows) == 1  # the invalid row was logged and dropped, not raised
    assert rows[0]["trace"]["truncated"] is True
    assert rows[0]["trace"]["chars"] > 200_000
    assert len(rows[0]["trace"]["preview"]) == 2000
