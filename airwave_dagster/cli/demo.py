"""`airwave demo`: import the bundled lineup (dry-run, then for real), then an offline AI lineup.

The demo runs on a home of its own (`environment.use_demo_home`), never on configured services.
"""

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
demo stays a few minutes long on a small machine."""


@click.command("demo")
def demo_command() -> None:
    """Import the bundled example lineup (a dry-run, then for real), then an offline AI lineup.

    Always on the demo's own home (`<home>/demo`: a private database, Plex emulator and Dagster
    storage), whatever is configured; `airwave --demo VERB` works on that home afterwards.
    """
    demo_home, ignored = environment.use_demo_home()
    env = console.prepare(plex=True)
    server = webserver.find(env.dagster_home)
    console.stdout.print(
        f"[bold]Airwave demo[/] in {demo_home}: its own database "
        f"{environment.redact(env.database_url)} and Plex emulator {Settings.load().plex_url}",
        highlight=False,
    )
    if ignored:
        console.stdout.print(
            f"Not used by the demo (it never touches your database, Plex or models): "
            f"{', '.join(ignored)}",
            highlight=False,
        )
    console.stdout.print(
        "\n[bold]1. Dry-run import[/] (plans and resolves every pool, writes nothing)"
    )
    # One target for the three runs: without `airwave --demo dev`, one code server, started once.
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
            f"\n[bold]3. Offline AI lineup[/] (planned and verified without a model; "
            f"{DEMO_LIMIT} of its channels built)"
        )
        # The wipe it pre-approves is of the demo database's AI channels: the demo's own.
        if run_lineup(target, provider="offline", confirm_wipe=True, wait=True, limit=DEMO_LIMIT):
            sys.exit(1)
    console.stdout.print(
        "\nThe demo's runs in the Dagster UI: [bold]airwave --demo dev[/] "
        "(http://127.0.0.1:3000). Its lineup: `airwave --demo export`; its guide: "
        "`airwave --demo guide --html guide.html`; stop its database and emulator: "
        "`airwave db stop`.",
        highlight=False,
    )
