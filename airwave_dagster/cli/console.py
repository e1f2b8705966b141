"""What every `airwave` verb shares: the consoles, errors, the bootstrap call, reports, progress."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table

from airwave_dagster.cli import environment
from airwave_dagster.settings import SettingsError

# Reports are tables; keep them readable when piped or captured (no terminal width to go by).
stdout = Console(width=None if sys.stdout.isatty() else 140)
stderr = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

Progress = Callable[[], tuple[int, int | None]]
"""Channels built so far and how many are planned (None until the plan is known)."""


def error(message: str) -> None:
    """Print `error: <message>` on stderr (the caller chooses the exit code)."""
    stderr.print(f"[bold red]error:[/] {message}", highlight=False)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print `error: <message>` on stderr and exit with `code`."""
    error(message)
    sys.exit(code)


def prepare(*, plex: bool = False) -> environment.Environment:
    """Resolve and export the runtime environment; with `plex`, also the Plex server.

    A setting that cannot be used ends the command with its variable's name, not a traceback.
    """
    try:
        env = environment.prepare()
        if plex:
            environment.ensure_plex(env.home)
    except SettingsError as problem:
        fail(str(problem))
    return env


def instance() -> Any:
    """The Dagster instance of `$DAGSTER_HOME` (the one the UI shows)."""
    # Imported here: `airwave --help` and `airwave schema` should not pay for loading Dagster.
    import dagster as dg

    return dg.DagsterInstance.get()


def wait_showing_progress(instance: Any, run_id: str, progress: Progress) -> None:
    """Block until the run finishes, printing `channels built: n/N` whenever it changes."""
    last: tuple[int, int | None] = (-1, None)
    while True:
        current = instance.get_run_by_id(run_id)
        if current is not None and current.is_finished:
            return
        now = progress()
        if now != last and now[1] is not None:
            stderr.print(f"  channels built: {now[0]}/{now[1]}", highlight=False)
            last = now
        time.sleep(0.5)


def print_import_report(report: dict[str, Any]) -> None:
    """The report of an `import_lineup` run: one row per channel, then the totals."""
    title = "Dry-run report (nothing was written)" if report["dry_run"] else "Import report"
    table = Table(title=f"{title}: {report['lineup_name']}")
    for column in ("#", "channel", "package", "status", "pool", "slots", "note"):
        table.add_column(column, justify="right" if column in ("#", "pool", "slots") else "left")
    for c in sorted(report["channels"], key=lambda c: c["number"]):
        status = c["status"]
        if status == "created":
            status = ("would create" if c["dry_run"] else "created") + (
                " (disabled)" if c["disabled"] else ""
            )
        number = str(c["number"])
        if c["number_reassigned"]:
            number += f" (was {c['original_number']})"
        table.add_row(
            number,
            c["name"],
            c["package_key"] or "",
            status,
            "" if c["pool_size"] is None else str(c["pool_size"]),
            "" if c["schedule_slots"] is None else str(c["schedule_slots"]),
            c["reason"] or "",
        )
    stdout.print(table)
    stdout.print(
        f"packages created {report['packages_created']}, reused {report['packages_reused']}; "
        f"channels created {report['channels_created']}, skipped {report['channels_skipped']}, "
        f"disabled {report['channels_disabled']}, failed {report['channels_failed']}, "
        f"renumbered {report['channels_reassigned']}",
        highlight=False,
    )
