"""The start rules of `cli/starts.py`, over an in-memory target.

The two real targets (a webserver over GraphQL, a code server of the command's own) are driven
end to end in tests/integration (test_guard_and_starts, test_recovery); these tests pin down the
decisions both share: which run a key returns, when it is resumed, what `--force` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from airwave_dagster.cli import starts
from airwave_dagster.domain.permissions import LOCAL_OPERATOR
from airwave_dagster.run_tags import IDEMPOTENCY_TAG, STARTED_BY_TAG
from airwave_dagster.settings import PERMISSIONS_ENV
from tests.support.permissions import write_three_principals


@dataclass
class _Slot:
    table: dict[str, str]
    key: str

    def recorded_run_id(self) -> str | None:
        return self.table.get(self.key)

    def record(self, run_id: str, job_name: str) -> None:
        self.table[self.key] = run_id


@dataclass
class _Starts:
    table: dict[str, str] = field(default_factory=dict)

    @contextmanager
    def slot(self, key: str) -> Iterator[_Slot]:
        yield _Slot(self.table, key)


@dataclass
class _Target:
    """Runs in a dict; `dead` names in-progress runs whose worker is gone."""

    runs: dict[str, starts.RunInfo] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    daemon: bool = False
    submitted: list[Mapping[str, str]] = field(default_factory=list)
    reexecuted: list[tuple[str, bool]] = field(default_factory=list)
    configs: list[Mapping[str, object] | None] = field(default_factory=list)
    health_checks: int = 0
    unserved: set[str] = field(default_factory=set)
    taken: list[str] = field(default_factory=list)

    def add(self, run_id: str, status: str, **fields: Any) -> starts.RunInfo:
        run = starts.RunInfo(
            run_id=run_id,
            status=status,
            job_name="import_lineup",
            created=float(len(self.runs)),
            **fields,
        )
        self.runs[run_id] = run
        return run

    def run(self, run_id: str) -> starts.RunInfo | None:
        return self.runs.get(run_id)

    def tagged(self, key: str) -> starts.RunInfo | None:
        found = [r for r in self.runs.values() if r.tags.get(IDEMPOTENCY_TAG) == key]
        return max(found, key=lambda r: r.created) if found else None

    def tree(self, run_id: str) -> list[starts.RunInfo]:
        root = run_id
        while (parent := self.runs[root].parent_run_id) is not None:
            root = parent
        members = {root}
        for run in sorted(self.runs.values(), key=lambda r: r.created):
            if run.parent_run_id in members:
                members.add(run.run_id)
        return [self.runs[m] for m in members]

    def submit(
        self, job_name: str, run_config: Mapping[str, object], tags: Mapping[str, str]
    ) -> str:
        self.submitted.append(dict(tags))
        return self.add(f"run-{len(self.runs)}", "QUEUED", tags=dict(tags)).run_id

    def reexecute(
        self,
        run_id: str,
        *,
        from_failure: bool,
        config: Mapping[str, object] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        self.reexecuted.append((run_id, from_failure))
        self.configs.append(config)
        child = f"run-{len(self.runs)}"
        inherited = {**self.runs[run_id].tags, **(tags or {})}
        return self.add(child, "QUEUED", parent_run_id=run_id, tags=inherited).run_id

    def fail_if_dead(self, run: starts.RunInfo) -> starts.RunInfo:
        self.health_checks += 1
        if run.in_progress and run.run_id in self.dead:
            self.runs[run.run_id] = replace(run, status="FAILURE")
        return self.runs[run.run_id]

    def daemon_running(self) -> bool:
        return self.daemon

    def take_if_unserved(self, run_id: str) -> str | None:
        if run_id not in self.unserved:
            return None
        self.taken.append(run_id)
        self.runs[run_id] = replace(self.runs[run_id], status="STARTING")
        return "nothing takes the queue"


def _start(target: _Target, table: _Starts, **options: Any) -> starts.Started:
    return starts.start(
        target,
        table,  # type: ignore[arg-type]  # the slot protocol of RunStarts, in memory
        job_name="import_lineup",
        run_config={},
        tags={"airwave/lineup": "x.json"},
        **options,
    )


def test_without_a_key_every_start_is_a_new_run() -> None:
    target, table = _Target(), _Starts()
    first, second = _start(target, table), _start(target, table)
    assert first.created and second.created
    assert first.run.run_id != second.run.run_id
    assert IDEMPOTENCY_TAG not in target.submitted[0] and not table.table


def test_a_key_returns_its_run_and_force_starts_another() -> None:
    target, table = _Target(), _Starts()
    first = _start(target, table, key="k")
    assert first.created and target.submitted[0][IDEMPOTENCY_TAG] == "k"
    again = _start(target, table, key="k")
    assert not again.created and again.run.run_id == first.run.run_id
    forced = _start(target, table, key="k", force=True)
    assert forced.created and forced.run.run_id != first.run.run_id
    assert table.table["k"] == forced.run.run_id  # the forced run is the key's run now


def test_a_run_tagged_with_the_key_counts_without_a_slot_row() -> None:
    """The upload sensor tags its runs with the key but records no slot."""
    target, table = _Target(), _Starts()
    sensor_run = target.add("sensor-run", "SUCCESS", tags={IDEMPOTENCY_TAG: "k"})
    again = _start(target, table, key="k")
    assert not again.created and again.run == sensor_run and not target.submitted


def test_a_failed_key_run_is_resumed_and_the_resume_becomes_the_keys_run() -> None:
    target, table = _Target(), _Starts()
    failed = target.add("failed", "FAILURE", tags={IDEMPOTENCY_TAG: "k"})
    table.table["k"] = failed.run_id
    resumed = _start(target, table, key="k")
    assert resumed.created and resumed.run.parent_run_id == "failed"
    assert target.reexecuted == [("failed", True)]
    assert table.table["k"] == resumed.run.run_id


def test_the_latest_run_of_the_tree_decides() -> None:
    """The key recorded the root; its resume succeeded: nothing to do."""
    target, table = _Target(), _Starts()
    target.add("root", "FAILURE", tags={IDEMPOTENCY_TAG: "k"})
    target.add("child", "SUCCESS", parent_run_id="root", tags={IDEMPOTENCY_TAG: "k"})
    table.table["k"] = "root"
    again = _start(target, table, key="k")
    assert not again.created and not target.reexecuted and not target.submitted


def test_a_failure_the_daemon_will_retry_is_left_to_it() -> None:
    target, table = _Target(daemon=True), _Starts()
    target.add("failed", "FAILURE", tags={IDEMPOTENCY_TAG: "k", starts.WILL_RETRY_TAG: "true"})
    again = _start(target, table, key="k")
    assert not again.created and not target.reexecuted


def test_without_a_daemon_a_dead_run_is_failed_and_resumed() -> None:
    target, table = _Target(daemon=False, dead={"dead"}), _Starts()
    target.add("dead", "STARTED", tags={IDEMPOTENCY_TAG: "k"})
    resumed = _start(target, table, key="k")
    assert resumed.created and target.reexecuted == [("dead", True)]


def test_with_a_daemon_a_start_leaves_the_health_check_to_it() -> None:
    """The daemon's run monitoring fails dead runs; the start returns the live-looking run."""
    target, table = _Target(daemon=True, dead={"dead"}), _Starts()
    target.add("dead", "STARTED", tags={IDEMPOTENCY_TAG: "k"})
    again = _start(target, table, key="k")
    assert not again.created and again.run.status == "STARTED"
    assert target.health_checks == 0


