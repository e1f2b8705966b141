"""Crash and resume through Dagster's multiprocess executor: no model call is paid twice."""

from __future__ import annotations

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.definitions import ai_lineup_job
from resources import tables as t
from resources.stores.ai import AiStore
from tests.fakes.scripted_model import ScriptedModel, channel_name, is_planner, small_plan
from tests.support.ai import lineup_config

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]


def _execute(instance, run_config, reexecute_from: str | None = None) -> tuple[bool, str]:
    options = (
        dg.ReexecutionOptions.from_failure(reexecute_from, instance) if reexecute_from else None
    )
    if options is None:
        # The `synced` fixture wrote the snapshot rows; record them as the asset's state.
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="plex_library"))
    with dg.execute_job(
        dg.reconstructable(ai_lineup_job),
        instance=instance,
        run_config=run_config,
        reexecution_options=options,
    ) as result:
        return result.success, result.run_id


def test_a_crash_mid_fan_out_then_resume_pays_only_for_unbuilt_channels(
    synced, store, stub, dagster_instance
) -> None:
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Action")))
    # A real fault inside Postgres: channel 1002's reservation cannot be inserted.
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE FUNCTION airwave_dagster.refuse_1002() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'injected fault for channel 1002'; END $$"
            )
        )
        conn.execute(
            sa.text(
                "CREATE TRIGGER refuse_1002 BEFORE INSERT ON public.channel FOR EACH ROW "
                "WHEN (NEW.number = 1002) EXECUTE FUNCTION airwave_dagster.refuse_1002()"
            )
        )
    try:
        ok, parent = _execute(dagster_instance, lineup_config(stub, provider="anthropic"))
        assert not ok
    finally:
        with store.engine.begin() as conn:
            conn.execute(sa.text("DROP TRIGGER refuse_1002 ON public.channel"))
            conn.execute(sa.text("DROP FUNCTION airwave_dagster.refuse_1002()"))
    parent_workers = [
        channel_name(r.body) for r in stub.logical_calls() if r.body and not is_planner(r.body)
    ]
    assert sorted(set(parent_workers)) == ["Action TV", "Drama TV"]
    stub.reset_requests()

    ok, child = _execute(
        dagster_instance,
        dagster_instance.get_run_by_id(parent).run_config,
        reexecute_from=parent,
    )

    assert ok
    calls = stub.logical_calls()
    assert [channel_name(r.body) for r in calls] == ["Comedy TV", "Comedy TV"]
    ai = AiStore(store.engine)
    child_rows = ai.traces(child)
    assert {r["phase"] for r in child_rows} == {"build", "report"}
    report = next(r for r in child_rows if r["phase"] == "report")["output"]
    assert sorted(c["number"] for c in report["built"]) == [1001, 1002, 1101]
    with store.engine.connect() as conn:
        enabled = conn.execute(
            sa.select(sa.func.count()).select_from(t.channel).where(t.channel.c.enabled)
        ).scalar_one()
    assert enabled == 3
    # The ledger spans both runs: the report prices the parent's calls too.
    worker = next(s for s in report["spend"] if s["model"] == "claude-haiku-4-5")
    assert worker["usage"]["calls"] == 6


def test_an_overloaded_planner_fails_clearly_and_resume_continues(
    synced, store, stub, dagster_instance
) -> None:
    overloaded = {
        "kind": "error",
        "status": 529,
        "message": "Overloaded",
        "headers": {"retry-after-ms": "1"},
    }
    stub.add(overloaded, overloaded, overloaded)
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy")))
    config = lineup_config(stub, provider="anthropic", max_retries=2, limit=1)

    ok, parent = _execute(dagster_instance, config)

    assert not ok
    assert len(stub.messages_requests()) == 3  # the SDK retried twice with backoff
    ai = AiStore(store.engine)
    failed = [r for r in ai.traces(parent) if r["phase"] == "plan"]
    assert [r["status"] for r in failed] == ["failed"]
    assert "529" in failed[0]["error"]
    messages = [
        e.dagster_event.step_failure_data.user_failure_data.description
        for e in dagster_instance.all_logs(parent)
        if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.STEP_FAILURE
    ]
    assert any("overloaded" in m.lower() and "Resume" in m for m in messages)

    ok, child = _execute(
        dagster_instance,
        dagster_instance.get_run_by_id(parent).run_config,
        reexecute_from=parent,
    )

    assert ok
    phases = [r["phase"] for r in ai.traces(child)]
    assert "analyze" not in phases and "context" not in phases
    report = next(r for r in ai.traces(child) if r["phase"] == "report")["output"]
    assert report["channels_planned"] == 2 and len(report["built"]) == 1
