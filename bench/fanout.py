"""Fan-out benchmark: the import before and after issue 25, side by side in one bench run.

"Before" is the code of a git revision (`BASELINE_REF` unless `--baseline REF` says otherwise),
unpacked with `git archive` into a temporary directory; "after" is this checkout. Each import
runs in a child process whose `PYTHONPATH` puts one tree first, so the same Dagster instance,
database, Plex emulator and lineup serve both, and the runs alternate (before 50, after 50,
before 10, after 10) so that a load change on a shared machine falls on both. Nothing of the
baseline's code is copied here: it is imported from its own tree.

Counted per run: Plex requests by kind (the emulator's own counters) and SQL statements the
project's engine sent (a `sitecustomize` in the child's path adds a SQLAlchemy listener to every
process of the run, forkserver and step processes included; Dagster's own storage, which uses
the `dagster` schema, is left out). Timed per run: wall time of `execute_job`, and per build
step the orchestration and build seconds (`bench/executors.py`'s `step_overheads`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg

from airwave_dagster import settings
from bench.executors import step_overheads

BASELINE_REF = "51be829"
"""The last commit of main before issue 25's changes: what "before" means by default."""

SITECUSTOMIZE = """
import os

_LOG = os.environ.get("AIRWAVE_BENCH_SQL_LOG")
if _LOG:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def _count(conn, cursor, statement, parameters, context, executemany):
        url = conn.engine.url
        if "dagster" in str(url.query.get("options", "")):
            return  # Dagster's own storage (its URL sets search_path=dagster)
        fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (statement.split(None, 1)[0].upper() + "\\n").encode())
        finally:
            os.close(fd)

    event.listen(Engine, "before_cursor_execute", _count)
"""
"""Loaded by every Python process of a child run (the child, its forkserver, its steps)."""

CHILD = """
import json, sys, time
import dagster as dg
from airwave_dagster.definitions import import_lineup_job

run_config = {
    "ops": {"plan_import_lineup": {"config": {"lineup": {"file": {"path": sys.argv[1]}}}}},
    "loggers": {"console": {"config": {"log_level": "WARNING"}}},
}
with dg.DagsterInstance.get() as instance:
    started = time.perf_counter()
    with dg.execute_job(
        dg.reconstructable(import_lineup_job), instance=instance, run_config=run_config
    ) as result:
        wall = time.perf_counter() - started
        print(json.dumps({"run_id": result.run_id, "wall_s": wall, "success": result.success}))
"""
"""One import in a child process, with whichever tree comes first on its path."""


