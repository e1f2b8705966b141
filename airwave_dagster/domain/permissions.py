"""Who may start, resume, cancel and approve which job: the permissions policy (docs/security.md).

A policy has roles (named lists of permissions), principals (who acts, each holding roles) and
identities (the user names the CLI and the web proxy see, each mapped to a principal). It is pure
data: reading the YAML file, asking Dagster who submitted a run and refusing the run belong to
`airwave_dagster.permissions`.

Permissions are colon-separated strings: `runs:start:<job>`, `runs:resume:<job>`,
`runs:cancel:<job>`, `approvals:resolve:<job>` and `automation:toggle`. A role may end one with
a `*` segment, which stands for any one or more segments (`runs:start:*`, `runs:*`, `*`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

SERVICE_PRINCIPAL = "airwave-daemon"
"""The principal of runs the daemon starts: sensor ticks, schedules, automatic retries."""
LOCAL_OPERATOR = "local-operator"
"""The one person of the default policy (no permissions file): may do everything."""
WILDCARD = "*"
ANY_IDENTITY = "*"
"""An `identities` key that maps every user name not listed otherwise."""

RUN_ACTIONS = ("start", "resume", "cancel")
"""The `runs:<action>:<job>` actions; `approvals:resolve:<job>` exists for gated jobs only."""
AUTOMATION_TOGGLE = "automation:toggle"
"""Turning sensors and schedules on or off (one permission for the whole code location)."""
_SHAPES = (
    *(("runs", action, "<job>") for action in RUN_ACTIONS),
    ("approvals", "resolve", "<job>"),
    ("automation", "toggle"),
)
_TOP_KEYS = ("roles", "principals", "identities")


def run_permission(action: str, job: str) -> str:
    """`runs:<action>:<job>`, the permission to start, resume or cancel a job's runs."""
    return f"runs:{action}:{job}"


def approval_permission(job: str) -> str:
    """`approvals:resolve:<job>`, the permission to approve or reject a job's gate."""
    return f"approvals:resolve:{job}"


