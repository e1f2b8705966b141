"""AI lineup benchmark: 50 channels, the real anthropic SDK against the stub at a fixed latency.

`ai_lineup_section(instance, db_url)` runs inside `bench/run.py` while its Plex emulator is up
(the forkserver's step processes inherit that PLEX_URL). The stub plays a planner that returns a
50-channel plan (the offline planner's channels, padded with variants when the library yields
fewer) and workers that preview the proposed filter, then commit it: two model calls per channel
when nothing goes wrong. It reports the run's wall time against the lower bound Σ build / 6.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import dagster as dg
import sqlalchemy as sa

from airwave_dagster.domain.ai.offline import offline_plan
from airwave_dagster.domain.ai.plan import sanitize_plan
from airwave_dagster.domain.ai.prompts import PLANNER_TOOL_NAME
from airwave_dagster.emulators.anthropic import LLMStub
from bench.tables import AI_LINEUP_TABLES, truncate

CHANNELS = 50
STUB_LATENCY_S = 0.5
CONCURRENCY = 6
# The stub takes any key; it lives in its own variable, set when this module is imported (before
# any benchmark starts the forkserver whose step processes must see it).
BENCH_KEY_ENV = "AIRWAVE_BENCH_STUB_KEY"
os.environ.setdefault(BENCH_KEY_ENV, "bench-stub-key")
PROPOSED = "PROPOSED FILTER (verify it first):\n"


def _plan(channels: int) -> dict[str, Any]:
    """The offline planner's lineup for the synced library, cut or padded to `channels`."""
    from ops.ai_lineup.ops import fetch_vocabulary
    from ops.library_assets import compute_profile
    from resources.plex import PlexClient
    from resources.stores.ai import AiStore
    from resources.stores.channels import AirwaveStore
    from resources.stores.engine import engine_for
    from resources.stores.library import sync_library

    store = AirwaveStore(engine_for(os.environ["AIRWAVE_DATABASE_URL"]))
    plex = PlexClient(os.environ["PLEX_URL"], os.environ["PLEX_TOKEN"])
    source_id = sync_library(store, plex).source_id
    profile = compute_profile(AiStore(store.engine), source_id)
    plan = sanitize_plan(offline_plan(profile, fetch_vocabulary(plex))).plan
    raw = plan.model_dump(mode="json", by_alias=True, exclude_none=True)
    pairs = [(p, c) for p in raw["packages"] for c in p["channels"]]
    for index in range(len(pairs), channels):
        package, channel = pairs[index % len(pairs)]
        variant = json.loads(json.dumps(channel))
        variant["key"] = f"{channel['key']}-v{index}"
        variant["name"] = f"{channel['name']} {index}"
        variant["filter"] = {
            "type": "group",
            "combinator": "and",
            "children": [
                channel["filter"],
                {"type": "condition", "field": "title", "op": "notContains", "value": f"zz{index}"},
            ],
        }
        package["channels"].append(variant)
    kept = 0
    for package in raw["packages"]:
        package["channels"] = package["channels"][: max(0, channels - kept)]
        kept += len(package["channels"])
    raw["packages"] = [p for p in raw["packages"] if p["channels"]]
    return raw


def _responder(plan: dict[str, Any]) -> Any:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if (body.get("tool_choice") or {}).get("name") == PLANNER_TOOL_NAME:
            return {"kind": "tool_use", "name": PLANNER_TOOL_NAME, "input": plan}
        brief = body["messages"][0]["content"][1]["text"]
        proposed = json.loads(brief.split(PROPOSED, 1)[1])
        media_line = next(line for line in brief.splitlines() if line.startswith("Media types:"))
        media = [m.strip() for m in media_line.split(":", 1)[1].split(",")]
        tool = "preview_filter" if len(body["messages"]) == 1 else "commit_channel"
        tool_input = {"mediaTypes": media, "filter": proposed}
        return {"kind": "tool_use", "name": tool, "input": tool_input}

    return respond


