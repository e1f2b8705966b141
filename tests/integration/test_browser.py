"""The Dagster UI as a person uses it: chromium on the shared `airwave dev`, Postgres, the emulator.

Each test does in the browser what the README tells an operator to do (launch from the
Launchpad, read the run page, re-execute from failure, follow the lineage, watch the upload
sensor) and asserts on what the page shows, not on GraphQL answers.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.cli import launcher
from airwave_dagster.durability.run_launcher import worker_pid
from airwave_dagster.run_tags import LINEUP_TAG
from tests.support import lineups
from tests.support.browser import UI
from tests.support.dagster_dev import Dev, wait_for
from tests.support.homes import query

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.plex,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.browser,
    # Each test waits for real runs, whose step processes start slowly on a loaded 2-core box.
    pytest.mark.timeout(600),
]

NO_AUTO_RESUME = {"dagster/max_retries": "0"}
RUN_URL = re.compile(r"/runs/([0-9a-f-]{36})")
# A run's page updates live; a run on a loaded 2-core machine can take a minute to finish.
RUN_TIMEOUT_MS = 420_000


def _expect(locator: Any, timeout: float = 30_000) -> Any:
    from playwright.sync_api import expect

    expect(locator).to_be_visible(timeout=timeout)
    return locator


def _open_run(ui: UI, run_id: str) -> None:
    ui.open(f"/runs/{run_id}")
    _expect(ui.page.get_by_text(run_id[:8]).first)


def _wait_run_event(ui: UI, event: str) -> None:
    """Wait until the run page's event log shows `event` (RUN_SUCCESS, RUN_FAILURE)."""
    _expect(ui.page.get_by_text(event, exact=True).first, RUN_TIMEOUT_MS)


def _channels(database_url: str) -> list[int]:
    rows = query(database_url, "SELECT number FROM public.channel WHERE enabled ORDER BY number")
    return [row.number for row in rows]


def test_launchpad_dry_run_shows_the_outcome_table(ui: UI, fresh: Dev, tmp_path: Path) -> None:
    path = lineups.write(tmp_path, lineups.genre_lineup(2), "from-the-launchpad.json")
    ui.open("/locations/airwave/jobs/import_lineup/playground")
    editor = _expect(ui.page.locator(".CodeMirror").first)
    editor.click()
    ui.page.keyboard.press("Control+A")
    # insert_text delivers the text as one input event, as a paste does: CodeMirror's
    # auto-indent would otherwise re-indent every typed newline of the YAML.
    ui.page.keyboard.insert_text(
        "ops:\n"
        "  plan_import_lineup:\n"
        "    config:\n"
        "      lineup:\n"
        "        file:\n"
        f"          path: {path}\n"
        "      dry_run: true\n"
    )
    _expect(ui.page.get_by_text("No errors"))
    ui.shot("launchpad-config")
    ui.page.get_by_role("button", name="Launch Run").click()
    ui.page.wait_for_url(RUN_URL)
    match = RUN_URL.search(ui.page.url)
    assert match is not None
    run_id = match.group(1)
    _wait_run_event(ui, "RUN_SUCCESS")
    ui.shot("run-finished")

    table = ui.page.locator("table", has=ui.page.get_by_text("would create")).last
    _expect(table)
    header = [cell.strip() for cell in table.locator("th").all_inner_texts()]
    assert header == ["number", "channel", "package", "status", "pool", "slots", "note"]
    rows = [
        [cell.strip() for cell in row.locator("td").all_inner_texts()]
        for row in table.locator("tbody tr").all()
    ]
    assert [row[:4] for row in rows] == [
        ["100", "Action 0", "genres", "would create"],
        ["101", "Comedy 1", "genres", "would create"],
    ]
    assert all(int(row[4]) > 0 for row in rows), rows  # the pools were resolved against Plex
    # A dry-run's counts say what would happen; none of them claims something was created.
    _expect(ui.page.get_by_text("channels_to_create", exact=True))
    assert ui.page.get_by_text("channels_created", exact=True).count() == 0
    assert launcher.wait_for_run(fresh.instance, run_id).status == dg.DagsterRunStatus.SUCCESS
    assert _channels(fresh.env["AIRWAVE_DATABASE_URL"]) == []


