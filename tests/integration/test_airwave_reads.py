"""What an import writes, read back the way Airwave's server and web UI read it.

The queries here are written from docs/reference/airwave-database.md (§3.9 the import run page,
§4.1 the viewer surface, §4.2 the show → episode merge, §4.5 the rules that keep Airwave's own
schedule jobs from rewriting a channel, §5.4 the initial schedule write). They use Airwave's
column names in raw SQL, never the project's tables module, so a row the project writes in a
shape Airwave would not read fails here even when the project's own reader accepts it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.definitions import import_lineup_job
from airwave_dagster.domain.schedule import channel_seed
from tests.support import lineups

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]


def _lineup() -> dict[str, Any]:
    data = lineups.genre_lineup(3)
    # Bumpers are laid exactly when the global configuration enables them and the channel's mode
    # is not OFF (§4.5): one channel of each kind.
    data["channels"][2]["bumperMode"] = "OFF"
    return data


def _import(instance: dg.DagsterInstance, path: Path) -> str:
    config = {"ops": {"plan_import_lineup": {"config": {"lineup": {"file": {"path": str(path)}}}}}}
    with dg.execute_job(
        dg.reconstructable(import_lineup_job), instance=instance, run_config=config
    ) as result:
        assert result.success
        return result.run_id


def _rows(engine: sa.Engine, sql: str, **params: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(sa.text(sql), params)]


def _no_empty_values(value: Any, where: str) -> None:
    """Airwave writes JSON from objects: absent keys are left out, never `null` or `[]` (§2.3)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            assert inner is not None and inner != [], f"{where}.{key} = {inner!r}"
            _no_empty_values(inner, f"{where}.{key}")


@pytest.fixture
def imported(store, plex_emulator, dagster_instance, tmp_path: Path) -> dict[str, Any]:
    path = lineups.write(tmp_path, _lineup())
    run_id = _import(dagster_instance, path)
    return {"engine": store.engine, "run_id": run_id}


def test_the_import_run_page_reads_its_counts_packages_and_channels(imported) -> None:
    engine, run_id = imported["engine"], imported["run_id"]
    rows = _rows(
        engine,
        'SELECT phase, "stepName", status, "dryRun", "channelNumber", "channelName", '
        '"packageKey", "poolSize", "scheduleSlots", output FROM import_trace '
        'WHERE "runId" = :run ORDER BY "startedAt", id',
        run=run_id,
    )

    plan = next(r for r in rows if r["phase"] == "plan")
    assert plan["stepName"] == "planImport" and plan["status"] == "ok"
    assert plan["output"]["counts"] == {
        "toCreate": 3,
        "skipDuplicate": 0,
        "disabled": 0,
        "reassigned": 0,
    }
    packages = [r for r in rows if r["phase"] == "packages"]
    assert len(packages) == 1, "one packages row per run"
    assert packages[0]["stepName"] == "createPackages"
    assert packages[0]["output"] == {
        "created": 1,
        "reused": 0,
        "packages": [{"key": "genres", "name": "Genres", "action": "create"}],
    }
    built = [r for r in rows if r["phase"] == "channel" and r["stepName"] == "buildChannel"]
    assert sorted(r["channelNumber"] for r in built) == [100, 101, 102]
    for row in built:
        assert row["status"] == "created" and row["packageKey"] == "genres"
        assert row["poolSize"] >= 1 and row["scheduleSlots"] >= 1
        assert row["output"]["status"] == "created" and row["output"]["channelId"]
        assert not any(r["dryRun"] for r in rows)
    (report,) = [r for r in rows if r["phase"] == "report"]
    assert report["stepName"] == "report"
    assert {k: v for k, v in report["output"].items() if k != "targetSourceId"} == {
        "dryRun": False,
        "packagesCreated": 1,
        "packagesReused": 0,
        "channelsCreated": 3,
        "channelsSkipped": 0,
        "channelsDisabled": 0,
        "channelsFailed": 0,
        "channelsReassigned": 0,
    }
    (source,) = _rows(engine, "SELECT id FROM media_source")
    assert report["output"]["targetSourceId"] == source["id"]


