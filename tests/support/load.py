"""Watching runs while they execute: how many are in progress, how many builds are in flight."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

ACTIVE = [
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
"""The statuses the queued run coordinator counts against `max_concurrent_runs`."""

_OPENS = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_RESTARTED}
_CLOSES = {
    dg.DagsterEventType.STEP_SUCCESS,
    dg.DagsterEventType.STEP_FAILURE,
    dg.DagsterEventType.STEP_UP_FOR_RETRY,
    dg.DagsterEventType.STEP_SKIPPED,
}


@dataclass
class Peaks:
    """The largest values seen by a `Sampler`, and how many samples it took."""

    samples: int = 0
    runs_in_progress: int = 0
    builds_in_flight: int = 0
    builds_in_flight_one_run: int = 0
    runs_seen_in_flight: set[str] = field(default_factory=set)


class Sampler:
    """Samples, on a thread, the active runs and the `build_channel` steps in flight.

    A build is in flight between its STEP_START (or STEP_RESTARTED, for a retry) and its
    success, failure, retry or skip, read from the event log in storage order: what the run
    workers wrote, not what the test guesses from timing.
    """

    def __init__(self, instance: Any, run_ids: list[str], poll: float = 0.3) -> None:
        self._instance = instance
        self._run_ids = list(run_ids)
        self._poll = poll
        self._cursors: dict[str, str | None] = dict.fromkeys(run_ids)
        self._open: dict[str, set[str]] = defaultdict(set)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="load-sampler", daemon=True)
        self.peaks = Peaks()
        self.error: BaseException | None = None

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.sample()  # one last read, so steps that ended after the last tick are closed

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except BaseException as error:  # reported by the test, never lost on the thread
                self.error = error
                return
            self._stop.wait(self._poll)

    def sample(self) -> None:
        """Take one sample now and fold it into `peaks`."""
        active = self._instance.get_runs_count(dg.RunsFilter(statuses=ACTIVE))
        for run_id in self._run_ids:
            connection = self._instance.get_records_for_run(
                run_id, cursor=self._cursors[run_id], of_type=_OPENS | _CLOSES
            )
            self._cursors[run_id] = connection.cursor
            for record in connection.records:
                event = record.event_log_entry.dagster_event
                if event is None or not (event.step_key or "").startswith("build_channel["):
                    continue
                if event.event_type in _OPENS:
                    self._open[run_id].add(event.step_key)
                else:
                    self._open[run_id].discard(event.step_key)
        per_run = [len(keys) for keys in self._open.values()]
        peaks = self.peaks
        peaks.samples += 1
        peaks.runs_in_progress = max(peaks.runs_in_progress, active)
        peaks.builds_in_flight = max(peaks.builds_in_flight, sum(per_run))
        peaks.builds_in_flight_one_run = max(peaks.builds_in_flight_one_run, *per_run, 0)
        peaks.runs_seen_in_flight |= {run_id for run_id, keys in self._open.items() if keys}

    def still_open(self) -> dict[str, set[str]]:
        """Builds whose start was seen without an end (none, once every run has finished)."""
        return {run_id: set(keys) for run_id, keys in self._open.items() if keys}
