"""The permissions policy at work: reading the file, naming who submitted a run, refusing it.

The policy itself is pure (`airwave_dagster.domain.permissions`); this module reads the YAML file
`AIRWAVE_PERMISSIONS` names, declares each job's permissions, and tells who asked for a run:
the proxy-verified principal of a web request, the daemon for what sensors, schedules and retries
start, else the principal the CLI stamped from its OS user (docs/security.md).
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import yaml

from airwave_dagster.domain.permissions import (
    AUTOMATION_TOGGLE,
    DEFAULT_POLICY,
    SERVICE_PRINCIPAL,
    PermissionsError,
    Policy,
    approval_permission,
    parse_policy,
    run_permission,
)
from airwave_dagster.run_tags import (
    AI_LINEUP_JOB,
    ANSWER_APPROVAL_JOB,
    IMPORT_LINEUP_JOB,
    ROLLBACK_LINEUP_JOB,
    STARTED_BY_TAG,
)
from airwave_dagster.settings import Settings

if TYPE_CHECKING:
    from dagster._core.run_coordinator import SubmitRunContext

PRINCIPAL_HEADER = "X-Airwave-Principal"
"""The principal of a web request; set only by `airwave serve`'s proxy middleware."""
USER_TAG = "user"
"""Dagster's own tag for who launched a run (the UI shows it)."""

# Dagster's tags on runs its daemon creates (dagster._core.storage.tags; spelt here so the CLI,
# which imports this module, does not load Dagster for them).
_RETRY_TAG = "dagster/retry_number"
"""Set only by the daemon's automatic retries, and never inherited by a re-execution."""
_BACKFILL_TAG = "dagster/backfill"
"""A backfill's runs: the daemon submits them (inherited only by the backfill's own retries)."""
_DAEMON_TAGS = (
    "dagster/sensor_name",
    "dagster/schedule_name",
    "dagster/from_automation_condition",
)


@dataclass(frozen=True)
class JobPermissions:
    """The permissions a job's runs are checked against; `approve` only for gated jobs."""

    start: str
    resume: str
    cancel: str
    approve: str | None = None

    @classmethod
    def of(cls, job: str, *, approval_gate: bool = False) -> JobPermissions:
        """The permissions of `job`, with `approvals:resolve:<job>` when it has a gate."""
        return cls(
            start=run_permission("start", job),
            resume=run_permission("resume", job),
            cancel=run_permission("cancel", job),
            approve=approval_permission(job) if approval_gate else None,
        )

    def all(self) -> tuple[str, ...]:
        """Every permission declared for the job."""
        return tuple(p for p in (self.start, self.resume, self.cancel, self.approve) if p)


ASSET_JOB = "__ASSET_JOB"
"""Dagster's implicit job of the code location's assets (the UI's Materialize button)."""

JOB_PERMISSIONS: Mapping[str, JobPermissions] = MappingProxyType(
    {
        IMPORT_LINEUP_JOB: JobPermissions.of(IMPORT_LINEUP_JOB),
        AI_LINEUP_JOB: JobPermissions.of(AI_LINEUP_JOB, approval_gate=True),
        ROLLBACK_LINEUP_JOB: JobPermissions.of(ROLLBACK_LINEUP_JOB, approval_gate=True),
        # Its op also checks `approvals:resolve:<job>` of the run it answers (docs/security.md).
        ANSWER_APPROVAL_JOB: JobPermissions.of(ANSWER_APPROVAL_JOB),
        **{
            job: JobPermissions.of(job)
            for job in (
                "backfill_schedules",
                "extend_schedules",
                "repair_schedules",
                "prune_schedules",
                "follow_library",
                "refresh_library",
                "check_library_freshness",
                ASSET_JOB,
            )
        },
    }
)
"""Every job of the code location and its permissions; `definitions.py` refuses to load a job
missing here. The coordinator and the web side read it without loading the job code, which is
why the declarations are one table rather than attributes of the job objects."""


def declared_permissions() -> tuple[str, ...]:
    """Every permission the code location checks: the jobs' and `automation:toggle`."""
    return (*(p for jobs in JOB_PERMISSIONS.values() for p in jobs.all()), AUTOMATION_TOGGLE)


