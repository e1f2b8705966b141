"""A run record to health-check: a one-op job's run, tagged as launched from a given code server."""

from __future__ import annotations

import json
from typing import Any

import dagster as dg
from dagster._core.storage.tags import GRPC_INFO_TAG


@dg.op
def _noop() -> None:
    pass


@dg.job
def probe() -> None:
    _noop()


def probe_run(instance: dg.DagsterInstance, grpc_info: dict[str, Any]) -> dg.DagsterRun:
    """A NOT_STARTED run of `probe` whose code server is `grpc_info` (host/port or socket)."""
    return instance.create_run_for_job(job_def=probe, tags={GRPC_INFO_TAG: json.dumps(grpc_info)})
