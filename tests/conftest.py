"""Shared fixtures: a real PostgreSQL database, the Plex emulator, and Dagster instances on them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg2
import pytest

from airwave_dagster import settings
from airwave_dagster.cli import environment

# Isolates plexapi from the developer's config; nothing above imports plexapi.
from tests.support import plex as plex_fixtures  # noqa: F401

# Fixtures shared across the mirrored folders: the scripted model's stub and the synced library
# (tests/ops, tests/cli, tests/integration), the small maintenance library, and one shared
# `airwave dev` for the tests that drive the real UI, daemon and code server, and the CLI on its
# own (no daemon) for the crash-recovery and celery tests, and a PostgreSQL cluster a test owns
# (and may restart) alone.
from tests.support.ai import library_snapshot, stub, stub_server, synced  # noqa: F401
from tests.support.dagster_dev import dev, fresh, slow_plex  # noqa: F401
from tests.support.maintenance import small_library, small_plex  # noqa: F401
from tests.support.own_postgres import own_postgres  # noqa: F401
from tests.support.spans import off, spans  # noqa: F401
from tests.support.standalone import alone  # noqa: F401

# Overridable so that several checkouts (or agents) can run the suite on one server at once.
# Each pytest-xdist worker (`make test` runs two) gets a database of its own: the sessions' shared
# `airwave dev`, daemons and run queues then never see each other's runs.
TEST_DATABASE = os.environ.get("AIRWAVE_TEST_DB", "airwave_test") + (
    f"_{os.environ['PYTEST_XDIST_WORKER']}" if os.environ.get("PYTEST_XDIST_WORKER") else ""
)


def _server_url() -> str:
    configured = os.environ.get("AIRWAVE_TEST_DATABASE_URL") or os.environ.get(
        settings.DATABASE_URL_ENV
    )
    if configured:
        return environment.normalise_url(configured)
    # No server configured: the project's private one, exactly as `make demo` gets it. If it
    # cannot start, every database test errors (never skips), so CI cannot pass without Postgres.
    return environment.start_private_postgres(environment.airwave_home())


@pytest.fixture(scope="session")
def server_url() -> str:
    """The test PostgreSQL server, for tests that make databases of their own on it."""
    return _server_url()


@pytest.fixture(scope="session")
def database_url(server_url: str) -> Iterator[str]:
    """A migrated test database, recreated once per session.

    Tests get their own database (`airwave_test`) on the configured server so a developer's demo
    data is never touched. Dropping the schemas once per session makes every run start from the
    migrations, as a fresh install does; per-test isolation comes from truncation (`clean_db`).
    """
    url = environment.ensure_database(server_url, TEST_DATABASE)
    conn = psycopg2.connect(environment.libpq_dsn(url))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            for schema in ("airwave", "airwave_dagster", "dagster"):
                cur.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            # Airwave's tables and enum types live in `public` (standalone mode's layout).
            cur.execute("DROP SCHEMA IF EXISTS public CASCADE")
            cur.execute("CREATE SCHEMA public")
    finally:
        conn.close()
    environment.ensure_schemas(url)
    from resources.migrations import upgrade

    upgrade(url)
    dagster_url = environment.with_search_path(url, environment.DAGSTER_SCHEMA)
    # Step processes of the multiprocess executor read the same variables as production runs.
    os.environ[settings.DATABASE_URL_ENV] = url
    os.environ[settings.DAGSTER_PG_URL_ENV] = dagster_url
    yield url


@pytest.fixture
def clean_db(database_url: str) -> Iterator[str]:
    """The test database with every table of the project's (Airwave's and private) emptied."""
    from tests.support.schemas import empty_project_tables

    empty_project_tables(database_url)
    yield database_url


@pytest.fixture
def stores(clean_db: str):
    """Every repository over a clean test database."""
    from resources.stores import open_stores

    return open_stores(clean_db)


@pytest.fixture
def store(stores):
    """The channel repository over a clean test database."""
    return stores.channels


@pytest.fixture(scope="session")
def plex_emulator() -> Iterator[object]:
    """The Plex emulator serving the demo-sized library on 127.0.0.1, exported as PLEX_URL."""
    from airwave_dagster.emulators.plex import start_emulator

    with start_emulator(items=2000, seed=7) as handle:
        os.environ[settings.PLEX_URL_ENV] = handle.url
        os.environ[settings.PLEX_TOKEN_ENV] = handle.token
        yield handle


@pytest.fixture
def plex_client(plex_emulator):
    """A real plexapi-backed client of the emulator."""
    from resources.plex import PlexClient

    return PlexClient(plex_emulator.url, plex_emulator.token)


@pytest.fixture
def dagster_instance(database_url: str) -> Iterator[object]:
    """A Dagster instance whose run storage and event log live in the test database."""
    from tests.support.instances import instance_on

    url = environment.with_search_path(database_url, environment.DAGSTER_SCHEMA)
    no_compute_logs = {
        "module": "dagster._core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
    with instance_on(url, compute_logs=no_compute_logs) as instance:
        yield instance
