"""A run's report: the stored output of its job's report op, wherever in the run tree it ran.

Every job of this project ends in a report op whose output (a pydantic model, stored as JSON by
the Postgres IO manager) is the run's result. A job names that op in its `airwave/report_op` tag.
After a resume, the report may have been produced by a re-execution, so the whole run group is
searched and the newest report wins.
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg
import sqlalchemy as sa

from airwave_dagster.cli.environment import DATABASE_URL_ENV
from airwave_dagster.run_tags import IMPORT_LINEUP_JOB, REPORT_OP_TAG, SUMMARIZE_IMPORT_OP

_KNOWN_REPORT_OPS = {IMPORT_LINEUP_JOB: SUMMARIZE_IMPORT_OP}


def report_op(run: dg.DagsterRun) -> str | None:
    """The op whose output is the run's report."""
    return run.tags.get(REPORT_OP_TAG) or _KNOWN_REPORT_OPS.get(run.job_name)


def stored_report(instance: dg.DagsterInstance, run_id: str) -> dict[str, Any] | None:
    """The newest report produced by `run_id` or any run of its group, or None."""
    from resources import tables as t
    from resources.stores.engine import engine_for

    run = instance.get_run_by_id(run_id)
    if run is None:
        return None
    op = report_op(run)
    if op is None:
        return None
    group = instance.get_run_group(run_id)
    run_ids = [r.run_id for r in group[1]] if group else [run_id]
    engine = engine_for(os.environ[DATABASE_URL_ENV])
    with engine.connect() as conn:
        value = conn.execute(
            sa.select(t.step_output.c.value)
            .where(t.step_output.c.run_id.in_(run_ids), t.step_output.c.step_key == op)
            .order_by(t.step_output.c.created_at.desc())
            .limit(1)
        ).scalar_one_or_none()
    return value if isinstance(value, dict) else None
