"""compose.attached.yaml and its host-networking twin stay one deployment with two networks.

compose.attached.host.yaml cannot be a layer on compose.attached.yaml (its header says why), so
it repeats the services; this test keeps everything but the network identical, and checks what
each file promises: the UI published on loopback only, Airwave's workflow engine forced off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DAGSTER_SERVICES = ("code-server", "webserver", "daemon", "worker")
NETWORK_KEYS = {"network_mode", "ports", "command", "healthcheck"}
DATABASE_URL = "AIRWAVE_DATABASE_URL"


def _services(name: str) -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((ROOT / name).read_text())["services"]
    return services


BRIDGE = _services("compose.attached.yaml")
HOST = _services("compose.attached.host.yaml")


@pytest.mark.parametrize("service", DAGSTER_SERVICES)
def test_host_twin_differs_only_in_networking(service: str) -> None:
    bridge, host = dict(BRIDGE[service]), dict(HOST[service])
    assert host["network_mode"] == "host"
    assert "ports" not in host
    shared = (set(bridge) | set(host)) - NETWORK_KEYS - {"environment"}
    assert {k: bridge.get(k) for k in shared} == {k: host.get(k) for k in shared}
    bridge_env, host_env = dict(bridge["environment"]), dict(host["environment"])
    assert bridge_env.pop(DATABASE_URL).replace("@postgres:5432/", "@HOST/") == host_env.pop(
        DATABASE_URL
    ).replace("@127.0.0.1:${AIRWAVE_DAGSTER_DB_PORT:-5432}/", "@HOST/")
    assert bridge_env == host_env
    # The probe names the port, which differs; its timing does not.
    timing = {k: v for k, v in bridge["healthcheck"].items() if k != "test"}
    assert timing == {k: v for k, v in host["healthcheck"].items() if k != "test"}


@pytest.mark.parametrize("services", [BRIDGE, HOST], ids=["bridge", "host"])
def test_airwaves_workflow_engine_is_forced_off(services: dict[str, Any]) -> None:
    assert services["server"] == {"environment": {"WORKFLOW_ENABLED": ""}}


@pytest.mark.parametrize("services", [BRIDGE, HOST], ids=["bridge", "host"])
def test_attached_mode_with_airwaves_secret(services: dict[str, Any]) -> None:
    for service in DAGSTER_SERVICES:
        env = services[service]["environment"]
        assert env["AIRWAVE_MODE"] == "attached"
        assert env["BETTER_AUTH_SECRET"].startswith("${BETTER_AUTH_SECRET:?")


def test_only_the_ui_is_published_and_on_loopback() -> None:
    published = {name: s["ports"] for name, s in BRIDGE.items() if "ports" in s}
    assert published == {"webserver": ["127.0.0.1:${AIRWAVE_UI_PORT:-3000}:3000"]}
