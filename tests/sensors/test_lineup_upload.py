"""`lineup_upload_sensor` scenarios with `build_sensor_context`, and once under the real daemon."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster import settings
from airwave_dagster.definitions import defs
from airwave_dagster.run_tags import import_key
from resources.uploads import UploadInboxResource
from sensors.lineup_upload import SETTLE_SECONDS, evaluate_inbox
from tests.support import lineups

pytestmark = pytest.mark.postgres


def _tick(instance: Any, inbox: Path, cursor: str | None, now: float) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"uploads": UploadInboxResource(path=str(inbox))},
    )
    return evaluate_inbox(context, context.resources.uploads, now=now)


def _settled(instance: Any, inbox: Path, cursor: str | None = None) -> dg.SensorResult:
    """Two ticks far enough apart for every file to count as completely written."""
    later = time.time() + SETTLE_SECONDS + 1
    first = _tick(instance, inbox, cursor, later)
    return _tick(instance, inbox, first.cursor, later + 5)


def _inbox(tmp_path: Path) -> Path:
    return UploadInboxResource(path=str(tmp_path / "inbox")).folder()


def _write(inbox: Path, name: str, payload: Any) -> Path:
    path = inbox / name
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return path


def _create_run_for(instance: Any, request: dg.RunRequest) -> None:
    """What the daemon does with a request: a run tagged with its run key."""
    instance.create_run_for_job(
        job_def=_noop_job,
        run_config={},
        tags={**request.tags, "dagster/run_key": request.run_key or ""},
    )


@dg.op
def _noop() -> None:
    pass


@dg.job
def _noop_job() -> None:
    _noop()


def test_new_file_becomes_one_run_then_moves_to_processed(
    dagster_instance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Validating the run config resolves the job's env-sourced resource config: the daemon's
    # environment has a Plex server named (nothing here contacts it).
    monkeypatch.setenv(settings.PLEX_URL_ENV, "http://127.0.0.1:9")
    monkeypatch.setenv(settings.PLEX_TOKEN_ENV, "unused-token")
    inbox = _inbox(tmp_path)
    content = json.dumps(lineups.genre_lineup(2))
    _write(inbox, "lineup.json", content)
    _write(inbox, "notes.txt", "not a lineup")

    first = _tick(dagster_instance, inbox, None, time.time() + SETTLE_SECONDS + 1)
    assert not first.run_requests, "a file seen once may still be growing"
    second = _tick(dagster_instance, inbox, first.cursor, time.time() + SETTLE_SECONDS + 6)
    (request,) = second.run_requests
    digest = hashlib.sha256(content.encode()).hexdigest()
    assert request.run_key == digest
    assert request.tags["airwave/idempotency_key"] == import_key(content.encode())
    config = request.run_config["ops"]["plan_import_lineup"]["config"]
    assert json.loads(config["lineup"]["inline"]["content"]) == json.loads(content)
    # What the daemon launches, as the job's schema reads it: this file, for real, not the
    # job's default (a dry-run of the bundled example).
    resolved = dg.validate_run_config(defs.resolve_job_def("import_lineup"), request.run_config)
    op_config = resolved["ops"]["plan_import_lineup"]["config"]
    assert op_config["lineup"]["inline"]["name"] == "lineup.json"
    assert op_config["dry_run"] is False
    assert (inbox / "lineup.json").exists(), "moves only once its run exists"

    third = _tick(dagster_instance, inbox, second.cursor, time.time() + 20)
    assert not third.run_requests and (inbox / "lineup.json").exists()
    _create_run_for(dagster_instance, request)
    _tick(dagster_instance, inbox, third.cursor, time.time() + 25)
    assert not (inbox / "lineup.json").exists()
    assert [p.name for p in (inbox / "processed").iterdir()] == [f"{digest[:12]}-lineup.json"]
    assert (inbox / "notes.txt").exists(), "other files are left alone"


def test_same_content_twice_gives_one_run(dagster_instance, tmp_path: Path) -> None:
    inbox = _inbox(tmp_path)
    content = json.dumps(lineups.genre_lineup(1, first_number=700))
    _write(inbox, "a.json", content)
    _write(inbox, "b.json", content)
    result = _settled(dagster_instance, inbox)
    assert len(result.run_requests) == 1
    _create_run_for(dagster_instance, result.run_requests[0])
    _tick(dagster_instance, inbox, result.cursor, time.time() + 30)
    assert sorted(p.name for p in (inbox / "processed").iterdir()) == sorted(
        f"{result.run_requests[0].run_key[:12]}-{n}" for n in ("a.json", "b.json")
    )
    # Uploaded again later: its run exists already, so no request at all.
    _write(inbox, "again.json", content)
    later = _settled(dagster_instance, inbox, result.cursor)
    assert not later.run_requests
    assert not (inbox / "again.json").exists()


def test_invalid_file_is_rejected_with_the_reason(dagster_instance, tmp_path: Path) -> None:
    inbox = _inbox(tmp_path)
    bad = lineups.genre_lineup(1)
    # Numbers <= 0 are renumbered on import now; a number that is not a number is still refused.
    bad["channels"][0]["number"] = "five"
    _write(inbox, "bad.json", bad)
    _write(inbox, "broken.json", '{"version": 1, "channels": [')
    result = _settled(dagster_instance, inbox)
    assert not result.run_requests
    rejected = sorted(p.name for p in (inbox / "rejected").iterdir())
    assert len(rejected) == 4 and sum(name.endswith(".error.txt") for name in rejected) == 2
    reasons = {
        p.name.split("-", 1)[1]: p.read_text()
        for p in (inbox / "rejected").iterdir()
        if p.name.endswith(".error.txt")
    }
    assert "$.channels[0].number" in reasons["bad.json.error.txt"]
    assert "bad.json" in reasons["bad.json.error.txt"]
    assert "broken.json" in reasons["broken.json.error.txt"]
    # The skipped tick, which is what the UI shows for the uploads, names each file and why.
    reason = result.skip_reason.skip_message if result.skip_reason else ""
    assert "bad.json: rejected (invalid), moved to rejected/: " in reason
    assert "$.channels[0].number" in reason
    assert "broken.json: rejected (invalid)" in reason


def test_oversized_symlinked_and_partial_files(dagster_instance, tmp_path: Path) -> None:
    inbox = _inbox(tmp_path)
    big = inbox / "huge.json"
    with big.open("wb") as handle:
        handle.truncate(10 * 1024 * 1024 + 1)
    outside = _write(tmp_path, "outside.json", lineups.genre_lineup(1))
    os.symlink(outside, inbox / "link.json")
    partial = _write(inbox, "partial.json", '{"version": 1, "channels": [')

    now = time.time()
    first = _tick(dagster_instance, inbox, None, now + SETTLE_SECONDS + 1)
    assert not first.run_requests
    assert (inbox / "rejected" / next(iter(_names(inbox / "rejected", "huge.json")))).exists()
    error = next(p for p in (inbox / "rejected").iterdir() if p.name.endswith(".error.txt"))
    assert "10 MB" in error.read_text()
    # The writer finishes the partial file before the next tick: it is taken as complete then.
    partial.write_text(json.dumps(lineups.genre_lineup(1, first_number=800)))
    second = _tick(dagster_instance, inbox, first.cursor, now + SETTLE_SECONDS + 6)
    assert not second.run_requests, "it changed since the previous tick"
    third = _tick(dagster_instance, inbox, second.cursor, time.time() + SETTLE_SECONDS + 11)
    assert [r.tags["airwave/lineup"] for r in third.run_requests] == ["partial.json"]
    assert (inbox / "link.json").is_symlink() and outside.exists(), "symlinks are ignored"


def _names(folder: Path, suffix: str) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(suffix)]


def test_the_sensor_is_registered_running() -> None:
    sensor = defs.get_sensor_def("lineup_upload_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.job_name == "import_lineup"


def test_a_bad_file_beside_a_good_one_is_still_reported(dagster_instance, tmp_path: Path) -> None:
    """Dropped in the same tick as a good file, a bad one left no trace in the UI (issue 27,
    item 9): a tick that requests runs shows no skip reason. Every outcome is now an observation
    of the `lineup_inbox` asset, and `airwave inbox` lists the rejection."""
    from airwave_dagster.cli.inbox import inbox_state
    from sensors.lineup_upload import LINEUP_INBOX

    inbox = _inbox(tmp_path)
    _write(inbox, "good.json", lineups.genre_lineup(1, first_number=710))
    _write(inbox, "bad.json", '{"version": 1, "channels": [')

    result = _settled(dagster_instance, inbox)

    assert len(result.run_requests) == 1 and result.skip_reason is None
    outcomes = {
        event.metadata["file"].value: event.metadata
        for event in result.asset_events
        if event.asset_key == LINEUP_INBOX.key
    }
    assert outcomes["good.json"]["outcome"].value == "run requested"
    bad = outcomes["bad.json"]
    assert bad["outcome"].value == "rejected"
    assert "bad.json" in bad["reason"].value and "JSON" in bad["reason"].value
    assert Path(bad["moved_to"].value).parent == inbox / "rejected"
    state = inbox_state(inbox, limit=5)
    assert [r.file for r in state.rejected] == [Path(bad["moved_to"].value).name]
    assert (
        state.rejected[0].reason
        == (inbox / "rejected").joinpath(state.rejected[0].file + ".error.txt").read_text().strip()
    )
    assert state.waiting == ["good.json"]  # until its run exists