def check_declarations(job_names: Iterable[str], policy: Policy, *, location: str) -> None:
    """Refuse a code location with an undeclared job or a permission nobody can hold.

    Raises:
        PermissionsError: Naming each undeclared job, each unholdable permission, and each role
            permission matching nothing declared.
    """
    undeclared = sorted(set(job_names) - set(JOB_PERMISSIONS))
    if undeclared:
        raise PermissionsError(
            f"code location {location!r}",
            [
                f"job {job!r} declares no permissions (add it to JOB_PERMISSIONS in "
                "airwave_dagster/permissions.py)"
                for job in undeclared
            ],
        )
    declared = declared_permissions()
    policy.require_holdable(declared, where=f"code location {location!r}")
    policy.require_declared(declared, where=f"code location {location!r}")


def load_policy() -> Policy:
    """The policy of `AIRWAVE_PERMISSIONS`, or `DEFAULT_POLICY` when it is unset.

    Read once per version of the file: an edited file applies to the next check, the code
    location's own check only at its next load.

    Raises:
        PermissionsError: The file cannot be read or is invalid (naming the file and key path).
    """
    path = Settings.load().permissions
    if path is None:
        return DEFAULT_POLICY
    path = path.expanduser()
    try:
        stat = path.stat()
    except OSError as error:
        raise PermissionsError(str(path), [f"cannot read the file: {error.strerror}"]) from None
    return _read_policy(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _read_policy(path: str, _mtime_ns: int, _size: int) -> Policy:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise PermissionsError(path, [f"cannot read the file: {error.strerror}"]) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "the file"
        problem = getattr(error, "problem", None) or str(error)
        raise PermissionsError(path, [f"{where}: not YAML ({problem})"]) from None
    return parse_policy(data, source=path)


class PermissionDenied(Exception):
    """The policy does not give `principal` the `permission`; nothing was created or changed."""

    def __init__(self, principal: str, permission: str) -> None:
        self.principal = principal
        self.permission = permission
        super().__init__(f"permission denied: {principal} may not {permission}")


def require(policy: Policy, principal: str, permission: str) -> None:
    """Raise `PermissionDenied` unless the policy gives the principal the permission."""
    if not policy.allows(principal, permission):
        raise PermissionDenied(principal, permission)


def os_user() -> str:
    """The OS user running this process: the CLI's only identity."""
    return getpass.getuser()


def principal_of_identity(policy: Policy, identity: str) -> str:
    """The principal a user name acts as; an unmapped one is `unknown user 'name'` (no roles)."""
    principal = policy.principal_for(identity)
    return principal if principal is not None else f"unknown user {identity!r}"


def cli_principal(policy: Policy | None = None) -> str:
    """The principal of this CLI process: its OS user, mapped by the policy."""
    return principal_of_identity(policy or load_policy(), os_user())


def cli_require(permission: str) -> str:
    """Check the CLI's principal for `permission` before anything is created.

    Returns:
        The principal, to stamp on what the command creates.

    Raises:
        PermissionDenied: The policy does not give it.
    """
    policy = load_policy()
    principal = cli_principal(policy)
    require(policy, principal, permission)
    return principal


def started_by_tags(principal: str) -> dict[str, str]:
    """The tags naming who started a run: ours and Dagster's `user` (the UI shows it)."""
    return {STARTED_BY_TAG: principal, USER_TAG: principal}


def identify_submission(context: SubmitRunContext) -> str:
    """The principal that submitted a run.

    In order: the proxy's header (a web request; the middleware replaces whatever the browser
    sent). The daemon, for an automatic retry, and for a first run a sensor, schedule, backfill
    or automation condition created (a re-execution inherits those tags from its parent, so they
    say nothing about who re-executed it). The principal the CLI stamped. Else the OS user of
    the submitting process (a script calling Dagster's API).
    """
    header = context.get_request_header(PRINCIPAL_HEADER)
    if header:
        return header
    run = context.dagster_run
    tags = run.tags
    if _RETRY_TAG in tags or _BACKFILL_TAG in tags:
        return SERVICE_PRINCIPAL
    if run.parent_run_id is None and any(tag in tags for tag in _DAEMON_TAGS):
        return SERVICE_PRINCIPAL
    stamped = tags.get(STARTED_BY_TAG)
    if stamped:
        return stamped
    return principal_of_identity(load_policy(), os_user())


def submission_permission(job_name: str, *, reexecution: bool) -> str:
    """`runs:resume:<job>` for a re-execution (a parent run), else `runs:start:<job>`."""
    jobs = JOB_PERMISSIONS.get(job_name) or JobPermissions.of(job_name)
    return jobs.resume if reexecution else jobs.start


__all__ = [
    "JOB_PERMISSIONS",
    "PRINCIPAL_HEADER",
    "STARTED_BY_TAG",
    "JobPermissions",
    "PermissionDenied",
    "PermissionsError",
    "Policy",
    "identify_submission",
    "load_policy",
]