class PermissionsError(ValueError):
    """A permissions file cannot be used; each line names the file and the key path at fault."""

    def __init__(self, source: str, problems: Iterable[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__(
            f"invalid permissions ({source}):\n" + "\n".join(f"  {p}" for p in self.problems)
        )


def matches(pattern: str, permission: str) -> bool:
    """Whether a role's permission (maybe ending in `*`) covers a concrete permission."""
    head, _, last = pattern.rpartition(":")
    if last != WILDCARD:
        return pattern == permission
    if not head:
        return True
    # `runs:*` covers `runs:start:x` but not `runs` itself, nor `runsx:...`.
    return permission.startswith(head + ":")


def _shape_problem(permission: str) -> str | None:
    """Why a role's permission can never match anything the project checks, or None."""
    segments = permission.split(":")
    if any(not segment for segment in segments):
        return "has an empty segment"
    if WILDCARD in segments[:-1] or any(
        WILDCARD in segment and segment != WILDCARD for segment in segments
    ):
        return "may use `*` only as its whole last segment"
    concrete = segments[:-1] if segments[-1] == WILDCARD else segments
    for shape in _SHAPES:
        if segments[-1] == WILDCARD and len(concrete) >= len(shape):
            continue
        if segments[-1] != WILDCARD and len(concrete) != len(shape):
            continue
        if all(want == "<job>" or want == got for want, got in zip(shape, concrete, strict=False)):
            return None
    return "is not a permission (" + ", ".join(":".join(shape) for shape in _SHAPES) + ")"


@dataclass(frozen=True)
class Policy:
    """Roles, the principals holding them and the user names that are those principals.

    Attributes:
        roles: Role name → its permissions (each maybe ending in `*`).
        principals: Principal name → the roles it holds.
        identities: User name → principal; `*` maps every name not listed. A name listed
            nowhere is the principal of the same name, if there is one.
        source: Where the policy came from (a file path), named in every error.
    """

    roles: Mapping[str, tuple[str, ...]]
    principals: Mapping[str, tuple[str, ...]]
    identities: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    source: str = "<policy>"

    def allows(self, principal: str, permission: str) -> bool:
        """Whether the principal holds the permission through any of its roles."""
        return any(
            matches(pattern, permission)
            for role in self.principals.get(principal, ())
            for pattern in self.roles.get(role, ())
        )

    def principal_for(self, identity: str) -> str | None:
        """The principal a user name (OS user, proxy-verified user) acts as; None: nobody."""
        if identity in self.identities:
            return self.identities[identity]
        if identity in self.principals:
            return identity
        return self.identities.get(ANY_IDENTITY)

    def holdable(self, permission: str) -> bool:
        """Whether some role grants the permission."""
        return any(matches(p, permission) for grants in self.roles.values() for p in grants)

    def require_holdable(self, permissions: Iterable[str], *, where: str) -> None:
        """Refuse declared permissions that no role grants (nobody could ever do that).

        Args:
            permissions: The permissions the code declares.
            where: What declares them, named in the error (the code location).

        Raises:
            PermissionsError: Naming each permission no role can hold.
        """
        problems = [
            f"{where}: permission {permission!r} is declared but no role in roles grants it"
            for permission in dict.fromkeys(permissions)
            if not self.holdable(permission)
        ]
        if problems:
            raise PermissionsError(self.source, problems)

    def require_declared(self, permissions: Iterable[str], *, where: str) -> None:
        """Refuse role permissions that match nothing declared (a misspelt job, a removed one).

        Args:
            permissions: Every permission the code declares.
            where: What declares them, named in the error (the code location).

        Raises:
            PermissionsError: Naming the key path of each role permission that matches nothing.
        """
        declared = list(permissions)
        problems = [
            f"roles.{role}[{index}]: {pattern!r} matches no permission {where} declares"
            for role, grants in self.roles.items()
            for index, pattern in enumerate(grants)
            if not any(matches(pattern, permission) for permission in declared)
        ]
        if problems:
            raise PermissionsError(self.source, problems)


def _names(value: object, path: str, problems: list[str]) -> tuple[str, ...]:
    """A list of non-empty strings at `path`, else a problem and nothing."""
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{path}: expected a list of names, got {type(value).__name__}")
        return ()
    names: list[str] = []
    for index, item in enumerate(value):
        if isinstance(item, str) and item.strip():
            names.append(item.strip())
        else:
            problems.append(f"{path}[{index}]: expected a non-empty string, got {item!r:.80}")
    return tuple(names)


def _section(data: Mapping[object, object], key: str, problems: list[str]) -> dict[str, object]:
    """The mapping under a top-level key, keyed by non-empty strings."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{key}: expected a mapping, got {type(value).__name__}")
        return {}
    section: dict[str, object] = {}
    for name, item in value.items():
        if isinstance(name, str) and name.strip():
            section[name.strip()] = item
        else:
            problems.append(f"{key}: {name!r:.80} is not a name")
    return section


def parse_policy(data: object, *, source: str) -> Policy:
    """Validate a permissions document (the YAML file, already parsed) into a `Policy`.

    Every problem is collected, so one refusal lists them all.

    Args:
        data: The parsed document: a mapping with `roles`, `principals` and `identities`.
        source: Where it came from, named in every error.

    Raises:
        PermissionsError: Naming the key path of each problem.
    """
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise PermissionsError(source, [f"expected a mapping with {', '.join(_TOP_KEYS)}"])
    problems.extend(
        f"{key!r:.80}: unknown key (expected {', '.join(_TOP_KEYS)})"
        for key in data
        if key not in _TOP_KEYS
    )
    if "principals" not in data:
        problems.append("principals: missing (nobody could do anything)")
    roles: dict[str, tuple[str, ...]] = {}
    for name, value in _section(data, "roles", problems).items():
        grants = _names(value, f"roles.{name}", problems)
        for index, permission in enumerate(grants):
            problem = _shape_problem(permission)
            if problem is not None:
                problems.append(f"roles.{name}[{index}]: {permission!r:.80} {problem}")
        roles[name] = grants
    principals: dict[str, tuple[str, ...]] = {}
    for name, value in _section(data, "principals", problems).items():
        held = _names(value, f"principals.{name}", problems)
        for index, role in enumerate(held):
            if role not in roles:
                known = ", ".join(sorted(roles)) or "none"
                problems.append(
                    f"principals.{name}[{index}]: unknown role {role!r} (roles: {known})"
                )
        principals[name] = held
    identities: dict[str, str] = {}
    for name, value in _section(data, "identities", problems).items():
        if not isinstance(value, str) or value not in principals:
            problems.append(f"identities.{name}: {value!r:.80} is not a principal in principals")
        else:
            identities[name] = value
    if problems:
        raise PermissionsError(source, problems)
    return Policy(
        roles=MappingProxyType(roles),
        principals=MappingProxyType(principals),
        identities=MappingProxyType(identities),
        source=source,
    )


DEFAULT_POLICY = parse_policy(
    {
        "roles": {"admin": [WILDCARD]},
        "principals": {LOCAL_OPERATOR: ["admin"], SERVICE_PRINCIPAL: ["admin"]},
        "identities": {ANY_IDENTITY: LOCAL_OPERATOR},
    },
    source="the default policy (AIRWAVE_PERMISSIONS unset)",
)
"""No permissions file: the single-user demo, where whoever runs `airwave` may do everything."""
