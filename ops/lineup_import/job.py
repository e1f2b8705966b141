"""The `import_lineup` job: plan → create packages → build channels (4 at once) → report."""

import dagster as dg

from airwave_dagster.data import DEMO_LINEUP
from airwave_dagster.run_tags import (
    IMPORT_LINEUP_JOB,
    JOB_TAG,
    PLAN_IMPORT_OP,
    REPORT_OP_TAG,
    SUMMARIZE_IMPORT_OP,
)
from ops.lineup_import.ops import (
    build_channel,
    create_packages,
    plan_import_lineup,
    summarize_import,
)
from ops.steps import fan_out_executor

IMPORT_CONCURRENCY = 4
"""At most this many channel builds run at once (a sliding window, not waves)."""


DEMO_DRY_RUN = {
    "ops": {
        PLAN_IMPORT_OP: {
            "config": {"lineup": {"file": {"path": str(DEMO_LINEUP)}}, "dry_run": True}
        }
    }
}
"""The job's default run config, which the Launchpad opens with: a dry-run of the bundled example.

Dagster applies it only where a run's config leaves the op out; the CLI and the upload sensor
always configure the op, so their runs never inherit `dry_run: true` or the demo file from it.
"""


def import_executor(start_method: str = "forkserver") -> dg.ExecutorDefinition:
    """The multiprocess executor bounding channel builds to IMPORT_CONCURRENCY at once."""
    return fan_out_executor(IMPORT_CONCURRENCY, start_method)


@dg.job(
    executor_def=import_executor(),
    config=DEMO_DRY_RUN,
    tags={JOB_TAG: IMPORT_LINEUP_JOB, REPORT_OP_TAG: SUMMARIZE_IMPORT_OP},
    description="Recreate packages and channels from a lineup file (with a dry-run).",
)
def import_lineup():
    """Plan → create packages → build every channel (4 at once) → report."""
    planned = plan_import_lineup()
    packages, vocabulary, channels = create_packages(planned)
    results = channels.map(lambda task: build_channel(task, vocabulary))
    summarize_import(planned, packages, results.collect())
