"""The `ai_lineup` job: analyze, context, plan, packages, numbers, builds (6 at once), report."""

import dagster as dg

from airwave_dagster.run_tags import AI_LINEUP_JOB, JOB_TAG, REPORT_LINEUP_OP, REPORT_OP_TAG
from ops.ai_lineup.build_ops import (
    assign_channel_numbers,
    build_ai_channel,
    create_ai_packages,
    report_lineup,
)
from ops.ai_lineup.ops import (
    analyze_library,
    build_shared_context,
    list_existing_packages,
    plan_lineup,
)
from ops.steps import fan_out_executor

BUILD_CONCURRENCY = 6
"""At most this many channel builds run at once (a sliding window, not the reference's waves)."""


def ai_lineup_executor(start_method: str = "forkserver") -> dg.ExecutorDefinition:
    """The multiprocess executor bounding channel builds to BUILD_CONCURRENCY at once."""
    return fan_out_executor(BUILD_CONCURRENCY, start_method)


@dg.job(
    executor_def=ai_lineup_executor(),
    tags={JOB_TAG: AI_LINEUP_JOB, REPORT_OP_TAG: REPORT_LINEUP_OP},
    description="Design a whole lineup from the library profile and build every channel with a "
    "verifying agent (anthropic or offline), within a budget.",
)
def ai_lineup():
    """Analyze → context → existing packages → plan → packages → numbers → builds → report."""
    analyzed = analyze_library()
    shared = build_shared_context(analyzed)
    existing = list_existing_packages(analyzed)
    planned = plan_lineup(analyzed, shared, existing)
    packages = create_ai_packages(analyzed, planned)
    numbered, builds = assign_channel_numbers(analyzed, planned, packages)
    results = builds.map(lambda task: build_ai_channel(task, shared))
    report_lineup(analyzed, planned, packages, numbered, results.collect())
