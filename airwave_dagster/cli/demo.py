"""`airwave demo`: import the bundled lineup (dry-run, then for real), then an offline AI lineup."""

from __future__ import annotations

import sys

import click

from airwave_dagster.cli import console, environment, webserver
from airwave_dagster.cli.ai_lineup import run_lineup
from airwave_dagster.cli.lineup_files import run_import
from airwave_dagster.data import DEMO_LINEUP
from airwave_dagster.settings import Settings

DEMO_LIMIT = 12
"""Channels `airwave demo` builds of the offline plan (round-robin over its packages), so the
demo stays a few minutes long on a small machine; `airwave lineup --confirm-wipe` builds all."""


@click.command("demo")
def demo_command() -> None:
    """Import the bundled example lineup: a dry-run, then for real."""
    if Settings.load().attached:
        # The demo writes sample channels and replaces the AI lineup it finds: never on an
        # operator's Airwave.
        console.fail(
            "airwave demo does not run attached to an Airwave (AIRWAVE_MODE=attached): it would "
            "write sample channels into it and replace its AI lineup. Run it with AIRWAVE_MODE "
            "and AIRWAVE_DATABASE_URL unset, on the private database",
            console.ExitCode.INPUT_REFUSED,
        )
    env = console.prepare(plex=True)
    server = webserver.find(env.dagster_home)
    console.stdout.print(
        f"[bold]Airwave demo[/]: database {environment.redact(env.database_url)}, "
        f"Plex {Settings.load().plex_url}",
        highlight=False,
    )
    console.stdout.print(
        "\n[bold]1. Dry-run import[/] (plans and resolves every pool, writes nothing)"
    )
    # One target for the three runs: without `airwave dev`, one code server, started once.
    with console.target_for(server) as target:
        if run_import(
            target, DEMO_LINEUP, dry_run=True, select=None, wait=True, as_json=False, force=True
        ):
            sys.exit(1)
        console.stdout.print("\n[bold]2. Import[/]")
        if run_import(
            target, DEMO_LINEUP, dry_run=False, select=None, wait=True, as_json=False, force=True
        ):
            sys.exit(1)
        console.stdout.print(
            f"\n[bold]3. Offline AI lineup[/] (planned and verified without a model; {DEMO_LIMIT} "
            "channels built, `airwave lineup --confirm-wipe --wait` builds them all)"
        )
        if run_lineup(target, provider="offline", confirm_wipe=True, wait=True, limit=DEMO_LIMIT):
            sys.exit(1)
    console.stdout.print(
        "\nOpen the Dagster UI with [bold]make dev[/] (http://127.0.0.1:3000) to see the runs; "
        "`airwave export` prints the imported lineup.",
        highlight=False,
    )
