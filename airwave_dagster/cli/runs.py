"""`airwave runs …`: list, inspect, resume, re-execute and cancel runs of the UI's instance.

Runs created here go through the same workspace and run queue as the UI, so they are visible and
re-executable there, and the UI's own "re-execute from failure" is the same complete resume
(`airwave_dagster.durability`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.table import Table

from airwave_dagster.cli import console, environment, starts
from airwave_dagster.domain.permissions import run_permission
from airwave_dagster.run_tags import (
    AI_LINEUP_JOB,
    AWAITING_APPROVAL,
    CANCEL_REASON_TAG,
    CONFIG_CHANGED_TAG,
    DRY_RUN_TAG,
    IMPORT_LINEUP_JOB,
    LINEUP_TAG,
    STARTED_BY_TAG,
    STATUS_TAG,
)


def _instance(*, plex: bool = False) -> Any:
    """The instance, after the environment is exported; with `plex` also the Plex server.

    Commands that may start a code server (resume, reexecute) need `plex`: the runs it launches
    read `PLEX_URL`/`PLEX_TOKEN`, which only the bootstrap sets when the embedded emulator is used.
    """
    console.prepare(plex=plex)
    return console.instance()


def _report(instance: Any, run_id: str) -> dict[str, Any] | None:
    from resources.io_manager import stored_report

    return stored_report(instance, run_id, environment.exported_database_url())


def step_states(instance: Any, run_id: str) -> dict[str, list[str]]:
    """Each step key of the run (mapped steps resolved) under its latest state."""
    import dagster as dg

    kinds = {
        dg.DagsterEventType.STEP_START: "IN_PROGRESS",
        dg.DagsterEventType.STEP_SUCCESS: "SUCCESS",
        dg.DagsterEventType.STEP_FAILURE: "FAILURE",
        dg.DagsterEventType.STEP_SKIPPED: "SKIPPED",
        dg.DagsterEventType.STEP_UP_FOR_RETRY: "UP_FOR_RETRY",
    }
    latest: dict[str, str] = {}
    for record in instance.all_logs(run_id, of_type=set(kinds)):
        event = record.dagster_event
        if event is not None and event.step_key:
            latest[event.step_key] = kinds[event.event_type]
    states: dict[str, list[str]] = {}
    for key, state in latest.items():
        states.setdefault(state, []).append(key)
    return {state: sorted(keys) for state, keys in sorted(states.items())}


def asset_checks(instance: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's asset check results, as its event log has them (the latest per check)."""
    import dagster as dg

    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        event = record.dagster_event
        evaluation = event.event_specific_data if event is not None else None
        if not isinstance(evaluation, dg.AssetCheckEvaluation):
            continue
        asset = evaluation.asset_key.to_user_string()
        latest[(asset, evaluation.check_name)] = {
            "asset": asset,
            "check": evaluation.check_name,
            "passed": evaluation.passed,
            "severity": evaluation.severity.value,
            "description": evaluation.description or "",
        }
    return list(latest.values())


def checks_lines(checks: list[dict[str, Any]]) -> list[str]:
    """`runs show`'s asset check lines: name, verdict, severity and the short description."""
    return [
        f"    {c['asset']}:{c['check']}  {'passed' if c['passed'] else 'FAILED'}  "
        f"{c['severity']}  {c['description']}"
        for c in checks
    ]


def refused(instance: Any, run_id: str, error: Exception) -> NoReturn:
    """End a refused resume, re-execution or cancel: 5 when the run does not exist, else 4."""
    missing = instance.get_run_by_id(run_id) is None
    console.fail(str(error), console.ExitCode.NOT_FOUND if missing else console.ExitCode.CONFLICT)


def _finish(
    run: starts.RunInfo, target: starts.Target, *, wait: bool, as_json: bool, verb: str
) -> None:
    if not wait:
        if as_json:
            print(json.dumps({"run_id": run.run_id, "status": run.status}))
        else:
            console.stdout.print(f"{verb} run {run.run_id}", highlight=False)
        return
    from airwave_dagster.cli import launcher

    instance = console.instance()
    console.stderr.print(f"{verb} run {run.run_id}; waiting for it to finish", highlight=False)
    if run.job_name == IMPORT_LINEUP_JOB:
        from airwave_dagster.cli.lineup_files import import_progress

        console.wait_showing_progress(
            instance, run.run_id, import_progress(instance, run.run_id), target
        )
    elif run.job_name == AI_LINEUP_JOB:
        from airwave_dagster.cli.ai_lineup import lineup_progress

        console.wait_showing_progress(
            instance, run.run_id, lineup_progress(instance, run.run_id), target
        )
    final = launcher.follow(instance, run.run_id)
    report = _report(instance, final.run_id)
    if as_json:
        print(json.dumps({"run_id": final.run_id, "status": final.status.value, "report": report}))
    else:
        for message in launcher.failure_messages(instance, final.run_id):
            console.stderr.print(message, highlight=False, markup=False)
        console.stdout.print(f"run {final.run_id}: {final.status.value}", highlight=False)
    if final.status.value != "SUCCESS":
        sys.exit(console.ExitCode.RUN_FAILED)


