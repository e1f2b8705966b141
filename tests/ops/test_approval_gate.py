"""The `ai_lineup` approval gate in process: it stops before any write, with the exact diff."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import dagster as dg
import genai_prices
import pytest
import sqlalchemy as sa

from airwave_dagster.definitions import defs
from airwave_dagster.run_tags import AWAITING_APPROVAL_TAG
from resources import tables as t
from resources.stores.ai import AiStore
from resources.stores.approvals import ApprovalStore
from resources.stores.rows import keyed
from tests.fakes.scripted_model import ScriptedModel, is_planner, small_plan
from tests.support.ai import lineup_config

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]


def _run(instance: dg.DagsterInstance, run_config: dict[str, Any]) -> dg.ExecuteInProcessResult:
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="plex_library"))
    return defs.resolve_job_def("ai_lineup").execute_in_process(
        run_config=run_config, instance=instance, raise_on_error=False
    )


def _snapshot(store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row an AI lineup could touch, to prove the gate changed none of them."""
    with store.engine.connect() as conn:
        return {
            table.name: sorted(tuple(map(str, row)) for row in conn.execute(sa.select(table)))
            for table in (t.channel, t.channel_package, t.channel_definition, t.schedule_item)
        }


def _worker_requests(stub) -> int:
    return sum(1 for r in stub.messages_requests() if r.body and not is_planner(r.body))


def _planner_requests(stub) -> int:
    return sum(1 for r in stub.messages_requests() if r.body and is_planner(r.body))


def test_a_second_lineup_stops_at_the_gate_with_the_exact_diff_and_writes_nothing(
    synced, store, stub, dagster_instance
) -> None:
    with store.engine.begin() as conn:
        conn.execute(t.channel_package.insert().values(id="mine", key="mine", name="Mine"))
        conn.execute(
            t.channel.insert().values(
                id="manual", number=7, name="My channel", media_source_id=synced, package_id="mine"
            )
        )
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Action")))
    first = _run(dagster_instance, lineup_config(stub, provider="anthropic"))
    assert first.success  # nothing on air to remove: the default policy does not ask
    numbers = {c["name"]: c["number"] for c in _ai_channels(store)}
    assert set(numbers) == {"Drama TV", "Comedy TV", "Action TV"}
    before = _snapshot(store)
    stub.reset_requests()
    # The new plan drops Action and adds Horror and Crime.
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Horror", "Crime")))

    stopped = _run(dagster_instance, lineup_config(stub, provider="anthropic"))

    assert not stopped.success
    failure = next(
        e for e in stopped.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE
    )
    assert failure.step_key == "approve_lineup"
    text = failure.step_failure_data.user_failure_data.description
    assert text.startswith("AWAITING APPROVAL (approve-plan:v1)")
    assert f"airwave approve {stopped.run_id}" in text
    tables = failure.step_failure_data.user_failure_data.metadata
    assert isinstance(tables["lineup diff"], dg.TableMetadataValue)
    assert _snapshot(store) == before, "the gate must not change any row"
    assert _worker_requests(stub) == 0 and _planner_requests(stub) == 1
    run = dagster_instance.get_run_by_id(stopped.run_id)
    assert run.tags[AWAITING_APPROVAL_TAG] == "approve-plan:v1"
    interrupt = ApprovalStore(store.engine).find(stopped.run_id)
    assert interrupt is not None and interrupt.open and interrupt.gate_id == "approve-plan:v1"
    diff = interrupt.payload["diff"]
    assert [(e["name"], e["previous_number"]) for e in diff["removed"]] == [
        ("Action TV", numbers["Action TV"])
    ]
    assert {e["name"] for e in diff["created"]} == {"Horror TV", "Crime TV"}
    kept = {e["name"]: (e["previous_number"], e["number"]) for e in diff["unchanged"]}
    assert kept == {name: (numbers[name], numbers[name]) for name in ("Drama TV", "Comedy TV")}
    assert diff["renumbered"] == []
    assert [(c["number"], c["origin"]) for c in diff["untouched"]] == [(7, "manual")]
    assert interrupt.payload["estimate"]["channels"] == 4
    assert interrupt.payload["estimate"]["planner_spent_usd"] > 0

    # confirm_wipe is a pre-approval: the same lineup passes the gate and replaces the old one.
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Horror", "Crime")))
    replaced = _run(dagster_instance, lineup_config(stub, provider="anthropic", confirm_wipe=True))
    assert replaced.success
    assert {c["name"] for c in _ai_channels(store)} == {
        "Drama TV",
        "Comedy TV",
        "Horror TV",
        "Crime TV",
    }


