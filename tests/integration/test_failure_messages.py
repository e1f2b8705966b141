"""A failed build says why: the root cause, not "Exceeded max_retries of 2"."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster.cli import launcher
from resources.database import DatabaseResource
from resources.plex import PlexClient, PlexResource
from tests.support import lineups
from tests.support.import_job import import_job_with

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration]

CLOSED = "http://127.0.0.1:9"
"""The discard port: nothing listens, so a connection is refused at once."""


class _ServerGoneClient(PlexClient):
    """The real client whose pool searches go to a server that has gone away since planning."""

    def list_pool(
        self, definitions: Sequence[tuple[str, dict[str, Any] | None, str | None]], **kwargs: Any
    ) -> Any:
        return PlexClient(CLOSED, self._token, timeout=2).list_pool(definitions, **kwargs)


class _PlexGoneAtBuild(PlexResource):
    """`PlexResource` whose clients plan against the emulator and build against a dead server."""

    def get_client(self) -> PlexClient:
        return _ServerGoneClient(self.base_url, self.token, timeout=self.timeout_seconds)


def test_a_build_that_exhausts_its_retries_names_plex_and_its_url(
    store, plex_emulator, dagster_instance, tmp_path: Path
) -> None:
    path = lineups.write(tmp_path, lineups.genre_lineup(1))
    job = import_job_with(
        database=DatabaseResource(url=store.engine.url.render_as_string(False)),
        plex=_PlexGoneAtBuild(base_url=plex_emulator.url, token=plex_emulator.token),
    )
    result = job.execute_in_process(
        run_config={
            "ops": {"plan_import_lineup": {"config": {"lineup": {"file": {"path": str(path)}}}}}
        },
        instance=dagster_instance,
        raise_on_error=False,
    )

    assert not result.success
    failures = [
        e
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.STEP_FAILURE
        and e.step_key == "build_channel[ch_100]"
    ]
    assert len(failures) == 1, "the step is retried, then fails once"
    data = failures[0].step_failure_data
    assert data.error is not None and data.error.message.startswith("Exceeded max_retries of 2")
    # The event log (and so the UI) carries the cause as the failure's description.
    description = data.user_failure_data.description
    assert "channel 100" in description
    assert f"Plex is unavailable at {CLOSED}" in description
    assert "PLEX_URL" in description
    assert plex_emulator.token not in json.dumps(description)
    # The CLI (`airwave import --wait`, `airwave runs show`) prints the same cause.
    messages = launcher.failure_messages(dagster_instance, result.run_id)
    assert any(f"Plex is unavailable at {CLOSED}" in m for m in messages), messages
    assert not any(m.endswith("Exceeded max_retries of 2") for m in messages), messages
