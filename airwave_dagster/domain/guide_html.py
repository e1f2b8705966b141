"""The guide as a page a person reads: channels down, time across, programmes and gaps as blocks.

The page is one self-contained HTML file: inline CSS, no script, nothing fetched. Every block's
width is its length on air within the window at a fixed scale, so a half-hour episode is half as
wide as an hour-long one, and a stretch with no stored row is drawn as a hatched gap rather than
left out. All times are UTC, and the page says so. Every text that comes from Plex (titles,
episode titles, channel names) is escaped: a title is data, never markup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

from airwave_dagster.domain.guide_window import (
    GuideBreak,
    GuideWindow,
    describe_shortfall,
    shortfall,
    span_text,
    utc_text,
)
from airwave_dagster.domain.xmltv import GuideChannel, GuideProgramme

PX_PER_HOUR = 240.0
"""Horizontal scale: a 30-minute ruler step is 120 px, wide enough for a short title."""

TICK_SECONDS = 1_800
"""The ruler marks every half hour on the UTC clock."""

_TO = "\N{EN DASH}"
"""Between the two times of a range (an en dash, as typeset clock ranges are)."""

_BACKTICKS = re.compile(r"`([^`<>]+)`")

CellKind = Literal["programme", "break", "gap"]
"""What a block of a channel's row stands for: a programme, a bumper, or nothing stored."""


class GridCell(BaseModel):
    """One block of a channel's row, clipped to the window, with its place on the page."""

    model_config = ConfigDict(frozen=True)

    kind: CellKind
    start: AwareDatetime
    stop: AwareDatetime
    left_px: float
    width_px: float
    programme: GuideProgramme | None = None
    began_before: bool = False
    """The row started before the window (a programme already on air)."""
    ends_after: bool = False
    """The row runs past the window's end."""


class GridRow(BaseModel):
    """A channel and the blocks that fill its row from the window's start to its end."""

    model_config = ConfigDict(frozen=True)

    channel: GuideChannel
    cells: tuple[GridCell, ...]


class GridTick(BaseModel):
    """A mark on the time ruler."""

    model_config = ConfigDict(frozen=True)

    at: AwareDatetime
    left_px: float
    label: str


class GuideGrid(BaseModel):
    """The laid-out page: rows by channel number, ruler ticks, the track width."""

    model_config = ConfigDict(frozen=True)

    start: AwareDatetime
    end: AwareDatetime
    width_px: float
    rows: tuple[GridRow, ...]
    ticks: tuple[GridTick, ...]


def layout(window: GuideWindow, *, px_per_hour: float = PX_PER_HOUR) -> GuideGrid:
    """Lay the window out: one row per channel (by number), each filled edge to edge.

    A channel's programmes and breaks are placed at their times; whatever they leave uncovered
    between the window's start and end becomes a gap block.

    Args:
        window: The guide window.
        px_per_hour: Horizontal scale.

    Returns:
        The grid.

    Raises:
        ValueError: A row names a channel that is not in the window, stops before it starts, or
            overlaps the row before it on its channel; a page drawn from such rows would lie.
    """
    scale = px_per_hour / 3600

    def place(start: datetime, stop: datetime) -> tuple[float, float]:
        left = (start - window.start).total_seconds() * scale
        return left, (stop - start).total_seconds() * scale

    rows_by_channel: dict[int, list[GuideProgramme | GuideBreak]] = {
        channel.number: [] for channel in window.channels
    }
    for row in window.rows():
        if row.channel_number not in rows_by_channel:
            raise ValueError(f"a guide row names unknown channel {row.channel_number}")
        if row.stop <= row.start:
            raise ValueError(
                f"a guide row on channel {row.channel_number} stops at {row.stop.isoformat()}, "
                f"not after its start {row.start.isoformat()}"
            )
        rows_by_channel[row.channel_number].append(row)

    grid_rows: list[GridRow] = []
    for channel in sorted(window.channels, key=lambda c: c.number):
        cells: list[GridCell] = []
        cursor = window.start
        for row in sorted(rows_by_channel[channel.number], key=lambda r: r.start):
            start, stop = max(row.start, window.start), min(row.stop, window.end)
            if stop <= start:
                continue
            if start < cursor:
                raise ValueError(
                    f"channel {channel.number} has rows overlapping at {start.isoformat()}"
                )
            if start > cursor:
                cells.append(
                    GridCell(kind="gap", start=cursor, stop=start, **_at(place(cursor, start)))
                )
            is_programme = isinstance(row, GuideProgramme)
            cells.append(
                GridCell(
                    kind="programme" if is_programme else "break",
                    start=start,
                    stop=stop,
                    programme=row if is_programme else None,
                    began_before=row.start < window.start,
                    ends_after=row.stop > window.end,
                    **_at(place(start, stop)),
                )
            )
            cursor = stop
        if cursor < window.end:
            cells.append(
                GridCell(
                    kind="gap", start=cursor, stop=window.end, **_at(place(cursor, window.end))
                )
            )
        grid_rows.append(GridRow(channel=channel, cells=tuple(cells)))

    return GuideGrid(
        start=window.start,
        end=window.end,
        width_px=window.seconds * scale,
        rows=tuple(grid_rows),
        ticks=tuple(_ticks(window.start, window.end, scale)),
    )


