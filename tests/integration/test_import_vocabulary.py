"""A lineup asking for filter fields or sorts the Plex server does not offer, reported per channel.

Real servers advertise their filter fields and sorts per library type and level (the `<Meta>`
of a section search), and plexapi validates every search against it: there is no
`episode.director`, episodes cannot be sorted by `contentRating`, and some servers lack optional
fields such as `hdr`. The emulator advertises the same by default (issue 22) and, with
`missing_fields`, a server without the optional ones. The import must say, per channel, in the
dry-run, the report and the run's metadata, what it cannot ask; the build does not fail on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster.emulators.plex import start_emulator
from resources.plex import PlexResource
from tests.support import lineups
from tests.support.import_job import import_job_with

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]


def _lineup() -> dict[str, Any]:
    c, p = lineups.condition, lineups.predicate
    return lineups.lineup(
        [
            lineups.channel(101, "Drama", [p(["movie", "show"], c("genre", "is", "Drama"))]),
            lineups.channel(102, "Shiny", [p(["movie", "show"], c("hdr", "is", "true"))]),
            lineups.channel(
                103,
                "Auteurs",
                [p(["movie", "show"], c("director", "isNot", "Nobody At All"))],
            ),
            lineups.channel(
                104,
                "Rated",
                [p(["show"], c("genre", "is", "Comedy"))],
                ordering="IN_ORDER",
                sortField="contentRating",
            ),
        ]
    )


def _run(
    instance: dg.DagsterInstance, path: Path, emulator: Any, *, dry_run: bool
) -> dg.ExecuteInProcessResult:
    config = {"lineup": {"file": {"path": str(path)}}, "dry_run": dry_run}
    plex = PlexResource(base_url=emulator.url, token=emulator.token)
    return import_job_with(plex=plex).execute_in_process(
        run_config={"ops": {"plan_import_lineup": {"config": config}}},
        instance=instance,
        raise_on_error=False,
    )


def _channels(result: dg.ExecuteInProcessResult) -> dict[int, Any]:
    """The import report's channel results (what `airwave import --json` prints), by number."""
    report = result.output_for_node("summarize_import")
    return {c.number: c for c in report.channels}


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "import"])
def test_missing_fields_and_sorts_are_reported_by_channel(
    store, dagster_instance, tmp_path: Path, dry_run: bool
) -> None:
    path = lineups.write(tmp_path, _lineup())
    with start_emulator(items=300, seed=3, missing_fields=("hdr",)) as emulator:
        result = _run(dagster_instance, path, emulator, dry_run=dry_run)

    assert result.success
    by_number = _channels(result)
    assert all(c.status == "created" for c in by_number.values())
    assert by_number[101].unsupported == [] and "lacks" not in (by_number[101].reason or "")
    shiny = by_number[102].reason or ""
    assert "filter field 'hdr' (hdr) is not offered by library 'Movies'" in shiny
    assert "filter field 'hdr' (episode.hdr) is not offered by library 'TV Shows'" in shiny
    assert by_number[102].pool_size == 0
    auteurs = by_number[103].reason or ""
    assert "'director' (episode.director) is not offered by library 'TV Shows'" in auteurs
    assert "Movies" not in auteurs  # movies offer `director`
    assert by_number[103].pool_size > 0  # the movies still match
    rated = by_number[104].reason or ""
    assert "sort 'contentRating' is not offered by library 'TV Shows': ordered by title" in rated
    assert by_number[104].pool_size > 0  # the build went on in title order
    channel_rows = [r for r in store.traces(result.run_id) if r["phase"] == "channel"]
    unsupported = {r["channel_number"]: r["output"].get("unsupported", []) for r in channel_rows}
    assert unsupported[101] == [] and len(unsupported[102]) == 2 and len(unsupported[104]) == 1
    # The UI: each build step's metadata names what the server lacks.
    metadata = {
        e.step_key: e.event_specific_data.metadata
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.STEP_OUTPUT and e.step_key.startswith("build")
    }
    texts = [
        m["unsupported by Plex"].value for m in metadata.values() if "unsupported by Plex" in m
    ]
    assert sum(1 for text in texts if text != "none") == 3


def test_a_full_server_reports_only_what_no_server_offers(
    store, dagster_instance, tmp_path: Path
) -> None:
    path = lineups.write(tmp_path, _lineup())
    with start_emulator(items=300, seed=3) as emulator:
        result = _run(dagster_instance, path, emulator, dry_run=True)

    assert result.success
    by_number = _channels(result)
    assert by_number[102].unsupported == [] and (by_number[102].pool_size or 0) > 0
    assert "episode.director" in (by_number[103].reason or "")
