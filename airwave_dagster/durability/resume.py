"""Complete resume: re-execute everything a failed run left undone, and nothing it finished.

Dagster's "from failure" re-execution retries failed and interrupted steps but silently skips
mapped steps that never started (dagster-io/dagster#20925): after a crash mid fan-out a run can
end SUCCESS with channels missing. Here the step selection is completed from the run tree:

1. Dagster's own from-failure selection (failed, interrupted and never-reached static steps);
2. plus, for every mapped step, each mapping key its dynamic output produced (in the parent or an
   ancestor run) whose mapped step has no output anywhere in the tree;
3. plus everything downstream of the added steps.

The run is then created exactly as Dagster's own re-execution creates it (same tags, parent/root
ids, remote origin), so it is an ordinary re-execution in the UI. Completed steps' outputs are
loaded from the run that produced them through the Postgres IO manager; nothing done is redone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import dagster as dg
from dagster._core.errors import DagsterInvalidSubsetError
from dagster._core.execution.plan.state import KnownExecutionState, PastExecutionState
from dagster._core.remote_representation.code_location import CodeLocation
from dagster._core.remote_representation.external import RemoteExecutionPlan, RemoteJob
from dagster._core.storage.tags import (
    PARENT_RUN_ID_TAG,
    RESUME_RETRY_TAG,
    ROOT_RUN_ID_TAG,
    TAGS_TO_MAYBE_OMIT_ON_RETRY,
)
from dagster._core.workspace.context import BaseWorkspaceRequestContext

from airwave_dagster.durability.reconfig import changed_tag, check_change, merge, validate
from airwave_dagster.durability.versions import refuse_if_changed
from airwave_dagster.run_tags import ADDED_STEPS_TAG, CONFIG_CHANGED_TAG, RESUMED_FROM_TAG

UNRESOLVED_SUFFIX = "[?]"
RESUMABLE = frozenset(
    {dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.SUSPENDED}
)
"""Statuses a run can be resumed from: failed, canceled, or suspended at an approval gate."""


def _produced_step_keys(state: PastExecutionState | None) -> set[str]:
    """Step keys with a stored output in this run or any of its ancestors."""
    keys: set[str] = set()
    while state is not None:
        keys.update(handle.step_key for handle in state.produced_outputs)
        state = cast("PastExecutionState | None", state.parent_state)
    return keys


def complete_selection(
    instance: dg.DagsterInstance, parent_run: dg.DagsterRun
) -> tuple[list[str], list[str], KnownExecutionState]:
    """(steps to execute, steps Dagster's own from-failure would have missed, known state)."""
    # Dagster's selection reads the run's event log and accepts only failed or canceled runs; a
    # SUSPENDED run (stopped at an approval gate, airwave_dagster/suspension.py) has the same log
    # as the failed run it used to be stored as, so it is read as one.
    as_ended = (
        parent_run.with_status(dg.DagsterRunStatus.FAILURE)
        if parent_run.status == dg.DagsterRunStatus.SUSPENDED
        else parent_run
    )
    base, _ = KnownExecutionState.build_resume_retry_reexecution(instance, as_ended)
    known = KnownExecutionState.build_for_reexecution(instance, parent_run)
    if parent_run.execution_plan_snapshot_id is None:
        raise dg.DagsterInvariantViolationError(f"run {parent_run.run_id} has no execution plan")
    snapshot = instance.get_execution_plan_snapshot(parent_run.execution_plan_snapshot_id)
    plan = RemoteExecutionPlan(execution_plan_snapshot=snapshot)
    produced = _produced_step_keys(known.parent_state)
    selected = set(base)
    added: list[str] = []
    deps = plan.execution_deps()
    for step in plan.topological_steps():
        if not step.key.endswith(UNRESOLVED_SUFFIX):
            continue
        name = step.key[: -len(UNRESOLVED_SUFFIX)]
        for mapping_key in _mapping_keys(step, known.dynamic_mappings):
            key = f"{name}[{mapping_key}]"
            if key not in produced and key not in selected:
                selected.add(key)
                added.append(key)
    if added:
        _add_downstream(plan, deps, selected, added)
    if not selected:
        # Every step has an output (e.g. orphaned steps finished after the worker died): re-run
        # the job's final steps, which only aggregate stored outputs, so the tree ends with a
        # successful run and its report.
        consumed = {dep for keys in deps.values() for dep in keys}
        selected = {
            step.key
            for step in plan.topological_steps()
            if step.key not in consumed and not step.key.endswith(UNRESOLVED_SUFFIX)
        }
        added.extend(sorted(selected))
    ordered = _in_plan_order(plan, selected)
    if not ordered:
        raise DagsterInvalidSubsetError(f"run {parent_run.run_id} has no step to re-execute")
    return ordered, sorted(added), known.update_for_step_selection(ordered)


def _mapping_keys(
    step: Any, dynamic_mappings: Mapping[str, Mapping[str, Sequence[str] | None]]
) -> list[str]:
    """The mapping keys feeding an unresolved mapped step, from its dynamic upstream output."""
    for step_input in step.inputs:
        for handle in step_input.upstream_output_handles:
            outputs = dynamic_mappings.get(handle.step_key)
            if outputs and outputs.get(handle.output_name):
                return list(outputs[handle.output_name] or [])
    return []


def _unresolved(key: str) -> str:
    return key.split("[", 1)[0] + UNRESOLVED_SUFFIX if key.endswith("]") else key


def _add_downstream(
    plan: RemoteExecutionPlan,
    deps: Mapping[str, set[str]],
    selected: set[str],
    added: list[str],
) -> None:
    """Select every step that consumes an output of a selected step, in plan order."""
    changed = True
    while changed:
        changed = False
        frontier = {_unresolved(key) for key in selected} | selected
        for step in plan.topological_steps():
            if step.key in selected or not (deps.get(step.key, set()) & frontier):
                continue
            if step.key.endswith(UNRESOLVED_SUFFIX):
                # A mapped step downstream of a mapped step: the same keys, resolved.
                name = step.key[: -len(UNRESOLVED_SUFFIX)]
                for key in list(selected):
                    if key.endswith("]") and not key.endswith(UNRESOLVED_SUFFIX):
                        resolved = f"{name}[{key.split('[', 1)[1]}"
                        if resolved not in selected:
                            selected.add(resolved)
                            added.append(resolved)
                            changed = True
                continue
            selected.add(step.key)
            added.append(step.key)
            changed = True


def _in_plan_order(plan: RemoteExecutionPlan, selected: set[str]) -> list[str]:
    order = {step.key: index for index, step in enumerate(plan.topological_steps())}
    return sorted(selected, key=lambda key: (order.get(_unresolved(key), len(order)), key))


def replayed_steps(
    instance: dg.DagsterInstance, parent_run: dg.DagsterRun, steps: Sequence[str]
) -> set[str]:
    """Steps with a stored output in `parent_run`'s tree that a run of `steps` replays."""
    known = KnownExecutionState.build_for_reexecution(instance, parent_run)
    return _produced_step_keys(known.parent_state) - set(steps)


def resume_tags(
    parent_run: dg.DagsterRun,
    job_tags: Mapping[str, str],
    *,
    added: Sequence[str],
    config_changes: Sequence[str],
    extra_tags: Mapping[str, Any] | None = None,
    use_parent_run_tags: bool = True,
) -> dict[str, str]:
    """The tags of a complete resume: Dagster's own re-execution tags plus what was added."""
    inherited = (
        {k: v for k, v in parent_run.tags.items() if k not in TAGS_TO_MAYBE_OMIT_ON_RETRY}
        if use_parent_run_tags
        else {}
    )
    # An earlier change belongs to the run that made it: a resume lists only its own.
    inherited.pop(CONFIG_CHANGED_TAG, None)
    tags = {
        **job_tags,
        **inherited,
        **(extra_tags or {}),
        PARENT_RUN_ID_TAG: parent_run.run_id,
        ROOT_RUN_ID_TAG: parent_run.root_run_id or parent_run.run_id,
        RESUME_RETRY_TAG: "true",
        RESUMED_FROM_TAG: parent_run.run_id,
    }
    if added:
        tags[ADDED_STEPS_TAG] = str(len(added))
    if config_changes:
        tags[CONFIG_CHANGED_TAG] = changed_tag(config_changes)
    return tags


@dataclass(frozen=True)
class ReconfiguredResume:
    """A complete resume with edited config, for a launcher that creates the run itself."""

    run_config: dict[str, Any]
    step_keys: list[str]
    tags: dict[str, str]
    changes: list[str]


Validator = Callable[[Mapping[str, Any]], None]
"""Raises (an error of the caller's) for a run config the job's current schema rejects."""


def reconfigured_resume(
    instance: dg.DagsterInstance,
    parent_run: dg.DagsterRun,
    edit: Mapping[str, Any],
    validator: Validator,
) -> ReconfiguredResume:
    """The complete resume of `parent_run` with `edit` merged over its config, checked.

    For a webserver's `launchPipelineReexecution`, which takes config and step keys but never
    computes a complete resume. `validator` judges the merged config against the job as the
    webserver now serves it (the parent's snapshot may predate a config field); then the change
    is checked (`reconfig.check_change`).

    Raises:
        ConfigChangeRefused: A change that a replayed step already used (after `validator`).
    """
    config = merge(parent_run.run_config, edit)
    validator(config)
    steps, added, _ = complete_selection(instance, parent_run)
    changes = check_change(
        parent_run.run_id,
        parent_run.run_config,
        config,
        replayed_steps(instance, parent_run, steps),
    )
    tags = resume_tags(parent_run, {}, added=added, config_changes=changes)
    return ReconfiguredResume(run_config=config, step_keys=steps, tags=tags, changes=changes)


def reconfigured_all_steps(
    instance: dg.DagsterInstance,
    parent_run: dg.DagsterRun,
    edit: Mapping[str, Any],
    validator: Validator,
) -> ReconfiguredResume:
    """Every step of `parent_run`'s job again with `edit` merged over its config (no steps named).

    Nothing is replayed, so every change is allowed once `validator` accepts the config.
    """
    config = merge(parent_run.run_config, edit)
    validator(config)
    changes = check_change(parent_run.run_id, parent_run.run_config, config, ())
    tags = {
        k: v
        for k, v in parent_run.tags.items()
        if k not in TAGS_TO_MAYBE_OMIT_ON_RETRY and k != CONFIG_CHANGED_TAG
    }
    tags[PARENT_RUN_ID_TAG] = parent_run.run_id
    tags[ROOT_RUN_ID_TAG] = parent_run.root_run_id or parent_run.run_id
    if changes:
        tags[CONFIG_CHANGED_TAG] = changed_tag(changes)
    return ReconfiguredResume(run_config=config, step_keys=[], tags=tags, changes=changes)


def create_resume_run(
    instance: dg.DagsterInstance,
    *,
    request_context: BaseWorkspaceRequestContext,
    parent_run: dg.DagsterRun,
    code_location: CodeLocation,
    remote_job: RemoteJob,
    extra_tags: Mapping[str, Any] | None = None,
    run_config: Mapping[str, Any] | None = None,
    use_parent_run_tags: bool = True,
) -> dg.DagsterRun:
    """Create (not launch) the complete from-failure re-execution of `parent_run`.

    A `run_config` other than the parent's is validated against the job's schema and checked
    (`reconfig.check_change`) before any run is created; the new run lists the changed paths
    in `CONFIG_CHANGED_TAG`.

    Raises:
        CodeVersionChanged: An op's code version differs from the parent run's.
        InvalidRunConfig: `run_config` does not validate.
        ConfigChangeRefused: `run_config` changes what a replayed step already used.
    """
    refuse_if_changed(instance, parent_run, remote_job.job_snapshot)
    config = dict(run_config if run_config is not None else parent_run.run_config)
    if config != parent_run.run_config:
        validate(remote_job.config_schema_snapshot, remote_job.root_config_key, config)
    steps, added, known_state = complete_selection(instance, parent_run)
    changes: list[str] = []
    if config != parent_run.run_config:
        changes = check_change(
            parent_run.run_id,
            parent_run.run_config,
            config,
            replayed_steps(instance, parent_run, steps),
        )
    root_run_id = parent_run.root_run_id or parent_run.run_id
    tags = resume_tags(
        parent_run,
        remote_job.tags,
        added=added,
        config_changes=changes,
        extra_tags=extra_tags,
        use_parent_run_tags=use_parent_run_tags,
    )
    plan = code_location.get_execution_plan(
        remote_job,
        config,
        step_keys_to_execute=steps,
        known_state=known_state,
        instance=instance,
    )
    return instance.create_run(
        job_name=parent_run.job_name,
        run_id=None,
        run_config=config,
        resolved_op_selection=parent_run.resolved_op_selection,
        step_keys_to_execute=steps,
        status=dg.DagsterRunStatus.NOT_STARTED,
        tags=tags,
        root_run_id=root_run_id,
        parent_run_id=parent_run.run_id,
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        op_selection=parent_run.op_selection,
        asset_selection=remote_job.asset_selection,
        asset_check_selection=remote_job.asset_check_selection,
        remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(),
        asset_graph=request_context.asset_graph,
    )