def test_a_failing_channel_names_itself_its_cause_and_the_resume_command(
    ui: UI, fresh: Dev, database_url: str
) -> None:
    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool)
    # A real fault inside Postgres: channel 101 cannot be inserted until the trigger is dropped.
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE FUNCTION airwave_dagster.refuse_101() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'injected fault for channel 101'; END $$"
            )
        )
        conn.execute(
            sa.text(
                "CREATE TRIGGER refuse_101 BEFORE INSERT ON public.channel FOR EACH ROW "
                "WHEN (NEW.number = 101) EXECUTE FUNCTION airwave_dagster.refuse_101()"
            )
        )
    try:
        run_id = fresh.launch_import(lineups.genre_lineup(2), tags=NO_AUTO_RESUME)
        _open_run(ui, run_id)
        _wait_run_event(ui, "RUN_FAILURE")
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TRIGGER refuse_101 ON public.channel"))
            conn.execute(sa.text("DROP FUNCTION airwave_dagster.refuse_101()"))
        engine.dispose()
    ui.shot("run-failed")
    failure = ui.page.locator("div", has_text=re.compile(r"channel 101 .*failed")).last
    _expect(failure)
    text = failure.inner_text()
    assert '"Comedy 1"' in text
    assert "injected fault for channel 101" in text
    assert f"airwave runs resume {run_id}" in text
    _expect(ui.page.get_by_text("build_channel[ch_101]").first)


def test_reexecute_from_failure_in_the_ui_completes_a_killed_run(
    ui: UI, fresh: Dev, database_url: str
) -> None:
    lineup = lineups.genre_lineup(3)
    run_id = fresh.launch_import(lineup, tags=NO_AUTO_RESUME)

    def packages_started() -> bool:
        return any(
            record.dagster_event is not None and record.dagster_event.step_key == "create_packages"
            for record in fresh.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
        )

    wait_for(packages_started, 120, "create_packages to start", poll=0.05)
    pid = wait_for(lambda: worker_pid(fresh.instance, run_id), 60, "the run worker's pid")
    os.kill(pid, signal.SIGKILL)
    wait_for(
        lambda: fresh.instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE,
        90,
        "the killed run to be marked FAILURE",
    )
    _open_run(ui, run_id)
    ui.shot("killed-run")
    everything = _expect(ui.page.get_by_role("button", name="Re-execute all (*)"))
    everything.locator("xpath=following::button[1]").click()
    ui.page.get_by_role("menuitem", name="From failure").click()
    # The UI opens the new run; its id differs from the killed one.
    ui.page.wait_for_url(lambda url: RUN_URL.search(url) is not None and run_id not in url)
    match = RUN_URL.search(ui.page.url)
    assert match is not None
    child = fresh.instance.get_run_by_id(match.group(1))
    assert child is not None and child.parent_run_id == run_id
    _wait_run_event(ui, "RUN_SUCCESS")
    ui.shot("resumed-run")
    assert launcher.wait_for_run(fresh.instance, child.run_id).status == (
        dg.DagsterRunStatus.SUCCESS
    )
    assert _channels(database_url) == [c["number"] for c in lineup["channels"]]


def test_the_lineage_page_shows_the_library_assets_in_order(ui: UI) -> None:
    # The library group's lineage (the global page shows one box per group: library, uploads).
    ui.open("/locations/airwave/asset-groups/library")
    names = ["plex_library", "library_profile", "ai_lineup"]
    # The graph lays assets out left to right, upstream first: the order of their boxes' x is
    # the order of the edges plex_library -> library_profile -> ai_lineup.
    xs = []
    for name in names:
        _expect(ui.page.get_by_text(name, exact=True).last)
        # The name also appears in the asset list beside the graph; the graph's box is the
        # rightmost visible one.
        boxes = [m.bounding_box() for m in ui.page.get_by_text(name, exact=True).all()]
        visible = [b for b in boxes if b is not None and b["height"] > 0]
        assert visible, name
        xs.append(max(b["x"] for b in visible))
    ui.shot("lineage")
    assert xs == sorted(xs) and len(set(xs)) == 3, dict(zip(names, xs, strict=True))