@pytest.mark.parametrize(
    ("status", "dead", "outcome"),
    [
        ("FAILURE", False, "resumed"),
        ("CANCELED", False, "resumed"),
        ("STARTED", True, "resumed"),
        ("STARTED", False, "wait for it to finish"),
        ("QUEUED", False, "wait for it to finish"),
        ("SUCCESS", False, "nothing to resume"),
    ],
)
def test_resume_by_status(status: str, dead: bool, outcome: str) -> None:
    target = _Target(daemon=True, dead={"r"} if dead else set())
    target.add("r", status)
    if outcome == "resumed":
        child = starts.resume(target, "r")
        assert child.parent_run_id == "r" and target.reexecuted == [("r", True)]
    else:
        with pytest.raises(starts.LaunchRefused, match=outcome):
            starts.resume(target, "r")
        assert not target.reexecuted


def test_resume_and_reexecute_of_a_missing_run_say_not_found() -> None:
    with pytest.raises(starts.RunNotFound, match="no run nope"):
        starts.resume(_Target(), "nope")
    with pytest.raises(starts.RunNotFound):
        starts.reexecute_all(_Target(), "nope")


def test_reexecute_needs_a_finished_run() -> None:
    target = _Target()
    target.add("live", "STARTED")
    with pytest.raises(starts.LaunchRefused, match="wait for it or cancel it"):
        starts.reexecute_all(target, "live")
    target.add("done", "SUCCESS")
    assert starts.reexecute_all(target, "done").parent_run_id == "done"
    assert target.reexecuted == [("done", False)]


