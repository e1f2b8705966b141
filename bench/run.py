"""`make bench`: measured figures for the targets the issues set, written to BENCHMARKS.md.

Import benchmark: a 50-channel `import_lineup` run against the Plex emulator with 20 ms added to
every request, through Dagster's multiprocess executor with Postgres storage, once with its
start method (forkserver) and once with spawn, side by side in one process so the
ratio is fair on a shared, noisy machine. Then the same import on the multiprocess executor and
on two celery workers (`bench/executors.py`), the import before and after issue 25's changes
(`bench/fanout.py`), the CLI's time to SUCCESS with a server up and without, before and after
(`bench/starts.py`), and with OpenTelemetry off and on (`bench/tracing.py`). `--only executors`,
`--only fanout`, `--only starts` or `--only tracing` runs that comparison alone and
replaces its section of BENCHMARKS.md, leaving the others as they were measured.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import sqlalchemy as sa

from airwave_dagster import settings
from airwave_dagster.cli import environment
from bench.ai_lineup import ai_lineup_section
from bench.executors import executors_section
from bench.fanout import BASELINE_REF, fanout_section
from bench.lineup_quality import lineup_quality_section
from bench.maintenance import maintenance_section
from bench.starts import SMALL_CHANNELS, starts_section
from bench.tables import IMPORT_TABLES, truncate
from bench.tracing import tracing_section

ROOT = Path(__file__).resolve().parent.parent
CHANNELS = 50
LATENCY_MS = 20
LIBRARY_ITEMS = 5000
BENCH_DATABASE = "airwave_bench"
GENRES = (
    "Action",
    "Comedy",
    "Drama",
    "Horror",
    "Science Fiction",
    "Animation",
    "Family",
    "Documentary",
    "Thriller",
    "Romance",
)


def spawn_import_job() -> dg.JobDefinition:
    """`import_lineup` with the spawn start method, for comparison."""
    from airwave_dagster.definitions import production_resources
    from ops.lineup_import.job import import_executor, import_lineup

    return import_lineup.graph.to_job(
        name="import_lineup_spawn",
        executor_def=import_executor("spawn"),
        resource_defs=production_resources(),
    )


def _lineup(count: int) -> dict[str, Any]:
    channels = []
    for i in range(count):
        genre = GENRES[i % len(GENRES)]
        children = [
            {"type": "condition", "field": "genre", "op": "is", "value": genre},
            {"type": "condition", "field": "year", "op": "gte", "value": str(1940 + i)},
        ]
        channels.append(
            {
                "number": 500 + i,
                "name": f"{genre} since {1940 + i}",
                "packageKey": f"bench-{i % 5}",
                "definitions": [
                    {
                        "kind": "PREDICATE",
                        "plexFilter": {
                            "mediaTypes": ["movie", "show"],
                            "filter": {"type": "group", "combinator": "and", "children": children},
                        },
                    }
                ],
            }
        )
    packages = [{"key": f"bench-{k}", "name": f"Bench {k}"} for k in range(5)]
    return {"version": 1, "packages": packages, "channels": channels}


def _stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/__emulator/stats", timeout=5) as response:
        return json.loads(response.read())


def _reset_stats(url: str) -> None:
    request = urllib.request.Request(f"{url}/__emulator/stats/reset", method="POST")
    urllib.request.urlopen(request, timeout=5).close()


def _run_import(
    instance: dg.DagsterInstance, job_fn: Any, lineup_path: Path, plex_url: str, db_url: str
) -> dict[str, Any]:
    truncate(db_url, IMPORT_TABLES)
    _reset_stats(plex_url)
    run_config = {
        "ops": {"plan_import_lineup": {"config": {"lineup": {"file": {"path": str(lineup_path)}}}}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    started = time.perf_counter()
    with dg.execute_job(
        dg.reconstructable(job_fn), instance=instance, run_config=run_config
    ) as result:
        wall = time.perf_counter() - started
        if not result.success:
            raise RuntimeError(f"benchmark run {result.run_id} failed")
        run_id = result.run_id
    requests = _stats(plex_url)["total"]
    return {
        "run_id": run_id,
        "wall_s": wall,
        "plex_requests": requests,
        "requests_per_channel": requests / CHANNELS,
        **_run_figures(run_id, db_url),
    }


def _run_figures(run_id: str, db_url: str) -> dict[str, Any]:
    """What a finished import left in the database: channels, rows, its builds' durations."""
    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        builds = conn.execute(
            sa.text(
                'SELECT extract(epoch FROM "finishedAt" - "startedAt") FROM public.import_trace '
                """WHERE "runId" = :r AND "stepName" = 'buildChannel'"""
            ),
            {"r": run_id},
        ).scalars()
        durations = sorted(float(d) for d in builds)
        created = conn.execute(sa.text("SELECT count(*) FROM public.channel")).scalar_one()
        rows = conn.execute(sa.text("SELECT count(*) FROM public.schedule_item")).scalar_one()
    engine.dispose()
    return {
        "channels": created,
        "schedule_rows": rows,
        "build_median_s": durations[len(durations) // 2] if durations else 0.0,
        "build_sum_s": sum(durations),
    }


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmarks and write BENCHMARKS.md (`--only SECTION`: that section alone).

    `--baseline REF` names the revision the fan-out section measures as "before".
    """
    # Stopped by SIGTERM (`kill`, `timeout`), the bench still runs its `finally` blocks: the
    # servers it started run in sessions of their own and would otherwise outlive it, taking the
    # runs of the next bench on the same databases (seen: a killed starts bench's `airwave serve`
    # kept dequeuing the next one's runs).
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = list(sys.argv[1:] if argv is None else argv)
    baseline = BASELINE_REF
    if args[-2:-1] == ["--baseline"]:
        baseline = args[-1]
        del args[-2:]
    only = args[1] if len(args) == 2 and args[0] == "--only" else None
    sections = ("executors", "fanout", "starts", f"starts-{CHANNELS}", "tracing")
    if len(args) not in (0, 2) or (args and only not in sections):
        raise SystemExit(
            "usage: python -m bench.run [--only executors|fanout|starts|starts-50|tracing] "
            "[--baseline REF]"
        )
    from airwave_dagster.definitions import import_lineup_job

    server = environment.start_private_postgres(environment.airwave_home())
    db_url = environment.ensure_database(server, BENCH_DATABASE)
    os.environ[settings.DATABASE_URL_ENV] = db_url
    env = environment.prepare()
    emulator = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "airwave_dagster.emulators.plex",
            "--port",
            str(port := environment._free_port()),
            "--items",
            str(LIBRARY_ITEMS),
            "--latency-ms",
            str(LATENCY_MS),
            "--token",
            "bench-token",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    plex_url = f"http://127.0.0.1:{port}"
    os.environ[settings.PLEX_URL_ENV] = plex_url
    os.environ[settings.PLEX_TOKEN_ENV] = "bench-token"
    try:
        deadline = time.monotonic() + 60
        while not environment._emulator_alive(plex_url):
            if time.monotonic() > deadline:
                raise RuntimeError("the Plex emulator did not start")
            time.sleep(0.1)
        with tempfile.TemporaryDirectory() as tmp:
            lineup_path = Path(tmp) / "bench-lineup.json"
            lineup_path.write_text(json.dumps(_lineup(CHANNELS)))
            small_path = Path(tmp) / "bench-lineup-10.json"
            small_path.write_text(json.dumps(_lineup(10)))
            starts_path = Path(tmp) / f"bench-lineup-{SMALL_CHANNELS}.json"
            starts_path.write_text(json.dumps(_lineup(SMALL_CHANNELS)))

            def starts() -> str:
                return starts_section(server, (plex_url, "bench-token"), starts_path, baseline)

            def starts_50() -> str:
                # The end-to-end figure: the whole 50-channel import through the CLI.
                return starts_section(
                    server,
                    (plex_url, "bench-token"),
                    lineup_path,
                    baseline,
                    modes=("serve", "none"),
                    repeats=3,
                    channels=CHANNELS,
                    warm_up=True,
                )

            if only == "starts":
                _replace_section(starts())
                return
            if only == f"starts-{CHANNELS}":
                _replace_section(starts_50())
                return
            with dg.DagsterInstance.get() as instance:

                def production_import() -> dict[str, Any]:
                    return _run_import(instance, import_lineup_job, lineup_path, plex_url, db_url)

                if only == "tracing":
                    _replace_section(tracing_section(lineup_path))
                    return

                def reset() -> None:
                    truncate(db_url, IMPORT_TABLES)
                    _reset_stats(plex_url)

                if only == "executors":  # not the fan-out's baseline and after runs first
                    _replace_section(executors_section(instance, production_import, {emulator.pid}))
                    return
                fanout = fanout_section(
                    instance,
                    {CHANNELS: lineup_path, 10: small_path},
                    lambda run_id: _run_figures(run_id, db_url),
                    reset,
                    lambda: _stats(plex_url),
                    baseline,
                )
                if only == "fanout":
                    _replace_section(fanout)
                    return
                executors = executors_section(instance, production_import, {emulator.pid})
                started = starts()
                started_50 = starts_50()
                traced = tracing_section(lineup_path)
                # The start methods are the multiprocess executor's (threads is the default).
                chosen = os.environ.get(settings.EXECUTOR_ENV)
                os.environ[settings.EXECUTOR_ENV] = "multiprocess"
                try:
                    forkserver = production_import()
                    spawn = _run_import(instance, spawn_import_job, lineup_path, plex_url, db_url)
                finally:
                    os.environ.pop(settings.EXECUTOR_ENV)
                    if chosen is not None:
                        os.environ[settings.EXECUTOR_ENV] = chosen
                ai_section = ai_lineup_section(instance, db_url)
    finally:
        emulator.terminate()
        emulator.wait(timeout=10)
    _write(forkserver, spawn, env)
    _append(fanout)
    _append(executors)
    _append(started)
    _append(started_50)
    _append(traced)
    _append(maintenance_section(db_url))
    _append(ai_section)
    _append(lineup_quality_section())


def _write(forkserver: dict[str, Any], spawn: dict[str, Any], env: environment.Environment) -> None:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    cpu = os.cpu_count()
    lines = [
        "# Benchmarks",
        "",
        f"Measured {when} on {platform.machine()} with {cpu} cores, Python "
        f"{platform.python_version()}. Reproduce with `make bench` (writes this file).",
        "",
        f"## import_lineup: {CHANNELS} channels, Plex emulator with {LATENCY_MS} ms per request",
        "",
        f"Library of {LIBRARY_ITEMS:,} items; each channel is a genre + year filter over movies "
        "and shows; Dagster multiprocess executor (at most 4 builds at once), Postgres storage, "
        "the JSON IO manager. Both runs in one process, one after the other. Target: under 60 s.",
        "",
        "| start method | wall time | channels | schedule rows | Plex requests / channel "
        "| build step median | Σ build steps |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in (("forkserver", forkserver), ("spawn", spawn)):
        lines.append(
            f"| {name} | {m['wall_s']:.1f} s | {m['channels']} | {m['schedule_rows']} "
            f"| {m['requests_per_channel']:.1f} | {m['build_median_s']:.2f} s "
            f"| {m['build_sum_s']:.1f} s |"
        )
    ratio = spawn["wall_s"] / forkserver["wall_s"] if forkserver["wall_s"] else float("nan")
    lines += [
        "",
        f"spawn / forkserver wall-time ratio: **{ratio:.2f}x**. Time per channel (wall / "
        f"{CHANNELS}): forkserver {forkserver['wall_s'] / CHANNELS:.2f} s, spawn "
        f"{spawn['wall_s'] / CHANNELS:.2f} s.",
        "",
        "Plex requests per channel counts every request the emulator served during the run "
        "(library listing and vocabulary included) divided by the number of channels.",
        "",
    ]
    (ROOT / "BENCHMARKS.md").write_text("\n".join(lines))
    sys.stdout.write("\n".join(lines) + "\n")


def _replace_section(section: str) -> None:
    """Put `section` in BENCHMARKS.md in place of the one with its heading (or at the end)."""
    path = ROOT / "BENCHMARKS.md"
    heading = section.split("\n", 1)[0]
    text = path.read_text(encoding="utf-8")
    start = text.find(heading + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    else:
        following = text.find("\n## ", start + len(heading))
        rest = text[following + 1 :] if following >= 0 else ""
        text = text[:start] + section + ("\n" + rest if rest else "\n")
    path.write_text(text, encoding="utf-8")
    sys.stdout.write(section + "\n")


def _append(section: str) -> None:
    """Add a section another benchmark module measured to BENCHMARKS.md (and print it)."""
    with (ROOT / "BENCHMARKS.md").open("a", encoding="utf-8") as out:
        out.write(section + "\n")
    sys.stdout.write(section + "\n")


if __name__ == "__main__":
    main()