def _ai_channels(store) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        return [
            keyed(r, t.channel)
            for r in conn.execute(sa.select(t.channel).where(t.channel.c.ai_generated.is_(True)))
        ]


def test_approval_required_stops_even_a_first_lineup(synced, store, dagster_instance) -> None:
    stopped = _run(dagster_instance, lineup_config(provider="offline", approval="required"))

    assert not stopped.success
    assert _ai_channels(store) == []
    interrupt = ApprovalStore(store.engine).find(stopped.run_id)
    assert interrupt is not None and interrupt.payload["diff"]["removed"] == []


def _genai(model: str, usage: dict[str, int]) -> Decimal:
    return genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage["input_tokens"]
            + usage["cache_read_input_tokens"]
            + usage["cache_creation_input_tokens"],
            cache_read_tokens=usage["cache_read_input_tokens"],
            cache_write_tokens=usage["cache_creation_input_tokens"],
            output_tokens=usage["output_tokens"],
        ),
        model,
        provider_id="anthropic",
    ).total_price


def test_the_ledger_is_genai_prices_of_every_billed_call_long_context_included(
    synced, store, stub, dagster_instance
) -> None:
    model = ScriptedModel(small_plan(("Drama", "Comedy")))

    def long_context_planner(body: dict[str, Any]) -> dict[str, Any]:
        reply = model(body)
        if is_planner(body):  # 300k input: Sonnet 4.5's long-context tier
            return {**reply, "usage": {"input_tokens": 300_000}}
        return reply

    stub.responder = long_context_planner
    config = lineup_config(
        stub,
        provider="anthropic",
        planner_model="claude-sonnet-4-5",
        worker_model="claude-haiku-4-5",
    )

    result = _run(dagster_instance, config)

    assert result.success
    billed = [r for r in stub.messages_requests() if r.usage is not None]
    expected = sum(_genai(r.body["model"], r.usage) for r in billed)
    rows = AiStore(store.engine).spend_rows(result.run_id)
    assert len(rows) == len(billed) == 5
    assert sum(Decimal(str(r["cost_usd"])) for r in rows) == pytest.approx(
        expected, abs=Decimal("1e-5")
    )
    planner = next(r for r in rows if r["phase"] == "plan")
    # Priced by ITS tier: above 200k input Sonnet 4.5 charges $6/M, not $3/M.
    assert float(planner["cost_usd"]) >= 300_000 * 6 / 1_000_000


def test_a_budget_of_exactly_one_calls_price_stops_the_next_call(
    synced, store, stub, dagster_instance
) -> None:
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy")))
    # Free planner; the worker priced so that its worst-case call is exactly the budget.
    prices = {
        "claude-opus-4-8": {"input": 0.0, "output": 0.0},
        "claude-haiku-4-5": {"input": 0.0, "output": 1_000_000 / 4_096},
    }
    config = lineup_config(stub, provider="anthropic", budget_usd=1.0, prices=prices)

    result = _run(dagster_instance, config)

    assert result.success
    assert _worker_requests(stub) == 1  # the first call fits the budget, the second cannot
    ledger = AiStore(store.engine).ledger(result.run_id)
    assert ledger.spent_usd <= 1.0


# -- the approval promise (issue 27 item 8): nothing on air is removed unless the diff said so --


def _give_up_on(name: str):
    """A worker that gives up on channel `name` (its rebuild ends skipped); others commit."""

    def fail(channel: str, index: int) -> dict[str, Any] | None:
        if channel != name:
            return None
        return {
            "kind": "tool_use",
            "name": "give_up",
            "input": {"reason": "it repeats a channel of the new lineup"},
        }

    return fail


