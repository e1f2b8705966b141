"""Reference-shaped files through the real `import_lineup` job (Postgres, the Plex emulator).

The normalisation table of tests/domain/test_lineup_normalisation.py, imported for real: each
channel is stored as normalised, its pool is what the normalised filter means, and the same note
is listed by the dry-run and by the report. The reference's own exports import unchanged and come
back out of `export_lineup` as the same recipes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from airwave_dagster.definitions import import_lineup_job
from airwave_dagster.domain.filters import FilterEnvelope, evaluate
from airwave_dagster.domain.library import MediaItem
from airwave_dagster.domain.lineup_file import parse_lineup
from resources import tables as t
from tests.domain.test_lineup_normalisation import CASES
from tests.support import lineups
from tests.support.channels import import_report
from tests.support.exports import EXPORTS

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]


def _config(path: Path, *, dry_run: bool) -> dict[str, Any]:
    return {
        "ops": {
            "plan_import_lineup": {
                "config": {"lineup": {"file": {"path": str(path)}}, "dry_run": dry_run}
            }
        }
    }


def _run(instance: dg.DagsterInstance, path: Path, *, dry_run: bool) -> str:
    with dg.execute_job(
        dg.reconstructable(import_lineup_job),
        instance=instance,
        run_config=_config(path, dry_run=dry_run),
    ) as result:
        assert result.success
        return result.run_id


def _run_in_process(instance: dg.DagsterInstance, path: Path, *, dry_run: bool) -> str:
    """The same job graph, ops and IO manager, with every step in this process.

    For the reference catalogues: 184 channels are about the data, not the executor (the other
    tests here and tests/integration/test_import_lineup.py run the multiprocess fan-out), and a
    process per step made this one test take minutes.
    """
    result = import_lineup_job().execute_in_process(
        run_config=_config(path, dry_run=dry_run), instance=instance
    )
    assert result.success
    return result.run_id


def _report(store, run_id: str) -> dict[str, Any]:
    return import_report(store, run_id)


def _expected_pool(items: list[MediaItem], envelope: dict[str, Any]) -> int:
    parsed = FilterEnvelope.model_validate(envelope)
    searched = parsed.effective_media_types
    return sum(
        1
        for item in items
        if ("movie" if item.type == "movie" else "show") in searched
        and evaluate(parsed.filter, item)
    )


def _table_file() -> dict[str, Any]:
    channels = []
    for index, case in enumerate(CASES):
        channel = json.loads(json.dumps(case.channel))
        channel["name"] = case.id
        if channel["number"] > 0:
            channel["number"] = 200 + index
        channels.append(channel)
    return lineups.lineup(channels)


@pytest.fixture
def env(store, plex_emulator, dagster_instance):
    return store, plex_emulator, dagster_instance


def test_each_normalisation_is_imported_and_noted_by_dry_run_and_report(
    env, tmp_path: Path
) -> None:
    store, emulator, instance = env
    path = lineups.write(tmp_path, _table_file(), "reference-shapes.json")
    parsed = parse_lineup(path.read_bytes(), source=path.name)

    dry = _report(store, _run(instance, path, dry_run=True))
    real = _report(store, _run(instance, path, dry_run=False))

    items = emulator.library.media_items()
    dry_rows = {row["name"]: row for row in dry["channels"]}
    real_rows = {row["name"]: row for row in real["channels"]}
    assert set(real_rows) == {case.id for case in CASES}
    with store.engine.connect() as conn:
        stored = {
            row.name: row
            for row in conn.execute(
                sa.select(t.channel, t.channel_definition.c.plex_filter).join(
                    t.channel_definition, t.channel_definition.c.channel_id == t.channel.c.id
                )
            )
        }
    for index, case in enumerate(CASES):
        (note,) = parsed.notes_of(index)
        row = real_rows[case.id]
        assert row["status"] == "created", row
        # Channel, JSON path and what was done: in the report and, identically, in the dry-run.
        assert f"{note.path}: {note.message}" in row["reason"]
        assert f"{note.path}: {note.message}" in dry_rows[case.id]["reason"]
        assert row["pool_size"] == dry_rows[case.id]["pool_size"]
        envelope = stored[case.id].plex_filter
        assert envelope == parsed.channels[index].definitions[0].plex_filter
        assert row["pool_size"] == _expected_pool(items, envelope)
        node = envelope["filter"]
        for key, expected in case.stored.items():
            if key in ("op", "value", "field"):
                assert node[key] == expected
            elif key == "number":
                assert row["number_reassigned"] is True
                assert row["original_number"] == expected
                assert 1 <= stored[case.id].number == row["number"]
            else:
                assert getattr(stored[case.id], key) == expected, key
    # `is` read as `contains` finds what `contains` finds: titles holding the words.
    assert real_rows["is-on-text"]["pool_size"] == sum(
        "return to" in m.title.lower() for m in items if m.type == "movie"
    )
    assert real_rows["is-on-text"]["pool_size"] > 0
    assert real_rows["empty-boolean"]["pool_size"] == sum(bool(m.hdr) for m in items
                                                          if m.type == "movie") > 0  # fmt: skip
    # A field that exists on none of the searched types matches nothing: no schedule, noted.
    empty = real_rows["field-missing-on-media-types"]
    assert empty["pool_size"] == 0
    assert "filter matches nothing in the library" in empty["reason"]
    assert empty["schedule_slots"] == 0


@pytest.mark.slow
@pytest.mark.timeout(900)  # the full catalogue builds 184 channels
@pytest.mark.parametrize("name", ["presets-basic.json", "presets-full-catalog.json"])
def test_reference_exports_import_through_the_job_and_round_trip(
    env, name: str, tmp_path: Path
) -> None:
    store, _, instance = env
    path = EXPORTS / name
    original = json.loads(path.read_bytes())

    report = _report(store, _run_in_process(instance, path, dry_run=False))

    assert report["channels_failed"] == 0
    assert report["channels_created"] + report["channels_disabled"] == len(original["channels"])
    # A file the reference wrote needs no normalisation: no channel carries a note.
    assert not [row for row in report["channels"] if "$.channels[" in (row["reason"] or "")]
    exported = json.loads(json.dumps(store.export_lineup().model_dump(mode="json", by_alias=True)))

    def recipe(channel: dict[str, Any]) -> tuple[Any, ...]:
        filters = [d["plexFilter"] for d in channel["definitions"] if d["kind"] == "PREDICATE"]
        return (
            channel["number"],
            channel["name"],
            channel["packageKey"],
            channel["ordering"],
            channel["sortField"],
            channel["sortDir"],
            json.dumps(filters, sort_keys=True),
        )

    assert sorted(map(recipe, exported["channels"])) == sorted(map(recipe, original["channels"]))
    assert {p["key"] for p in exported["packages"]} == {p["key"] for p in original["packages"]}
    # What the instance exports imports again, as a re-import that changes nothing.
    again = lineups.write(tmp_path, exported, "exported.json")
    second = _report(store, _run_in_process(instance, again, dry_run=True))
    assert second["channels_skipped"] == len(original["channels"])
