"""A guide window: what the stored schedules hold between two instants, and where they stop.

Both guides (`domain/xmltv.py`, `domain/guide_html.py`) are drawn from one window. The window
also answers the question a guide alone hides: when the schedules stored for a channel end before
the window does, the rest of that channel's row is empty because nothing was laid yet, and a
reader has to be told so.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, model_validator

from airwave_dagster.domain.xmltv import GuideChannel, GuideProgramme


class GuideBreak(BaseModel):
    """A bumper row: the channel airs something, but it is a break, not a programme."""

    model_config = ConfigDict(frozen=True)

    channel_number: int
    start: AwareDatetime
    stop: AwareDatetime


class GuideWindow(BaseModel):
    """Enabled channels and every stored row airing on them between `start` and `end`."""

    model_config = ConfigDict(frozen=True)

    start: AwareDatetime
    end: AwareDatetime
    channels: tuple[GuideChannel, ...]
    programmes: tuple[GuideProgramme, ...]
    breaks: tuple[GuideBreak, ...] = ()

    @model_validator(mode="after")
    def _ordered(self) -> GuideWindow:
        if self.end <= self.start:
            raise ValueError(
                f"a guide window must end after it starts, got {self.start} to {self.end}"
            )
        return self

    @property
    def seconds(self) -> int:
        """Length of the window asked for."""
        return int((self.end - self.start).total_seconds())

    def rows(self) -> list[GuideProgramme | GuideBreak]:
        """Programmes and breaks together, programmes first."""
        return [*self.programmes, *self.breaks]

    def covered_until(self) -> dict[int, datetime | None]:
        """Per channel number, where its stored rows stop within the window.

        Returns:
            The window's end for a channel whose rows reach it, the end of its last row when
            they stop earlier, and None for a channel with no row in the window at all.
        """
        reach: dict[int, datetime | None] = {channel.number: None for channel in self.channels}
        for row in self.rows():
            if row.channel_number not in reach:
                continue
            current = reach[row.channel_number]
            stop = min(row.stop, self.end)
            if current is None or stop > current:
                reach[row.channel_number] = stop
        return reach


class Shortfall(BaseModel):
    """Channels whose stored schedules stop before the window's end."""

    model_config = ConfigDict(frozen=True)

    asked_seconds: int
    covered_seconds: int
    """From the window's start to the earliest stop of a channel that has rows."""
    earliest_stop: AwareDatetime | None
    """That earliest stop; None when no channel has a row in the window."""
    short_channels: tuple[int, ...]
    """Numbers of the channels that stop early, including those with nothing stored."""
    empty_channels: tuple[int, ...]
    """Numbers of the channels with no row in the window at all."""
    channel_count: int


def shortfall(window: GuideWindow) -> Shortfall | None:
    """Where the stored schedules fall short of the window, or None when every channel fills it.

    A window with no channel has nothing to fall short of.

    Args:
        window: The guide window.

    Returns:
        The shortfall, or None.
    """
    reach = window.covered_until()
    short = sorted(number for number, stop in reach.items() if stop is None or stop < window.end)
    if not short:
        return None
    stops = [stop for stop in reach.values() if stop is not None]
    earliest = min(stops) if stops else None
    covered = 0 if earliest is None else max(0, int((earliest - window.start).total_seconds()))
    return Shortfall(
        asked_seconds=window.seconds,
        covered_seconds=covered,
        earliest_stop=earliest,
        short_channels=tuple(short),
        empty_channels=tuple(sorted(n for n, stop in reach.items() if stop is None)),
        channel_count=len(reach),
    )


def span_text(seconds: int) -> str:
    """A length as a person reads it: `24 h`, `11 h 42 min`, `45 min`, `0 min`.

    Args:
        seconds: A non-negative length; seconds below a whole minute are dropped.

    Returns:
        Hours and minutes, leaving out a zero part (but never both).
    """
    minutes = max(0, seconds) // 60
    hours, minutes = divmod(minutes, 60)
    if hours and minutes:
        return f"{hours} h {minutes} min"
    if hours:
        return f"{hours} h"
    return f"{minutes} min"


def utc_text(moment: datetime) -> str:
    """An instant as both guides' notes write it: `2026-05-01 14:30 UTC`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def describe_shortfall(gap: Shortfall) -> str:
    """One sentence saying how far the stored schedules reach, without the remedy.

    Args:
        gap: The shortfall of a window.

    Returns:
        e.g. `schedules are stored up to 2026-05-01 02:13 UTC at the earliest (13 of 13 channels
        end before the window does): the guide covers 11 h 42 min of the 24 h asked`.
    """
    asked = span_text(gap.asked_seconds)
    parts: list[str] = []
    stopping = [n for n in gap.short_channels if n not in gap.empty_channels]
    if gap.earliest_stop is not None and stopping:
        parts.append(
            f"schedules are stored up to {utc_text(gap.earliest_stop)} at the earliest "
            f"({len(stopping)} of {gap.channel_count} channels end before the window does): "
            f"the guide covers {span_text(gap.covered_seconds)} of the {asked} asked"
        )
    if gap.empty_channels:
        parts.append(
            f"{_count(len(gap.empty_channels), 'channel')} ({_numbers(gap.empty_channels)}) "
            f"{'has' if len(gap.empty_channels) == 1 else 'have'} nothing stored in the {asked} "
            "asked"
        )
    return "; ".join(parts)


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _numbers(numbers: tuple[int, ...], shown: int = 8) -> str:
    listed = ", ".join(str(n) for n in numbers[:shown])
    return listed if len(numbers) <= shown else f"{listed}, …"
