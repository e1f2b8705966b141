"""Starting, resuming and re-executing runs, the same way whoever takes them.

A run is taken either by a webserver of this home (`airwave dev` / `airwave serve`, over its
GraphQL API: the run id comes back at once) or by a code server the command starts itself (about
10 s more, but no service needs to be running). Both are a `Target`; what a start means — the
idempotency key's run is returned, a dead or failed one resumed, `--force` starts another — is
decided once, here, for both.

This module imports no Dagster: a command that finds a webserver answers without loading it
(README, "Using it"). The webserver target lives in `webserver`, the code-server target in
`launcher` (which loads Dagster), and `console.target_for` picks one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from airwave_dagster import tracing
from airwave_dagster.domain.permissions import run_permission
from airwave_dagster.permissions import PermissionDenied, cli_require, started_by_tags
from airwave_dagster.run_tags import IDEMPOTENCY_TAG, TRACEPARENT_TAG

if TYPE_CHECKING:
    from resources.run_starts import RunStarts

FINISHED = frozenset({"SUCCESS", "FAILURE", "CANCELED"})
RESUMABLE = frozenset({"FAILURE", "CANCELED", "SUSPENDED"})
"""Failed, canceled, or suspended at an approval gate (durability/resume.py's `RESUMABLE`)."""
WILL_RETRY_TAG = "dagster/will_retry"
_KEY_LIMIT = 200
"""Dagster tag values are short; longer keys are cut (the slot table keeps the whole key)."""


class LaunchRefused(Exception):
    """A start, resume or cancel that cannot proceed, with a message for the user."""


class RunNotFound(LaunchRefused):
    """The run named does not exist in this instance."""


class ConfigInvalid(LaunchRefused):
    """A re-execution's edited run config does not validate against the job's schema."""


class NotPermitted(LaunchRefused):
    """The permissions policy does not give this command's principal what it asks (exit 4)."""


def authorize(action: str, job_name: str) -> dict[str, str]:
    """Check `runs:<action>:<job>` for the CLI's principal before anything is created.

    Returns:
        The tags naming the principal, for the run the command creates (docs/security.md).

    Raises:
        NotPermitted: Naming the principal and the permission; nothing was written.
    """
    try:
        return started_by_tags(cli_require(run_permission(action, job_name)))
    except PermissionDenied as denied:
        raise NotPermitted(str(denied)) from None


@dataclass(frozen=True)
class RunInfo:
    """What a start needs to know of a run, from either target."""

    run_id: str
    status: str
    job_name: str
    parent_run_id: str | None = None
    created: float = 0.0
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_finished(self) -> bool:
        """Whether the run reached SUCCESS, FAILURE or CANCELED."""
        return self.status in FINISHED

    @property
    def in_progress(self) -> bool:
        """Whether a worker should be executing it now (not queued, not finished)."""
        return self.status in ("STARTING", "STARTED", "CANCELING")


class Target(Protocol):
    """Whoever takes runs for this command: a running webserver, or a code server of its own."""

    def run(self, run_id: str) -> RunInfo | None:
        """The run, or None when the instance has no such run."""
        ...

    def tagged(self, key: str) -> RunInfo | None:
        """The newest run tagged with idempotency key `key` (the upload sensor tags its runs)."""
        ...

    def tree(self, run_id: str) -> list[RunInfo]:
        """Every run of `run_id`'s group: its root, re-executions and theirs."""
        ...

    def submit(
        self, job_name: str, run_config: Mapping[str, object], tags: Mapping[str, str]
    ) -> str:
        """Start a new run of `job_name`; its id. Raises `LaunchRefused` with the reason."""
        ...

    def reexecute(
        self,
        run_id: str,
        *,
        from_failure: bool,
        config: Mapping[str, object] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """The complete from-failure resume of `run_id`, or all its steps again; the new id.

        `tags` are set on the new run over those it inherits (who started it).

        `config` is a partial run config merged over the parent's (docs/durability.md,
        "Re-execution with edited config"): `ConfigInvalid` when the result does not validate,
        `LaunchRefused` naming the path when a replayed step already used a changed value.
        """
        ...

    def fail_if_dead(self, run: RunInfo) -> RunInfo:
        """The run, marked FAILURE first when it is in progress but its worker is gone."""
        ...

    def daemon_running(self) -> bool:
        """Whether a daemon serves the run queue and run retries."""
        ...

    def take_if_unserved(self, run_id: str) -> str | None:
        """Launch the queued run `run_id` from this command when nothing takes queued runs.

        Returns:
            Why the queue was judged unserved, when this command launched the run; else None.
        """
        ...


@dataclass(frozen=True)
class Started:
    """The run a start ended with, and whether this start created it (new or a resume)."""

    run: RunInfo
    created: bool


def latest_in_tree(target: Target, run: RunInfo) -> RunInfo:
    """The most recently created run of `run`'s tree: the one whose outcome is the key's."""
    return max(target.tree(run.run_id) or [run], key=lambda candidate: candidate.created)


def resume(target: Target, run_id: str, config: Mapping[str, object] | None = None) -> RunInfo:
    """Resume a failed or canceled run (a dead in-progress one is marked failed first).

    With `config`, a partial run config merged over the run's (`Target.reexecute`).

    Raises:
        RunNotFound: No such run.
        LaunchRefused: It succeeded, or is still queued or running.
    """
    parent = target.run(run_id)
    if parent is None:
        raise RunNotFound(f"no run {run_id}")
    stamp = authorize("resume", parent.job_name)
    parent = target.fail_if_dead(parent)
    if parent.status not in RESUMABLE:
        hint = (
            "it finished; nothing to resume"
            if parent.status == "SUCCESS"
            else "wait for it to finish, or cancel it first (`airwave runs cancel`)"
        )
        raise LaunchRefused(f"run {run_id} is {parent.status}: {hint}")
    return _reexecuted(target, parent, config, stamp, from_failure=True)


def reexecute_all(
    target: Target, run_id: str, config: Mapping[str, object] | None = None
) -> RunInfo:
    """Run every step of a finished run's job again with its config (nothing replayed).

    With `config`, a partial run config merged over the run's: any valid change is allowed,
    since no step's output is replayed.
    """
    parent = target.run(run_id)
    if parent is None:
        raise RunNotFound(f"no run {run_id}")
    stamp = authorize("resume", parent.job_name)
    if not parent.is_finished:
        raise LaunchRefused(f"run {run_id} is {parent.status}: wait for it or cancel it")
    return _reexecuted(target, parent, config, stamp, from_failure=False)


def _reexecuted(
    target: Target,
    parent: RunInfo,
    config: Mapping[str, object] | None,
    stamp: Mapping[str, str],
    *,
    from_failure: bool,
) -> RunInfo:
    """The re-execution of `parent` (from its failure, or all of it), created and submitted.

    It joins the root run's trace: the root's traceparent tag is copied to every re-execution.
    """
    verb = "resume" if from_failure else "reexecute"
    with tracing.starting(
        f"{verb} {parent.job_name}",
        {"airwave.run.parent_id": parent.run_id},
        join=parent.tags.get(TRACEPARENT_TAG),
    ):
        return _created(
            target,
            target.reexecute(parent.run_id, from_failure=from_failure, config=config, tags=stamp),
        )


def start(
    target: Target,
    starts: RunStarts,
    *,
    job_name: str,
    run_config: Mapping[str, object],
    tags: Mapping[str, str],
    key: str | None = None,
    force: bool = False,
    answers_now: bool = False,
) -> Started:
    """Start a run, or with `key` return (or resume) the run that key already has.

    An advisory lock on the key serialises concurrent starts, so simultaneous starts with one key
    create exactly one run. A key whose latest run failed (a dead worker, Plex down) or was
    canceled is resumed, unless the daemon said it will retry it itself; successful, queued and
    running runs are returned as they are, and a queued one that nothing takes is launched by
    this command (`Target.take_if_unserved`). `force` starts another run and makes it the key's
    run.

    `answers_now` is for runs whose worth is their answer about the database as it is now (a
    dry-run): only a run of the key still queued or running is returned; after it finished, in
    any state, the next start is a new run, never a replay of an old answer.

    The CLI's principal must hold `runs:start:<job>` (and `runs:resume:<job>` when the key's
    run is resumed); `NotPermitted` before anything is created otherwise.
    """
    tags = {**tags, **authorize("start", job_name)}
    with tracing.starting(f"start {job_name}", {"airwave.run.job": job_name}) as traced:
        return _start(
            target, starts, job_name, run_config, {**tags, **traced}, key, force, answers_now
        )


def _start(
    target: Target,
    starts: RunStarts,
    job_name: str,
    run_config: Mapping[str, object],
    tags: Mapping[str, str],
    key: str | None,
    force: bool,
    answers_now: bool,
) -> Started:
    if key is None:
        return Started(_created(target, target.submit(job_name, run_config, tags)), True)
    with starts.slot(key) as slot:
        if not force:
            recorded = slot.recorded_run_id()
            existing = (target.run(recorded) if recorded else None) or target.tagged(key)
            if existing is not None:
                latest = latest_in_tree(target, existing)
                if not target.daemon_running():
                    # A daemon's run monitoring marks dead runs failed itself (every 5 s); here
                    # nothing else would, and it costs loading Dagster.
                    latest = target.fail_if_dead(latest)
                if latest.status == "QUEUED":
                    target.take_if_unserved(latest.run_id)
                    return Started(target.run(latest.run_id) or latest, False)
                if answers_now:
                    if not latest.is_finished:
                        return Started(latest, False)
                elif _resumable_by_start(target, latest):
                    resumed = resume(target, latest.run_id)
                    slot.record(resumed.run_id, job_name)
                    return Started(resumed, True)
                else:
                    return Started(existing, False)
        run_id = target.submit(job_name, run_config, {**tags, IDEMPOTENCY_TAG: key[:_KEY_LIMIT]})
        slot.record(run_id, job_name)
    return Started(_created(target, run_id), True)


def _resumable_by_start(target: Target, run: RunInfo) -> bool:
    if run.status == "CANCELED":
        return True  # asking again after a cancel asks for the work, not for the canceled run
    if run.status != "FAILURE":
        return False
    return not (run.tags.get(WILL_RETRY_TAG) == "true" and target.daemon_running())


def _created(target: Target, run_id: str) -> RunInfo:
    run = target.run(run_id)
    if run is None:  # the target just created it: its storage must have it
        raise LaunchRefused(f"run {run_id} was created but cannot be read back")
    return run
