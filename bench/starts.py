"""Starts benchmark: `airwave import --wait` to SUCCESS, with a server up and without, before/after.

Issue 25 asks that a run begin building within about a second of the command when `airwave
serve` or `airwave dev` is up, and that the command's own start be measured without one. Each
measurement here is the whole command, as a person or a script sees it: the process starts, finds
(or does not find) a server, submits, waits and exits. "Before" is the code of a git revision
unpacked with `git archive` (`fanout.unpack_baseline`), "after" is this checkout; each tree runs
its own `airwave` script entry (from its own pyproject.toml) and its own servers, on a home and a
database of its own, against the bench's Plex emulator. Within a mode both trees' servers are up
together and the imports alternate before/after, so a load change on a shared machine falls on
both.

The broken-down times come from the run's event log in the tree's own Dagster storage, relative
to the command's start: when the run id was printed (the CLI's stderr), when the run was created
(submitted), when a run worker was asked for (`PIPELINE_STARTING`: the queue's dequeue), when the
first step started, when the run succeeded, and when the command exited.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from airwave_dagster import settings
from airwave_dagster.cli import environment
from airwave_dagster.cli.serve import daemon_healthy, location_loaded
from bench.fanout import unpack_baseline
from bench.tables import IMPORT_TABLES, truncate

SMALL_CHANNELS = 2
REPEATS = 3
MODES = ("none", "serve", "dev")
"""No server (the command starts a code server), `airwave serve` up, `airwave dev` up.

No server comes first: a daemon stopped less than a minute before still looks alive to a
command (its heartbeat), which then queues its run for it and launches the run itself only
after 20 s (docs/durability.md, "A queue nothing takes"), which is not what this measures."""
_READY_SECONDS = 600.0
_IMPORT_SECONDS = 900.0

_ENTRY = """
import importlib, sys, tomllib
from pathlib import Path

target = tomllib.loads(Path("pyproject.toml").read_text())["project"]["scripts"]["airwave"]
module, _, name = target.partition(":")
sys.argv[0] = "airwave"
getattr(importlib.import_module(module), name)()
"""
"""The tree's own `airwave` script, run from its directory (as its installed script would)."""


@dataclass(frozen=True)
class Tree:
    """One version of the code and the home, database and environment its commands use."""

    name: str
    root: Path
    home: Path
    database_url: str
    env: dict[str, str]

    def airwave(self, *args: str) -> list[str]:
        """The argv of `airwave ARGS` with this tree's code."""
        return [sys.executable, "-c", _ENTRY, *args]


def _tree(name: str, root: Path, tmp: Path, server_url: str, plex: tuple[str, str]) -> Tree:
    database_url = environment.ensure_database(server_url, f"airwave_bench_starts_{name}")
    home = tmp / f"home-{name}"
    home.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        # The bench process exported its own Dagster storage and its settings' executor; each
        # tree derives its own storage and runs on its own code's default executor.
        if key not in ("DAGSTER_HOME", settings.DAGSTER_PG_URL_ENV, "PYTHONPATH")
        and key != settings.EXECUTOR_ENV
    }
    env.update(
        {
            "PYTHONPATH": str(root),
            "AIRWAVE_HOME": str(home),
            settings.DATABASE_URL_ENV: database_url,
            settings.PLEX_URL_ENV: plex[0],
            settings.PLEX_TOKEN_ENV: plex[1],
        }
    )
    return Tree(name, root, home, database_url, env)


