"""`airwave guide`: the stored schedules of the next hours as an XMLTV file for IPTV guides."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from airwave_dagster.cli import console

MAX_GUIDE_HOURS = 24 * 14
"""Longest guide accepted: twice the 7-day horizon the schedules keep."""


def guide_xml(database_url: str, hours: int, now: datetime | None = None) -> bytes:
    """Render the XMLTV guide of every enabled channel for `hours` from `now`.

    Args:
        database_url: The application database.
        hours: Length of the guide, 1 to `MAX_GUIDE_HOURS`.
        now: Start of the guide; the current time when None.

    Returns:
        The XMLTV document.

    Raises:
        ValueError: `hours` is out of range.
    """
    if not 1 <= hours <= MAX_GUIDE_HOURS:
        raise ValueError(f"--hours must be between 1 and {MAX_GUIDE_HOURS}, got {hours}")
    from airwave_dagster.domain.xmltv import render_xmltv
    from resources.stores import open_stores

    start = now or datetime.now(UTC)
    channels, programmes = open_stores(database_url).maintenance.guide(
        start, start + timedelta(hours=hours)
    )
    return render_xmltv(channels, programmes)


@click.command("guide")
@click.option(
    "--hours", default=24, show_default=True, type=int, help="How many hours ahead to list."
)
@click.option(
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the XMLTV file here instead of stdout.",
)
def guide_command(hours: int, output: Path | None) -> None:
    """Write the next HOURS of every enabled channel's schedule as XMLTV."""
    if not 1 <= hours <= MAX_GUIDE_HOURS:
        raise click.BadParameter(
            f"must be between 1 and {MAX_GUIDE_HOURS}, got {hours}", param_hint="--hours"
        )
    if output is not None and not output.parent.is_dir():
        raise click.BadParameter(
            f"the folder {output.parent} does not exist", param_hint="--output"
        )
    env = console.prepare()
    document = guide_xml(env.database_url, hours)
    if output is None:
        sys.stdout.buffer.write(document)
        sys.stdout.flush()
        return
    output.write_bytes(document)
    click.echo(f"wrote {output}", err=True)
