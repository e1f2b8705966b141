"""The built wheel works anywhere: a fresh venv outside the checkout runs `airwave demo`.

No home is configured (no AIRWAVE_HOME, DAGSTER_HOME; HOME is a temporary folder), so the home is
the platform's user data directory, and site-packages must come out of it untouched. A
production database, Plex and model key are configured, and the demo must use none of them.
This is also the suite's one test of `airwave demo` (`make demo` runs the same command from the
checkout): it starts its own Postgres and Plex emulator, imports, and builds an offline lineup.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


def _uv() -> str:
    # The same uv `make` uses: on PATH, else the bootstrap copy. Missing is a failure, never a skip.
    found = shutil.which("uv") or str(ROOT / ".airwave" / "bootstrap" / "bin" / "uv")
    assert Path(found).exists(), "uv is needed to build the wheel (run `make .venv/.synced`)"
    return found


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in root.rglob("*")
        if path.is_file()
    }


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.mark.timeout(2400)
def test_wheel_runs_the_demo_from_a_fresh_venv_outside_the_checkout(tmp_path: Path) -> None:
    uv = _uv()
    dist = tmp_path / "dist"
    _run([uv, "build", "--wheel", "--out-dir", str(dist), str(ROOT)])
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "airwave_dagster/deploy/dagster.yaml" in names
    assert "airwave_dagster/deploy/workspace.yaml" in names

    requirements = tmp_path / "requirements.txt"
    exported = _run(
        [uv, "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project"], cwd=ROOT
    )
    requirements.write_text(exported.stdout)
    venv = tmp_path / "venv"
    _run([uv, "venv", "--python", sys.executable, str(venv)])
    python = venv / "bin" / "python"
    # Bytecode compiled at install, as a deployment would: importing must then write nothing.
    _run([uv, "pip", "install", "--python", str(python), "--compile-bytecode",
          "-r", str(requirements), str(wheel)])  # fmt: skip
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    assert not (site / "airwave_dagster" / "deploy" / "dagster.yaml").is_symlink()
    before = _snapshot(site)

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    user_home = tmp_path / "user"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRWAVE_", "PLEX_", "ANTHROPIC_", "DAGSTER_", "XDG_"))
        and key not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env["HOME"] = str(user_home)
    # A machine configured for production (issue 27, item 1): the demo must use none of it. Each
    # address answers nothing, so a demo that used one would fail.
    production = {
        "AIRWAVE_DATABASE_URL": "postgresql://operator@127.0.0.1:9/production",
        "PLEX_URL": "http://127.0.0.1:9",
        "PLEX_TOKEN": "production-plex-token",
        "ANTHROPIC_API_KEY": "sk-ant-production-key",
    }
    env.update(production)
    airwave = str(venv / "bin" / "airwave")
    home = user_home / ".local" / "share" / "airwave-dagster"
    demo_home = home / "demo"
    try:
        assert "version" in _run([airwave, "--version"], cwd=outside, env=env).stdout
        demo = _run([airwave, "demo"], cwd=outside, env=env, timeout=2000)
        assert "Dry-run report (nothing was written)" in demo.stdout
        assert "Import report" in demo.stdout
        assert "AI lineup report (offline)" in demo.stdout
        assert f"Airwave demo in {demo_home}" in demo.stdout
        assert "AIRWAVE_DATABASE_URL, ANTHROPIC_API_KEY, PLEX_TOKEN, PLEX_URL" in demo.stdout
        assert "--confirm-wipe" not in demo.stdout + demo.stderr
        for secret in ("production-plex-token", "sk-ant-production-key"):
            assert secret not in demo.stdout + demo.stderr
        exported = tmp_path / "exported.json"
        _run([airwave, "--demo", "export", "--output", str(exported)], cwd=outside, env=env)
        channels = json.loads(exported.read_text())["channels"]
        state = json.loads((demo_home / "plex-emulator.json").read_text())
        assert state["url"].startswith("http://127.0.0.1:"), "the demo's own emulator, loopback"
    finally:
        stop = subprocess.run(
            [airwave, "db", "stop"], cwd=outside, env=env, timeout=120, capture_output=True,
            text=True, check=False,
        )  # fmt: skip
    assert "stopped the demo's private PostgreSQL" in stop.stdout, stop.stdout + stop.stderr

    # The bundled lineup's 14 channels, and the demo's offline lineup of at most 12 (never fewer
    # than 10: a channel whose pool fails the checks is dropped, not built).
    assert 14 + 10 <= len(channels) <= 14 + 12, len(channels)
    assert (demo_home / "dagster_home" / "dagster.yaml").is_file(), "in the user data dir"
    assert (demo_home / "pg" / "PG_VERSION").is_file(), "the demo's own database, in its home"
    after = _snapshot(site)
    added = sorted(set(after) - set(before))
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    assert not added and not changed, f"written into site-packages: {(added + changed)[:20]}"
    assert not list(outside.iterdir()), "nothing written into the working directory"
