"""The project's Dagster instance: complete resumes, and runs that wait at a gate SUSPENDED.

`dagster.yaml` names this class (`instance_class`), so the webserver (UI and GraphQL), the daemon
(automatic run retries) and the `airwave` CLI all re-execute through `create_resume_run`: the
mapped steps a crash never started are included, and a re-execution whose op code versions
changed is refused before any run is created. A run stopped at an approval gate is stored as
SUSPENDED instead of failed (`airwave_dagster/suspension.py`), and can be resumed like a failed
one.

Loaded by every Dagster process of the instance, it is also where the daemon's idle sensor ticks
are kept off the terminal (`quiet_idle_sensor_ticks`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import dagster as dg
import sqlalchemy.exc
from dagster._core.execution.plan.resume_retry import ReexecutionStrategy
from dagster._core.remote_representation.code_location import CodeLocation
from dagster._core.remote_representation.external import RemoteJob
from dagster._core.workspace.context import BaseWorkspaceRequestContext
from dagster_postgres.utils import DagsterPostgresException

from airwave_dagster.durability.resume import RESUMABLE, create_resume_run
from airwave_dagster.durability.versions import refuse_if_changed
from airwave_dagster.durability.wakeups import wake_queue
from airwave_dagster.suspension import instead_of_failure

if TYPE_CHECKING:
    from dagster._core.events import DagsterEventBatchMetadata
    from dagster._core.events.log import EventLogEntry

IDLE_SKIP_REASONS = (
    "no new lineup files",  # sensors/lineup_upload.py, an empty inbox
    "No new materialization events found for asset key",  # Dagster's asset sensor, nothing new
)
"""Skip reasons that only say a sensor looked and found nothing: not worth a terminal line."""


ROUTINE_PREFIXES = (
    "Checking for new runs for sensor: ",  # the sensor daemon, before every evaluation
    "Collected ",  # the monitoring daemon, every 5 s while a run is in progress ...
    "Checking run ",  # ... and once per run it looks at
)
"""INFO lines the daemons print on every poll, whatever happens."""


TERMINAL_EVENT_PATIENCE_SECONDS = 600.0
"""How long the event that says why a run ended waits for an unreachable event log.

Dagster raises when it cannot store an event it generated, so a run whose worker cannot reach
Postgres fails on the first such event; the failure it then reports (an engine event carrying
the error, the RUN_FAILURE) would be lost with the outage too, leaving a run that another
process later marks "failed from outside the execution context" with no cause. Waiting as long
as `airwave import --wait` waits out an outage (10 minutes) keeps the cause: once Postgres is
back the run's failure names the driver's error (docs/durability.md, "Postgres outages")."""

DATABASE_UNREACHABLE: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    DagsterPostgresException,
)
"""What storing an event raises while Postgres is down or restarting."""

_LOG = logging.getLogger(__name__)


RUN_ENDS = frozenset(
    {
        dg.DagsterEventType.RUN_SUCCESS,
        dg.DagsterEventType.RUN_FAILURE,
        dg.DagsterEventType.RUN_CANCELED,
    }
)
"""The events after which a run no longer holds one of the queue's `max_concurrent_runs`."""


def is_terminal_evidence(event: EventLogEntry) -> bool:
    """Whether `event` records why a run ended: its RUN_FAILURE, or a run-level engine error."""
    dagster_event = event.dagster_event
    if dagster_event is None:
        return False
    if dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE:
        return True
    return (
        dagster_event.event_type == dg.DagsterEventType.ENGINE_EVENT
        and dagster_event.step_key is None
        and getattr(dagster_event.event_specific_data, "error", None) is not None
    )


class _IdleSensorTicks(logging.Filter):
    """Drops the daemons' per-poll INFO lines and the sensor lines of a tick that found nothing.

    Dagster logs "Checking for new runs for sensor: …" before every evaluation and "Sensor …
    skipped: …" after it; with the upload sensor every 5 s that was a pair of lines every 5 s in
    `airwave dev` (issue 27, item 11). A tick that requests a run, skips for a reason worth
    reading (a rejected or moved file) or fails still prints, and the UI keeps every tick.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        message = record.getMessage()
        if message.startswith(ROUTINE_PREFIXES):
            return False
        return not (
            message.startswith("Sensor ")
            and " skipped: " in message
            and any(reason in message for reason in IDLE_SKIP_REASONS)
        )


def quiet_idle_sensor_ticks() -> None:
    """Attach `_IdleSensorTicks` to the sensor and monitoring daemons' loggers, once a process."""
    for name in ("dagster.daemon.SensorDaemon", "dagster.daemon.MonitoringDaemon"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _IdleSensorTicks) for f in logger.filters):
            logger.addFilter(_IdleSensorTicks())


