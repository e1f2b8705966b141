"""`answer_approval` on the shared `airwave dev`: the continuation from a run worker, dev's origin.

tests/integration/test_web_permissions.py answers through `airwave serve` (a code server reached
by address); `airwave dev` hands runs the origin of Dagster's own development workspace, and the
answer's op must continue the stopped run tree from there too. Without a permissions file the
answer is the local operator's.
"""

from __future__ import annotations

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.cli import launcher
from airwave_dagster.domain.permissions import LOCAL_OPERATOR
from airwave_dagster.run_tags import AWAITING_APPROVAL, STARTED_BY_TAG, STATUS_TAG
from resources.stores.approvals import ApprovalStore
from tests.support.dagster_dev import Dev

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.plex,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

LINEUP = {"limit": 1, "provider": "offline", "approval": "required", "confirm_wipe": False}


def test_answer_approval_continues_the_tree_as_airwave_approve_does(
    fresh: Dev, database_url: str
) -> None:
    stopped = fresh.launch_run("ai_lineup", {"ops": {"analyze_library": {"config": LINEUP}}})
    run = launcher.wait_for_run(fresh.instance, stopped)
    assert run.status == dg.DagsterRunStatus.FAILURE
    assert run.tags[STATUS_TAG] == AWAITING_APPROVAL

    config = {"run_id": stopped, "decision": "approve", "reason": "from the Launchpad"}
    answer_id = fresh.launch_run(
        "answer_approval", {"ops": {"resolve_interrupt": {"config": config}}}
    )
    answer = launcher.wait_for_run(fresh.instance, answer_id)
    assert answer.status == dg.DagsterRunStatus.SUCCESS

    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        interrupt = ApprovalStore(engine).find(stopped)
    finally:
        engine.dispose()
    assert interrupt is not None and interrupt.status == "approved"
    assert interrupt.resolved_by == LOCAL_OPERATOR and interrupt.reason == "from the Launchpad"
    assert interrupt.continuation_run_id is not None
    continuation = launcher.wait_for_run(fresh.instance, interrupt.continuation_run_id)
    assert continuation.status == dg.DagsterRunStatus.SUCCESS
    assert continuation.parent_run_id == stopped
    assert continuation.tags[STARTED_BY_TAG] == LOCAL_OPERATOR
    assert fresh.instance.get_run_by_id(stopped).tags[STATUS_TAG] == "approved"  # type: ignore[union-attr]
