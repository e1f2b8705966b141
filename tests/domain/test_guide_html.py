"""The HTML guide and the guide window: grid geometry, gaps, escaping, order, and the shortfall."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from lxml import html as lxml_html

from airwave_dagster.domain.guide_html import layout, render_guide_html
from airwave_dagster.domain.guide_window import (
    GuideBreak,
    GuideWindow,
    describe_shortfall,
    shortfall,
    span_text,
)
from airwave_dagster.domain.xmltv import GuideChannel, GuideProgramme

START = datetime(2026, 7, 19, 10, 0, tzinfo=UTC)
PX_PER_HOUR = 240.0


def _at(minutes: float) -> datetime:
    return START + timedelta(minutes=minutes)


def _programme(channel: int, start: float, stop: float, title: str, **extra: object):
    return GuideProgramme(
        channel_number=channel, start=_at(start), stop=_at(stop), title=title, **extra
    )


def _window(hours: float = 3) -> GuideWindow:
    """Three channels given out of order: one full-ish, one that stops early, one empty."""
    return GuideWindow(
        start=START,
        end=_at(hours * 60),
        channels=(
            GuideChannel(number=5, name="Five"),
            GuideChannel(number=2, name="Two"),
            GuideChannel(number=9, name="Nine"),
        ),
        programmes=(
            _programme(5, 0, 30, "Half hour", season=1, episode=2, sub_title="Pilot"),
            _programme(5, 31, 91, "One hour", year=1999),
            _programme(5, 150, 170, "After a hole"),
            # On air since before the window, and running past its end.
            _programme(2, -15, 15, "Morning show"),
            _programme(2, 15, 200, "Long film"),
        ),
        breaks=(GuideBreak(channel_number=5, start=_at(30), stop=_at(31)),),
    )


def test_rows_are_by_number_and_filled_edge_to_edge_at_a_proportional_scale() -> None:
    grid = layout(_window(), px_per_hour=PX_PER_HOUR)

    assert [row.channel.number for row in grid.rows] == [2, 5, 9]
    assert grid.width_px == pytest.approx(3 * PX_PER_HOUR)
    per_minute = PX_PER_HOUR / 60
    for row in grid.rows:
        edge = 0.0
        for cell in row.cells:
            assert cell.left_px == pytest.approx(edge)
            minutes = (cell.stop - cell.start).total_seconds() / 60
            assert cell.width_px == pytest.approx(minutes * per_minute)
            edge += cell.width_px
        assert edge == pytest.approx(grid.width_px)

    two, five, nine = grid.rows
    assert [(c.kind, c.width_px) for c in five.cells] == [
        ("programme", pytest.approx(120)),
        ("break", pytest.approx(4)),
        ("programme", pytest.approx(240)),
        ("gap", pytest.approx(236)),  # 11:31 to 12:30: nothing stored
        ("programme", pytest.approx(80)),
        ("gap", pytest.approx(40)),  # 12:50 to 13:00: the stored schedule has ended
    ]
    assert [(c.kind, c.began_before, c.ends_after) for c in two.cells] == [
        ("programme", True, False),
        ("programme", False, True),
    ]
    assert two.cells[0].width_px == pytest.approx(60)  # clipped to the 15 min inside the window
    assert [(c.kind, c.width_px) for c in nine.cells] == [("gap", pytest.approx(720))]


def test_the_page_draws_blocks_gaps_and_the_ruler_in_utc() -> None:
    page = render_guide_html(_window(), px_per_hour=PX_PER_HOUR)
    doc = lxml_html.document_fromstring(page)

    rows = doc.xpath('//div[@class="row" and starts-with(@id, "ch-")]')
    assert [row.get("id") for row in rows] == ["ch-2", "ch-5", "ch-9"]
    five = rows[1]
    cells = five.xpath('.//div[contains(@class, "cell")]')
    assert [c.get("class") for c in cells] == [
        "cell prog",
        "cell brk",
        "cell prog",
        "cell gap",
        "cell prog",
        "cell gap",
    ]
    assert [c.get("style") for c in cells] == [
        "left:0.00px;width:120.00px",
        "left:120.00px;width:4.00px",
        "left:124.00px;width:240.00px",
        "left:364.00px;width:236.00px",
        "left:600.00px;width:80.00px",
        "left:680.00px;width:40.00px",
    ]
    first, _, second, gap, _, _ = cells
    assert first.findtext("b") == "Half hour"
    assert first.findtext("span") == "S01E02 · Pilot"
    assert first.findtext("time") == "10:00\N{EN DASH}10:30"
    assert second.findtext("span") == "1999"
    assert gap.text_content() == "no schedule"
    assert "11:31\N{EN DASH}12:30 UTC" in gap.get("title")
    nine = rows[2].xpath('.//div[contains(@class, "cell")]')
    assert [c.get("class") for c in nine] == ["cell gap"]
    cut = rows[0].xpath('.//div[contains(@class, "cell")]')
    assert [c.get("class") for c in cut] == ["cell prog cut-l", "cell prog cut-r"]

    ticks = doc.xpath('//span[@class="tick"]')
    assert [t.get("style") for t in ticks] == [f"left:{i * 120:.2f}px" for i in range(6)]
    assert ticks[0].text == "Sun 19 Jul 10:00" and ticks[1].text == "10:30"
    assert "All times are UTC." in doc.findtext(".//header/p/strong")


def test_titles_and_names_are_text_never_markup() -> None:
    hostile = '<script>alert("x")</script>'
    window = GuideWindow(
        start=START,
        end=_at(60),
        channels=(GuideChannel(number=7, name='Tom & Jerry "TV" <b>', callsign="<i>"),),
        programmes=(_programme(7, 0, 60, hostile, sub_title="<img src=x onerror=alert(1)>"),),
    )
    page = render_guide_html(window, notes=["<a href='http://evil'>x</a>"])

    assert "<script" not in page.lower()
    assert "<img" not in page.lower() and "<a " not in page.lower()
    assert "&lt;script&gt;" in page
    doc = lxml_html.document_fromstring(page)
    (cell,) = doc.xpath('//div[contains(@class, "prog")]')
    assert cell.findtext("b") == hostile
    assert cell.findtext("span") == "<img src=x onerror=alert(1)>"
    assert hostile in cell.get("title")
    assert doc.xpath('string(//div[@id="ch-7"]//span[@class="name"])') == 'Tom & Jerry "TV" <b>'


def test_the_page_is_self_contained() -> None:
    page = render_guide_html(_window())
    doc = lxml_html.document_fromstring(page)

    assert not doc.xpath("//script | //link | //img | //iframe | //object")
    assert not doc.xpath("//@src | //@href")
    assert not re.search(r"url\(|@import|https?://", page)
    assert doc.xpath("//style")


def test_a_short_schedule_is_said_on_the_page_and_in_words() -> None:
    window = _window()
    gap = shortfall(window)

    assert gap is not None
    assert gap.short_channels == (5, 9) and gap.empty_channels == (9,)
    assert gap.earliest_stop == _at(170) and gap.covered_seconds == 170 * 60
    text = describe_shortfall(gap)
    assert "2026-07-19 12:50 UTC" in text
    assert "the guide covers 2 h 50 min of the 3 h asked" in text
    assert "1 channel (9) has nothing stored" in text

    page = render_guide_html(window, notes=["Run `extend_schedules` now."])
    doc = lxml_html.document_fromstring(page)
    warnings = doc.xpath('//p[@class="warn"]')
    assert warnings[0].text_content().startswith("Schedules are stored up to 2026-07-19 12:50 UTC")
    assert warnings[1].text_content() == "Run extend_schedules now."
    assert warnings[1].findtext("code") == "extend_schedules"


def test_a_covered_window_has_no_shortfall_and_no_warning() -> None:
    window = GuideWindow(
        start=START,
        end=_at(60),
        channels=(GuideChannel(number=1, name="One"),),
        programmes=(_programme(1, -5, 40, "A"), _programme(1, 41, 90, "B")),
        breaks=(GuideBreak(channel_number=1, start=_at(40), stop=_at(41)),),
    )

    assert shortfall(window) is None
    assert 'class="warn"' not in render_guide_html(window)
    assert [c.kind for c in layout(window).rows[0].cells] == ["programme", "break", "programme"]


def test_rows_that_would_make_the_page_lie_are_refused() -> None:
    channels = (GuideChannel(number=1, name="One"),)
    overlapping = GuideWindow(
        start=START,
        end=_at(60),
        channels=channels,
        programmes=(_programme(1, 0, 40, "A"), _programme(1, 30, 60, "B")),
    )
    with pytest.raises(ValueError, match="overlapping"):
        layout(overlapping)
    stray = GuideWindow(
        start=START, end=_at(60), channels=channels, programmes=(_programme(3, 0, 60, "A"),)
    )
    with pytest.raises(ValueError, match="unknown channel 3"):
        layout(stray)


def test_span_text() -> None:
    assert [span_text(s) for s in (0, 59, 60, 3600, 42_120, 86_400)] == [
        "0 min",
        "0 min",
        "1 min",
        "1 h",
        "11 h 42 min",
        "24 h",
    ]
