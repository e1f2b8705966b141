"""`rollback_lineup` in process: an AI lineup undone exactly, refusals, a kill mid-apply."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster import failpoints, settings
from airwave_dagster.definitions import defs
from airwave_dagster.run_tags import AWAITING_APPROVAL_TAG
from resources import tables as t
from resources.stores.approvals import ApprovalStore
from resources.stores.rollback import RollbackStore
from tests.fakes.scripted_model import ScriptedModel, small_plan
from tests.support.ai import lineup_config

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]

STAMP = datetime(2026, 12, 3, tzinfo=UTC)
ROWS = (
    t.channel_package,
    t.channel,
    t.channel_definition,
    t.schedule_item,
    t.channel_schedule_state,
    t.channel_origin,
)


def _lineup(instance: dg.DagsterInstance, config: dict[str, Any]) -> dg.ExecuteInProcessResult:
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key="plex_library"))
    return defs.resolve_job_def("ai_lineup").execute_in_process(
        run_config=config, instance=instance, raise_on_error=False
    )


def _rollback(
    instance: dg.DagsterInstance, run_id: str, **config: Any
) -> dg.ExecuteInProcessResult:
    return defs.resolve_job_def("rollback_lineup").execute_in_process(
        run_config={"ops": {"plan_rollback": {"config": {"run_id": run_id, **config}}}},
        instance=instance,
        raise_on_error=False,
    )


def _export(store) -> dict[str, Any]:
    return store.export_lineup(exported_at=STAMP).model_dump(mode="json")


def _rows(store) -> dict[str, list[str]]:
    """Every row a rollback restores, ids and timestamps included, as PostgreSQL prints them."""
    with store.engine.connect() as conn:
        return {
            table.name: sorted(
                conn.execute(
                    sa.text(f'SELECT to_jsonb(x)::text FROM "{table.schema}"."{table.name}" x')
                ).scalars()
            )
            for table in ROWS
        }


def _failure(result: dg.ExecuteInProcessResult) -> str:
    event = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    return event.step_failure_data.user_failure_data.description


@pytest.fixture
def replaced(
    synced, store, stub, dagster_instance
) -> tuple[str, dict[str, Any], dict[str, list[str]]]:
    """A first AI lineup (exported), then a second one that replaces it with confirm_wipe.

    Returns (the second run's id, the export before it, every restorable row before it).
    """
    with store.engine.begin() as conn:
        conn.execute(t.channel_package.insert().values(id="mine", key="mine", name="Mine"))
        conn.execute(
            t.channel.insert().values(
                id="manual", number=7, name="My channel", media_source_id=synced, package_id="mine"
            )
        )
    stub.responder = ScriptedModel(small_plan(("Drama", "Comedy", "Action")))
    assert _lineup(dagster_instance, lineup_config(stub, provider="anthropic")).success
    before, rows = _export(store), _rows(store)
    # Drama is kept and rebuilt (parked, then replaced); Comedy and Action are removed.
    stub.responder = ScriptedModel(small_plan(("Drama", "Horror", "Crime")))
    second = _lineup(dagster_instance, lineup_config(stub, provider="anthropic", confirm_wipe=True))
    assert second.success
    assert _export(store) != before
    return second.run_id, before, rows


def test_a_rollback_asks_then_restores_the_replaced_lineup_exactly(
    replaced, store, dagster_instance
) -> None:
    run_id, before, rows = replaced
    after_second = _rows(store)

    stopped = _rollback(dagster_instance, run_id)

    assert not stopped.success
    assert _failure(stopped).startswith("AWAITING APPROVAL (approve-rollback:v1)")
    assert _rows(store) == after_second, "the gate writes nothing"
    assert dagster_instance.get_run_by_id(stopped.run_id).tags[AWAITING_APPROVAL_TAG] == (
        "approve-rollback:v1"
    )
    diff = ApprovalStore(store.engine).find(stopped.run_id).payload["diff"]
    assert {e["name"] for e in diff["removed"]} == {"Drama TV", "Horror TV", "Crime TV"}
    assert {e["name"] for e in diff["created"]} == {"Drama TV", "Comedy TV", "Action TV"}
    assert [c["number"] for c in diff["untouched"]] == [7]

    done = _rollback(dagster_instance, run_id, confirm=True)

    assert done.success, _failure(done)
    assert _export(store) == before
    assert _rows(store) == rows, "the same rows, ids and all"
    result = done.output_for_node("apply_rollback")
    assert {e.name for e in result.restored} == {"Drama TV", "Comedy TV", "Action TV"}
    assert RollbackStore(store.engine).info(run_id).rolled_back_by == done.run_id

    again = _rollback(dagster_instance, run_id, confirm=True)
    assert not again.success
    assert f"already rolled back by run {done.run_id}" in _failure(again)


def test_a_rollback_is_refused_when_the_air_changed_since(
    replaced, store, dagster_instance
) -> None:
    run_id, before, _ = replaced
    rollback = RollbackStore(store.engine)
    assert rollback.plan(run_id, "r").refusals == ()
    with store.engine.begin() as conn:
        horror = conn.execute(
            sa.select(t.channel.c.id, t.channel.c.number).where(t.channel.c.name == "Horror TV")
        ).one()
        conn.execute(t.channel.update().where(t.channel.c.id == horror.id).values(name="Scary TV"))
    needed = {c["name"]: c["number"] for c in before["channels"]}
    name_needed = next(n for n in ("Action TV", "Comedy TV") if needed[n] != horror.number)
    number_needed = needed[name_needed]
    with store.engine.begin() as conn:
        held = conn.execute(
            sa.select(t.channel.c.id).where(t.channel.c.number == number_needed)
        ).scalar_one_or_none()
        if held is not None:  # a channel of the AI run holds it: move it out of the way
            conn.execute(t.channel.delete().where(t.channel.c.id == held))
        source = conn.execute(sa.select(t.media_source.c.id)).scalar_one()
        conn.execute(
            t.channel.insert().values(
                id="squatter", number=number_needed, name="Squatter", media_source_id=source
            )
        )

    refused = _rollback(dagster_instance, run_id, confirm=True)

    assert not refused.success
    text = _failure(refused)
    assert text.startswith("ROLLBACK REFUSED")
    assert f"AI channel {horror.number} (Scary TV) was changed since the lineup" in text
    assert f"number {number_needed} of {name_needed} is taken by channel Squatter" in text
    if held is not None:
        assert "was deleted since the lineup" in text
    assert "Nothing was written" in text

    # Undo the edits: the rollback is no longer ambiguous.
    with store.engine.begin() as conn:
        conn.execute(t.channel.delete().where(t.channel.c.id == "squatter"))
        conn.execute(t.channel.update().where(t.channel.c.id == horror.id).values(name="Horror TV"))
    if held is None:
        assert rollback.plan(run_id, "r").refusals == ()


def test_a_kill_inside_the_apply_leaves_the_air_as_it_was_and_a_retry_restores_it(
    replaced, store, tmp_path: Path
) -> None:
    run_id, before, rows = replaced
    after_second = _rows(store)
    failpoints.arm(tmp_path, failpoints.ROLLBACK_IN_APPLY, key=run_id)
    url = store.engine.url.render_as_string(hide_password=False)
    script = (
        "import sys\n"
        "from resources.stores.engine import engine_for\n"
        "from resources.stores.rollback import RollbackStore\n"
        "RollbackStore(engine_for(sys.argv[1])).apply(sys.argv[2], 'rollback-root')\n"
    )
    env = {**os.environ, settings.FAILPOINTS_DIR_ENV: str(tmp_path)}

    killed = subprocess.run(
        [sys.executable, "-c", script, url, run_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert killed.returncode == -9, killed.stderr
    assert [name for name, _, _ in failpoints.fired(tmp_path)] == [failpoints.ROLLBACK_IN_APPLY]
    assert _rows(store) == after_second, "the transaction died with its connection"
    rollback = RollbackStore(store.engine)
    assert rollback.info(run_id).rolled_back_by is None

    first = rollback.apply(run_id, "rollback-root")
    second = rollback.apply(run_id, "rollback-root")

    assert first.already_by is None and second.already_by == "rollback-root"
    assert _export(store) == before
    assert _rows(store) == rows
