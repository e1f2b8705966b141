"""`airwave db`, `plex-emulator` and `dev`: the local services the other verbs run against."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import click

from airwave_dagster.cli import console, environment, webserver
from airwave_dagster.cli.serve import check_bind
from airwave_dagster.settings import Settings


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
    """Stop everything this home started: the private PostgreSQL server and the Plex emulator.

    The demo's home inside it (`airwave demo`) is stopped too.
    """
    home = environment.airwave_home()
    demo = home / environment.DEMO_HOME
    for each, label in ((home, "the"), (demo, "the demo's")):
        if each == demo and not demo.is_dir():
            continue
        stopped = environment.stop_private_postgres(each)
        emulator = environment.stop_plex_emulator(each)
        for name, was_running in (("private PostgreSQL", stopped), ("Plex emulator", emulator)):
            console.stdout.print(
                f"stopped {label} {name}" if was_running else f"{label} {name} was not running"
            )


@click.command("plex-emulator")
@click.option("--port", default=32400, show_default=True)
@click.option("--items", default=environment.DEMO_LIBRARY_ITEMS, show_default=True)
@click.option("--seed", default=environment.DEMO_LIBRARY_SEED, show_default=True)
@click.option("--latency-ms", default=0.0, show_default=True, help="Added to every request.")
@click.option("--token", default=environment.EMULATOR_TOKEN, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--full-listings",
    is_flag=True,
    help="Permissive: full tag lists in listings (real servers send only the first few).",
)
@click.option(
    "--allow-without-token",
    is_flag=True,
    help="Also answer requests without a token, like a server that allows its local network "
    "without auth (a wrong token is still refused).",
)
def plex_emulator_command(
    port: int,
    items: int,
    seed: int,
    latency_ms: float,
    token: str,
    host: str,
    full_listings: bool,
    allow_without_token: bool,
) -> None:
    """Serve a synthetic Plex library for the real plexapi client (foreground)."""
    from airwave_dagster.emulators.plex import run_emulator

    run_emulator(
        port=port,
        items=items,
        seed=seed,
        latency_ms=latency_ms,
        token=token,
        host=host,
        truncate_tags=not full_listings,
        allow_without_token=allow_without_token,
    )


@click.command("dev")
@click.option("--host", default="127.0.0.1", show_default=True, help="UI bind address.")
@click.option("--port", default=3000, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow binding beyond loopback (the UI has no authentication; see docs/deploy.md).",
)
def dev_command(host: str, port: int, allow_remote: bool) -> None:
    """Run the Dagster UI, daemon and code server as `dg dev` does (private Postgres by default)."""
    check_bind(host, port, allow_remote)
    env = console.prepare(plex=True)
    console.stderr.print(
        f"Dagster UI on http://{host}:{port} (DAGSTER_HOME={env.dagster_home})",
        highlight=False,
    )
    # `airwave import`, `lineup` and `runs …` find this server here and submit through it.
    webserver.announce(env.dagster_home, port, env.database_url, Settings.load().plex_url)
    workspace = environment.workspace_file(env.home)
    # The home, not the checkout: Dagster reads a dagster.yaml and .env next to its working
    # directory, and an installed package has no checkout.
    os.chdir(env.home)
    serve_dev(workspace, host, port)


def serve_dev(workspace: Path, host: str, port: int) -> None:
    """Dagster's local deployment of `workspace` in this process, until SIGINT, SIGTERM or SIGHUP.

    This is what `dg dev` runs once it has a workspace (dagster-dg-cli 1.13's `dev_command` calls
    `dagster._cli.dev.dev_command_impl`): a code server, the webserver and the daemon as child
    processes. `dagster dev` runs it too, but is marked superseded and warns on every start; `dg`
    itself is a development tool this package does not depend on (docs/dagster-notes.md §0.4).
    """
    from dagster._cli.dev import dev_command_impl
    from dagster_shared.cli import WorkspaceOpts

    # A shell that started us in the background may have left SIGINT ignored, and Dagster points
    # SIGTERM at whatever SIGINT does: we could then only be killed, leaving the children behind
    # (docs/dagster-notes.md §0.3). Python's own handler turns each into KeyboardInterrupt, on
    # which Dagster stops the webserver and daemon and waits for them; a closed terminal (SIGHUP)
    # stops them the same way.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    dev_command_impl(
        code_server_log_level="warning",
        log_level="info",
        log_format="colored",
        port=str(port),
        host=host,
        use_legacy_code_server_behavior=False,
        shutdown_pipe=None,
        verbose=False,
        workspace_opts=WorkspaceOpts(workspace=[str(workspace)]),
    )
