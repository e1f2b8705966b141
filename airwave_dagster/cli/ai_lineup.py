"""`airwave lineup`: start the `ai_lineup` job (visible in the UI, resumable), maybe wait for it."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from airwave_dagster.cli import console, environment, starts
from airwave_dagster.run_tags import (
    AI_LINEUP_JOB,
    ANALYZE_LIBRARY_OP,
    APPROVAL_TAG,
    AWAITING_APPROVAL_TAG,
    LIMIT_TAG,
    PROVIDER_TAG,
    ROLLBACK_LINEUP_JOB,
)
from airwave_dagster.settings import API_KEY_ENV, Settings

if TYPE_CHECKING:
    from resources.stores import Stores


def lineup_run_config(
    *,
    limit: int,
    budget_usd: float | None,
    confirm_wipe: bool,
    provider: str,
    approval: str = "auto",
) -> dict[str, Any]:
    """The run config of `ai_lineup` for the CLI's options (never a secret)."""
    config: dict[str, Any] = {
        "limit": limit,
        "confirm_wipe": confirm_wipe,
        "provider": provider,
        "approval": APPROVAL_POLICIES[approval],
    }
    if budget_usd is not None:
        config["budget_usd"] = budget_usd
    return {
        "ops": {ANALYZE_LIBRARY_OP: {"config": config}},
        # The run worker shares this terminal; the CLI shows progress itself.
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }


APPROVAL_POLICIES = {
    "required": "required",
    "auto": "auto_when_nothing_removed",
    "never": "never",
}
"""`--approval` choices → the job's `approval` config."""
EXIT_AWAITING_APPROVAL = 3
"""`airwave lineup --wait` when the run stopped at the approval gate."""


def launch_refusal(*, provider: str, limit: int) -> str | None:
    """Why the run must not start (checked before any run exists), or None.

    A previous AI lineup is no longer a refusal: the run plans, then stops at the approval gate
    with the diff (or passes it with `--confirm-wipe`, a pre-approval).
    """
    if limit < 0:
        return f"--limit must be 0 (all) or positive, got {limit}"
    # Checked here only to refuse early; the job itself reads the key through `LlmResource`.
    settings = Settings.load()
    key = settings.anthropic_api_key
    if provider == "anthropic" and (key is None or not key.get_secret_value()):
        return (
            f"provider 'anthropic' needs an API key in {API_KEY_ENV}, which is not set; "
            "set it, or use --provider offline"
        )
    return None


_PHASES = {
    "analyze": "profiling the library",
    "context": "building the shared context",
    "plan": "planning packages and channels",
    "packages": "creating packages",
    "numbering": "assigning channel numbers",
    "build": "building channels",
    "report": "writing the report",
}
"""The job's trace phases, worded for the progress display (unknown phases show as they are)."""


def _progress(stores: Stores, run_ids: list[str]) -> console.Snapshot:
    built = failed = 0
    total: int | None = None
    phase: str | None = None
    for row in stores.ai.traces(run_ids):
        phase = _PHASES.get(row["phase"], row["phase"])
        if row["phase"] == "numbering" and row["output"]:
            total = len(row["output"].get("selected", []))
        elif row["phase"] == "build":
            if row["status"] == "failed":
                failed += 1
            else:
                built += 1
    return console.Snapshot(built=built, failed=failed, total=total, phase=phase)


def lineup_progress(instance: Any, run_id: str) -> console.Progress:
    """The progress reader of an `ai_lineup` run and of the runs that resume it."""
    from airwave_dagster.cli import launcher

    stores = environment.open_project_stores()
    return lambda: _progress(
        stores, [r.run_id for r in launcher.run_tree(instance, run_id)] or [run_id]
    )


def _report(stores: Stores, run_ids: list[str]) -> dict[str, Any] | None:
    reports = [row["output"] for row in stores.ai.traces(run_ids) if row["phase"] == "report"]
    return reports[-1] if reports else None


