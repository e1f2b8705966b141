"""Op code versions recorded on every run, and the refusal of a re-execution whose ops changed.

Every op of this project declares a code version and mirrors it into the op tag
`airwave/code_version` (Dagster persists op tags in the run's job snapshot, not code versions;
docs/dagster-notes.md Q7). A re-execution replays the parent run's stored outputs, which is
only sound if the ops that produced them and the ops that will consume them are the same code.
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg
from dagster._core.snap import JobSnap

from airwave_dagster.run_tags import CODE_VERSION_TAG


class CodeVersionChanged(dg.DagsterInvariantViolationError):
    """A re-execution was refused because op code versions differ from the parent run's."""


def op_code_versions(snapshot: JobSnap) -> dict[str, str | None]:
    """Op name → declared code version (None for an op without one) in a job snapshot."""
    return {
        op.name: op.tags.get(CODE_VERSION_TAG) for op in snapshot.node_defs_snapshot.op_def_snaps
    }


def version_changes(
    parent: Mapping[str, str | None], current: Mapping[str, str | None]
) -> list[str]:
    """Human-readable differences, one per op, in op-name order (empty when none)."""
    changes = []
    for name in sorted(set(parent) | set(current)):
        if name in parent and name in current and parent[name] == current[name]:
            continue
        before = parent.get(name) or "(no version)" if name in parent else "(no such op)"
        after = current.get(name) or "(no version)" if name in current else "(op removed)"
        changes.append(f"op {name!r} was {before} in the parent run and is {after} now")
    return changes


def refuse_if_changed(
    instance: dg.DagsterInstance, parent_run: dg.DagsterRun, current: JobSnap
) -> None:
    """Raise `CodeVersionChanged` if the job's ops differ from those that ran `parent_run`."""
    if parent_run.job_snapshot_id is None:
        return
    parent_snapshot = instance.get_job_snapshot(parent_run.job_snapshot_id)
    changes = version_changes(op_code_versions(parent_snapshot), op_code_versions(current))
    if changes:
        raise CodeVersionChanged(
            f"Refusing to re-execute run {parent_run.run_id} of {parent_run.job_name}: the code "
            f"changed since it ran ({'; '.join(changes)}). Its stored outputs were made by the "
            "old code and cannot be trusted by the new one; start a new run instead."
        )