def test_an_edited_config_reaches_the_target_both_ways() -> None:
    # What the target does with it (merge, validate, the rule) is tests/durability's and
    # tests/integration/test_reconfig_resume.py's; here: resume and reexecute pass it on.
    target = _Target()
    target.add("failed", "FAILURE")
    edit = {"execution": {"config": {"max_concurrent": 1}}}

    starts.resume(target, "failed", edit)
    starts.reexecute_all(target, "failed", edit)
    starts.resume(target, "failed")

    assert target.reexecuted == [("failed", True), ("failed", False), ("failed", True)]
    assert target.configs == [edit, edit, None]


@pytest.mark.parametrize("status", ["SUCCESS", "FAILURE", "CANCELED"])
def test_a_dry_run_never_answers_with_a_finished_run(status: str) -> None:
    """A dry-run after an import must answer for the database as it is now (issue 27, item 4)."""
    target, table = _Target(), _Starts()
    old = target.add("old", status, tags={IDEMPOTENCY_TAG: "k"})
    table.table["k"] = old.run_id
    again = _start(target, table, key="k", answers_now=True)
    assert again.created and again.run.run_id != "old" and again.run.parent_run_id is None
    assert not target.reexecuted and table.table["k"] == again.run.run_id


def test_a_dry_run_still_running_is_the_answer() -> None:
    target, table = _Target(daemon=True), _Starts()
    target.add("live", "STARTED", tags={IDEMPOTENCY_TAG: "k"})
    again = _start(target, table, key="k", answers_now=True)
    assert not again.created and again.run.run_id == "live" and not target.submitted


def test_a_canceled_key_run_is_resumed_not_returned() -> None:
    """Asking again after a cancel asks for the work (issue 27, item 2)."""
    target, table = _Target(), _Starts()
    target.add("canceled", "CANCELED", tags={IDEMPOTENCY_TAG: "k"})
    again = _start(target, table, key="k")
    assert again.created and again.run.parent_run_id == "canceled"
    assert target.reexecuted == [("canceled", True)]


def test_a_queued_key_run_nothing_takes_is_launched_by_the_start() -> None:
    target, table = _Target(daemon=True, unserved={"queued"}), _Starts()
    target.add("queued", "QUEUED", tags={IDEMPOTENCY_TAG: "k"})
    again = _start(target, table, key="k")
    assert target.taken == ["queued"] and not target.submitted
    assert not again.created and again.run.status == "STARTING"


def test_a_queued_key_run_the_daemon_serves_is_left_in_the_queue() -> None:
    target, table = _Target(daemon=True), _Starts()
    target.add("queued", "QUEUED", tags={IDEMPOTENCY_TAG: "k"})
    again = _start(target, table, key="k")
    assert not target.taken and again.run.status == "QUEUED"


def _acting_as(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, principal: str) -> None:
    monkeypatch.setenv(PERMISSIONS_ENV, str(write_three_principals(tmp_path, principal)))


def test_a_viewer_start_is_refused_before_anything_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _acting_as(tmp_path, monkeypatch, "viewer")
    target, table = _Target(), _Starts()
    with pytest.raises(starts.NotPermitted) as refused:
        _start(target, table, key="k")
    assert str(refused.value) == "permission denied: viewer may not runs:start:import_lineup"
    assert not target.runs and not table.table


def test_a_launchers_run_names_the_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _acting_as(tmp_path, monkeypatch, "launcher")
    target, table = _Target(), _Starts()
    started = _start(target, table, key="k")
    assert started.run.tags[STARTED_BY_TAG] == "launcher"
    assert started.run.tags["user"] == "launcher"


def test_a_resume_names_who_resumed_not_who_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _Target()
    target.add("r1", "FAILURE", tags={STARTED_BY_TAG: "launcher", "user": "launcher"})
    _acting_as(tmp_path, monkeypatch, "approver")  # may resume ai_lineup only
    with pytest.raises(starts.NotPermitted, match="approver may not runs:resume:import_lineup"):
        starts.resume(target, "r1")
    assert target.reexecuted == [] and target.health_checks == 0
    _acting_as(tmp_path, monkeypatch, "admin")
    resumed = starts.resume(target, "r1")
    assert resumed.tags[STARTED_BY_TAG] == "admin" and resumed.tags["user"] == "admin"


def test_without_a_permissions_file_the_local_operator_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PERMISSIONS_ENV, raising=False)
    target, table = _Target(), _Starts()
    assert _start(target, table).run.tags[STARTED_BY_TAG] == LOCAL_OPERATOR
