"""Pure maintenance rules: seams across extensions, pass marks, repair points, XMLTV output."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lxml import etree

from airwave_dagster.domain.library import MediaItem
from airwave_dagster.domain.maintenance import (
    ChannelOutcome,
    RowRef,
    next_seam,
    pass_marks,
    pool_fingerprint,
    repair_point,
    summarize,
    usable_count,
)
from airwave_dagster.domain.schedule import BumperPlan, build_schedule
from airwave_dagster.domain.xmltv import (
    GuideChannel,
    GuideProgramme,
    episode_numbers,
    render_xmltv,
    xmltv_time,
)

DTD = Path(__file__).parent.parent / "data" / "xmltv-subset.dtd"
START = datetime(2026, 7, 19, 12, 0, tzinfo=UTC)


def _pool(count: int, minutes: int = 30) -> list[MediaItem]:
    return [
        MediaItem(
            rating_key=str(1000 + i),
            type="episode",
            title=f"Episode {i}",
            duration_ms=(minutes + i % 7) * 60_000,
            show_rating_key=str(900 + i % 3),
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("bumpers", [None, BumperPlan()])
@pytest.mark.parametrize("ordering", ["SHUFFLE", "IN_ORDER"])
def test_window_plus_extension_equals_one_uncapped_build(ordering, bumpers) -> None:
    pool = _pool(40)
    window = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=77,
        start_at=START,
        window_seconds=43_200,
        bumpers=bumpers,
    )
    assert window.ends_at is not None
    extension = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=77,
        start_at=window.ends_at,
        cursor=window.cursor,
        bumpers=bumpers,
    )
    whole = build_schedule(
        pool,
        ordering=ordering,
        channel_seed=77,
        start_at=START,
        min_duration_seconds=window.covered_seconds + extension.covered_seconds,
        bumpers=bumpers,
    )
    programs = [e.rating_key for e in window.entries + extension.entries if e.kind == "PROGRAM"]
    assert programs == [e.rating_key for e in whole.entries if e.kind == "PROGRAM"][: len(programs)]
    # The seam itself starts with a program: the extension never opens with a bumper.
    assert extension.entries[0].kind == "PROGRAM"
    assert extension.entries[0].starts_at == window.ends_at


def test_pass_marks_fall_where_each_pass_begins() -> None:
    pool = _pool(10)
    window = build_schedule(
        pool, ordering="SHUFFLE", channel_seed=5, start_at=START, window_seconds=3 * 3600
    )
    assert window.ends_at is not None
    extension = build_schedule(
        pool, ordering="SHUFFLE", channel_seed=5, start_at=window.ends_at, cursor=window.cursor
    )
    marks = pass_marks(extension, window.cursor, usable_count(pool))
    assert [m.pass_index for m in marks] == list(range(1, 1 + len(marks)))
    programs = [e for e in extension.entries if e.kind == "PROGRAM"]
    first_in_pass = len(pool) - window.cursor.pos
    for n, mark in enumerate(marks):
        entry = programs[first_in_pass + n * len(pool)]
        assert mark.starts_at == entry.starts_at
        assert mark.pass_seed == window.cursor.pass_seed
        # A build resumed at the mark lays exactly what the original laid from there.
        resumed = build_schedule(
            pool,
            ordering="SHUFFLE",
            channel_seed=5,
            start_at=mark.starts_at,
            cursor=mark.cursor(),
            min_duration_seconds=3600,
        )
        assert [e.rating_key for e in resumed.entries[:5]] == [
            e.rating_key for e in programs[first_in_pass + n * len(pool) :][:5]
        ]


def test_pass_marks_with_bumpers_start_at_the_bumper_before_the_pass() -> None:
    pool = _pool(6)
    build = build_schedule(
        pool, ordering="IN_ORDER", channel_seed=5, start_at=START, bumpers=BumperPlan()
    )
    marks = pass_marks(build, None, usable_count(pool))
    assert marks[0].starts_at == START
    for mark in marks[1:]:
        at = next(e for e in build.entries if e.starts_at == mark.starts_at)
        assert at.kind == "BUMPER"
        assert at.target_rating_key == pool[0].rating_key
    assert next_seam(marks, START + timedelta(seconds=1)) == marks[1]
    assert next_seam(marks, build.ends_at or START) is None


def _row(minutes: int, kind: str = "PROGRAM", playable: bool = True) -> RowRef:
    return RowRef(
        starts_at=START + timedelta(minutes=minutes),
        kind=kind,  # type: ignore[arg-type]
        playable=playable,
    )


def test_repair_point_is_the_first_bad_row_after_the_buffer_or_its_bumper() -> None:
    rows = [
        _row(1, playable=False),  # within 5 minutes: left alone
        _row(30),
        _row(60, "BUMPER"),
        _row(61, playable=False),
        _row(90, playable=False),
    ]
    assert repair_point(rows, START) == START + timedelta(minutes=60)
    rows[2] = _row(60, "BUMPER", playable=False)
    assert repair_point(rows, START) == START + timedelta(minutes=60)
    assert repair_point([_row(30), _row(60)], START) is None
    assert repair_point([_row(1, playable=False)], START) is None


def test_summary_counts_statuses_rows_and_earliest_runway() -> None:
    outcomes = [
        ChannelOutcome(
            channel_id="a", number=2, status="extended", rows_added=10, runway_seconds=9
        ),
        ChannelOutcome(channel_id="b", number=1, status="failed", detail="boom"),
        ChannelOutcome(channel_id="c", number=3, status="not-due", runway_seconds=4),
        ChannelOutcome(channel_id="d", number=4, status="empty-pool", rows_removed=3),
    ]
    summary = summarize("extend", outcomes)
    assert (summary.checked, summary.extended, summary.failed, summary.empty_pool) == (4, 1, 1, 1)
    assert (summary.rows_added, summary.rows_pruned) == (10, 3)
    assert summary.earliest_runway_seconds == 4
    assert summary.failures == ["1: boom"]


def test_pool_fingerprint_sees_membership_order_and_length_but_not_dead_items() -> None:
    pool = _pool(5)
    assert pool_fingerprint(pool) == pool_fingerprint(list(pool))
    assert pool_fingerprint(pool[:4]) != pool_fingerprint(pool)
    assert pool_fingerprint(list(reversed(pool))) != pool_fingerprint(pool)
    longer = [*pool[:4], pool[4].model_copy(update={"duration_ms": 1})]
    assert pool_fingerprint(longer) != pool_fingerprint(pool)
    dead = MediaItem(rating_key="1", type="movie", title="x", duration_ms=0)
    assert pool_fingerprint([*pool, dead]) == pool_fingerprint(pool)


def _guide() -> bytes:
    channels = [
        GuideChannel(number=101, name="Comedy & Co", callsign="COMD"),
        GuideChannel(number=102, name="Films"),
    ]
    programmes = [
        GuideProgramme(
            channel_number=101,
            start=START,
            stop=START + timedelta(minutes=22),
            title="The Office <US>",
            sub_title="Pilot",
            description="It begins.",
            year=2005,
            season=1,
            episode=1,
            categories=("Comedy",),
            content_rating="TV-14",
        ),
        GuideProgramme(
            channel_number=102,
            start=START,
            stop=START + timedelta(minutes=95),
            title="A Film",
            year=1999,
        ),
    ]
    return render_xmltv(channels, programmes)


def test_xmltv_validates_against_the_dtd_and_carries_the_guide_fields() -> None:
    document = _guide()
    dtd = etree.DTD(str(DTD))
    tree = etree.fromstring(document)
    assert dtd.validate(tree), dtd.error_log.filter_from_errors()
    channel = tree.find("channel")
    assert channel is not None and channel.get("id") == "101.airwave"
    assert [e.text for e in channel.findall("display-name")] == [
        "101 Comedy & Co",
        "Comedy & Co",
        "101",
        "COMD",
    ]
    show = tree.find("programme")
    assert show is not None
    assert (show.get("start"), show.get("stop")) == ("20260719120000 +0000", "20260719122200 +0000")
    assert show.findtext("title") == "The Office <US>"
    assert show.findtext("sub-title") == "Pilot"
    assert show.findtext("date") == "2005"
    assert {e.get("system"): e.text for e in show.findall("episode-num")} == {
        "xmltv_ns": "0.0.",
        "onscreen": "S01E01",
    }


def test_xmltv_without_the_required_channel_attribute_fails_the_dtd() -> None:
    # The validation above could not pass by accident: a broken document is refused.
    tree = etree.fromstring(_guide())
    programme = tree.find("programme")
    assert programme is not None
    del programme.attrib["channel"]
    assert not etree.DTD(str(DTD)).validate(tree)


def test_xmltv_refuses_unknown_channels_backwards_times_and_naive_times() -> None:
    channel = GuideChannel(number=1, name="One")
    later = START + timedelta(hours=1)
    with pytest.raises(ValueError, match="unknown channel 2"):
        render_xmltv(
            [channel], [GuideProgramme(channel_number=2, start=START, stop=later, title="x")]
        )
    with pytest.raises(ValueError, match="not after its start"):
        render_xmltv(
            [channel], [GuideProgramme(channel_number=1, start=later, stop=START, title="x")]
        )
    with pytest.raises(ValueError, match="timezone-aware"):
        xmltv_time(datetime(2026, 1, 1))


def test_episode_numbers_are_zero_based_and_tolerate_missing_parts() -> None:
    assert episode_numbers(None, None) == []
    assert episode_numbers(3, 12) == [("xmltv_ns", "2.11."), ("onscreen", "S03E12")]
    assert episode_numbers(None, 5) == [("xmltv_ns", ".4.")]
