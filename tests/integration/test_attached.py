"""Attached mode end to end: the CLI as an operator runs it against a running Airwave's database.

The database is built as Airwave's migrations and an operator's setup leave it, owned by another
role (`tests/support/attached.py`): an admin, a Plex source whose token is encrypted with
`BETTER_AUTH_SECRET` and points at the Plex emulator, its libraries, an AI connection. The CLI
gets only `AIRWAVE_MODE=attached`, the database URL and the secret: no PLEX_URL, no token. Every
test then reads the result as Airwave's server would and checks that Airwave's schema is exactly
what it was.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
import pytest

from airwave_dagster import settings
from airwave_dagster.cli import environment
from airwave_dagster.domain.schedule import channel_seed
from tests.support import lineups
from tests.support.attached import (
    AUTH_SECRET,
    AirwaveDatabase,
    Operator,
    create_airwave_database,
    database_name,
    public_catalog,
    seed_operator,
)
from tests.support.dagster_dev import STALE_SECONDS
from tests.support.homes import query, user_env
from tests.support.standalone import (
    airwave,
    assert_exactly_once,
    claims_held,
    kill_import_mid_fan_out,
)

pytestmark = [pytest.mark.postgres, pytest.mark.plex, pytest.mark.integration, pytest.mark.slow]

_NOT_THE_OPERATORS = (
    settings.PLEX_URL_ENV,
    settings.PLEX_TOKEN_ENV,
    settings.DAGSTER_PG_URL_ENV,
    settings.API_KEY_ENV,
    settings.BASE_URL_ENV,
)


def _admin_sql(database: AirwaveDatabase, statement: str, *params: object) -> None:
    conn = psycopg2.connect(environment.libpq_dsn(database.admin_url))
    try:
        with conn, conn.cursor() as cur:
            cur.execute(statement, params)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def quick_plex() -> Iterator[Any]:
    """A small library answering at once, for the tests that need no time to crash mid-way."""
    from airwave_dagster.emulators.plex import start_emulator

    with start_emulator(items=300, seed=11) as handle:
        yield handle


@pytest.fixture
def attached(
    server_url: str, quick_plex: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """An operator's Airwave database and the environment of a CLI attached to it."""
    with _operator_session(server_url, quick_plex, tmp_path, monkeypatch) as session:
        yield session


