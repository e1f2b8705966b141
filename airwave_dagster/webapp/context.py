"""Dagster's per-request permission map, from the request's principal and the policy.

Dagster's webserver asks its request context `permissions` / `permissions_for_location` for
every action: the UI greys out a button whose permission is off, and every GraphQL mutation
checks the same map before it acts (a request that bypasses the UI is refused the same way).
Dagster's map is coarse (one "launch" for every job); the policy is per job. A coarse entry is
on when the principal holds the permission for at least one job; the run coordinator then
checks the job itself (`airwave_dagster.permissions`), so a launcher of `import_lineup` sees the
Launchpad of `ai_lineup` but its run is refused before it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dagster._core.workspace.context import WorkspaceProcessContext, WorkspaceRequestContext
from dagster._core.workspace.permissions import (
    LOCATION_SCOPED_PERMISSIONS,
    PermissionResult,
    Permissions,
)

from airwave_dagster.domain.permissions import AUTOMATION_TOGGLE, WILDCARD, Policy
from airwave_dagster.permissions import PRINCIPAL_HEADER, JobPermissions
from airwave_dagster.webapp.identity import ANONYMOUS

EVERYTHING = WILDCARD
"""Dagster actions no job declares (delete a run, wipe assets, report events, edit partitions and
concurrency limits, backfills): only a principal holding every permission (a role granting `*`)
may do them. A backfill's runs are submitted by the daemon as its service principal, so launching
one is an administrator's decision, not a launcher's."""
ADMIN_ONLY = (
    Permissions.DELETE_PIPELINE_RUN,
    Permissions.LAUNCH_PARTITION_BACKFILL,
    Permissions.CANCEL_PARTITION_BACKFILL,
    Permissions.WIPE_ASSETS,
    Permissions.REPORT_RUNLESS_ASSET_EVENTS,
    Permissions.EDIT_DYNAMIC_PARTITIONS,
    Permissions.EDIT_CONCURRENCY_LIMIT,
    Permissions.REFRESH_COMPONENT_STATE,
)

_AUTOMATION = (
    Permissions.START_SCHEDULE,
    Permissions.STOP_RUNNING_SCHEDULE,
    Permissions.SCHEDULE_DRY_RUN,
    Permissions.EDIT_SENSOR,
    Permissions.SENSOR_DRY_RUN,
    Permissions.UPDATE_SENSOR_CURSOR,
    Permissions.TOGGLE_AUTO_MATERIALIZE,
)
_EVERYONE = (Permissions.RELOAD_REPOSITORY_LOCATION, Permissions.RELOAD_WORKSPACE)
"""Reloading re-reads the code server's definitions: no state changes, and the supervisor of
`airwave serve` reloads the location after a code server restart without any identity."""


def granted(
    policy: Policy, principal: str, jobs: Mapping[str, JobPermissions]
) -> dict[str, PermissionResult]:
    """Dagster's whole permission map for `principal`, each refusal naming what it lacks."""

    def any_job(pick: Callable[[JobPermissions], str]) -> tuple[bool, str]:
        needed = sorted({pick(declared) for declared in jobs.values()})
        return any(policy.allows(principal, p) for p in needed), " or ".join(needed)

    rules: dict[str, tuple[bool, str]] = {
        Permissions.LAUNCH_PIPELINE_EXECUTION: any_job(lambda d: d.start),
        Permissions.LAUNCH_PIPELINE_REEXECUTION: any_job(lambda d: d.resume),
        Permissions.TERMINATE_PIPELINE_EXECUTION: any_job(lambda d: d.cancel),
    }
    toggle = policy.allows(principal, AUTOMATION_TOGGLE)
    rules |= {permission: (toggle, AUTOMATION_TOGGLE) for permission in _AUTOMATION}
    admin = policy.allows(principal, EVERYTHING)
    rules |= {permission: (admin, "every permission (`*`)") for permission in ADMIN_ONLY}
    rules |= {permission: (True, "") for permission in _EVERYONE}
    result = {}
    for permission in Permissions:
        # Dagster+ only (UI-managed components): off, as in Dagster's own open-source map.
        enabled, needed = rules.get(permission, (False, "Dagster+"))
        reason = None if enabled else f"{principal} does not hold {needed} (docs/security.md)"
        result[str(permission)] = PermissionResult(enabled=enabled, disabled_reason=reason)
    return result


def request_principal(source: object | None) -> str:
    """The principal the identity middleware wrote on the request; `ANONYMOUS` without one."""
    headers: Any = getattr(source, "headers", None)
    value = headers.get(PRINCIPAL_HEADER) if headers is not None else None
    return str(value) if value else ANONYMOUS


class PrincipalRequestContext(WorkspaceRequestContext):
    """A request context whose permission map is the request principal's."""

    def __init__(self, *, grants: Mapping[str, PermissionResult], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._grants = dict(grants)

    @property
    def permissions(self) -> Mapping[str, PermissionResult]:
        return self._grants

    def permissions_for_location(self, *, location_name: str) -> Mapping[str, PermissionResult]:
        return {p: r for p, r in self._grants.items() if p in LOCATION_SCOPED_PERMISSIONS}


class PrincipalProcessContext(WorkspaceProcessContext):
    """Dagster's workspace process context, making one `PrincipalRequestContext` per request.

    `policy` is asked on every request (`load_policy` re-reads the file only when it changed), so
    an edited permissions file applies to the next request.
    """

    def __init__(
        self,
        *args: Any,
        policy: Callable[[], Policy],
        jobs: Mapping[str, JobPermissions],
        **kwargs: Any,
    ) -> None:
        self._policy = policy
        self._jobs = jobs
        super().__init__(*args, **kwargs)

    def create_request_context(self, source: object | None = None) -> WorkspaceRequestContext:
        principal = request_principal(source)
        return PrincipalRequestContext(
            grants=granted(self._policy(), principal, self._jobs),
            instance=self.instance,
            current_workspace=self.get_current_workspace(),
            process_context=self,
            version=self.version,
            source=source,
            read_only=False,
        )
