"""Dagster's project tools work in a bare checkout: `dg check defs` and `dg list defs`.

They run as a developer new to the project runs them: in the checkout, with nothing configured
(no DAGSTER_HOME, no AIRWAVE_* or PLEX_* variable, a HOME of their own). `dg` then finds the code
location through `[tool.dg]` in pyproject.toml and keeps Dagster's storage in a temporary folder
configured by the checkout's own `dagster.yaml`, which must need nothing from the environment.
`make test` runs `dg check defs` the same way before the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
DG = str(Path(sys.executable).parent / "dg")
CONFIGURING = ("AIRWAVE_", "DAGSTER_", "PLEX_")


def _bare_env(home: Path) -> dict[str, str]:
    """This environment less everything that configures Airwave or Dagster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CONFIGURING)}
    env["HOME"] = str(home)
    # The virtualenv `dg` runs from, as activating it would say (dg warns when they differ).
    env["VIRTUAL_ENV"] = str(Path(sys.executable).parent.parent)
    return env


def _dg(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DG, *args],
        cwd=ROOT,
        env=_bare_env(home),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.timeout(900)
def test_dg_checks_and_lists_the_definitions_with_nothing_configured(tmp_path: Path) -> None:
    checked = _dg("check", "defs", home=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All definitions loaded successfully." in checked.stdout
    assert "AIRWAVE_DAGSTER_PG_URL" not in checked.stderr

    listed = _dg("list", "defs", "--json", home=tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    found = json.loads(listed.stdout)

    from airwave_dagster.definitions import defs

    repository = defs.get_repository_def()
    assert {job["name"] for job in found["jobs"]} == {
        name for name in repository.job_names if not name.startswith("__")
    }
    assert {s["name"] for s in found["schedules"]} == {s.name for s in repository.schedule_defs}
    assert {s["name"] for s in found["sensors"]} == {s.name for s in repository.sensor_defs}
    assert {a["asset_key"] for a in found["assets"]} == {
        key.to_user_string() for key in repository.asset_graph.get_all_asset_keys()
    }
    assert {"import_lineup", "ai_lineup"} <= {job["name"] for job in found["jobs"]}
    assert {c["key"] for c in found["asset_checks"]} == {
        key.to_user_string() for key in repository.asset_graph.asset_check_keys
    }
    assert {"plex_library:fresh", "ai_lineup:audience_ceiling"} <= {
        c["key"] for c in found["asset_checks"]
    }


def test_dg_is_a_development_dependency_only() -> None:
    uv = shutil.which("uv") or str(ROOT / ".airwave" / "bootstrap" / "bin" / "uv")
    runtime = subprocess.run(
        [uv, "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    names = {line.split("==")[0] for line in runtime.splitlines() if "==" in line}
    assert "dagster" in names and "dagster-shared" in names  # what `airwave dev` runs on
    assert not {"dagster-dg-cli", "dagster-dg-core"} & names