@pytest.fixture
def attached_slow(
    server_url: str, slow_plex: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """`attached` on the slow emulator, so a test can kill an import mid fan-out."""
    with _operator_session(server_url, slow_plex, tmp_path, monkeypatch) as session:
        yield session


@contextmanager
def _operator_session(
    server_url: str, plex: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    database = create_airwave_database(server_url, database_name("attached_cli"))
    operator = seed_operator(
        database,
        plex_url=plex.url,
        plex_token=plex.token,
        libraries=[("1", "Movies", "movie", True), ("2", "TV Shows", "show", True)],
    )
    env = user_env(
        tmp_path,
        **{
            settings.MODE_ENV: "attached",
            settings.DATABASE_URL_ENV: database.app_url,
            settings.AUTH_SECRET_ENV: AUTH_SECRET,
            settings.CLAIM_STALE_ENV: STALE_SECONDS,
        },
    )
    for name in _NOT_THE_OPERATORS:
        env.pop(name, None)
    # The test's own view of the runs: Dagster's storage where attached mode puts it by default.
    environment.ensure_schemas(database.app_url)
    dagster_url = environment.with_search_path(database.app_url, environment.DAGSTER_SCHEMA)
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    monkeypatch.setenv(settings.DAGSTER_PG_URL_ENV, dagster_url)
    before = public_catalog(database)
    instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
    try:
        yield {
            "env": env,
            "instance": instance,
            "tmp": tmp_path,
            "database": database,
            "operator": operator,
            "catalog": before,
        }
    finally:
        instance.dispose()


def _rows(database: AirwaveDatabase, sql: str, **params: Any) -> list[Any]:
    return query(database.admin_url, sql, params)


def _untouched(attached: dict[str, Any]) -> None:
    """Airwave's schema is exactly what its migrations made: nothing created or altered."""
    assert public_catalog(attached["database"]) == attached["catalog"]


def _sources_and_libraries(database: AirwaveDatabase) -> list[Any]:
    return _rows(
        database,
        'SELECT s.id, s."updatedAt", s.token, l.key, l.enabled, l."updatedAt" AS lib_updated '
        'FROM media_source s JOIN media_library l ON l."mediaSourceId" = s.id ORDER BY l.key',
    )


def test_dry_run_then_import_write_airwaves_rows_with_the_operators_configuration(
    attached: dict[str, Any],
) -> None:
    database: AirwaveDatabase = attached["database"]
    operator: Operator = attached["operator"]
    env = attached["env"]
    lineup = lineups.genre_lineup(4)
    path = lineups.write(attached["tmp"], lineup)
    configuration = _sources_and_libraries(database)

    dry = airwave(env, "import", str(path), "--dry-run", "--wait", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["status"] == "SUCCESS"
    assert _rows(database, "SELECT id FROM channel") == []
    traces = _rows(database, 'SELECT "dryRun", phase FROM import_trace')
    assert traces and all(row.dryRun for row in traces)

    done = airwave(env, "import", str(path), "--wait", "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "SUCCESS"
    channels = _rows(
        database,
        'SELECT id, number, enabled, "mediaSourceId", "createdById", "shuffleSeed", '
        '"bumperRev" FROM channel ORDER BY number',
    )
    assert [c.number for c in channels] == sorted(c["number"] for c in lineup["channels"])
    (rev,) = _rows(database, "SELECT rev FROM bumper_config WHERE key = 'global'")
    for channel in channels:
        assert channel.enabled and channel.mediaSourceId == operator.source_id
        assert channel.createdById == operator.admin_id, "the oldest admin, as Airwave's trigger"
        assert channel.shuffleSeed == channel_seed(channel.id)
        assert channel.bumperRev == rev.rev
    # The guide as Airwave's server reads it: every enabled channel has titled programmes.
    programmes = _rows(
        database,
        'SELECT s."channelId", m.title FROM schedule_item s JOIN media_item m '
        "ON m.id = s.\"mediaItemId\" WHERE s.kind = 'PROGRAM'",
    )
    assert {p.channelId for p in programmes} == {c.id for c in channels}
    assert all(p.title for p in programmes)
    # Airwave's configuration rows were only read.
    assert _sources_and_libraries(database) == configuration
    (report,) = _rows(
        database, "SELECT output FROM import_trace WHERE phase = 'report' AND NOT \"dryRun\""
    )
    assert report.output["targetSourceId"] == operator.source_id
    _untouched(attached)


def test_ai_lineup_replaces_exactly_what_airwaves_own_wipe_would(attached: dict[str, Any]) -> None:
    database: AirwaveDatabase = attached["database"]
    operator: Operator = attached["operator"]
    # Another source's AI lineup and a hand-made channel: Airwave's wipe is global
    # (docs/reference/airwave-database.md §5.2).
    _admin_sql(
        database,
        'INSERT INTO media_source (id, name, "baseUrl", token, "updatedAt") '
        "VALUES ('cother', 'Cabin Plex', 'http://cabin:32400', '', now())",
    )
    _admin_sql(
        database,
        'INSERT INTO channel_package (id, key, name, "aiGenerated", "updatedAt") '
        "VALUES ('cpkgold', 'old-ai', 'Old AI', true, now())",
    )
    _admin_sql(
        database,
        'INSERT INTO channel (id, number, name, "mediaSourceId", "packageId", "aiGenerated", '
        '"updatedAt") VALUES '
        "('cold1', 1001, 'Old AI One', 'cother', 'cpkgold', true, now()), "
        "('cmine', 7, 'My Own', %s, 'cpkgold', false, now())",
        operator.source_id,
    )

    # The whole plan: a `--limit` run is a trial that removes nothing (docs/ai-lineup.md).
    stopped = airwave(attached["env"], "lineup", "--provider", "offline", "--wait")
    assert stopped.returncode == 3, stopped.stderr + stopped.stdout  # the approval gate
    (interrupt,) = _rows(
        database, "SELECT run_id FROM airwave_dagster.interrupt WHERE status = 'open'"
    )
    assert _rows(database, "SELECT id FROM channel WHERE id = 'cold1'"), "nothing before approval"
    approved = airwave(attached["env"], "approve", interrupt.run_id, "--wait")
    assert approved.returncode == 0, approved.stderr
    assert "SUCCESS" in approved.stdout

    remaining = {row.id: row for row in _rows(database, 'SELECT id, "packageId" FROM channel')}
    assert "cold1" not in remaining, "another source's AI channel goes, as in Airwave"
    assert remaining["cmine"].packageId is None, "a hand-made channel is kept, ungrouped"
    assert not _rows(database, "SELECT id FROM channel_package WHERE id = 'cpkgold'")
    built = _rows(
        database,
        'SELECT number, enabled, "createdById", "mediaSourceId" FROM channel WHERE "aiGenerated"',
    )
    assert len(built) >= 10 and all(c.number >= 1000 for c in built)
    assert f", {len(built)} built," in approved.stdout + approved.stderr, approved.stdout
    assert all(c.enabled and c.createdById == operator.admin_id for c in built)
    assert all(c.mediaSourceId == operator.source_id for c in built)
    _untouched(attached)


def test_an_attached_import_killed_whole_is_canceled_then_resumed_exactly_once(
    attached_slow: dict[str, Any],
) -> None:
    """kill -9 of the whole CLI mid fan-out; `runs cancel` ends the run and gives its numbers
    back; `runs resume` then finishes it, every channel built once (one kill serves both)."""
    attached = attached_slow
    database: AirwaveDatabase = attached["database"]
    run_id, _, done, in_flight = kill_import_mid_fan_out(attached)

    canceled = airwave(attached["env"], "runs", "cancel", run_id, "--json")

    assert canceled.returncode == 0, canceled.stderr
    status = attached["instance"].get_run_by_id(run_id).status
    assert status == dg.DagsterRunStatus.CANCELED
    assert claims_held(database.admin_url, run_id) == 0
    # No reservation is left for Airwave's viewers or jobs to trip over.
    assert not _rows(database, "SELECT id FROM channel WHERE NOT enabled")

    resumed = airwave(attached["env"], "runs", "resume", run_id, "--wait", "--json")

    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "SUCCESS"
    assert_exactly_once(database.admin_url, [run_id, outcome["run_id"]], done, in_flight)
    _untouched(attached)


def test_refusals_name_the_cause_and_never_the_secret(attached: dict[str, Any]) -> None:
    database: AirwaveDatabase = attached["database"]
    path = lineups.write(attached["tmp"], lineups.genre_lineup(1))
    wrong = {**attached["env"], settings.AUTH_SECRET_ENV: "a-different-secret"}

    refused = airwave(wrong, "import", str(path), "--dry-run", "--wait")

    assert refused.returncode == 3, refused.stderr
    assert "cannot decrypt the Plex token of media source 'Home Plex'" in refused.stderr
    assert "a-different-secret" not in refused.stderr + refused.stdout
    assert AUTH_SECRET not in refused.stderr + refused.stdout

    # Airwave's own engine has an import running: one engine per instance.
    _admin_sql(
        database,
        "INSERT INTO workflow.workflow_runs (id, name, status) "
        "VALUES ('wrun_1', 'workflow//importLineupWorkflow', 'running')",
    )
    started = time.monotonic()
    busy = airwave(attached["env"], "import", str(path), "--wait")
    assert busy.returncode == 1, busy.stderr
    assert "Airwave's own workflow engine has lineup runs in progress: wrun_1" in busy.stderr
    assert time.monotonic() - started < 240
    assert _rows(database, "SELECT id FROM channel") == []
    _untouched(attached)
