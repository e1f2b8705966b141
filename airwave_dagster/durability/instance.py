"""The project's Dagster instance: every "re-execute from failure" is a complete resume.

`dagster.yaml` names this class (`instance_class`), so the webserver (UI and GraphQL), the daemon
(automatic run retries) and the `airwave` CLI all re-execute through `create_resume_run`: the
mapped steps a crash never started are included, and a re-execution whose op code versions
changed is refused before any run is created.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster._core.execution.plan.resume_retry import ReexecutionStrategy
from dagster._core.remote_representation.code_location import CodeLocation
from dagster._core.remote_representation.external import RemoteJob
from dagster._core.workspace.context import BaseWorkspaceRequestContext

from airwave_dagster.durability.resume import create_resume_run
from airwave_dagster.durability.versions import refuse_if_changed


class AirwaveInstance(dg.DagsterInstance):
    """`DagsterInstance` whose from-failure re-execution is complete and version-guarded."""

    @classmethod
    def config_schema(cls) -> dict[str, Any]:
        """No settings of its own (Dagster asks custom instance classes for theirs)."""
        return {}

    @staticmethod
    def config_defaults(base_dir: str) -> Mapping[str, Any]:
        """The same storage defaults as a plain instance."""
        from dagster._core.instance.ref import InstanceRef

        return InstanceRef.config_defaults(base_dir)

    def create_reexecuted_run(
        self,
        *,
        request_context: BaseWorkspaceRequestContext,
        parent_run: dg.DagsterRun,
        code_location: CodeLocation,
        remote_job: RemoteJob,
        strategy: ReexecutionStrategy,
        extra_tags: Mapping[str, Any] | None = None,
        run_config: Mapping[str, Any] | None = None,
        use_parent_run_tags: bool = False,
    ) -> dg.DagsterRun:
        """Complete resume for FROM_FAILURE; Dagster's own behaviour for the other strategies."""
        if strategy == ReexecutionStrategy.FROM_FAILURE:
            if parent_run.status not in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED):
                raise dg.DagsterInvariantViolationError(
                    f"run {parent_run.run_id} is {parent_run.status.value}: only failed or "
                    "canceled runs can be resumed"
                )
            return create_resume_run(
                self,
                request_context=request_context,
                parent_run=parent_run,
                code_location=code_location,
                remote_job=remote_job,
                extra_tags=extra_tags,
                run_config=run_config,
                use_parent_run_tags=use_parent_run_tags,
            )
        if strategy == ReexecutionStrategy.FROM_ASSET_FAILURE:
            refuse_if_changed(self, parent_run, remote_job.job_snapshot)
        return super().create_reexecuted_run(
            request_context=request_context,
            parent_run=parent_run,
            code_location=code_location,
            remote_job=remote_job,
            strategy=strategy,
            extra_tags=extra_tags,
            run_config=run_config,
            use_parent_run_tags=use_parent_run_tags,
        )