@contextmanager
def _server(tree: Tree, mode: str) -> Iterator[None]:
    """`airwave serve` or `airwave dev` of `tree`, ready (location loaded, daemon healthy)."""
    if mode == "none":
        yield
        return
    port = environment._free_port()
    args = ["--port", str(port)]
    if mode == "serve":
        args += ["--code-server-port", str(environment._free_port())]
    log = (tree.home / f"{mode}.log").open("ab")
    process = subprocess.Popen(
        tree.airwave(mode, *args),
        cwd=tree.root,
        env=tree.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + _READY_SECONDS
        while not (location_loaded(base) and daemon_healthy(base)):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tree.name}: airwave {mode} did not get ready ({log.name})")
            time.sleep(1)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def timed_import(tree: Tree, lineup: Path) -> dict[str, Any]:
    """One `airwave import LINEUP --wait --force`, timed from outside and broken down."""
    truncate(tree.database_url, IMPORT_TABLES)
    load = os.getloadavg()
    started = time.time()
    process = subprocess.Popen(
        tree.airwave("import", str(lineup), "--wait", "--force"),
        cwd=tree.root,
        env=tree.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None and process.stdout is not None
    printed: float | None = None
    run_id: str | None = None
    stderr_lines = []
    for line in process.stderr:
        stderr_lines.append(line)
        if printed is None and line.startswith("run ") and "in the Dagster UI" in line:
            printed = time.time() - started
            run_id = line.split()[1]
    stdout = process.stdout.read()
    code = process.wait(timeout=_IMPORT_SECONDS)
    exited = time.time() - started
    if code != 0 or run_id is None or "SUCCESS" not in stdout:
        raise RuntimeError(f"{tree.name}: import failed ({code}): {''.join(stderr_lines)[-2000:]}")
    return {
        "load": load,
        "exit_s": exited,
        "printed_s": printed,
        "remote_server": any("those of the webserver" in line for line in stderr_lines),
        **_events(tree.database_url, run_id, started),
    }


def _events(database_url: str, run_id: str, started: float) -> dict[str, float]:
    """Seconds from the command's start to the run's milestones, from its event log."""
    dagster_url = environment.with_search_path(database_url, "dagster")
    engine = sa.create_engine(dagster_url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        created = conn.execute(
            sa.text("SELECT create_timestamp FROM runs WHERE run_id = :r"), {"r": run_id}
        ).scalar_one()
        rows = conn.execute(
            sa.text(
                "SELECT dagster_event_type, min(timestamp), max(timestamp) FROM event_logs "
                "WHERE run_id = :r AND dagster_event_type IN "
                "('PIPELINE_STARTING', 'PIPELINE_START', 'STEP_START', 'STEP_SUCCESS', "
                "'PIPELINE_SUCCESS') GROUP BY dagster_event_type"
            ),
            {"r": run_id},
        ).all()
    engine.dispose()

    def since(moment: Any) -> float:
        return float(moment.replace(tzinfo=UTC).timestamp() - started)

    first = {kind: since(low) for kind, low, _high in rows}
    last = {kind: since(high) for kind, _low, high in rows}
    return {
        "created_s": since(created),
        "starting_s": first.get("PIPELINE_STARTING", float("nan")),
        "worker_s": first["PIPELINE_START"],
        "first_step_s": first["STEP_START"],
        "last_step_s": last["STEP_SUCCESS"],
        "success_s": first["PIPELINE_SUCCESS"],
    }


def starts_section(
    server_url: str,
    plex: tuple[str, str],
    lineup: Path,
    baseline_ref: str,
    modes: tuple[str, ...] = MODES,
    repeats: int = REPEATS,
    channels: int = SMALL_CHANNELS,
    warm_up: bool = False,
) -> str:
    """Measure every mode before and after; return the BENCHMARKS.md section.

    `channels` is how many the lineup file has (the section's heading names it); `warm_up`
    runs one untimed import per tree and mode first (a server's first run also pays for its
    own first look at the location and the storage).
    """
    here = Path(__file__).resolve().parent.parent
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="airwave-starts-") as tmp:
        roots = {"before": unpack_baseline(baseline_ref, Path(tmp)), "after": here}
        trees = [_tree(name, root, Path(tmp), server_url, plex) for name, root in roots.items()]
        for tree in trees:  # migrations and storage once, outside the timings
            subprocess.run(
                tree.airwave("db", "upgrade"),
                cwd=tree.root,
                env=tree.env,
                check=True,
                capture_output=True,
            )
        for mode in modes:
            with _server(trees[0], mode), _server(trees[1], mode):
                for tree in trees if warm_up else ():
                    timed_import(tree, lineup)
                for _ in range(repeats):
                    for tree in trees:
                        figures = timed_import(tree, lineup)
                        results.setdefault((tree.name, mode), []).append(figures)
                        sys.stderr.write(
                            f"starts {tree.name} {mode}: {figures['exit_s']:.1f} s to exit\n"
                        )
    return render(results, baseline_ref, modes, repeats, channels, warm_up)


def _only(channels: int) -> str:
    """The `bench.run --only` name of the section for a lineup of `channels`."""
    return "starts" if channels == SMALL_CHANNELS else f"starts-{channels}"


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(run[key]) for run in runs)