def _definitions(store, channel_id: str) -> list[tuple[Any, ...]]:
    d = t.channel_definition.c
    with store.engine.connect() as conn:
        return [
            tuple(map(str, r))
            for r in conn.execute(
                sa.select(d.mode, d.sort_index, d.plex_filter)
                .where(d.channel_id == channel_id)
                .order_by(d.sort_index)
            )
        ]


def _lineup_report(store, run_id: str) -> dict[str, Any]:
    rows = [r for r in AiStore(store.engine).traces(run_id) if r["phase"] == "report"]
    assert len(rows) == 1
    return rows[0]["output"]


def test_a_kept_channel_whose_rebuild_is_skipped_stays_on_air(
    synced, store, stub, dagster_instance
) -> None:
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Action")))
    assert _run(dagster_instance, lineup_config(stub, provider="anthropic")).success
    before = {c["name"]: c for c in _ai_channels(store)}
    comedy_definitions = _definitions(store, before["Comedy TV"]["id"])
    # The new plan keeps every channel and adds one: the default policy does not ask. The
    # rebuild of "Comedy TV" then ends skipped.
    stub.responder = ScriptedModel(
        small_plan(("Drama", "Comedy", "Action", "Horror")), fail=_give_up_on("Comedy TV")
    )

    result = _run(dagster_instance, lineup_config(stub, provider="anthropic"))

    assert result.success
    gate = result.output_for_node("approve_lineup")
    assert gate.decision == "auto" and gate.diff.removed == ()
    after = {c["name"]: c for c in _ai_channels(store)}
    assert set(after) == {"Drama TV", "Comedy TV", "Action TV", "Horror TV"}
    # The old row of the channel whose rebuild was skipped is back, on air, as it was.
    comedy = after["Comedy TV"]
    assert comedy["id"] == before["Comedy TV"]["id"] and comedy["enabled"]
    assert comedy["number"] == before["Comedy TV"]["number"]
    assert _definitions(store, comedy["id"]) == comedy_definitions
    # The channels rebuilt as approved are replaced.
    assert after["Drama TV"]["id"] != before["Drama TV"]["id"]
    report = _lineup_report(store, result.run_id)
    kept = report["kept_old"]
    assert [(k["name"], k["number"]) for k in kept] == [("Comedy TV", comedy["number"])]
    assert "it repeats a channel of the new lineup" in kept[0]["reason"]
    markdown = AiStore(store.engine).traces(result.run_id)
    text = next(r for r in markdown if r["phase"] == "report")["output"]["markdown"]
    assert f"kept the old channel {comedy['number']} (Comedy TV): its rebuild was skipped" in text


def test_a_limit_builds_a_sample_and_removes_nothing(synced, store, stub, dagster_instance) -> None:
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Action")))
    assert _run(dagster_instance, lineup_config(stub, provider="anthropic")).success
    before = {c["name"]: c for c in _ai_channels(store)}
    # The full plan drops Action; a limit of 2 builds Drama (moods) and Horror (thrills).
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Horror", "Crime")))

    result = _run(dagster_instance, lineup_config(stub, provider="anthropic", limit=2))

    assert result.success, "a limit removes nothing, so the default policy does not ask"
    diff = result.output_for_node("approve_lineup").diff
    assert diff.removed == () and diff.removed_packages == ()
    assert [e.name for e in diff.created] == ["Horror TV"]
    assert [e.name for e in (*diff.unchanged, *diff.renumbered)] == ["Drama TV"]
    assert sorted((e.name, e.number) for e in diff.kept) == sorted(
        (name, before[name]["number"]) for name in ("Comedy TV", "Action TV")
    )
    after = {c["name"]: c for c in _ai_channels(store)}
    assert set(after) == {"Drama TV", "Comedy TV", "Action TV", "Horror TV"}
    for name in ("Comedy TV", "Action TV"):  # beyond the limit: untouched
        assert after[name]["id"] == before[name]["id"]
        assert after[name]["number"] == before[name]["number"]
        assert after[name]["package_id"] == before[name]["package_id"]
    assert after["Drama TV"]["id"] != before["Drama TV"]["id"]
    with store.engine.connect() as conn:
        names = list(conn.execute(sa.select(t.channel_package.c.name)).scalars())
    assert sorted(names) == ["Moods", "Thrills"], "a package on air is reused, not doubled"
