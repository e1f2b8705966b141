"""The `airwave` command line: import and export lineups, inspect runs, run the UI and the demo.

This module only assembles the group; each verb lives in its own module, which never imports this
one (the dependencies point downward: group → verbs → console, launcher, environment).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Any

import click

from airwave_dagster.cli import console, environment
from airwave_dagster.cli.ai_lineup import lineup_command
from airwave_dagster.cli.approvals import approvals_group, approve_command, reject_command
from airwave_dagster.cli.demo import demo_command
from airwave_dagster.cli.guide import guide_command
from airwave_dagster.cli.inbox import inbox_command
from airwave_dagster.cli.lineup_files import export_command, import_command, schema_command
from airwave_dagster.cli.outages import DatabaseUnreachable
from airwave_dagster.cli.runs import runs_group
from airwave_dagster.cli.serve import serve_command
from airwave_dagster.cli.services import db_group, dev_command, plex_emulator_command
from airwave_dagster.cli.worker import worker_command
from airwave_dagster.settings import Settings, SettingsError


class _Group(click.Group):
    """The root group: a bad setting ends any command with `error: VARIABLE: problem`, and a
    database that stayed away while a command waited ends it with exit code 6."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SettingsError as problem:
            console.fail(str(problem), code=2)
        except DatabaseUnreachable as problem:
            console.fail(str(problem), console.ExitCode.UNAVAILABLE)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="airwave-dagster", prog_name="airwave")
@click.option(
    "--demo",
    is_flag=True,
    help="Run the command on the demo's own home (`airwave demo`'s database, emulator, runs), "
    "ignoring configured settings.",
)
def main(demo: bool) -> None:
    """Airwave: numbered, always-on TV channels from a Plex library, run on Dagster."""
    if demo:
        environment.use_demo_home()
    # Validated before any verb runs, so every command fails at start and in the same words.
    Settings.load()


main.add_command(import_command)
main.add_command(export_command)
main.add_command(schema_command)
main.add_command(db_group)
main.add_command(plex_emulator_command)
main.add_command(dev_command)
main.add_command(demo_command)
main.add_command(guide_command)
main.add_command(inbox_command)
main.add_command(lineup_command)
main.add_command(runs_group)
main.add_command(serve_command)
main.add_command(worker_command)
main.add_command(approve_command)
main.add_command(reject_command)
main.add_command(approvals_group)


def _whole_short_help(group: click.Group) -> None:
    """Give every command a complete one-line summary for `--help`'s command list.

    Click cuts a summary derived from the docstring to fit a fixed width ("Approve the lineup a
    run stopped at, and continue its..."); an explicit `short_help` is printed whole and wrapped.
    The summary is the docstring's first sentence, as click would take it.
    """
    for command in group.commands.values():
        if command.short_help is None and command.help:
            paragraph = " ".join(command.help.split("\n\n")[0].split())
            end = paragraph.find(". ")
            command.short_help = paragraph if end < 0 else paragraph[: end + 1]
        if isinstance(command, click.Group):
            _whole_short_help(command)


_whole_short_help(main)


def entry() -> None:
    """The `airwave` script: `main`, then an exit that skips tearing the interpreter down.

    A command that loaded Dagster holds some 200,000 objects; freeing them one by one at exit
    took 2-4 s of the loaded 2-core development machine (load 15-18; `airwave runs list` 5.2 s
    instead of 7.6-9.4 s) after the command had printed its last line, time a script waiting on
    `airwave import --wait` pays for nothing (BENCHMARKS.md, "CLI starts": run success to exit).
    The exit handlers still run (logging, OpenTelemetry's span export, multiprocessing's
    children) and the standard streams are flushed; only the freeing is skipped. While a
    non-daemon thread still runs, the exit is the ordinary one, which waits for it.
    """
    try:
        main(standalone_mode=True)
        code: int = 0
    except SystemExit as ended:
        code = _exit_code(ended.code)
    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to deliver
            pass
    os._exit(code)


def _exit_code(code: object) -> int:
    """What `sys.exit(code)` would exit with (a message is printed on stderr, as Python does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