def test_channels_packages_and_guide_as_the_viewer_surface_reads_them(imported) -> None:
    engine = imported["engine"]
    # The channel list and the package sidebar (§4.1).
    channels = _rows(
        engine,
        'SELECT id, number, "shuffleSeed", "bumperRev", "bumperMode", "createdById" '
        "FROM channel WHERE enabled ORDER BY number",
    )
    assert [c["number"] for c in channels] == [100, 101, 102]
    sidebar = _rows(
        engine,
        "SELECT p.key FROM channel_package p WHERE EXISTS (SELECT 1 FROM channel c "
        'WHERE c."packageId" = p.id AND c.enabled) ORDER BY p."sortIndex", p.name',
    )
    assert [p["key"] for p in sidebar] == ["genres"]

    (config,) = _rows(engine, "SELECT enabled, rev FROM bumper_config WHERE key = 'global'")
    assert config["enabled"] is True
    now = datetime.now(UTC).replace(tzinfo=None)
    for channel in channels:
        # What keeps Airwave's bumper sync and refresh from rebuilding the channel (§4.5).
        assert channel["shuffleSeed"] == channel_seed(channel["id"])
        assert channel["bumperRev"] == config["rev"]
        assert channel["createdById"] is None
        slots = _rows(
            engine,
            'SELECT kind, "startsAt", "durationSeconds", "ratingKey", "bumperKind", '
            '"mediaItemId", "targetMediaItemId" FROM schedule_item WHERE "channelId" = :c '
            'ORDER BY "startsAt"',
            c=channel["id"],
        )
        assert slots, channel
        for slot, following in pairwise(slots):
            end = slot["startsAt"] + timedelta(seconds=slot["durationSeconds"])
            assert end == following["startsAt"], "rows are contiguous and never overlap"
        programs = [s for s in slots if s["kind"] == "PROGRAM"]
        bumpers = [s for s in slots if s["kind"] == "BUMPER"]
        assert all(p["ratingKey"] and p["mediaItemId"] and not p["bumperKind"] for p in programs)
        if channel["bumperMode"] == "OFF":
            assert not bumpers, "no bumper rows on a channel whose mode is OFF"
        else:
            assert bumpers, "bumpers are on in the global configuration"
            for index, slot in enumerate(slots):
                if slot["kind"] == "BUMPER":
                    assert slot["bumperKind"] == "interstitial" and slot["ratingKey"] is None
                    after = next(s for s in slots[index:] if s["kind"] == "PROGRAM")
                    assert slot["targetMediaItemId"] == after["mediaItemId"]
        # Now/next: the latest row started by now is still running, and a next one exists.
        current = [s for s in slots if s["startsAt"] <= now]
        assert current, "the schedule starts at the build, before this read"
        latest = current[-1]
        assert latest["startsAt"] + timedelta(seconds=latest["durationSeconds"]) > now
        assert any(s["startsAt"] > now for s in slots)


def test_guides_merge_over_their_show_rows_as_airwave_shows_them(imported) -> None:
    engine = imported["engine"]
    programs = _rows(
        engine,
        'SELECT m.type, m.title, m."ratingKey", m.guide, m."parentId", '
        'p.type AS parent_type, p."ratingKey" AS parent_key, p.guide AS parent_guide '
        'FROM schedule_item s JOIN media_item m ON m.id = s."mediaItemId" '
        "LEFT JOIN media_item p ON p.id = m.\"parentId\" WHERE s.kind = 'PROGRAM'",
    )
    assert programs
    episodes = [p for p in programs if p["type"] == "episode"]
    movies = [p for p in programs if p["type"] == "movie"]
    assert episodes and movies, "the genre channels mix films and series"
    for row in programs:
        guide = row["guide"]
        assert guide["title"] == row["title"] and isinstance(guide["durationMs"], int)
        assert guide.get("type") == row["type"]
        _no_empty_values(guide, f"media_item {row['ratingKey']}.guide")
        assert all(key == key[:1].lower() + key[1:] and "_" not in key for key in guide)
    for row in episodes:
        assert row["parentId"], f"episode {row['ratingKey']} is linked to its show's row"
        assert row["parent_type"] == "show"
        assert row["parent_key"] == row["guide"]["showRatingKey"]
        merged = {**row["parent_guide"], **row["guide"]}
        assert merged["showTitle"] and merged["title"] == row["title"]
        assert isinstance(row["guide"]["season"], int) and isinstance(row["guide"]["episode"], int)