def ai_lineup_section(instance: dg.DagsterInstance, db_url: str) -> str:
    """Run the 50-channel benchmark and return its BENCHMARKS.md section."""
    from airwave_dagster.definitions import ai_lineup_job

    truncate(db_url, AI_LINEUP_TABLES)
    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    plan = _plan(CHANNELS)
    with LLMStub(responder=_responder(plan), latency=STUB_LATENCY_S) as stub:
        run_config = {
            "ops": {"analyze_library": {"config": {"provider": "anthropic"}}},
            "resources": {
                "llm": {"config": {"api_key_env_var": BENCH_KEY_ENV, "base_url": stub.url}}
            },
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        }
        started = time.perf_counter()
        with dg.execute_job(
            dg.reconstructable(ai_lineup_job), instance=instance, run_config=run_config
        ) as result:
            wall = time.perf_counter() - started
            if not result.success:
                raise RuntimeError(f"AI lineup benchmark run {result.run_id} failed")
            run_id = result.run_id
        worker_calls = sum(
            1
            for r in stub.logical_calls()
            if r.body and (r.body.get("tool_choice") or {}).get("name") != PLANNER_TOOL_NAME
        )
    with engine.connect() as conn:
        durations = [
            float(d)
            for d in conn.execute(
                sa.text(
                    'SELECT extract(epoch FROM "finishedAt" - "startedAt") '
                    """FROM public.ai_lineup_trace WHERE "runId" = :r AND phase = 'build'"""
                ),
                {"r": run_id},
            ).scalars()
        ]
        report = conn.execute(
            sa.text(
                "SELECT output FROM public.ai_lineup_trace "
                """WHERE "runId" = :r AND phase = 'report'"""
            ),
            {"r": run_id},
        ).scalar_one()
    engine.dispose()
    built = len(report["built"])
    total = sum(durations)
    bound = total / CONCURRENCY
    fan_out = _fan_out_seconds(instance, run_id)
    lines = [
        f"## ai_lineup: {CHANNELS} channels, LLM stub at {STUB_LATENCY_S:.1f} s per call",
        "",
        "The real anthropic SDK against the local Messages-API stub (planner streamed, workers "
        "preview then commit), the Plex emulator above, at most 6 builds at once (forkserver).",
        "",
        "| channels built | wall time (run) | fan-out wall time | Σ build time | lower bound Σ/6 "
        "| fan-out / bound | model calls per channel | cache read ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {built} | {wall:.1f} s | {fan_out:.1f} s | {total:.1f} s | {bound:.1f} s "
        f"| {fan_out / bound if bound else float('nan'):.2f}x "
        f"| {worker_calls / max(built, 1):.2f} | {report['cache_read_ratio']:.1%} |",
        "",
        "Σ build time sums each build step's own duration (trace rows); the fan-out wall time "
        "runs from the first build's start to the last build's end. Measured on "
        f"{os.cpu_count()} cores with a 1-minute load average of {os.getloadavg()[0]:.1f} at the "
        f"end: with fewer cores than builds in flight the reachable bound is Σ / "
        f"{min(CONCURRENCY, os.cpu_count() or 1)} = "
        f"{total / min(CONCURRENCY, os.cpu_count() or 1):.1f} s.",
        "",
    ]
    return "\n".join(lines)


def _fan_out_seconds(instance: dg.DagsterInstance, run_id: str) -> float:
    """From the first build step's start to the last one's end (Dagster's own step stats)."""
    stats = [
        s
        for s in instance.get_run_step_stats(run_id)
        if s.step_key.startswith("build_ai_channel") and s.start_time and s.end_time
    ]
    if not stats:
        return 0.0
    return max(s.end_time for s in stats) - min(s.start_time for s in stats)  # type: ignore[type-var,operator]


def main() -> None:
    """Print the section on its own: private Postgres (own database), an in-process emulator."""
    from airwave_dagster import settings
    from airwave_dagster.cli import environment
    from airwave_dagster.emulators.plex import start_emulator

    server = environment.start_private_postgres(environment.airwave_home())
    db_url = environment.ensure_database(server, "airwave_bench_ai")
    os.environ[settings.DATABASE_URL_ENV] = db_url
    environment.prepare()
    with start_emulator(items=5000, seed=7, latency_ms=20) as emulator:
        os.environ[settings.PLEX_URL_ENV] = emulator.url
        os.environ[settings.PLEX_TOKEN_ENV] = emulator.token
        with dg.DagsterInstance.get() as instance:
            section = ai_lineup_section(instance, db_url)
    sys.stdout.write(section + "\n")


if __name__ == "__main__":
    main()