class AirwaveInstance(dg.DagsterInstance):
    """`DagsterInstance` whose from-failure re-execution is complete and version-guarded, and
    whose runs stopped at an approval gate are SUSPENDED."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """A plain instance; the daemon's idle sensor ticks stay off the terminal."""
        super().__init__(*args, **kwargs)
        quiet_idle_sensor_ticks()

    @classmethod
    def config_schema(cls) -> dict[str, Any]:
        """No settings of its own (Dagster asks custom instance classes for theirs)."""
        return {}

    @staticmethod
    def config_defaults(base_dir: str) -> Mapping[str, Any]:
        """The same storage defaults as a plain instance."""
        from dagster._core.instance.ref import InstanceRef

        return InstanceRef.config_defaults(base_dir)

    def handle_new_event(
        self,
        event: EventLogEntry,
        *,
        batch_metadata: DagsterEventBatchMetadata | None = None,
    ) -> None:
        """Store the event; a run failure is first checked for a gate's stop (suspension.py).

        The events that say why a run ended (`is_terminal_evidence`) wait out a database outage
        instead of being lost with it (`TERMINAL_EVENT_PATIENCE_SECONDS`). Once a run's end is
        stored, the run queue's daemon is woken: a queued run may have waited for its slot
        (durability/wakeups.py).
        """

        def store() -> None:
            stored = event
            failure = dg.DagsterEventType.RUN_FAILURE
            if stored.dagster_event is not None and stored.dagster_event.event_type == failure:
                stored = instead_of_failure(stored, self.get_run_by_id(stored.run_id))
            super(AirwaveInstance, self).handle_new_event(stored, batch_metadata=batch_metadata)
            if stored.dagster_event is not None and stored.dagster_event.event_type in RUN_ENDS:
                wake_queue(self)

        if not is_terminal_evidence(event):
            store()
            return
        deadline = time.monotonic() + TERMINAL_EVENT_PATIENCE_SECONDS
        pause = 1.0
        while True:
            try:
                store()
                return
            except DATABASE_UNREACHABLE as error:
                if time.monotonic() + pause > deadline:
                    raise
                _LOG.warning(
                    "the event log is unreachable (%s): keeping run %s's %s until it is back",
                    type(error).__name__,
                    event.run_id,
                    event.dagster_event.event_type_value if event.dagster_event else "event",
                )
                time.sleep(pause)
                pause = min(pause * 2, 15.0)

    def create_reexecuted_run(
        self,
        *,
        request_context: BaseWorkspaceRequestContext,
        parent_run: dg.DagsterRun,
        code_location: CodeLocation,
        remote_job: RemoteJob,
        strategy: ReexecutionStrategy,
        extra_tags: Mapping[str, Any] | None = None,
        run_config: Mapping[str, Any] | None = None,
        use_parent_run_tags: bool = False,
    ) -> dg.DagsterRun:
        """Complete resume for FROM_FAILURE; Dagster's own behaviour for the other strategies."""
        if strategy == ReexecutionStrategy.FROM_FAILURE:
            if parent_run.status not in RESUMABLE:
                raise dg.DagsterInvariantViolationError(
                    f"run {parent_run.run_id} is {parent_run.status.value}: only failed, "
                    "canceled or suspended runs can be resumed"
                )
            return create_resume_run(
                self,
                request_context=request_context,
                parent_run=parent_run,
                code_location=code_location,
                remote_job=remote_job,
                extra_tags=extra_tags,
                run_config=run_config,
                use_parent_run_tags=use_parent_run_tags,
            )
        if strategy == ReexecutionStrategy.FROM_ASSET_FAILURE:
            refuse_if_changed(self, parent_run, remote_job.job_snapshot)
        return super().create_reexecuted_run(
            request_context=request_context,
            parent_run=parent_run,
            code_location=code_location,
            remote_job=remote_job,
            strategy=strategy,
            extra_tags=extra_tags,
            run_config=run_config,
            use_parent_run_tags=use_parent_run_tags,
        )
