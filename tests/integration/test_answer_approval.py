"""`answer_approval` on the shared `airwave dev`: the continuation from a run worker, dev's origin.

tests/integration/test_web_permissions.py answers through `airwave serve` (a code server reached
by address); `airwave dev` hands runs the origin of Dagster's own development workspace, and the
answer's op must continue the stopped run tree from there too. Without a permissions file the
answer is the local operator's.
"""

from __future__ import annotations

import time

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.cli import launcher
from airwave_dagster.domain.permissions import LOCAL_OPERATOR
from airwave_dagster.durability.run_launcher import process_alive, worker_pid
from airwave_dagster.run_tags import AWAITING_APPROVAL, STARTED_BY_TAG, STATUS_TAG
from resources.stores.approvals import ApprovalStore, Interrupt
from tests.support.dagster_dev import Dev

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.plex,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

LINEUP = {"limit": 1, "provider": "offline", "approval": "required", "confirm_wipe": False}


def _stopped_at_the_gate(dev: Dev) -> str:
    """An `ai_lineup` run launched as the UI does, once it waits at its gate: SUSPENDED."""
    stopped = dev.launch_run("ai_lineup", {"ops": {"analyze_library": {"config": LINEUP}}})
    run = launcher.wait_for_run(dev.instance, stopped)
    assert run.status == dg.DagsterRunStatus.SUSPENDED
    assert run.tags[STATUS_TAG] == AWAITING_APPROVAL
    return stopped


def _approve_from_the_launchpad(dev: Dev, stopped: str, reason: str) -> dg.DagsterRun:
    """Launch `answer_approval` (approve) as the UI does; the answer's run once it ended."""
    config = {"run_id": stopped, "decision": "approve", "reason": reason}
    answer_id = dev.launch_run(
        "answer_approval", {"ops": {"resolve_interrupt": {"config": config}}}
    )
    return launcher.wait_for_run(dev.instance, answer_id)


def _interrupt(database_url: str, run_id: str) -> Interrupt | None:
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    try:
        return ApprovalStore(engine).find(run_id)
    finally:
        engine.dispose()


def test_answer_approval_continues_the_tree_as_airwave_approve_does(
    fresh: Dev, database_url: str
) -> None:
    stopped = _stopped_at_the_gate(fresh)
    # Its worker ends (Dagster then reports a run it left unfinished as failed): the run stays
    # SUSPENDED, holding no worker, and no failure event is stored.
    pid = worker_pid(fresh.instance, stopped)
    assert pid is not None
    deadline = time.monotonic() + 60
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not process_alive(pid)
    time.sleep(6)  # the code server's orphan check runs every few seconds
    still = fresh.instance.get_run_by_id(stopped)
    assert still is not None and still.status == dg.DagsterRunStatus.SUSPENDED
    logged = fresh.instance.all_logs(stopped)
    assert not [e for e in logged if e.dagster_event_type == dg.DagsterEventType.RUN_FAILURE]
    suspended = [e for e in logged if e.dagster_event_type == dg.DagsterEventType.RUN_SUSPENDED]
    assert len(suspended) == 1 and "AWAITING APPROVAL (approve-plan:v1)" in suspended[0].message

    answer = _approve_from_the_launchpad(fresh, stopped, "from the Launchpad")
    assert answer.status == dg.DagsterRunStatus.SUCCESS

    interrupt = _interrupt(database_url, stopped)
    assert interrupt is not None and interrupt.status == "approved"
    assert interrupt.resolved_by == LOCAL_OPERATOR and interrupt.reason == "from the Launchpad"
    assert interrupt.continuation_run_id is not None
    continuation = launcher.wait_for_run(fresh.instance, interrupt.continuation_run_id)
    assert continuation.status == dg.DagsterRunStatus.SUCCESS
    assert continuation.parent_run_id == stopped
    assert continuation.tags[STARTED_BY_TAG] == LOCAL_OPERATOR
    answered = fresh.instance.get_run_by_id(stopped)
    assert answered is not None and answered.tags[STATUS_TAG] == "approved"
    # Answered and continued, the stopped run has done its part.
    assert answered.status == dg.DagsterRunStatus.SUCCESS


TERMINATE = """
mutation($id: String!, $policy: TerminateRunPolicy) {
  terminateRun(runId: $id, terminatePolicy: $policy) {
    __typename ... on TerminateRunFailure { message }
  }
}
"""


def test_a_suspended_run_force_terminated_in_the_ui_is_not_restarted_by_an_answer(
    fresh: Dev, database_url: str
) -> None:
    stopped = _stopped_at_the_gate(fresh)

    # Dagster terminates only STARTED and QUEUED runs: the UI's plain Terminate is refused ...
    safe = fresh.graphql(TERMINATE, {"id": stopped, "policy": "SAFE_TERMINATE"})["terminateRun"]
    assert safe["__typename"] == "TerminateRunFailure" and "SUSPENDED" in safe["message"], safe
    # ... its forced one marks the run CANCELED, with the question still open in our table.
    forced = fresh.graphql(TERMINATE, {"id": stopped, "policy": "MARK_AS_CANCELED_IMMEDIATELY"})
    assert forced["terminateRun"]["__typename"] == "TerminateRunSuccess", forced
    canceled = fresh.instance.get_run_by_id(stopped)
    assert canceled is not None and canceled.status == dg.DagsterRunStatus.CANCELED

    answer = _approve_from_the_launchpad(fresh, stopped, "too late")
    assert answer.status == dg.DagsterRunStatus.FAILURE
    messages = launcher.failure_messages(fresh.instance, answer.run_id)
    assert any("was canceled; nothing is left to answer" in m for m in messages), messages
    interrupt = _interrupt(database_url, stopped)
    assert interrupt is not None and interrupt.status == "canceled"
    assert interrupt.continuation_run_id is None
    assert [r.run_id for r in launcher.run_tree(fresh.instance, stopped)] == [stopped]