@click.group("runs")
def runs_group() -> None:
    """Inspect, resume, re-execute and cancel runs of the instance the UI uses."""


def started_cell(timestamp: float | None) -> str:
    """When a run started, for the table: UTC to the minute (16 characters, never wrapped).

    The column header says UTC; `--json` keeps the full ISO 8601 time with the local offset.
    """
    if not timestamp:
        return ""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M")


def started_by(tags: Mapping[str, str]) -> str:
    """Who started a run: the principal stamped on it (docs/security.md), else Dagster's `user`.

    Empty for runs created before runs were stamped, or by a process that set neither.
    """
    return tags.get(STARTED_BY_TAG) or tags.get("user") or ""


def dry_run_cell(value: str | None) -> str:
    """`yes` for a dry-run import, `no` for a real one, empty for jobs without the choice.

    Args:
        value: The run's `DRY_RUN_TAG`, if it has one.
    """
    return "" if value is None else "yes" if value == "true" else "no"


def status_cell(status: str, airwave_status: str | None) -> str:
    """Dagster's status, except a run waiting at an approval gate: `AWAITING APPROVAL`.

    Such a run is SUSPENDED (airwave_dagster/suspension.py); one stopped by a release before
    that is FAILURE with the `awaiting-approval` status tag, and waits just the same.

    Args:
        status: The run's Dagster status.
        airwave_status: Its `STATUS_TAG`, if it has one.
    """
    if status == "SUSPENDED" or (status == "FAILURE" and airwave_status == AWAITING_APPROVAL):
        return "AWAITING APPROVAL"
    return status


def runs_table(rows: list[dict[str, Any]]) -> Table:
    """`runs list` as a table: ids and start times are never cut or wrapped."""
    table = Table()
    table.add_column("run id", no_wrap=True, min_width=36)  # ids are what users copy: never cut
    table.add_column("job", no_wrap=True)
    # As wide as NOT_STARTED; `AWAITING APPROVAL` takes two lines.
    table.add_column("status", min_width=11)
    table.add_column("started (UTC)", no_wrap=True)
    table.add_column("by", no_wrap=True)
    table.add_column("dry run", no_wrap=True)
    table.add_column("lineup", overflow="fold")
    table.add_column("parent", overflow="fold")
    for row in rows:
        table.add_row(
            row["run_id"],
            row["job"],
            status_cell(row["status"], row["airwave_status"]),
            started_cell(row["start_time"]),
            row["started_by"],
            dry_run_cell(row["dry_run"]),
            row["lineup"],
            row["parent"],
        )
    return table


@runs_group.command("list")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def runs_list(limit: int, as_json: bool) -> None:
    """The most recent runs."""
    instance = _instance()
    rows = []
    for run in instance.get_runs(limit=limit):
        record = instance.get_run_record_by_id(run.run_id)
        start_time = record.start_time if record and record.start_time else None
        rows.append(
            {
                "run_id": run.run_id,
                "job": run.job_name,
                "status": run.status.value,
                # ISO 8601 with the local offset: a time without one is ambiguous once shared.
                "started": datetime.fromtimestamp(start_time).astimezone().isoformat("T", "seconds")
                if start_time
                else "",
                "start_time": start_time,
                "airwave_status": run.tags.get(STATUS_TAG),
                "started_by": started_by(run.tags),
                "dry_run": run.tags.get(DRY_RUN_TAG),
                "lineup": run.tags.get(LINEUP_TAG, ""),
                "parent": run.parent_run_id or "",
            }
        )
    if as_json:
        print(
            json.dumps(
                [
                    {
                        **{
                            k: v
                            for k, v in row.items()
                            if k not in ("start_time", "airwave_status")
                        },
                        "awaiting_approval": status_cell(row["status"], row["airwave_status"])
                        != row["status"],
                        "dry_run": None if row["dry_run"] is None else row["dry_run"] == "true",
                    }
                    for row in rows
                ]
            )
        )
        return
    console.stdout.print(runs_table(rows))


