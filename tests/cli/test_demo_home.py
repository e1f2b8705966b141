"""`airwave demo` and `airwave --demo` switch to the demo's own home, whatever is configured."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from airwave_dagster.cli import environment
from airwave_dagster.settings import Settings


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """`use_demo_home` edits os.environ itself; the session's settings must come back whole."""
    with mock.patch.dict(os.environ):
        yield


def test_the_demo_home_ignores_every_configured_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("PLEX_TOKEN=from-the-dotenv-file\n")
    monkeypatch.setenv("AIRWAVE_HOME", str(home))
    monkeypatch.setenv("AIRWAVE_DATABASE_URL", "postgresql://operator@db.example/production")
    monkeypatch.setenv("AIRWAVE_MODE", "attached")
    monkeypatch.setenv("PLEX_URL", "http://plex.example:32400")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "production-dagster"))
    monkeypatch.setenv("BETTER_AUTH_SECRET", "operator-secret")
    monkeypatch.delenv("AIRWAVE_ENV_FILE", raising=False)
    assert Settings.load().plex_token is not None  # the dotenv file is read before the switch

    demo, ignored = environment.use_demo_home()

    assert demo == home.resolve() / "demo" and demo.is_dir()
    for name in ("AIRWAVE_DATABASE_URL", "AIRWAVE_MODE", "PLEX_URL", "DAGSTER_HOME"):
        assert name in ignored
    assert "BETTER_AUTH_SECRET" in ignored and "the settings in .env" in ignored
    settings = Settings.load()
    assert settings.database_url is None and settings.plex_url is None
    assert settings.plex_token is None and not settings.attached
    assert settings.resolved_home() == demo
    # Switching again (`airwave --demo demo`) stays on the same home.
    assert environment.use_demo_home() == (demo, [])
