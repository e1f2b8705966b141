"""The `airwave` command line: import and export lineups, inspect runs, run the UI and the demo.

This module only assembles the group; each verb lives in its own module, which never imports this
one (the dependencies point downward: group → verbs → console, launcher, environment).
"""

from __future__ import annotations

import click

from airwave_dagster.cli.ai_lineup import lineup_command
from airwave_dagster.cli.approvals import approvals_group, approve_command, reject_command
from airwave_dagster.cli.demo import demo_command
from airwave_dagster.cli.guide import guide_command
from airwave_dagster.cli.lineup_files import export_command, import_command, schema_command
from airwave_dagster.cli.runs import runs_group
from airwave_dagster.cli.services import db_group, dev_command, plex_emulator_command


@click.group()
def main() -> None:
    """Airwave: numbered, always-on TV channels from a Plex library, run on Dagster."""


main.add_command(import_command)
main.add_command(export_command)
main.add_command(schema_command)
main.add_command(db_group)
main.add_command(plex_emulator_command)
main.add_command(dev_command)
main.add_command(demo_command)
main.add_command(guide_command)
main.add_command(lineup_command)
main.add_command(runs_group)
main.add_command(approve_command)
main.add_command(reject_command)
main.add_command(approvals_group)
