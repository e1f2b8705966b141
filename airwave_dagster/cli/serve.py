"""`airwave serve`: Dagster's production topology (code server, webserver, daemon), supervised.

`airwave dev` runs Dagster's development server (what `dg dev` runs). `serve` runs
the three processes a real deployment runs, each on its own: the code server
(`airwave_dagster.code_server`: Dagster's gRPC code server, its run workers forked from a
forkserver that preloaded the code location; the only process that loads the code location), the
webserver and the daemon (`airwave_dagster.daemon`: Dagster's daemons, its run queue woken by
each queued run), both reading the code location over gRPC. Each is restarted when it dies, with
a backoff that grows to 30 s and resets once the process stayed up for a minute; each logs to
`<home>/logs/<name>.log`. SIGTERM or Ctrl-C stops all three. One line starting `ready:` is
printed on stdout once all three answer, so scripts and tests can wait for it; from then on the
home's commands (`airwave import`, `lineup`, `runs resume`, ...) submit their runs here over
GraphQL, as they do to `airwave dev` (`webserver.announce`).

The webserver has no authentication in Dagster OSS: whoever reaches it can launch runs (spend on
the model, wipe the AI lineup). Binding beyond loopback is therefore refused unless
`--allow-remote` is given (docs/deploy.md shows an authenticating reverse proxy instead). The
webserver process is Dagster's app behind this project's identity middleware
(`airwave_dagster.webapp.server`): behind a trusted proxy each request acts as the user the proxy
names, with that user's permissions; without one, as the local operator (docs/security.md).
"""

from __future__ import annotations

import ipaddress
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import IO, Any

import click

from airwave_dagster.cli import console, environment, webserver
from airwave_dagster.settings import Settings

LOCATION_NAME = "airwave"
CODE_SERVER_MODULE = "airwave_dagster.code_server"
"""Dagster's gRPC code server whose run workers fork from a warm forkserver."""
WEBSERVER_MODULE = "airwave_dagster.webapp.server"
"""Dagster's webserver app behind the identity middleware (docs/security.md)."""
DAEMON_MODULE = "airwave_dagster.daemon"
"""Dagster's daemons, the run queue's woken by each queued run instead of only polling."""
ROLES = ("code-server", "webserver", "daemon")
_BACKOFF_FIRST_SECONDS = 0.5
_BACKOFF_MAX_SECONDS = 30.0
_STABLE_SECONDS = 60.0
_STOP_GRACE_SECONDS = 20.0
_READY_TIMEOUT_SECONDS = 300.0

REMOTE_WARNING = """\
warning: binding {host}:{port} exposes the Dagster UI and its GraphQL API beyond this machine.
Dagster OSS has no authentication: anyone who reaches this address can launch, cancel and
re-execute runs (an anthropic AI lineup spends money; --confirm-wipe replaces channels), read
every run's logs and config, and start or stop schedules and sensors. Prefer binding 127.0.0.1
behind an authenticating reverse proxy (docs/deploy.md)."""

LOCATION = """
query { workspaceOrError { ... on Workspace { locationEntries { name
  locationOrLoadError { __typename } } } } }
"""
RELOAD = """
mutation { reloadRepositoryLocation(repositoryLocationName: "airwave") { __typename
  ... on WorkspaceLocationEntry { locationOrLoadError { __typename } } } }
"""
_RELOAD_EVERY_SECONDS = 2.0

DAEMON_HEALTH = """
query { instance { daemonHealth { allDaemonStatuses { daemonType required healthy } } } }
"""


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def check_bind(host: str, port: int, allow_remote: bool) -> None:
    """Refuse a non-loopback bind without `--allow-remote`; with it, say what it exposes."""
    if is_loopback(host):
        return
    if not allow_remote:
        console.fail(
            f"refusing to bind {host}: the Dagster UI has no authentication. Bind 127.0.0.1 "
            "behind an authenticating reverse proxy (docs/deploy.md), or pass --allow-remote "
            "if this network is trusted.",
            code=2,
        )
    console.stderr.print(REMOTE_WARNING.format(host=host, port=port), highlight=False)


