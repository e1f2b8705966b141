"""Container health probe: exit 0 when the roles named on the command line answer.

`python3 -m airwave_dagster.cli.healthcheck [code-server[:PORT]] [webserver[:PORT]] [daemon]`
(default: the webserver and the code server on their default ports 3000 and 4266, what a plain
`airwave serve` runs). It reuses the
probes `airwave serve` waits on, so "healthy" means the same thing in a container and outside.
"""

from __future__ import annotations

import os
import sys

from airwave_dagster.cli import serve
from airwave_dagster.settings import DAGSTER_HOME_ENV, Settings

_DEFAULT_PORTS = {"code-server": 4266, "webserver": 3000, "daemon": 0}


def _daemon_ok() -> bool:
    settings = Settings.load()
    if settings.dagster_home is None:
        # The same instance directory `airwave serve` prepared under the home.
        os.environ[DAGSTER_HOME_ENV] = str(settings.resolved_home() / "dagster_home")
    return serve.daemon_heartbeat_fresh()


def main(argv: list[str]) -> int:
    """Probe each role; 0 when all answer, 1 otherwise."""
    failed = []
    for arg in argv or ["code-server", "webserver"]:
        role, _, port_text = arg.partition(":")
        port = int(port_text) if port_text else _DEFAULT_PORTS[role]
        if role == "code-server":
            ok = serve.code_server_answers("127.0.0.1", port)
        elif role == "webserver":
            ok = serve.webserver_answers(f"http://127.0.0.1:{port}")
        else:
            ok = _daemon_ok()
        if not ok:
            failed.append(role)
    if failed:
        print("unhealthy: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