def test_the_asset_checks_tab_lists_the_lineup_targets_and_the_freshness_check(ui: UI) -> None:
    lineup_checks = [
        "audience_ceiling",
        "no_strict_subsets",
        "overlap_bound",
        "channels_per_item",
        "channels_verified",
        "genres_covered",
    ]
    # The asset page's Checks tab: every declared check is listed, evaluated or not yet.
    ui.open("/assets/ai_lineup?view=checks")
    for name in lineup_checks:
        _expect(ui.page.get_by_text(name, exact=True).first)
    ui.shot("ai-lineup-checks")

    ui.open("/assets/plex_library?view=checks")
    _expect(ui.page.get_by_text("fresh", exact=True).first)
    ui.shot("plex-library-checks")


_SENSOR_STATE = """
query State($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) { ... on Sensor { sensorState { id } } }
}
"""
_STOP_SENSOR = """
mutation Stop($id: String) { stopSensor(id: $id) { __typename } }
"""
_START_SENSOR = """
mutation Start($selector: SensorSelector!) { startSensor(sensorSelector: $selector) { __typename } }
"""


def _tick_reasons(ui: UI, wanted: str, rows: int = 15) -> str | None:
    """Open the result of each recent tick until one's skip reason mentions `wanted`."""
    ticks = ui.page.locator("tr", has=ui.page.get_by_role("button", name="View logs"))
    for index in range(min(rows, ticks.count())):
        ticks.nth(index).locator("td").nth(4).get_by_role("button").first.click()
        dialog = _expect(ui.page.get_by_role("dialog"))
        # The dialog opens with "Loading tick details…"; its reason comes with the details.
        _expect(dialog.get_by_text("Duration", exact=True))
        text = dialog.inner_text()
        dialog.get_by_role("button", name="Close").click()
        if wanted in text:
            return text
    return None


def test_uploads_become_sensor_runs_and_bad_files_skipped_ticks(
    ui: UI, fresh: Dev, database_url: str
) -> None:
    inbox = Path(fresh.env["AIRWAVE_INBOX"])
    inbox.mkdir(parents=True, exist_ok=True)
    # The bad file first, alone: a tick that also requests a run reports runs, not skip reasons.
    (inbox / "broken-upload.json").write_text('{"version": 1, "channels": [')
    wait_for(
        lambda: (
            any(
                p.name.endswith("broken-upload.json.error.txt")
                for p in (inbox / "rejected").iterdir()
            )
            if (inbox / "rejected").exists()
            else False
        ),
        90,
        "the bad upload to be rejected",
    )
    # Stop the sensor while the ticks are read: a new tick every 5 s shifts the table's rows
    # under the clicks, and the rejecting tick can slide past them.
    selector = {
        "repositoryLocationName": "airwave",
        "repositoryName": "__repository__",
        "sensorName": "lineup_upload_sensor",
    }
    state = fresh.graphql(_SENSOR_STATE, {"selector": selector})["sensorOrError"]["sensorState"]
    fresh.graphql(_STOP_SENSOR, {"id": state["id"]})
    try:
        ui.open("/locations/airwave/sensors/lineup_upload_sensor")
        _expect(ui.page.get_by_role("button", name="View logs").first)
        reason = _tick_reasons(ui, "broken-upload.json")
        ui.shot("sensor-ticks")
    finally:
        fresh.graphql(_START_SENSOR, {"selector": selector})
    assert reason is not None, "no recent tick names the rejected file"
    assert "Skip reason" in reason
    assert "broken-upload.json: rejected (invalid), moved to rejected/" in reason

    good = lineups.genre_lineup(1, first_number=300)
    (inbox / "good-upload.json").write_text(json.dumps(good))
    run = wait_for(
        lambda: next(
            iter(fresh.instance.get_runs(dg.RunsFilter(tags={LINEUP_TAG: "good-upload.json"}))),
            None,
        ),
        120,
        "the good upload's run",
    )
    ui.open("/locations/airwave/sensors/lineup_upload_sensor")
    ui.page.get_by_role("button", name="Runs", exact=True).click()
    _expect(ui.page.get_by_text(run.run_id[:8]).first)
    ui.shot("sensor-runs")
    finished = launcher.wait_for_run(fresh.instance, run.run_id)
    assert finished.status == dg.DagsterRunStatus.SUCCESS
    assert _channels(database_url) == [300]
