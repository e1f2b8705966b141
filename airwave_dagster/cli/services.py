"""`airwave db`, `plex-emulator` and `dev`: the local services the other verbs run against."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click

from airwave_dagster.cli import console, environment


@click.group("db")
def db_group() -> None:
    """The project database."""


@db_group.command("upgrade")
def db_upgrade() -> None:
    """Create the schemas and apply every migration (idempotent)."""
    from resources.migrations import current_revisions

    env = console.prepare()
    console.stdout.print(
        f"database {environment.redact(env.database_url)} at revision "
        f"{', '.join(sorted(current_revisions(env.database_url))) or 'none'}",
        highlight=False,
    )


@db_group.command("stop")
def db_stop() -> None:
    """Stop the private PostgreSQL server and the Plex emulator started by this project."""
    stopped = environment.stop_private_postgres()
    environment.stop_plex_emulator()
    console.stdout.print(
        "stopped the private PostgreSQL" if stopped else "no private PostgreSQL running"
    )


@click.command("plex-emulator")
@click.option("--port", default=32400, show_default=True)
@click.option("--items", default=environment.DEMO_LIBRARY_ITEMS, show_default=True)
@click.option("--seed", default=environment.DEMO_LIBRARY_SEED, show_default=True)
@click.option("--latency-ms", default=0.0, show_default=True, help="Added to every request.")
@click.option("--token", default=environment.EMULATOR_TOKEN, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
def plex_emulator_command(
    port: int, items: int, seed: int, latency_ms: float, token: str, host: str
) -> None:
    """Serve a synthetic Plex library for the real plexapi client (foreground)."""
    from airwave_dagster.emulators.plex import run_emulator

    run_emulator(port=port, items=items, seed=seed, latency_ms=latency_ms, token=token, host=host)


@click.command("dev")
@click.option("--port", default=3000, show_default=True)
def dev_command(port: int) -> None:
    """Run the Dagster UI, daemon and code server on 127.0.0.1 (private Postgres by default)."""
    env = console.prepare(plex=True)
    console.stderr.print(
        f"Dagster UI on http://127.0.0.1:{port} (DAGSTER_HOME={env.dagster_home})",
        highlight=False,
    )
    # A shell that started us in the background may have left SIGINT/SIGTERM ignored; dagster dev
    # would inherit that and could then only be killed (docs/dagster-notes.md §0.3).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    dagster = str(Path(sys.executable).parent / "dagster")
    os.chdir(environment.project_root())
    os.execv(
        dagster,
        [dagster, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
    )