def _at(placed: tuple[float, float]) -> dict[str, float]:
    return {"left_px": placed[0], "width_px": placed[1]}


def _ticks(start: datetime, end: datetime, scale: float) -> list[GridTick]:
    start_utc = start.astimezone(UTC)
    epoch = int(start_utc.timestamp())
    first = -(-epoch // TICK_SECONDS) * TICK_SECONDS
    ticks: list[GridTick] = []
    moment = datetime.fromtimestamp(first, UTC)
    while moment < end:
        # The date is written at the first mark and at each midnight, so a long guide says which
        # day a column is without a label on every mark.
        dated = not ticks or (moment.hour == 0 and moment.minute == 0)
        label = moment.strftime("%a %d %b %H:%M" if dated else "%H:%M")
        ticks.append(
            GridTick(at=moment, left_px=(moment - start).total_seconds() * scale, label=label)
        )
        moment += timedelta(seconds=TICK_SECONDS)
    return ticks


def episode_text(programme: GuideProgramme) -> str:
    """The second line of a programme block: `S01E05 · Pilot`, `E05`, `Pilot`, `1999`, or ``."""
    code = ""
    if programme.season is not None and programme.episode is not None:
        code = f"S{programme.season:02d}E{programme.episode:02d}"
    elif programme.episode is not None:
        code = f"E{programme.episode:02d}"
    elif programme.season is not None:
        code = f"S{programme.season:02d}"
    parts = [part for part in (code, programme.sub_title or "") if part]
    if not parts and programme.year is not None:
        parts.append(str(programme.year))
    return " · ".join(parts)


def _clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%H:%M")


def _px(value: float) -> str:
    return f"{value:.2f}px"


_STYLE = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.3 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;
background:#f6f7f9}
header{padding:16px 20px 8px}
h1{font-size:20px;margin:0 0 6px}
header p{margin:4px 0;max-width:70em}
.warn{background:#fff4d6;border-left:4px solid #d99a00;padding:6px 10px}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:28px;height:12px;vertical-align:middle;margin-right:5px;
border:1px solid #9aa3ad}
.guide{overflow-x:auto;padding:0 20px 20px}
.row{display:flex;width:max-content;border-bottom:1px solid #d6dae0}
.ch{position:sticky;left:0;z-index:2;flex:0 0 190px;width:190px;padding:8px 10px;
background:#fff;border-right:2px solid #9aa3ad;overflow:hidden;white-space:nowrap;
text-overflow:ellipsis}
.num{font-weight:700;font-variant-numeric:tabular-nums;margin-right:6px}
.track{position:relative;flex:0 0 auto;height:58px}
.ruler .track{height:26px}
.ruler .ch{font-weight:600}
.tick{position:absolute;top:0;height:100%;border-left:1px solid #9aa3ad;padding:5px 4px;
white-space:nowrap;font-size:12px;color:#4a525c;font-variant-numeric:tabular-nums}
.cell{position:absolute;top:3px;bottom:3px;overflow:hidden;white-space:nowrap;
padding:3px 5px;border-radius:3px;font-size:12px}
.cell b,.cell span,.cell time{display:block;overflow:hidden;text-overflow:ellipsis}
.cell time{color:#4a525c;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f1e6c0;padding:0 3px}
.prog{background:#dce9fb;border:1px solid #7ea6dc}
.prog.cut-l{border-left:3px dotted #2f5f9e;border-top-left-radius:0;border-bottom-left-radius:0}
.prog.cut-r{border-right:3px dotted #2f5f9e;border-top-right-radius:0;border-bottom-right-radius:0}
.brk{background:#c9ced6;padding:0;border-radius:0}
.gap{background:repeating-linear-gradient(135deg,#fbe3e3 0 6px,#f3c4c4 6px 12px);
border:1px dashed #c0392b;color:#8e2a20}
"""


def render_guide_html(
    window: GuideWindow,
    *,
    notes: Sequence[str] = (),
    px_per_hour: float = PX_PER_HOUR,
    title: str = "Airwave guide",
) -> str:
    """The window as one self-contained HTML page (no script, no external resource).

    Args:
        window: The guide window.
        notes: Extra sentences shown under the heading, e.g. how to extend the schedules; they
            are escaped like everything else, and a `command` in backticks is set as code.
        px_per_hour: Horizontal scale.
        title: The page's title and heading.

    Returns:
        The HTML document.

    Raises:
        ValueError: As `layout`.
    """
    grid = layout(window, px_per_hour=px_per_hour)
    gap = shortfall(window)
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)} · {escape(utc_text(window.start))}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{escape(title)}</h1>",
        f"<p>{escape(utc_text(window.start))} to {escape(utc_text(window.end))} "
        f"({escape(span_text(window.seconds))}), {len(grid.rows)} enabled "
        f"channel{'' if len(grid.rows) == 1 else 's'}. "
        "<strong>All times are UTC.</strong></p>",
    ]
    if gap is not None:
        out.append(f'<p class="warn">{escape(_sentence(describe_shortfall(gap)))}</p>')
    out.extend(f'<p class="warn">{_code(escape(note))}</p>' for note in notes)
    if not grid.rows:
        out.append("<p>No enabled channels: there is nothing to list.</p>")
    out.append(
        '<p class="legend"><span><i class="prog"></i>programme</span>'
        '<span><i class="brk"></i>break between programmes</span>'
        '<span><i class="gap"></i>gap: nothing stored</span>'
        "<span>a dotted edge: the programme began before the window or runs past it</span></p>"
    )
    out.append("</header>")
    out.append('<main class="guide">')
    track = f'style="width:{_px(grid.width_px)}"'
    out.append(f'<div class="row ruler"><div class="ch">Channel</div><div class="track" {track}>')
    out.extend(
        f'<span class="tick" style="left:{_px(tick.left_px)}">{escape(tick.label)}</span>'
        for tick in grid.ticks
    )
    out.append("</div></div>")
    for row in grid.rows:
        channel = row.channel
        label = (
            f'<span class="num">{channel.number}</span>'
            f'<span class="name">{escape(channel.name)}</span>'
        )
        hover = escape(
            f"{channel.number} {channel.name}"
            + (f" ({channel.callsign})" if channel.callsign else "")
        )
        out.append(
            f'<div class="row" id="ch-{channel.number}">'
            f'<div class="ch" title="{hover}">{label}</div>'
            f'<div class="track" {track}>'
        )
        out.extend(_cell(cell) for cell in row.cells)
        out.append("</div></div>")
    out.append("</main>")
    out.append(
        '<footer><p style="padding:0 20px 16px;color:#4a525c">Written by airwave-dagster from the '
        "schedules stored in the Airwave database.</p></footer>"
    )
    out.append("</body>")
    out.append("</html>")
    return "\n".join(out) + "\n"


def _code(escaped: str) -> str:
    # Runs after escaping, so a backtick pair can only ever wrap text, never markup.
    return _BACKTICKS.sub(r"<code>\1</code>", escaped)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _cell(cell: GridCell) -> str:
    where = f'style="left:{_px(cell.left_px)};width:{_px(cell.width_px)}"'
    times = f"{_clock(cell.start)}{_TO}{_clock(cell.stop)}"
    if cell.kind == "gap":
        hover = f"nothing stored {times} UTC ({span_text(_seconds(cell))})"
        return (
            f'<div class="cell gap" {where} title="{escape(hover)}"><span>no schedule</span></div>'
        )
    if cell.kind == "break" or cell.programme is None:
        return f'<div class="cell brk" {where} title="{escape(f"break {times} UTC")}"></div>'
    programme = cell.programme
    info = episode_text(programme)
    aired = f"{_clock(programme.start)}{_TO}{_clock(programme.stop)}"
    hover = " — ".join(part for part in (programme.title, info, f"{aired} UTC") if part)
    classes = (
        "cell prog"
        + (" cut-l" if cell.began_before else "")
        + (" cut-r" if cell.ends_after else "")
    )
    body = f"<b>{escape(programme.title)}</b>"
    if info:
        body += f"<span>{escape(info)}</span>"
    body += f"<time>{escape(aired)}</time>"
    return f'<div class="{classes}" {where} title="{escape(hover)}">{body}</div>'


def _seconds(cell: GridCell) -> int:
    return int((cell.stop - cell.start).total_seconds())
