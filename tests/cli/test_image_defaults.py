"""The image and the compose stack serve the UI on loopback unless a command opens it up."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import yaml

from airwave_dagster.cli import serve

ROOT = Path(__file__).resolve().parents[2]


def _serve_params(argv: list[str]) -> dict[str, object]:
    """The options `airwave serve` would run with for `argv` (parsed by click, nothing run)."""
    assert argv[0] == "serve", argv
    with click.Context(serve.serve_command) as ctx:
        return dict(serve.serve_command.make_context("serve", argv[1:], parent=ctx).params)


def _instruction(dockerfile: str, name: str) -> list[str]:
    lines = [line for line in dockerfile.splitlines() if line.startswith(f"{name} ")]
    assert lines, f"no {name} in the Dockerfile"
    return list(json.loads(lines[-1][len(name) + 1 :]))


def test_plain_docker_run_serves_on_loopback_only() -> None:
    # What `docker run -p 3000:3000 airwave-dagster` runs: ENTRYPOINT plus the default CMD.
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert _instruction(dockerfile, "ENTRYPOINT") == ["airwave"]
    params = _serve_params(_instruction(dockerfile, "CMD"))

    assert serve.is_loopback(str(params["host"]))
    assert serve.is_loopback(str(params["code_server_host"]))
    assert params["allow_remote"] is False


def _with_defaults(word: str) -> str:
    # Compose substitutes ${NAME:-default}; the defaults are what an unconfigured stack runs.
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", word)


def test_compose_services_serve_on_loopback_only() -> None:
    stack = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    commands = {
        name: [_with_defaults(str(word)) for word in service["command"]]
        for name, service in stack["services"].items()
        if service.get("command", [None])[0] == "serve"
    }
    assert set(commands) == {"code-server", "webserver", "daemon"}
    for name, argv in commands.items():
        params = _serve_params(argv)
        assert serve.is_loopback(str(params["host"])), name
        assert serve.is_loopback(str(params["code_server_host"])), name
        assert params["allow_remote"] is False, name
