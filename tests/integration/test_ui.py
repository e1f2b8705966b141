"""`airwave dev`: the Dagster UI serves the code location and launches runs with typed config."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from airwave_dagster.cli import launcher
from tests.support import lineups
from tests.support.dagster_dev import Dev

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]


def test_ui_launches_an_import_with_typed_config(fresh: Dev, store) -> None:
    config = {
        "lineup_json": json.dumps(lineups.genre_lineup(2)),
        "lineup_name": "from-the-ui.json",
        "dry_run": True,
    }
    run_id = fresh.launch_run("import_lineup", {"ops": {"plan_import_lineup": {"config": config}}})
    finished = launcher.wait_for_run(fresh.instance, run_id)
    assert finished.status == dg.DagsterRunStatus.SUCCESS
    report = next(r for r in store.traces(run_id) if r["phase"] == "report")["output"]
    assert report["lineup_name"] == "from-the-ui.json"
    assert report["dry_run"] is True
    assert store.counts()["channels"] == 0
