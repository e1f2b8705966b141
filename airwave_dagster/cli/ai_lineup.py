"""`airwave lineup`: start the `ai_lineup` job (visible in the UI, resumable), maybe wait for it."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from airwave_dagster.cli import console, environment
from airwave_dagster.run_tags import AI_LINEUP_JOB, ANALYZE_LIBRARY_OP, LIMIT_TAG, PROVIDER_TAG
from airwave_dagster.settings import API_KEY_ENV, PLEX_URL_ENV, Settings

if TYPE_CHECKING:
    from resources.stores import Stores


def lineup_run_config(
    *,
    limit: int,
    budget_usd: float | None,
    confirm_wipe: bool,
    provider: str,
) -> dict[str, Any]:
    """The run config of `ai_lineup` for the CLI's options (never a secret)."""
    config: dict[str, Any] = {"limit": limit, "confirm_wipe": confirm_wipe, "provider": provider}
    if budget_usd is not None:
        config["budget_usd"] = budget_usd
    return {
        "ops": {ANALYZE_LIBRARY_OP: {"config": config}},
        # The run worker shares this terminal; the CLI shows progress itself.
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }


def launch_refusal(*, provider: str, confirm_wipe: bool, limit: int) -> str | None:
    """Why the run must not start (checked before any run exists), or None."""
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
    if confirm_wipe:
        return None
    if not settings.plex_url:
        raise RuntimeError(f"{PLEX_URL_ENV} is not set; call environment.ensure_plex() first")
    stores = environment.open_project_stores(settings)
    source_id = stores.channels.find_source(settings.plex_url)
    if source_id is None:
        return None
    counts = stores.ai.wipe_counts(source_id)
    if not counts.anything:
        return None
    return (
        f"a previous AI lineup of this source exists: {counts.channels} AI channel(s) in "
        f"{counts.packages} AI package(s) would be deleted. Nothing was started. To replace it, "
        "run again with --confirm-wipe."
    )


def _progress(stores: Stores, run_ids: list[str]) -> tuple[int, int | None]:
    done = 0
    total: int | None = None
    for row in stores.ai.traces(run_ids):
        if row["phase"] == "numbering" and row["output"]:
            total = len(row["output"].get("selected", []))
        elif row["phase"] == "build" and row["status"] != "failed":
            done += 1
    return done, total


def _report(stores: Stores, run_ids: list[str]) -> dict[str, Any] | None:
    reports = [row["output"] for row in stores.ai.traces(run_ids) if row["phase"] == "report"]
    return reports[-1] if reports else None


def run_lineup(
    *,
    limit: int = 0,
    budget_usd: float | None = None,
    confirm_wipe: bool = False,
    provider: str = "auto",
    wait: bool = False,
    as_json: bool = False,
    idempotency_key: str | None = None,
) -> int:
    """Start an `ai_lineup` run against `workspace.yaml`; with `wait`, print its report.

    With `idempotency_key`, a start while a run exists for that key returns that run.

    Returns the process exit code (0 on success).
    """
    from airwave_dagster.cli import launcher

    refusal = launch_refusal(provider=provider, confirm_wipe=confirm_wipe, limit=limit)
    if refusal is not None:
        console.error(refusal)
        return 2
    run_config = lineup_run_config(
        limit=limit, budget_usd=budget_usd, confirm_wipe=confirm_wipe, provider=provider
    )
    tags = {PROVIDER_TAG: provider, LIMIT_TAG: str(limit)}
    instance = console.instance()
    stores = environment.open_project_stores()
    with launcher.workspace(instance) as context:
        try:
            if idempotency_key is None:
                run = launcher.create_run(instance, context, AI_LINEUP_JOB, run_config, tags)
                launcher.launch(instance, context, run)
            else:
                run, created = launcher.start_idempotent(
                    instance,
                    context,
                    key=idempotency_key,
                    job_name=AI_LINEUP_JOB,
                    run_config=run_config,
                    tags=tags,
                )
                if not created:
                    console.stderr.print(
                        f"run {run.run_id} already exists for this key ({run.status.value})",
                        highlight=False,
                    )
        except launcher.LaunchRefused as error:
            console.error(str(error))
            return 2
        if not wait:
            console.stdout.print(f"started run {run.run_id}", highlight=False)
            return 0
        console.stderr.print(f"run {run.run_id} started; waiting for it to finish", highlight=False)
        console.wait_showing_progress(instance, run.run_id, lambda: _progress(stores, [run.run_id]))
    # A run whose worker died is resumed by the daemon; follow it to the run that ended the tree.
    finished = launcher.follow(instance, run.run_id)
    status = finished.status.value
    report = _report(
        stores, [r.run_id for r in launcher.run_tree(instance, run.run_id)] or [run.run_id]
    )
    if status != "SUCCESS" or report is None:
        for message in launcher.failure_messages(instance, run.run_id):
            console.stderr.print(message, highlight=False, markup=False)
        if as_json:
            sys.stdout.write(json.dumps({"run_id": run.run_id, "status": status}) + "\n")
        console.stderr.print(
            f"run {run.run_id} ended {status}; `airwave runs resume {run.run_id}` continues it",
            highlight=False,
        )
        return 1
    if as_json:
        sys.stdout.write(
            json.dumps({"run_id": run.run_id, "status": "SUCCESS", "report": report}) + "\n"
        )
    else:
        sys.stdout.write(report.get("markdown", ""))
        console.stdout.print(f"run {run.run_id}: SUCCESS", highlight=False)
    return 0


@click.command("lineup")
@click.option("--limit", default=0, show_default=True, help="Build at most N channels (0 = all).")
@click.option("--budget-usd", type=float, default=None, help="Most the run may spend on models.")
@click.option("--confirm-wipe", is_flag=True, help="Replace this source's previous AI lineup.")
@click.option(
    "--provider",
    type=click.Choice(["anthropic", "offline"]),
    default=None,
    help="Default: anthropic when ANTHROPIC_API_KEY is set, otherwise offline.",
)
@click.option("--wait", is_flag=True, help="Show progress and print the report at the end.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (implies --wait).")
@click.option("--idempotency-key", help="Starts with the same key return the same run.")
def lineup_command(
    limit: int,
    budget_usd: float | None,
    confirm_wipe: bool,
    provider: str | None,
    wait: bool,
    as_json: bool,
    idempotency_key: str | None,
) -> None:
    """Build an AI lineup of the Plex library as a Dagster run of `ai_lineup`."""
    console.prepare(plex=True)
    sys.exit(
        run_lineup(
            limit=limit,
            budget_usd=budget_usd,
            confirm_wipe=confirm_wipe,
            provider=provider or "auto",
            wait=wait or as_json,
            as_json=as_json,
            idempotency_key=idempotency_key,
        )
    )
