"""`airwave guide`: the stored schedules of the next hours, as XMLTV or as a page to read."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from airwave_dagster.cli import console

if TYPE_CHECKING:
    from airwave_dagster.domain.guide_window import GuideWindow, Shortfall

MAX_GUIDE_HOURS = 24 * 14
"""Longest guide accepted: twice the 7-day horizon the schedules keep."""


def guide_window(database_url: str, hours: int, now: datetime | None = None) -> GuideWindow:
    """Read every enabled channel's stored rows for `hours` from `now`.

    Args:
        database_url: The application database.
        hours: Length of the guide, 1 to `MAX_GUIDE_HOURS`.
        now: Start of the guide; the current time when None.

    Returns:
        The guide window (channels, programmes, breaks).

    Raises:
        ValueError: `hours` is out of range.
    """
    if not 1 <= hours <= MAX_GUIDE_HOURS:
        raise ValueError(f"--hours must be between 1 and {MAX_GUIDE_HOURS}, got {hours}")
    from resources.stores import open_stores

    start = now or datetime.now(UTC)
    return open_stores(database_url).maintenance.guide_window(start, start + timedelta(hours=hours))


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
    from airwave_dagster.domain.xmltv import render_xmltv

    window = guide_window(database_url, hours, now)
    return render_xmltv(window.channels, window.programmes)


def remedy(gap: Shortfall, *, attached: bool) -> str:
    """What makes the stored schedules reach further, in this deployment.

    Args:
        gap: The shortfall the guide found.
        attached: Whether the project runs on a real Airwave's database.

    Returns:
        One sentence naming the command or job that lays more schedule.
    """
    if attached:
        return (
            "Attached to an Airwave server, Airwave's own schedule jobs lay and extend every "
            "channel's schedule; this project's maintenance stays off (docs/attached.md)."
        )
    text = (
        "An import lays 12 h per channel; while `airwave serve` (or `airwave dev`) runs, its "
        "Dagster schedule `extend_schedule` tops up, every hour, each channel with less than "
        "2 days left to 7 days ahead; launch the `extend_schedules` job in the UI to do it now."
    )
    if gap.empty_channels:
        text += (
            " A channel with no rows at all gets 12 h from `backfill_schedule` (every 10 min) "
            "once its filter matches something in the library."
        )
    return text


def _refuse_terminal() -> None:
    raise click.UsageError(
        "the XMLTV guide is a long XML document, not meant for a terminal: write it with "
        "--output FILE, draw a readable grid with --html FILE, or pipe it "
        "(airwave guide | your-iptv-tool)."
    )


def _writable(path: Path | None, option: str) -> None:
    if path is not None and not path.parent.is_dir():
        raise click.BadParameter(f"the folder {path.parent} does not exist", param_hint=option)


@click.command("guide")
@click.option(
    "--hours", default=24, show_default=True, type=int, help="How many hours ahead to list."
)
@click.option(
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the XMLTV file here instead of stdout.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a self-contained HTML page of the guide here (channels by time, UTC).",
)
def guide_command(hours: int, output: Path | None, html_path: Path | None) -> None:
    """Write the next HOURS of every enabled channel's schedule as XMLTV or as an HTML page.

    XMLTV goes to stdout (piped) or to --output; --html writes a grid a person can read, and
    with --html alone no XML is written. When the stored schedules end before the HOURS asked,
    stderr says how far they reach and what extends them.
    """
    if not 1 <= hours <= MAX_GUIDE_HOURS:
        raise click.BadParameter(
            f"must be between 1 and {MAX_GUIDE_HOURS}, got {hours}", param_hint="--hours"
        )
    _writable(output, "--output")
    _writable(html_path, "--html")
    xml_to_stdout = output is None and html_path is None
    if xml_to_stdout and sys.stdout.isatty():
        _refuse_terminal()
    env = console.prepare()
    from airwave_dagster.domain.guide_html import render_guide_html
    from airwave_dagster.domain.guide_window import describe_shortfall, shortfall
    from airwave_dagster.domain.xmltv import render_xmltv
    from airwave_dagster.settings import Settings

    window = guide_window(env.database_url, hours)
    gap = shortfall(window)
    notes = [] if gap is None else [remedy(gap, attached=Settings.load().attached)]
    if html_path is not None:
        html_path.write_text(render_guide_html(window, notes=notes), encoding="utf-8")
        click.echo(f"wrote {html_path}", err=True)
    if output is not None or xml_to_stdout:
        document = render_xmltv(window.channels, window.programmes)
        if output is None:
            sys.stdout.buffer.write(document)
            sys.stdout.flush()
        else:
            output.write_bytes(document)
            click.echo(f"wrote {output}", err=True)
    if not window.channels:
        click.echo("airwave guide: no enabled channels, so the guide lists nothing", err=True)
    elif gap is not None:
        click.echo(f"airwave guide: {describe_shortfall(gap)}.\n{notes[0]}", err=True)