def unpack_baseline(ref: str, into: Path) -> Path:
    """The tree of `ref` (its code only) under `into`, read from this repository."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", ref],
        check=True,
        capture_output=True,
    ).stdout
    target = into / "baseline"
    target.mkdir()
    tar_path = into / "baseline.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(target, filter="data")
    return target


def run_child(
    tree: Path, helpers: Path, lineup: Path, sql_log: Path, executor: str = "multiprocess"
) -> dict[str, Any]:
    """Run one import with `tree`'s code on `executor`; returns the child's run id and wall time."""
    env = {
        **os.environ,
        settings.EXECUTOR_ENV: executor,
        "PYTHONPATH": os.pathsep.join([str(helpers), str(tree)]),
        "AIRWAVE_BENCH_SQL_LOG": str(sql_log),
    }
    done = subprocess.run(
        [sys.executable, str(helpers / "fanout_child.py"), str(lineup)],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not figures["success"]:
        raise RuntimeError(f"benchmark run {figures['run_id']} ({tree}) failed")
    return figures


VARIANTS = ("before", "after", "threads")
EXECUTORS = {"before": "multiprocess", "after": "multiprocess", "threads": "threads"}
LABELS = {"before": "before", "after": "after", "threads": "after, threads (default)"}
"""The three runs of each size: the baseline and this checkout on multiprocess, then threads."""


def fanout_section(
    instance: dg.DagsterInstance,
    lineups: dict[int, Path],
    measure: Callable[[str], dict[str, Any]],
    reset: Callable[[], None],
    plex_stats: Callable[[], dict[str, Any]],
    baseline_ref: str = BASELINE_REF,
) -> str:
    """Run before/after imports of 50 and 10 channels, alternating; return the section.

    Args:
        instance: The instance the children's runs are stored in (their `DAGSTER_HOME`).
        lineups: The lineup file for 50 and for 10 channels.
        measure: Figures of a finished run from the database (`channels`, `build_sum_s`…).
        reset: Empties the project's tables and the emulator's counters before a run.
        plex_stats: The emulator's counters (`total`, `by_kind`).
        baseline_ref: The git revision "before" is measured from.
    """
    here = Path(__file__).resolve().parent.parent
    results: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="airwave-fanout-") as tmp:
        helpers = Path(tmp) / "helpers"
        helpers.mkdir()
        (helpers / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (helpers / "fanout_child.py").write_text(CHILD)
        trees = {"before": unpack_baseline(baseline_ref, Path(tmp)), "after": here, "threads": here}
        for channels in (50, 10):
            for name in VARIANTS:
                reset()
                sql_log = Path(tmp) / f"sql-{name}-{channels}.log"
                load = os.getloadavg()
                figures = run_child(
                    trees[name], helpers, lineups[channels], sql_log, EXECUTORS[name]
                )
                statements = Counter(sql_log.read_text().split()) if sql_log.exists() else {}
                stats = plex_stats()
                measured = measure(figures["run_id"])
                overheads = step_overheads(instance, figures["run_id"])
                work = measured["build_sum_s"] / max(measured["channels"], 1)
                results[name, channels] = {
                    **figures,
                    **measured,
                    **overheads,
                    "load": load,
                    "work_s": work,
                    "orchestration_s": overheads["to_success_s"] - work,
                    "plex": stats,
                    "sql": dict(statements),
                }
                sys.stderr.write(f"fanout {name} {channels}: {figures['wall_s']:.1f} s\n")
    return render(results, baseline_ref)


def render(results: dict[tuple[str, int], dict[str, Any]], baseline_ref: str) -> str:
    """The BENCHMARKS.md section of one before/after comparison."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    for channels in (50, 10):
        for name in VARIANTS:
            m = results[name, channels]
            sql_total = sum(m["sql"].values())
            load = ", ".join(f"{x:.2f}" for x in m["load"])
            rows.append(
                f"| {LABELS[name]} | {channels} | {m['wall_s']:.1f} s | {m['channels']} "
                f"| {m['orchestration_s']:.2f} s | {m['work_s']:.2f} s "
                f"| {m['plex']['total'] / channels:.1f} | {sql_total / channels:.1f} | {load} |"
            )

    def marginal(name: str) -> float:
        return (results[name, 50]["wall_s"] - results[name, 10]["wall_s"]) / 40

    ratio = results["after", 50]["wall_s"] / results["before", 50]["wall_s"]
    threads_ratio = results["threads", 50]["wall_s"] / results["before", 50]["wall_s"]
    kinds = sorted(
        set(results["before", 50]["plex"]["by_kind"]) | set(results["after", 50]["plex"]["by_kind"])
    )
    plex_rows = [
        f"| {kind} | {results['before', 50]['plex']['by_kind'].get(kind, 0)} "
        f"| {results['after', 50]['plex']['by_kind'].get(kind, 0)} |"
        for kind in kinds
    ]
    verbs = sorted(set(results["before", 50]["sql"]) | set(results["after", 50]["sql"]))
    sql_rows = [
        f"| {verb} | {results['before', 50]['sql'].get(verb, 0)} "
        f"| {results['after', 50]['sql'].get(verb, 0)} |"
        for verb in verbs
    ]
    lines = [
        "## import_lineup before / after issue 25: 50 and 10 channels, side by side",
        "",
        f"Measured {when} on {os.cpu_count()} cores. Reproduce with `make bench` (everything) "
        "or `.venv/bin/python -m bench.run --only fanout` (this section). Before is the code "
        f"of `{baseline_ref}` (`git archive`, run from its own tree), after is this checkout; "
        "same emulator (20 ms per request), database, instance and lineups; runs alternate "
        "before/after/threads. Before and after on the multiprocess executor (forkserver, 4 "
        "builds at once; the baseline's only one), then this checkout on its default, threads "
        "(4 at once).",
        "",
        "| code | channels | wall time | channels built | orchestration / step "
        "| build work / step | Plex requests / channel | SQL statements / channel "
        "| load average before the run (1, 5, 15 min) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        f"after / before wall-time ratio at 50 channels: **{ratio:.2f}x**; threads / before: "
        f"**{threads_ratio:.2f}x**. Marginal cost of a channel (wall at 50 minus wall at 10, "
        f"over 40): before {marginal('before'):.2f} s, after {marginal('after'):.2f} s, "
        f"threads {marginal('threads'):.2f} s.",
        "",
        "Orchestration and build work per step are measured as in the executor comparison "
        "below. Plex requests and SQL statements are the run's totals divided by its channels "
        "(planning, packages and the report included); SQL statements count what the "
        "project's engine sent, not Dagster's event storage.",
        "",
        "| Plex requests by kind (50 channels) | before | after |",
        "|---|---:|---:|",
        *plex_rows,
        "",
        "| SQL statements by verb (50 channels) | before | after |",
        "|---|---:|---:|",
        *sql_rows,
        "",
    ]
    return "\n".join(lines)
