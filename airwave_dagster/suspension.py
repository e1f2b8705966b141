"""A run stopped at an approval gate is SUSPENDED: waiting, holding no worker and no queue slot.

Dagster 1.13 has the status (`DagsterRunStatus.SUSPENDED`, "started and waiting on external work,
with no run worker, on purpose"): the UI shows it as a blue **Suspended** badge among the runs in
progress, the run queue does not count it, and run monitoring only applies `max_runtime_seconds`
to it. Nothing in Dagster writes it yet. This module is the project's one writer:

1. The gate (`ops/ai_lineup/approval.py::pass_gate`) records its question, tags the run
   `airwave/status=awaiting-approval` and fails its step with a description that starts
   `AWAITING APPROVAL (`. The step has no output, so a resume re-runs it.
2. When the run worker then reports the run's failure, the project's instance
   (`durability/instance.py::AirwaveInstance.handle_new_event`) stores `RUN_SUSPENDED` instead
   (`instead_of_failure`): the run is SUSPENDED, and no failure alert or automatic retry follows.
3. Dagster reports a second failure when a worker ends with its run unfinished (the worker's own
   epilogue and its code server's orphan check); for a SUSPENDED run that is the expected end of
   its worker, so it is kept as an engine event and the run stays SUSPENDED.
4. An answer ends it (`end_suspended`): an approval, once its continuation run exists, marks it
   SUCCESS (its part — plan and question — is done; the continuation carries on); a rejection,
   an expiry or a cancel marks it CANCELED.

A run marked failed by run monitoring's runtime limit passes through CANCELING first, so it is
not mistaken for the worker's epilogue.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import dagster as dg
from dagster._core.events import EngineEventData, JobFailureData
from dagster._core.events.log import EventLogEntry

from airwave_dagster.run_tags import AWAITING_APPROVAL, AWAITING_APPROVAL_TAG, STATUS_TAG

GATE_STOP_PREFIX = "AWAITING APPROVAL ("
"""How the gate's step failure description starts (followed by the gate id)."""


def has_stopped(run: dg.DagsterRun) -> bool:
    """Whether the run will make no more progress by itself: finished, or waiting for a person."""
    return run.is_finished or run.status == dg.DagsterRunStatus.SUSPENDED


def wait_until_stopped(
    instance: dg.DagsterInstance, run_id: str, timeout: float = 120.0
) -> dg.DagsterRun | None:
    """The run once it has stopped (`has_stopped`), or as it is after `timeout` seconds.

    A gate records its question a moment before its run worker reports the run's end, so an
    answer given in between waits here for the run to be SUSPENDED before it ends it or
    resumes it.
    """
    deadline = time.monotonic() + timeout
    run = instance.get_run_by_id(run_id)
    while run is not None and not has_stopped(run) and time.monotonic() < deadline:
        time.sleep(0.5)
        run = instance.get_run_by_id(run_id)
    return run


def _gate_stop(failure: JobFailureData | None) -> str | None:
    """The gate's description when this run failure is exactly a gate stopping, else None."""
    if failure is None or failure.first_step_failure_event is None:
        return None
    step = failure.first_step_failure_event.step_failure_data
    if step.user_failure_data is None:
        return None
    description = step.user_failure_data.description or ""
    return description if description.startswith(GATE_STOP_PREFIX) else None


def instead_of_failure(entry: EventLogEntry, run: dg.DagsterRun | None) -> EventLogEntry:
    """What to store for a RUN_FAILURE event of `run` (as stored now): see the module docstring.

    Returns:
        `entry` itself for an ordinary failure; a RUN_SUSPENDED entry for a gate's stop; an
        engine event for a worker's after-the-fact failure of a run already SUSPENDED.
    """
    event = entry.dagster_event
    if run is None or event is None or event.event_type != dg.DagsterEventType.RUN_FAILURE:
        return entry
    if run.status == dg.DagsterRunStatus.SUSPENDED:
        message = (
            f"{entry.user_message} Not applied: the run is suspended at its approval gate and "
            "holds no worker; an answer ends it."
        )
        replacement = dg.DagsterEvent(
            event_type_value=dg.DagsterEventType.ENGINE_EVENT.value,
            job_name=event.job_name,
            message=message,
            event_specific_data=EngineEventData(),
        )
        return entry._replace(dagster_event=replacement, user_message=message, level=logging.INFO)
    data = event.event_specific_data
    stop = _gate_stop(data if isinstance(data, JobFailureData) else None)
    if stop is None or run.tags.get(STATUS_TAG) != AWAITING_APPROVAL:
        return entry
    message = f"Suspended: {stop}"
    replacement = dg.DagsterEvent(
        event_type_value=dg.DagsterEventType.RUN_SUSPENDED.value,
        job_name=event.job_name,
        message=message,
    )
    return entry._replace(dagster_event=replacement, user_message=message, level=logging.INFO)


class Answer(Protocol):
    """An interrupt row as an answer left it (`resources/stores/approvals.py::Interrupt`)."""

    @property
    def run_id(self) -> str:
        """The run the gate stopped."""
        ...

    @property
    def status(self) -> str:
        """`approved` or `rejected`."""
        ...

    @property
    def reason(self) -> str | None:
        """Why, as the answer gave it."""
        ...

    def describe(self) -> str:
        """ "approved by alice at …"."""
        ...


def answered(
    instance: dg.DagsterInstance, answer: Answer, timeout: float = 120.0
) -> dg.DagsterRun | None:
    """What every answer that won does to the stopped run before its own next step.

    Waits for the run to be SUSPENDED (`wait_until_stopped`), tags it with the answer and, for
    a rejection, ends it CANCELED. An approval's caller resumes the tree, then ends the run with
    `end_suspended(approved=True)`.

    Returns:
        The run as it was once stopped (None if there is no such run).
    """
    stopped = wait_until_stopped(instance, answer.run_id, timeout)
    described = answer.describe()
    instance.add_run_tags(
        answer.run_id, {AWAITING_APPROVAL_TAG: described, STATUS_TAG: answer.status}
    )
    if answer.status == "rejected":
        end_suspended(
            instance,
            answer.run_id,
            approved=False,
            message=described
            + (f" ({answer.reason})" if answer.reason else "")
            + ": the run tree ends here; nothing was written",
        )
    return stopped


def end_suspended(
    instance: dg.DagsterInstance, run_id: str, *, approved: bool, message: str
) -> bool:
    """End a SUSPENDED run after its question was answered; True if this call ended it.

    Args:
        approved: True once the approval's continuation run exists (the run becomes SUCCESS);
            False for a rejection, an expiry or a cancel (CANCELED).
        message: The run's last event: who answered, and where the tree goes on.
    """
    run = instance.get_run_by_id(run_id)
    if run is None or run.status != dg.DagsterRunStatus.SUSPENDED:
        return False
    if approved:
        instance.report_dagster_event(
            dg.DagsterEvent(
                event_type_value=dg.DagsterEventType.RUN_SUCCESS.value,
                job_name=run.job_name,
                message=message,
            ),
            run_id=run_id,
        )
    else:
        instance.report_run_canceled(run, message=message)
    return True