def run_lineup(
    target: starts.Target,
    *,
    limit: int = 0,
    budget_usd: float | None = None,
    confirm_wipe: bool = False,
    provider: str = "auto",
    wait: bool = False,
    as_json: bool = False,
    idempotency_key: str | None = None,
    approval: str = "auto",
) -> int:
    """Start an `ai_lineup` run against `workspace.yaml`; with `wait`, print its report.

    With `idempotency_key`, a start while a run exists for that key returns that run (a failed
    one is resumed). Callers hold `target` open until this returns.

    Returns the process exit code (0 on success).
    """
    refusal = launch_refusal(provider=provider, limit=limit)
    if refusal is not None:
        console.error(refusal)
        return console.ExitCode.INPUT_REFUSED
    run_config = lineup_run_config(
        limit=limit,
        budget_usd=budget_usd,
        confirm_wipe=confirm_wipe,
        provider=provider,
        approval=approval,
    )
    tags = {PROVIDER_TAG: provider, LIMIT_TAG: str(limit), APPROVAL_TAG: approval}
    try:
        started = starts.start(
            target,
            environment.open_run_starts(),
            job_name=AI_LINEUP_JOB,
            run_config=run_config,
            tags=tags,
            key=idempotency_key,
        )
    except starts.LaunchRefused as error:
        console.error(str(error))
        return console.ExitCode.CONFLICT
    run = started.run
    console.show_run_page(run.run_id, target)
    if not started.created:
        console.stderr.print(
            f"run {run.run_id} already exists for this key ({run.status})", highlight=False
        )
    if not wait:
        console.stdout.print(f"started run {run.run_id}", highlight=False)
        return 0
    from airwave_dagster.cli import launcher

    instance = console.instance()
    console.stderr.print(f"run {run.run_id} started; waiting for it to finish", highlight=False)
    console.wait_showing_progress(
        instance, run.run_id, lineup_progress(instance, run.run_id), target
    )
    # A run whose worker died is resumed by the daemon; follow it to the run that ended the tree.
    finished = launcher.follow(instance, run.run_id)
    status = finished.status.value
    report = _report(
        environment.open_project_stores(),
        [r.run_id for r in launcher.run_tree(instance, run.run_id)] or [run.run_id],
    )
    stopped = instance.get_run_by_id(finished.run_id)
    if status == "SUSPENDED" and stopped is not None and stopped.tags.get(AWAITING_APPROVAL_TAG):
        return _awaiting(instance, finished.run_id, as_json=as_json)
    if status != "SUCCESS" or report is None:
        for message in launcher.failure_messages(instance, run.run_id):
            console.stderr.print(message, highlight=False, markup=False)
        if as_json:
            sys.stdout.write(json.dumps({"run_id": run.run_id, "status": status}) + "\n")
        console.stderr.print(
            f"run {run.run_id} ended {status}; `airwave runs resume {run.run_id}` continues it",
            highlight=False,
        )
        return console.ExitCode.RUN_FAILED
    if as_json:
        sys.stdout.write(
            json.dumps({"run_id": run.run_id, "status": "SUCCESS", "report": report}) + "\n"
        )
    else:
        console.print_markdown(report.get("markdown", ""))
        console.stdout.print(f"run {run.run_id}: SUCCESS", highlight=False)
    return 0


def _awaiting(instance: Any, run_id: str, *, as_json: bool) -> int:
    from airwave_dagster.cli.approvals import find_interrupt, print_interrupt

    interrupt = find_interrupt(instance, run_id)
    if as_json:
        payload = interrupt.payload if interrupt is not None else None
        sys.stdout.write(
            json.dumps({"run_id": run_id, "status": "AWAITING_APPROVAL", "approval": payload})
            + "\n"
        )
    elif interrupt is not None:
        print_interrupt(interrupt)
    console.stderr.print(
        f"run {run_id} stopped at the approval gate; nothing was written. "
        f"`airwave approve {run_id}` continues it, "
        f"`airwave reject {run_id} --reason TEXT` ends it",
        highlight=False,
    )
    return EXIT_AWAITING_APPROVAL


@click.group("lineup", invoke_without_command=True)
@click.option(
    "--limit",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="A trial: build only N channels of the plan (round-robin across its packages) and "
    "remove nothing; AI channels on air that none of them replaces (same name) stay as they "
    "are, listed as 'kept' in the approval diff. 0 (default) builds the whole plan and "
    "replaces the previous AI lineup.",
)
@click.option(
    "--budget-usd",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Most the run may spend on models.",
)
@click.option(
    "--confirm-wipe",
    is_flag=True,
    help="Pre-approve replacing this source's previous AI lineup (for scripts).",
)
@click.option(
    "--approval",
    type=click.Choice(sorted(APPROVAL_POLICIES)),
    default="auto",
    show_default=True,
    help="Stop for approval after the plan: always, only when something on air would be "
    "removed (auto), or never.",
)
@click.option(
    "--provider",
    type=click.Choice(["anthropic", "offline"]),
    default=None,
    help="Default: anthropic when ANTHROPIC_API_KEY is set, otherwise offline.",
)
@click.option("--wait", is_flag=True, help="Show progress and print the report at the end.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (implies --wait).")
@click.option("--idempotency-key", help="Starts with the same key return the same run.")
@click.pass_context
def lineup_command(
    ctx: click.Context,
    limit: int,
    budget_usd: float | None,
    confirm_wipe: bool,
    provider: str | None,
    wait: bool,
    as_json: bool,
    idempotency_key: str | None,
    approval: str,
) -> None:
    """Build an AI lineup of the Plex library as a Dagster run of `ai_lineup`.

    `airwave lineup rollback RUN_ID` puts back the lineup such a run replaced.
    """
    if ctx.invoked_subcommand is not None:
        return
    server = console.prepare_to_start()
    with console.target_for(server) as target:
        code = run_lineup(
            target,
            limit=limit,
            budget_usd=budget_usd,
            confirm_wipe=confirm_wipe,
            provider=provider or "auto",
            wait=wait or as_json,
            as_json=as_json,
            idempotency_key=idempotency_key,
            approval=approval,
        )
    sys.exit(code)