def step(runs: list[dict[str, Any]], start: str, end: str) -> float:
    """The median of one stretch (from `start` to `end`) over the runs."""
    return statistics.median(float(run[end]) - float(run[start]) for run in runs)


_MODE_LABEL = {
    "serve": "`airwave serve` up",
    "dev": "`airwave dev` up",
    "none": "no server (own code server)",
}


def render(
    results: dict[tuple[str, str], list[dict[str, Any]]],
    baseline_ref: str,
    modes: tuple[str, ...],
    repeats: int,
    channels: int = SMALL_CHANNELS,
    warm_up: bool = False,
) -> str:
    """The BENCHMARKS.md section of one before/after comparison of CLI starts."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    for mode in modes:
        for name in ("before", "after"):
            runs = results[name, mode]
            loads = "; ".join(", ".join(f"{x:.1f}" for x in run["load"]) for run in runs)
            rows.append(
                f"| {_MODE_LABEL[mode]} | {name} | **{_median(runs, 'exit_s'):.1f} s** "
                f"| {'yes' if all(r['remote_server'] for r in runs) else 'no'} "
                f"| {_median(runs, 'printed_s'):.2f} s | {_median(runs, 'created_s'):.2f} s "
                f"| {step(runs, 'created_s', 'starting_s'):.2f} s "
                f"| {step(runs, 'starting_s', 'worker_s'):.2f} s "
                f"| {step(runs, 'worker_s', 'first_step_s'):.2f} s "
                f"| {_median(runs, 'first_step_s'):.1f} s "
                f"| {step(runs, 'success_s', 'exit_s'):.2f} s | {loads} |"
            )
    lines = [
        f"## CLI starts: `airwave import --wait` of {channels} channels to SUCCESS",
        "",
        f"Measured {when} on {os.cpu_count()} cores. Reproduce with `make bench` (everything) or "
        f"`.venv/bin/python -m bench.run --only {_only(channels)}` (this section). Before is the "
        "code of "
        f"`{baseline_ref}` (`git archive`, run from its own tree), after is this checkout; each "
        "with its own home, database and servers, the bench's Plex emulator (20 ms per "
        f"request); {'after one untimed import per tree and server, ' if warm_up else ''}"
        f"imports alternate before/after, {repeats} of each; medians. Times are from the "
        "command's start; the run's come from its event log.",
        "",
        "| server | code | command to exit | submitted to the server | run id printed "
        "| run created | queue (created → worker asked) | run worker start (→ run start) "
        "| → first step | first step | run success → exit "
        "| load average before each import (1, 5, 15 min) |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        '"Queue" is the daemon\'s dequeue (with a server) or the command\'s own launch; "run '
        "worker start\" is the code server's start of a run worker process until the job "
        'begins; "→ first step" is the step executor\'s own start (its forkserver and the '
        'first step process); "run success → exit" is the command noticing the end, reading '
        "the report and exiting.",
        "",
    ]
    return "\n".join(lines)