def grpc_workspace(host: str, port: int) -> str:
    """A workspace naming the code server by address (what the webserver and daemon load)."""
    # JSON is valid YAML and needs no dependency here.
    entry = {"grpc_server": {"host": host, "port": port, "location_name": LOCATION_NAME}}
    return json.dumps({"load_from": [entry]}, indent=2) + "\n"


@dataclass
class Service:
    """One supervised process: its command, log file and restart state."""

    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    restarts: int = 0
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start the process in its own session, appending to its log."""
        if self._log is None:
            self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Its own session: Ctrl-C in our terminal reaches us only, and we stop the children
            # in order (a daemon killed before the webserver would show as unhealthy).
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self.started_at = time.monotonic()
        self.restart_at = None

    def poll(self, now: float) -> bool:
        """Restart the process when it died and its backoff elapsed; True if it was restarted."""
        if self.process is not None and self.process.poll() is None:
            if now - self.started_at >= _STABLE_SECONDS:
                self.failures = 0
            return False
        if self.restart_at is None:
            code = None if self.process is None else self.process.returncode
            delay = min(_BACKOFF_MAX_SECONDS, _BACKOFF_FIRST_SECONDS * 2**self.failures)
            self.failures += 1
            self.restart_at = now + delay
            console.stderr.print(
                f"{self.name} exited (code {code}); restarting in {delay:.1f} s "
                f"(log: {self.log_path})",
                highlight=False,
            )
            return False
        if now < self.restart_at:
            return False
        self.start()
        self.restarts += 1
        return True

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL what is left after the grace period."""
        process = self.process
        if process is not None and process.poll() is None:
            _signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=_STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        if process is not None:
            # Grandchildren (the code server's gRPC child, run workers) share the group.
            _signal_group(process, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the supervisor dies, even by SIGKILL (Linux).

    A supervisor killed outright would otherwise leave its own session's children running: an
    orphaned daemon keeps dequeuing runs from the shared instance and launching them at a code
    server that no longer exists.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    import os

    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def build_services(
    *,
    roles: Sequence[str],
    host: str,
    port: int,
    code_server_host: str,
    code_server_port: int,
    home: Path,
) -> list[Service]:
    """The supervised processes for `roles`, in start order."""
    serve_dir = home / "serve"
    logs = home / "logs"
    serve_dir.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    workspace = serve_dir / "workspace.yaml"
    workspace.write_text(grpc_workspace(code_server_host, code_server_port))
    commands = {
        "code-server": [
            sys.executable,
            "-m",
            CODE_SERVER_MODULE,
            "-h",
            code_server_host,
            "-p",
            str(code_server_port),
            "--location-name",
            LOCATION_NAME,
        ],
        "webserver": [
            sys.executable,
            "-m",
            WEBSERVER_MODULE,
            "-w",
            str(workspace),
            "-h",
            host,
            "-p",
            str(port),
        ],
        "daemon": [sys.executable, "-m", DAEMON_MODULE, "-w", str(workspace)],
    }
    return [Service(role, commands[role], logs / f"{role}.log") for role in roles]


def code_server_answers(host: str, port: int) -> bool:
    """Whether the code server answers a gRPC ping."""
    from dagster._grpc.client import DagsterGrpcClient

    try:
        DagsterGrpcClient(host=host, port=port).ping("ready?")
    except Exception:  # any transport error means "not yet"
        return False
    return True


def _http_get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bytes(response.read()) if response.status == 200 else None
    except (OSError, urllib.error.URLError):
        return None


def _graphql(base: str, query: str) -> dict[str, Any] | None:
    request = urllib.request.Request(
        f"{base}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            payload = json.loads(response.read())
    except (OSError, ValueError):
        return None
    data = payload.get("data") if isinstance(payload, dict) else None
    return data if isinstance(data, dict) else None


def webserver_answers(base: str) -> bool:
    """Whether the webserver serves `/server_info`."""
    return _http_get(f"{base}/server_info") is not None


def location_loaded(base: str) -> bool:
    """Whether the webserver has the airwave code location loaded (not a load error)."""
    data = _graphql(base, LOCATION)
    if data is None:
        return False
    try:
        entries = data["workspaceOrError"]["locationEntries"]
    except (KeyError, TypeError):
        return False
    return any(
        e["name"] == LOCATION_NAME
        and (e["locationOrLoadError"] or {}).get("__typename") == "RepositoryLocation"
        for e in entries
    )


def reload_location(base: str) -> bool:
    """Ask the webserver to reload the code location; True once it loaded without error."""
    data = _graphql(base, RELOAD)
    if data is None:
        return False
    try:
        entry = data["reloadRepositoryLocation"]
        return bool(entry["locationOrLoadError"]["__typename"] == "RepositoryLocation")
    except (KeyError, TypeError):
        return False


def daemon_healthy(base: str) -> bool:
    """Whether every required daemon has a fresh heartbeat, as the webserver reports it."""
    data = _graphql(base, DAEMON_HEALTH)
    if data is None:
        return False
    try:
        statuses = data["instance"]["daemonHealth"]["allDaemonStatuses"]
    except (KeyError, TypeError):
        return False
    required = [s for s in statuses if s["required"]]
    return bool(required) and all(s["healthy"] for s in required)


def readiness_checks(
    roles: Sequence[str], *, web_base: str, code_host: str, code_port: int
) -> dict[str, Callable[[], bool]]:
    """One probe per role; the daemon is judged through the webserver when both run here."""
    checks: dict[str, Callable[[], bool]] = {}
    if "code-server" in roles:
        checks["code-server"] = lambda: code_server_answers(code_host, code_port)
    if "webserver" in roles:
        # The code server answers pings before it has loaded the code; a location the webserver
        # loaded is the readiness that matters to a user.
        checks["webserver"] = lambda: webserver_answers(web_base) and location_loaded(web_base)
    if "daemon" in roles:
        if "webserver" in roles:
            checks["daemon"] = lambda: daemon_healthy(web_base)
        else:
            checks["daemon"] = lambda: daemon_heartbeat_fresh()
    return checks


def daemon_heartbeat_fresh() -> bool:
    """Whether the run-queue daemon's heartbeat in the instance is fresh (daemon-only role)."""
    import dagster as dg

    from airwave_dagster.cli.launcher import daemon_running

    with dg.DagsterInstance.get() as instance:
        return bool(daemon_running(instance))


class _Stop:
    """Turns SIGTERM, SIGINT and SIGHUP into a flag the supervision loop checks."""

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


def supervise(
    services: list[Service],
    checks: dict[str, Callable[[], bool]],
    banner: str,
    web_base: str | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Start `services`, print `ready:` once every check passes, restart what dies, until a stop.

    After a code server restart, the webserver (`web_base`, when it runs here) is asked to reload
    the location until it loads: it would otherwise keep an error entry for the dead server.
    `on_ready` runs once, when `ready:` is printed.
    """
    stop = _Stop()
    for service in services:
        service.start()
    deadline = time.monotonic() + _READY_TIMEOUT_SECONDS
    ready = False
    reload_pending = False
    last_reload = 0.0
    try:
        while not stop.requested:
            now = time.monotonic()
            for service in services:
                if service.poll(now):
                    console.stderr.print(
                        f"restarted {service.name} (restart {service.restarts})", highlight=False
                    )
                    reload_pending = reload_pending or service.name == "code-server"
            due = now - last_reload > _RELOAD_EVERY_SECONDS
            if reload_pending and web_base is not None and due:
                last_reload = now
                reload_pending = not reload_location(web_base)
                if not reload_pending:
                    console.stderr.print(
                        f"reloaded {LOCATION_NAME} in the webserver from the new code server",
                        highlight=False,
                    )
            if not ready:
                if all(check() for check in checks.values()):
                    ready = True
                    if on_ready is not None:
                        on_ready()
                    print(f"ready: {banner}", flush=True)
                elif now > deadline:
                    logs = ", ".join(str(s.log_path) for s in services)
                    console.error(f"not ready after {_READY_TIMEOUT_SECONDS:.0f} s; see {logs}")
                    raise SystemExit(1)
            time.sleep(0.5)
    finally:
        # Reverse start order: the webserver and daemon go before the code server they read.
        for service in reversed(services):
            service.stop()
    console.stderr.print("stopped " + ", ".join(s.name for s in services), highlight=False)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Webserver bind address.")
@click.option("--port", default=3000, show_default=True, help="Webserver port.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow binding beyond loopback (the UI has no authentication; see docs/deploy.md).",
)
@click.option(
    "--code-server-host",
    default="127.0.0.1",
    show_default=True,
    help="Where the code server listens and where the webserver and daemon reach it.",
)
@click.option("--code-server-port", default=4266, show_default=True, help="Code server port.")
@click.option(
    "--only",
    "only",
    type=click.Choice(ROLES),
    multiple=True,
    help="Run only these roles (one per container in compose.yaml); default: all three.",
)
def serve_command(
    host: str,
    port: int,
    allow_remote: bool,
    code_server_host: str,
    code_server_port: int,
    only: tuple[str, ...],
) -> None:
    """Run the code server, webserver and daemon as supervised production processes."""
    roles = [role for role in ROLES if not only or role in only]
    if "webserver" in roles:
        check_bind(host, port, allow_remote)
    if "code-server" in roles:
        check_bind(code_server_host, code_server_port, allow_remote)
    # Migrations run where the code is served; the other roles only read what it created.
    env = environment.prepare(migrate="code-server" in roles)
    if "code-server" in roles:
        environment.ensure_plex(env.home)
    services = build_services(
        roles=roles,
        host=host,
        port=port,
        code_server_host=code_server_host,
        code_server_port=code_server_port,
        home=env.home,
    )
    shown = "localhost" if host in ("0.0.0.0", "::") else host
    web_base = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else shown}:{port}"
    checks = readiness_checks(
        roles, web_base=web_base, code_host=code_server_host, code_port=code_server_port
    )
    parts = []
    if "webserver" in roles:
        parts.append(f"Dagster UI on http://{shown}:{port}")
    if "code-server" in roles:
        parts.append(f"code server on {code_server_host}:{code_server_port}")
    if "daemon" in roles:
        parts.append("daemon healthy")
    console.stderr.print(
        f"serving {', '.join(roles)} (DAGSTER_HOME={env.dagster_home}, "
        f"logs in {env.home / 'logs'})",
        highlight=False,
    )
    announced = set(ROLES) <= set(roles)
    try:
        supervise(
            services,
            checks,
            "; ".join(parts),
            web_base=web_base if {"webserver", "code-server"} <= set(roles) else None,
            on_ready=partial(_announce, env, port) if announced else None,
        )
    finally:
        if announced:
            webserver.withdraw(env.dagster_home)


def _announce(env: environment.Environment, port: int) -> None:
    """Tell this home's commands that runs can be submitted here (`webserver.find`).

    Only when all three roles run in this supervisor: then the webserver takes a run, the daemon
    dequeues it and the code server runs it with this process's database and Plex, which the
    announcement records. A command then submits over GraphQL in well under a second instead of
    starting a code server of its own (README, "Using it").
    """
    webserver.announce(env.dagster_home, port, env.database_url, Settings.load().plex_url)
