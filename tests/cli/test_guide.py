"""`airwave guide` as a user runs it: the HTML page of an imported lineup, quiet and true output."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from lxml import html as lxml_html

from airwave_dagster.cli.demo import DEMO_LINEUP
from resources import tables as t
from resources.stores.maintenance import MaintenanceStore

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

AIRWAVE = str(Path(sys.executable).parent / "airwave")
SHORT = re.compile(
    r"schedules are stored up to \d{4}-\d\d-\d\d \d\d:\d\d UTC at the earliest "
    r"\((\d+) of (\d+) channels end before the window does\): "
    r"the guide covers 1[1-9] h(?: \d+ min)? of the 24 h asked"
)


def _airwave(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_html_guide_of_the_demo_lineup_lists_every_channel_and_says_where_schedules_end(
    cli_env, store, tmp_path: Path
) -> None:
    imported = _airwave(cli_env, "import", str(DEMO_LINEUP), "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["status"] == "SUCCESS"
    # One channel switched off after the import: the guide is of enabled channels only.
    with store.transaction() as conn:
        conn.execute(t.channel.update().where(t.channel.c.number == 403).values(enabled=False))
        enabled = conn.execute(
            sa.select(t.channel.c.number, t.channel.c.name)
            .where(t.channel.c.enabled)
            .order_by(t.channel.c.number)
        ).all()
        has_rows = sa.exists().where(t.schedule_item.c.channel_id == t.channel.c.id)
        unscheduled = set(
            conn.execute(
                sa.select(t.channel.c.number).where(t.channel.c.enabled, ~has_rows)
            ).scalars()
        )
    assert len(enabled) >= 10
    assert len(unscheduled) < len(enabled)
    page = tmp_path / "guide.html"

    done = _airwave(cli_env, "guide", "--hours", "24", "--html", str(page))
    finished = datetime.now(UTC)

    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # --html alone writes no XML
    doc = lxml_html.document_fromstring(page.read_text(encoding="utf-8"))
    rows = doc.xpath('//div[@class="row" and starts-with(@id, "ch-")]')
    assert [
        (
            int(row.xpath('string(.//span[@class="num"])')),
            row.xpath('string(.//span[@class="name"])'),
        )
        for row in rows
    ] == [(number, name) for number, name in enabled]

    # Every programme the stored schedules air well inside the window is on its channel's row.
    _, programmes = MaintenanceStore(store).guide(
        finished + timedelta(minutes=5), finished + timedelta(hours=11)
    )
    scheduled = {number for number, _ in enabled} - unscheduled
    assert {p.channel_number for p in programmes} == scheduled
    cells = {
        int(row.get("id").removeprefix("ch-")): row.xpath('.//div[contains(@class, "cell")]')
        for row in rows
    }
    for programme in programmes:
        titles = [
            c.findtext("b") for c in cells[programme.channel_number] if "prog" in c.get("class")
        ]
        assert programme.title in titles, programme

    # An import lays 12 h per channel (and at most one programme more): the 24 h asked are not all
    # there, and both outputs say so. A channel whose filter matched nothing has no rows at all,
    # and is named.
    match = SHORT.search(done.stderr)
    assert match, done.stderr
    assert (int(match[1]), int(match[2])) == (len(scheduled), len(enabled))
    for number in unscheduled:
        assert f"({number})" in done.stderr or f" {number}," in done.stderr, done.stderr
        assert [c.get("class") for c in cells[number]] == ["cell gap"]
    assert "airwave serve" in done.stderr and "extend_schedule" in done.stderr
    warnings = " ".join(p.text_content() for p in doc.xpath('//p[@class="warn"]'))
    assert SHORT.search(warnings[:1].lower() + warnings[1:]), warnings
    for number in scheduled:
        # Stored schedules are gapless, so the only gap is where they end; a bumper between two
        # programmes is drawn as a break, not as a gap.
        kinds = [c.get("class").split()[1] for c in cells[number]]
        assert kinds[-1] == "gap" and "gap" not in kinds[:-1], (number, kinds)
    assert any("brk" in c.get("class") for row in cells.values() for c in row)

    # Piped, the XMLTV still comes out on stdout.
    piped = _airwave(cli_env, "guide", "--hours", "2")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert piped.stdout.count("<channel ") == len(enabled)


def test_guide_refuses_to_print_xml_to_a_terminal(cli_env) -> None:
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [AIRWAVE, "guide"],
            env=cli_env,
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
        ready, _, _ = select.select([leader], [], [], 0.2)
        printed = os.read(leader, 65_536) if ready else b""
    finally:
        os.close(follower)
        os.close(leader)

    assert done.returncode == 2
    assert "--output FILE" in done.stderr and "--html FILE" in done.stderr
    assert "pipe it" in done.stderr
    assert b"<?xml" not in printed
