"""After a `start_run` that failed in the client, the launcher requeues only a start never served.

The whole fault runs in tests/integration/test_load_and_faults.py (a code server whose every
start exceeds a 1 s gRPC deadline); here each answer the code server and the event log can give
is played back on a clock that only the test moves, so every branch is decided, not raced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airwave_dagster.durability.run_launcher import start_was_served

RUN = "run-1"


@dataclass
class Script:
    """A probe whose answers change at given times of a fake clock."""

    pid_from: float | None = None
    """From when the worker has reported itself (None: never)."""
    held: tuple[float, float] | None = None
    """When the code server holds a worker for the run: [from, until)."""
    unreachable_until: float = 0.0
    """The code server cannot be reached before this time."""
    now: float = 0.0
    asked: list[float] = field(default_factory=list)

    def reported_worker(self) -> int | None:
        return 4242 if self.pid_from is not None and self.now >= self.pid_from else None

    def code_server_runs(self) -> set[str] | None:
        self.asked.append(self.now)
        if self.now < self.unreachable_until:
            return None
        if self.held is not None and self.held[0] <= self.now < self.held[1]:
            return {RUN, "another-run"}
        return {"another-run"}

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def decide(script: Script, window: float = 180.0) -> str | None:
    return start_was_served(
        RUN, script, window_seconds=window, clock=script.clock, sleep=script.sleep
    )


def test_a_worker_that_reported_itself_was_served() -> None:
    script = Script(pid_from=0.0)
    assert decide(script) == "run worker 4242 reported itself"
    assert script.asked == []  # the event log settles it without asking the code server


def test_a_worker_the_code_server_holds_is_waited_for_until_it_reports_itself() -> None:
    script = Script(held=(0.0, 1e9), pid_from=42.0)
    assert decide(script) == "run worker 4242 reported itself"
    assert script.now == 42.0


def test_a_worker_slower_than_the_window_is_still_served_not_requeued() -> None:
    """Requeued while its worker was still starting, the worker would find its run QUEUED and
    exit as a duplicate, and the code server would mark the run failed."""
    script = Script(held=(1.0, 1e9))
    served = decide(script, window=180.0)
    assert served == "the code server holds a worker for the run that has not reported itself"
    assert script.now == 180.0


def test_a_start_the_code_server_never_had_is_requeued_after_two_answers_apart() -> None:
    script = Script()
    assert decide(script) is None
    assert script.asked == [0.0, 1.0, 2.0]  # absent at 0 s and still absent 2 s later


def test_a_worker_that_appears_between_two_answers_is_not_requeued() -> None:
    """A `start_run` handler still registering its worker at the first answer."""
    script = Script(held=(1.0, 1e9), pid_from=5.0)
    assert decide(script) == "run worker 4242 reported itself"


def test_a_worker_that_ended_without_reporting_itself_is_requeued() -> None:
    script = Script(held=(0.0, 4.0))
    assert decide(script) is None
    assert script.now == 4.0


def test_a_worker_that_reported_itself_just_before_ending_was_served() -> None:
    script = Script(held=(0.0, 4.0), pid_from=3.5)
    assert decide(script) == "run worker 4242 reported itself"


def test_a_code_server_down_for_15_s_lets_the_queue_retry() -> None:
    """Down or restarting: the queue's own retries (`max_user_code_failure_retries`) apply."""
    script = Script(unreachable_until=1e9)
    assert decide(script) is None
    assert script.now == 15.0
    assert len(script.asked) == 16


def test_a_code_server_lost_after_it_showed_the_worker_is_waited_for() -> None:
    script = Script(pid_from=100.0)
    answers = iter([{RUN}])

    def flaky() -> set[str] | None:
        script.asked.append(script.now)
        return next(answers, None)  # shows the worker once, then cannot be reached

    script.code_server_runs = flaky  # type: ignore[method-assign]
    assert decide(script) == "run worker 4242 reported itself"
    assert script.now == 100.0


def test_a_code_server_that_answers_late_still_decides() -> None:
    script = Script(unreachable_until=10.0, held=(0.0, 1e9), pid_from=25.0)
    assert decide(script) == "run worker 4242 reported itself"
