"""The events that say why a run ended wait out an unreachable event log instead of being lost.

A real outage is tests/integration/test_load_and_faults.py's (a Postgres cluster stopped for 45 s
under a running import); here the instance's storage fails on demand, so each rule is checked
on its own: which events wait, that they are stored once the database answers, that nothing
else waits, and that the wait ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest
import sqlalchemy.exc
from dagster._core.events import EngineEventData
from dagster._utils.error import SerializableErrorInfo

from airwave_dagster.durability import instance as airwave_instance
from airwave_dagster.durability.instance import AirwaveInstance, is_terminal_evidence
from tests.support.instances import airwave_instance_on
from tests.support.schemas import fresh_schema

pytestmark = pytest.mark.postgres

ERROR = SerializableErrorInfo("psycopg2.OperationalError: server closed the connection\n", [], "E")


@dg.op
def noop() -> None:
    """Nothing: the job only gives the test a run to fail."""


@dg.job
def probe_job() -> None:
    noop()


@pytest.fixture
def airwave(database_url: str) -> Iterator[AirwaveInstance]:
    """The project's instance class on a schema of its own."""
    with airwave_instance_on(fresh_schema(database_url, "dagster_terminal_events")) as instance:
        yield instance


class _Outage:
    """The parent's store raising as an unreachable Postgres does, `failures` times."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
        self.failures = failures
        self.calls: list[str] = []
        self.slept: list[float] = []
        store = dg.DagsterInstance.handle_new_event

        def failing(instance: Any, event: Any, **kwargs: Any) -> None:
            kind = event.dagster_event.event_type_value if event.dagster_event else "log"
            self.calls.append(kind)
            if self.failures > 0:
                self.failures -= 1
                raise sqlalchemy.exc.OperationalError("INSERT", {}, Exception("connection refused"))
            store(instance, event, **kwargs)

        monkeypatch.setattr(dg.DagsterInstance, "handle_new_event", failing)
        monkeypatch.setattr(airwave_instance.time, "sleep", self.slept.append)


def _events(instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType) -> list[Any]:
    return list(instance.all_logs(run_id, of_type=kind))


def test_which_events_say_why_a_run_ended(airwave: AirwaveInstance) -> None:
    run = airwave.create_run_for_job(job_def=probe_job)

    def entry(kind: dg.DagsterEventType, data: Any = None, step_key: str | None = None) -> Any:
        event = dg.DagsterEvent(
            event_type_value=kind.value,
            job_name=run.job_name,
            step_key=step_key,
            event_specific_data=data,
        )
        return dg.EventLogEntry(
            error_info=None,
            level=40,
            user_message="",
            run_id=run.run_id,
            timestamp=0.0,
            dagster_event=event,
        )

    errored = EngineEventData(error=ERROR)
    assert is_terminal_evidence(entry(dg.DagsterEventType.RUN_FAILURE))
    assert is_terminal_evidence(entry(dg.DagsterEventType.ENGINE_EVENT, errored))
    assert not is_terminal_evidence(entry(dg.DagsterEventType.ENGINE_EVENT, EngineEventData()))
    # A step's engine error belongs to the step, whose failure event reports it.
    assert not is_terminal_evidence(entry(dg.DagsterEventType.ENGINE_EVENT, errored, "noop"))
    assert not is_terminal_evidence(entry(dg.DagsterEventType.RUN_START))


def test_a_run_failure_waits_for_the_event_log_and_is_stored_once_it_answers(
    airwave: AirwaveInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = airwave.create_run_for_job(job_def=probe_job)
    outage = _Outage(monkeypatch, failures=3)

    airwave.report_engine_event(
        "An exception was thrown during execution", run, EngineEventData(error=ERROR)
    )
    airwave.report_run_failed(run)

    # The engine error waited through three failed writes (1 s, 2 s, 4 s), the failure did not.
    assert outage.calls == ["ENGINE_EVENT"] * 4 + ["PIPELINE_FAILURE"]
    assert outage.slept == [1.0, 2.0, 4.0]
    engine = _events(airwave, run.run_id, dg.DagsterEventType.ENGINE_EVENT)
    assert [e.dagster_event.engine_event_data.error for e in engine] == [ERROR]
    stored = airwave.get_run_by_id(run.run_id)
    assert stored is not None and stored.status == dg.DagsterRunStatus.FAILURE


def test_other_events_fail_at_once_as_dagster_stores_them(
    airwave: AirwaveInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = airwave.create_run_for_job(job_def=probe_job)
    outage = _Outage(monkeypatch, failures=1)

    with pytest.raises(sqlalchemy.exc.OperationalError):
        airwave.report_engine_event("a step launched", run, EngineEventData())

    assert outage.calls == ["ENGINE_EVENT"] and outage.slept == []


def test_the_wait_ends_with_the_database_error(
    airwave: AirwaveInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = airwave.create_run_for_job(job_def=probe_job)
    monkeypatch.setattr(airwave_instance, "TERMINAL_EVENT_PATIENCE_SECONDS", 0.5)
    outage = _Outage(monkeypatch, failures=1_000)

    with pytest.raises(sqlalchemy.exc.OperationalError):
        airwave.report_run_failed(run)

    # The first pause (1 s) would pass the deadline: one attempt, no sleep, the error raised.
    assert outage.calls == ["PIPELINE_FAILURE"] and outage.slept == []
    stored = airwave.get_run_by_id(run.run_id)
    assert stored is not None and stored.status == dg.DagsterRunStatus.NOT_STARTED