ROLLBACK_PLAN_OP = "plan_rollback"
"""The rollback job's first op: its run config is addressed to it."""


def rollback_run_config(
    run_id: str, *, approval: str = "auto", confirm: bool = False
) -> dict[str, Any]:
    """The run config of `rollback_lineup` for the CLI's options."""
    return {
        "ops": {
            ROLLBACK_PLAN_OP: {
                "config": {
                    "run_id": run_id,
                    "approval": APPROVAL_POLICIES[approval],
                    "confirm": confirm,
                }
            }
        },
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }


def run_rollback(
    target: starts.Target,
    run_id: str,
    *,
    approval: str = "auto",
    confirm: bool = False,
    wait: bool = False,
    as_json: bool = False,
    idempotency_key: str | None = None,
) -> int:
    """Start a `rollback_lineup` run of `run_id`'s lineup; with `wait`, print what it did."""
    try:
        started = starts.start(
            target,
            environment.open_run_starts(),
            job_name=ROLLBACK_LINEUP_JOB,
            run_config=rollback_run_config(run_id, approval=approval, confirm=confirm),
            tags={APPROVAL_TAG: approval},
            key=idempotency_key,
        )
    except starts.LaunchRefused as error:
        console.error(str(error))
        return console.ExitCode.CONFLICT
    run = started.run
    console.show_run_page(run.run_id, target)
    if not wait:
        console.stdout.print(f"started run {run.run_id}", highlight=False)
        return 0
    from airwave_dagster.cli import launcher

    instance = console.instance()
    console.stderr.print(f"run {run.run_id} started; waiting for it to finish", highlight=False)
    console.wait_showing_progress(
        instance, run.run_id, lambda: console.Snapshot(built=0, phase="rolling back"), target
    )
    finished = launcher.follow(instance, run.run_id)
    status = finished.status.value
    tree = [r.run_id for r in launcher.run_tree(instance, run.run_id)] or [run.run_id]
    stopped = instance.get_run_by_id(finished.run_id)
    if status == "SUSPENDED" and stopped is not None and stopped.tags.get(AWAITING_APPROVAL_TAG):
        return _awaiting(instance, finished.run_id, as_json=as_json)
    from airwave_dagster.cli.approvals import print_rollback, rollback_result

    result = rollback_result(instance, tree)
    if status != "SUCCESS" or result is None:
        for message in launcher.failure_messages(instance, finished.run_id):
            console.stderr.print(message, highlight=False, markup=False)
        if as_json:
            sys.stdout.write(json.dumps({"run_id": run.run_id, "status": status}) + "\n")
        console.stderr.print(f"run {run.run_id} ended {status}", highlight=False)
        return console.ExitCode.RUN_FAILED
    if as_json:
        sys.stdout.write(
            json.dumps({"run_id": run.run_id, "status": "SUCCESS", "rollback": result}) + "\n"
        )
    else:
        print_rollback(result)
        console.stdout.print(f"run {run.run_id}: SUCCESS", highlight=False)
    return 0


@lineup_command.command("rollback")
@click.argument("run_id")
@click.option(
    "--approval",
    type=click.Choice(sorted(APPROVAL_POLICIES)),
    default="auto",
    show_default=True,
    help="Stop for approval with the diff: always, when something on air would be removed "
    "(auto: nearly always for a rollback), or never.",
)
@click.option("--confirm", is_flag=True, help="Pre-approve the rollback (for scripts).")
@click.option("--wait", is_flag=True, help="Wait and print what was removed and restored.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (implies --wait).")
@click.option("--idempotency-key", help="Starts with the same key return the same run.")
def rollback_command(
    run_id: str,
    approval: str,
    confirm: bool,
    wait: bool,
    as_json: bool,
    idempotency_key: str | None,
) -> None:
    """Put back the AI lineup that the `ai_lineup` run RUN_ID replaced.

    Refused with the reasons when the air changed since that run in a way that makes the
    restore ambiguous (docs/ai-lineup.md "Rolling back").
    """
    server = console.prepare_to_start()
    with console.target_for(server) as target:
        code = run_rollback(
            target,
            run_id,
            approval=approval,
            confirm=confirm,
            wait=wait or as_json,
            as_json=as_json,
            idempotency_key=idempotency_key,
        )
    sys.exit(code)
