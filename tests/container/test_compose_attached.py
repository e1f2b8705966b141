"""compose.attached.yaml on a compose file shaped like Airwave's: attached mode in containers.

Marked `container`: not part of `make test`; `make test-container` runs it. Airwave's own image
is not reachable here, so `tests/container/airwave-compose.yaml` stands in for Airwave's
docker-compose.yml (its service names and variables, the test Postgres image). The override is
laid on it as an operator lays it on Airwave's: compose.attached.yaml is merged and its
configuration checked, and its host-networking twin compose.attached.host.yaml is started,
because every container here must use host networking on 127.0.0.1 (tests/test_compose_files.py
keeps the two files identical but for the network). Airwave's database is built and seeded by
`tests/support/attached.py` as a foreign owner would leave it; the Dagster services connect as
the app role, with the grants docs/attached.md asks for.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import sqlalchemy as sa
import yaml

from airwave_dagster.cli import serve
from airwave_dagster.emulators.plex.dataset import MOVIES_SECTION_KEY, SHOWS_SECTION_KEY
from tests.container.harness import (
    HERE,
    IMAGE,
    POSTGRES_IMAGE,
    ROOT,
    RUN,
    compose_command,
    run,
    save_logs,
)
from tests.support import attached, lineups
from tests.support.dagster_dev import Dev, wait_for
from tests.support.ports import free_port

pytestmark = [pytest.mark.container, pytest.mark.slow]

CHANNELS = 6
DATABASE = "channelguide"
SUPERUSER = "channelguide"
SERVICES = ["code-server", "webserver", "daemon"]
STOPPED_BY_DEFAULT = {
    "backfill_schedule",
    "extend_schedule",
    "repair_schedule",
    "prune_schedule",
    "refresh_library_schedule",
    "library_freshness_schedule",
}
SCHEDULES = """{ schedulesOrError(repositorySelector: {repositoryLocationName: "airwave",
  repositoryName: "__repository__"}) { ... on Schedules { results { name scheduleState {
  status } } } } }"""
SENSORS = """{ sensorsOrError(repositorySelector: {repositoryLocationName: "airwave",
  repositoryName: "__repository__"}) { ... on Sensors { results { name sensorState {
  status } } } } }"""
log = logging.getLogger(__name__)


def _postgres_answers(url: str) -> bool:
    try:
        psycopg2.connect(url, connect_timeout=3).close()
    except psycopg2.OperationalError:
        return False
    return True


@pytest.fixture
def stack(images: dict[str, float], plex: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    project = f"airwave-attached-{os.getpid()}"
    db_port = free_port()
    env = {
        **os.environ,
        # Airwave's .env, as its compose file reads it.
        "POSTGRES_IMAGE": POSTGRES_IMAGE,
        "POSTGRES_USER": SUPERUSER,
        "POSTGRES_PASSWORD": secrets.token_hex(12),
        "POSTGRES_DB": DATABASE,
        "POSTGRES_PORT": str(db_port),
        "BETTER_AUTH_SECRET": attached.AUTH_SECRET,
        # An operator who had turned Airwave's engine on: the override must turn it off.
        "WORKFLOW_ENABLED": "1",
        # What docs/attached.md adds to it.
        "AIRWAVE_DAGSTER_IMAGE": IMAGE,
        "AIRWAVE_DAGSTER_DB_USER": attached.APP,
        "AIRWAVE_DAGSTER_DB_PASSWORD": attached.APP_PASSWORD,
        "AIRWAVE_DAGSTER_DB_PORT": str(db_port),
        "AIRWAVE_UI_PORT": str(free_port()),
        "AIRWAVE_CODE_SERVER_PORT": str(free_port()),
    }
    standin = [*compose_command(), "-p", project, "-f", str(HERE / "airwave-compose.yaml")]
    bridged = [*standin, "-f", str(ROOT / "compose.attached.yaml")]
    compose = [*standin, "-f", str(ROOT / "compose.attached.host.yaml")]
    config = {
        "bridge": yaml.safe_load(run(*bridged, "config", env=env)),
        "host": yaml.safe_load(run(*compose, "config", env=env)),
    }
    superuser_url = (
        f"postgresql://{SUPERUSER}:{env['POSTGRES_PASSWORD']}@127.0.0.1:{db_port}/{DATABASE}"
    )
    try:
        run(*compose, "up", "-d", "--no-build", "postgres", env=env, timeout=600)
        wait_for(lambda: _postgres_answers(superuser_url), 300, "Airwave's Postgres", poll=1)
        database = attached.create_airwave_database(superuser_url, DATABASE)
        operator = attached.seed_operator(
            database,
            plex_url=plex,
            plex_token="emulator-token",
            libraries=[
                (str(MOVIES_SECTION_KEY), "Movies", "movie", True),
                (str(SHOWS_SECTION_KEY), "TV Shows", "show", True),
            ],
        )
        schema_before = attached.public_catalog(database)
        started = time.monotonic()
        run(*compose, "up", "-d", "--no-build", *SERVICES, env=env, timeout=600)
        base = f"http://127.0.0.1:{env['AIRWAVE_UI_PORT']}"
        wait_for(lambda: serve.location_loaded(base), 600, "the code location in the UI", poll=2)
        wait_for(lambda: serve.daemon_healthy(base), 300, "a healthy daemon", poll=2)
        ready_seconds = time.monotonic() - started
        log.warning("attached compose start to ready: %.1f s", ready_seconds)
        yield {
            "env": env,
            "compose": compose,
            "config": config,
            "base": base,
            "database": database,
            "operator": operator,
            "schema_before": schema_before,
        }
    finally:
        save_logs(compose, env, SERVICES, tmp_path)
        subprocess.run([*compose, "down", "-v", "--timeout", "30"], env=env, check=False)


# The budget covers the fixtures: an image build (minutes when uv.lock or pyproject.toml changed)
# and the stack's first start on a shared machine.
@pytest.mark.timeout(3600)
def test_attached_override_imports_into_airwaves_tables(stack: dict[str, Any]) -> None:
    env = stack["env"]
    bridge, host = stack["config"]["bridge"]["services"], stack["config"]["host"]["services"]
    for services in (bridge, host):
        # The stand-in's server reads WORKFLOW_ENABLED=1 from the environment, as Airwave's does.
        assert services["server"]["environment"]["WORKFLOW_ENABLED"] in ("", None)
        for name in SERVICES:
            assert services[name]["environment"]["AIRWAVE_MODE"] == "attached"
    assert (
        "@postgres:5432/channelguide"
        in bridge["code-server"]["environment"]["AIRWAVE_DATABASE_URL"]
    )
    assert {host[name]["network_mode"] for name in SERVICES} == {"host"}

    dev = Dev(
        port=int(env["AIRWAVE_UI_PORT"]),
        home=Path("/nonexistent"),
        env={},
        workdir=Path("."),
        instance=None,
    )
    schedules = {
        s["name"]: s["scheduleState"]["status"]
        for s in dev.graphql(SCHEDULES)["schedulesOrError"]["results"]
    }
    sensors = {
        s["name"]: s["sensorState"]["status"]
        for s in dev.graphql(SENSORS)["sensorsOrError"]["results"]
    }
    assert STOPPED_BY_DEFAULT <= set(schedules), schedules
    assert {schedules[name] for name in STOPPED_BY_DEFAULT} == {"STOPPED"}, schedules
    assert sensors.get("follow_library_sensor") == "STOPPED", sensors

    lineup = lineups.genre_lineup(CHANNELS)
    run_id = dev.launch_import(lineup)

    def status() -> str | None:
        found = str(dev.graphql(RUN, {"id": run_id})["runOrError"].get("status"))
        return found if found in ("SUCCESS", "FAILURE", "CANCELED") else None

    final = wait_for(status, 900, "the import run to finish", poll=2)
    assert final == "SUCCESS"

    database, operator = stack["database"], stack["operator"]
    # The fixture's URLs are libpq's; SQLAlchemy 2 would pick psycopg 3 for them.
    url = database.admin_url.replace("postgresql://", "postgresql+psycopg2://", 1)
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text('SELECT number, enabled, "createdById" FROM public.channel')
            ).all()
            scheduled = conn.execute(
                sa.text('SELECT count(DISTINCT "channelId") FROM public.schedule_item')
            ).scalar_one()
    finally:
        engine.dispose()
    planned = sorted(c["number"] for c in lineup["channels"])
    assert sorted(r.number for r in rows) == planned
    assert all(r.enabled for r in rows)
    assert {r.createdById for r in rows} == {operator.admin_id}
    assert scheduled == len(planned)
    assert attached.public_catalog(database) == stack["schema_before"]
    log.warning(
        "attached import over the override: run %s %s, %d/%d channels in public.channel: %s",
        run_id,
        final,
        len(rows),
        len(planned),
        json.dumps(planned),
    )