@runs_group.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def runs_show(run_id: str, as_json: bool) -> None:
    """Status, steps by state, asset checks, failures and the report of one run."""
    from airwave_dagster.cli import launcher

    instance = _instance()
    run_id = console.run_id(run_id)
    run = instance.get_run_by_id(run_id)
    if run is None:
        console.fail(f"no run {run_id}", console.ExitCode.NOT_FOUND)
    steps = step_states(instance, run_id)
    failures = launcher.failure_messages(instance, run_id)
    checks = asset_checks(instance, run_id)
    report = _report(instance, run_id)
    tree = [
        {"run_id": r.run_id, "status": r.status.value, "parent": r.parent_run_id}
        for r in launcher.run_tree(instance, run_id)
    ]
    if as_json:
        print(
            json.dumps(
                {
                    "run_id": run_id,
                    "job": run.job_name,
                    "status": run.status.value,
                    "parent_run_id": run.parent_run_id,
                    "started_by": started_by(run.tags),
                    "cancel_reason": run.tags.get(CANCEL_REASON_TAG),
                    "config_changed": config_changes(run.tags),
                    "steps": steps,
                    "failures": failures,
                    "tree": tree,
                    "checks": checks,
                    "report": report,
                }
            )
        )
        return
    console.stdout.print(f"run {run_id} ({run.job_name}): {run.status.value}", highlight=False)
    if started_by(run.tags):
        console.stdout.print(f"  started by: {started_by(run.tags)}", highlight=False)
    if run.tags.get(CANCEL_REASON_TAG):
        console.stdout.print(f"  cancel reason: {run.tags[CANCEL_REASON_TAG]}", highlight=False)
    if config_changes(run.tags):
        changed = ", ".join(config_changes(run.tags))
        console.stdout.print(f"  config changed from its parent: {changed}", highlight=False)
    for state, keys in steps.items():
        shown = ", ".join(keys[:10]) + (f", … ({len(keys) - 10} more)" if len(keys) > 10 else "")
        console.stdout.print(f"  {state}: {len(keys)}  {shown}", highlight=False)
    if len(tree) > 1:
        console.stdout.print("  run tree:", highlight=False)
        for entry in tree:
            console.stdout.print(f"    {entry['run_id']} {entry['status']}", highlight=False)
    if checks:
        console.stdout.print("  asset checks:", highlight=False)
        for line in checks_lines(checks):
            console.stdout.print(line, highlight=False, markup=False)
    for message in failures:
        console.stderr.print(message, highlight=False, markup=False)
    from airwave_dagster.cli.approvals import find_interrupt, print_interrupt

    interrupt = find_interrupt(instance, run_id)
    if interrupt is not None:
        print_interrupt(interrupt)
    if report is not None and run.job_name == IMPORT_LINEUP_JOB:
        console.print_import_report(report)
    elif report is not None:
        console.stdout.print_json(json.dumps(report))


def config_changes(tags: Mapping[str, str]) -> list[str]:
    """The run config paths a re-execution changed from its parent (`CONFIG_CHANGED_TAG`)."""
    value = tags.get(CONFIG_CHANGED_TAG, "")
    return value.split(",") if value else []


def read_config_edit(path: Path | None) -> dict[str, Any] | None:
    """The partial run config of `--config FILE` (YAML, so JSON too); exit 3 when unreadable."""
    if path is None:
        return None
    import yaml

    try:
        edit = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        console.fail(f"cannot read the config {path}: {error}", console.ExitCode.INPUT_REFUSED)
    if not isinstance(edit, dict):
        console.fail(
            f"{path} must hold a run config mapping (e.g. `execution: {{config: …}}`)",
            console.ExitCode.INPUT_REFUSED,
        )
    return edit


_CONFIG_HELP = (
    "A partial run config (YAML or JSON) merged over the run's; refused when a change would "
    "alter what a completed step already did (docs/durability.md)."
)


@runs_group.command("resume")
@click.argument("run_id")
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=_CONFIG_HELP,
)
@click.option(
    "--cancel-running",
    is_flag=True,
    help="Cancel the run first if it is still queued or in progress (one held up by a lost "
    "task, docs/scale-out.md), then resume it. Needs the cancel and the resume permission.",
)
@click.option("--wait", is_flag=True, help="Wait for the resumed run and print its outcome.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON (implies --wait).")
def runs_resume(
    run_id: str, config_file: Path | None, cancel_running: bool, wait: bool, as_json: bool
) -> None:
    """Re-execute exactly what a failed or canceled run left undone.

    Failed steps, started-but-unfinished steps and mapped steps that never started, plus
    everything downstream; every completed step's stored output is replayed, not recomputed.
    With --config, a change is allowed only where no replayed step used the old value (e.g. a
    lower `execution.config.max_concurrent`, or the config of an op that has not completed).
    """
    edit = read_config_edit(config_file)
    if cancel_running:
        _cancel_to_resume(run_id, quiet=as_json)
    _start_from(
        run_id,
        lambda target, parent: starts.resume(target, parent, edit),
        wait=wait or as_json,
        as_json=as_json,
        verb="resumed as",
    )


