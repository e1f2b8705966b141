"""The `ai_lineup` job: analyze, context, plan, numbers, approval, packages, builds, report."""

import dagster as dg

from airwave_dagster.run_tags import AI_LINEUP_JOB, JOB_TAG, REPORT_LINEUP_OP, REPORT_OP_TAG
from ops.ai_lineup.approval import approve_lineup, number_ai_channels
from ops.ai_lineup.build_ops import (
    build_ai_channel,
    create_ai_packages,
    fan_out_ai_builds,
    report_lineup,
)
from ops.ai_lineup.checkpoints import BUILD_CONCURRENCY
from ops.ai_lineup.ops import (
    analyze_library,
    build_shared_context,
    list_existing_packages,
    plan_lineup,
)
from ops.steps import fan_out_executor


def ai_lineup_executor(start_method: str = "forkserver") -> dg.ExecutorDefinition:
    """The fan-out executor: BUILD_CONCURRENCY builds per run, the `llm` pool across runs."""
    return fan_out_executor(BUILD_CONCURRENCY, start_method, llm_pool=True)


@dg.job(
    executor_def=ai_lineup_executor(),
    tags={JOB_TAG: AI_LINEUP_JOB, REPORT_OP_TAG: REPORT_LINEUP_OP},
    description="Design a whole lineup from the library profile and build every channel with a "
    "verifying agent (anthropic or offline), within a budget.",
)
def ai_lineup():
    """Analyze → context → packages → plan → numbers → approval gate → wipe → builds → report.

    The report step settles what the wipe parked: nothing the approved diff kept leaves the air.
    """
    analyzed = analyze_library()
    shared = build_shared_context(analyzed)
    existing = list_existing_packages(analyzed)
    planned = plan_lineup(analyzed, shared, existing)
    numbered = number_ai_channels(analyzed, planned)
    approved = approve_lineup(analyzed, shared, planned, numbered)
    packages = create_ai_packages(analyzed, planned, numbered, approved)
    builds = fan_out_ai_builds(analyzed, planned, numbered, packages)
    results = builds.map(lambda task: build_ai_channel(task, shared))
    report_lineup(analyzed, planned, packages, numbered, results.collect(), approved)
