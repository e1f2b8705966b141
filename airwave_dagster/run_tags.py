"""Names more than one module must agree on: run tags, job, op and asset names, idempotency keys.

Each string here has exactly one owner. The CLI, the sensors, the ops and the Dagster instance
plug-ins import it from this module instead of spelling it again, so a rename cannot leave one
of them behind. Nothing here imports anything of the project: every layer may depend on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

JOB_TAG = "airwave/job"
"""The job a run belongs to, as the project names it (set on every job of this code location)."""
REPORT_OP_TAG = "airwave/report_op"
"""The op whose stored output is the run's report (see `resources.io_manager.stored_report`)."""
CODE_VERSION_TAG = "airwave/code_version"
"""Op tag carrying the op's code version; Dagster keeps op tags in the run's job snapshot."""
IDEMPOTENCY_TAG = "airwave/idempotency_key"
"""Starts with the same key return the existing run instead of creating another."""
CANCEL_REASON_TAG = "airwave/cancel_reason"
RESUMED_FROM_TAG = "airwave/resumed_from"
ADDED_STEPS_TAG = "airwave/resume_added_steps"
CONFIG_CHANGED_TAG = "airwave/config_changed"
"""On a re-execution started with edited config: the config paths it changed, comma-separated."""
LINEUP_TAG = "airwave/lineup"
"""The lineup file's name, shown by `airwave runs list` and the UI."""
DRY_RUN_TAG = "airwave/dry_run"
LINEUP_SHA256_TAG = "airwave/lineup_sha256"
PROVIDER_TAG = "airwave/provider"
LIMIT_TAG = "airwave/limit"
AWAITING_APPROVAL_TAG = "airwave/awaiting_approval"
"""Set by an approval gate on the run it stopped (the gate id), then to the answer once given."""
STATUS_TAG = "airwave/status"
"""`AWAITING_APPROVAL` on a run an approval gate stopped (the run is SUSPENDED, see
airwave_dagster/suspension.py), then the interrupt's answer (`approved`, `rejected`,
`canceled`)."""
AWAITING_APPROVAL = "awaiting-approval"
STARTED_BY_TAG = "airwave/started_by"
"""The principal who asked for a run (CLI: its OS user mapped by the permissions policy;
web: the proxy-verified user; the daemon: `airwave-daemon`). Dagster's `user` tag says the same."""
TRACEPARENT_TAG = "airwave/traceparent"
"""The W3C traceparent of whatever started the run; its resumes join that trace (tracing.py)."""
TRACE_EXPORTED_TAG = "airwave/trace_exported"
"""The run id, set by the run worker that exported that run's span (a re-execution copies its
parent's tags, hence the id); a resume records a dead run's span itself."""
APPROVAL_TAG = "airwave/approval"
"""The `ai_lineup` approval policy a run was started with (`airwave lineup --approval`)."""

IMPORT_LINEUP_JOB = "import_lineup"
AI_LINEUP_JOB = "ai_lineup"
ROLLBACK_LINEUP_JOB = "rollback_lineup"
ANSWER_APPROVAL_JOB = "answer_approval"
"""Approves or rejects a stopped run from the UI's Launchpad (ops/approval_answer.py)."""
PLAN_IMPORT_OP = "plan_import_lineup"
"""The import's first op: run config for an import (CLI, sensor) is addressed to it."""
SUMMARIZE_IMPORT_OP = "summarize_import"
REPORT_LINEUP_OP = "report_lineup"
APPROVE_LINEUP_OP = "approve_lineup"
"""The `ai_lineup` approval gate (its stored output is the decision and the diff)."""
ANALYZE_LIBRARY_OP = "analyze_library"
"""The AI lineup's first op: its run config carries the whole run's settings."""

PLEX_LIBRARY_ASSET = "plex_library"
LIBRARY_PROFILE_ASSET = "library_profile"
AI_LINEUP_ASSET = "ai_lineup"


def import_key(
    content: bytes, *, dry_run: bool = False, select: Iterable[int] | None = None
) -> str:
    """The default idempotency key of an import: its content and what it was asked to do.

    The CLI and the upload sensor both use it, so dropping a file into the inbox and running
    `airwave import` on the same file find the same run.

    Args:
        content: The lineup file's bytes.
        dry_run: Whether the import writes nothing.
        select: The file channel numbers asked for; None means every channel.

    Returns:
        `import_lineup:<sha256>:<write|dry-run>:<numbers|all>`.
    """
    return import_key_of_digest(hashlib.sha256(content).hexdigest(), dry_run=dry_run, select=select)


def import_key_of_digest(
    digest: str, *, dry_run: bool = False, select: Iterable[int] | None = None
) -> str:
    """`import_key` for content whose SHA-256 hex digest is already known."""
    selection = ",".join(map(str, sorted(select))) if select is not None else "all"
    return f"{IMPORT_LINEUP_JOB}:{digest}:{'dry-run' if dry_run else 'write'}:{selection}"


ATTACHED_MAINTENANCE_OFF = (
    "off in attached mode: Airwave's own server keeps every channel's schedule and its library "
    "rows (its schedule and library jobs run against every channel); running this project's "
    "as well would make two maintainers of the same rows (docs/attached.md)"
)
"""Why maintenance, library refreshes and the follow-library sensor do nothing when attached."""