def _cancel_to_resume(run_id: str, *, quiet: bool) -> None:
    """Cancel `run_id` if it is still queued or in progress, so that it can be resumed.

    Both permissions are checked before the cancel, so a principal that may cancel but not
    resume changes nothing. A missing or finished run is left to the resume to report.
    """
    from airwave_dagster.cli import launcher

    instance = _instance()
    run_id = console.run_id(run_id)
    run = instance.get_run_by_id(run_id)
    if run is None or run.is_finished:
        return
    console.permitted(run_permission("resume", run.job_name))
    console.permitted(run_permission("cancel", run.job_name))
    try:
        run, changed, released = launcher.cancel(
            instance, run_id, "canceled to be resumed (airwave runs resume --cancel-running)"
        )
    except launcher.LaunchRefused as error:
        refused(instance, run_id, error)
    if changed and not quiet:
        console.stdout.print(
            f"run {run_id}: {run.status.value} ({released} leftover claim(s) deleted); resuming",
            highlight=False,
        )


@runs_group.command("reexecute")
@click.argument("run_id")
@click.option("--all", "all_steps", is_flag=True, required=True, help="Every step (required).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A partial run config (YAML or JSON) merged over the run's.",
)
@click.option("--wait", is_flag=True, help="Wait for the new run and print its outcome.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON (implies --wait).")
def runs_reexecute(
    run_id: str, all_steps: bool, config_file: Path | None, wait: bool, as_json: bool
) -> None:
    """Run every step of a finished run's job again, with its config (nothing is replayed).

    With --config, merged over the run's config; any valid change is allowed.
    """
    edit = read_config_edit(config_file)
    _start_from(
        run_id,
        lambda target, parent: starts.reexecute_all(target, parent, edit),
        wait=wait or as_json,
        as_json=as_json,
        verb="re-executed as",
    )


def _start_from(
    run_id: str,
    how: Callable[[starts.Target, str], starts.RunInfo],
    *,
    wait: bool,
    as_json: bool,
    verb: str,
) -> None:
    """Start a run from `run_id` (`how`: resume or re-execute) and report it like `_finish`.

    Exit 5 when there is no such run, 3 when its edited config does not validate, 4 when it
    cannot be resumed or re-executed now (or with that config change).
    """
    server = console.prepare_to_start()
    run_id = console.run_id(run_id)
    with console.target_for(server) as target:
        try:
            run = how(target, run_id)
        except starts.RunNotFound as error:
            console.fail(str(error), console.ExitCode.NOT_FOUND)
        except starts.ConfigInvalid as error:
            console.fail(str(error), console.ExitCode.INPUT_REFUSED)
        except starts.LaunchRefused as error:
            console.fail(str(error), console.ExitCode.CONFLICT)
        console.show_run_page(run.run_id, target)
        _finish(run, target, wait=wait, as_json=as_json, verb=verb)


@runs_group.command("cancel")
@click.argument("run_id")
@click.option("--reason", default="canceled from the airwave CLI", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def runs_cancel(run_id: str, reason: str, as_json: bool) -> None:
    """Stop a run: in-flight builds stop and their claims are deleted; it is not resumed.

    Idempotent: a finished run is reported as it is and nothing changes.
    """
    from airwave_dagster.cli import launcher
    from airwave_dagster.cli.approvals import close_open_interrupt

    instance = _instance()
    run_id = console.run_id(run_id)
    target_run = instance.get_run_by_id(run_id)
    principal = console.permitted(
        run_permission("cancel", target_run.job_name) if target_run is not None else None
    )
    # Close an open approval first: once canceled, nobody can answer it and restart the run.
    closed = close_open_interrupt(instance, run_id, reason, by=principal)
    if closed is not None and not as_json:
        console.stdout.print(f"approval {closed.gate_id}: {closed.describe()}", highlight=False)
    try:
        run, changed, released = launcher.cancel(instance, run_id, reason)
    except launcher.LaunchRefused as error:
        refused(instance, run_id, error)
    if as_json:
        print(
            json.dumps(
                {
                    "run_id": run_id,
                    "status": run.status.value,
                    "changed": changed,
                    "claims_released": released,
                    "approval_closed": closed is not None,
                }
            )
        )
        return
    if changed:
        console.stdout.print(
            f"run {run_id}: {run.status.value} ({released} leftover claim(s) deleted)",
            highlight=False,
        )
    else:
        console.stdout.print(f"run {run_id} already finished: {run.status.value}", highlight=False)
