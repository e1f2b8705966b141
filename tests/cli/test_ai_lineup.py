"""`airwave lineup`: refusals at launch, and one real run through the workspace and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airwave_dagster.cli.ai_lineup import launch_refusal, lineup_run_config
from airwave_dagster.settings import API_KEY_ENV
from resources import tables as t

pytestmark = [pytest.mark.postgres, pytest.mark.plex]

AIRWAVE = str(Path(sys.executable).parent / "airwave")


def _airwave(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_anthropic_without_a_key_is_refused_before_a_run_exists(cli_env, store) -> None:
    done = _airwave(cli_env, "lineup", "--provider", "anthropic", "--wait")

    assert done.returncode == 3  # input refused
    assert API_KEY_ENV in done.stderr and "--provider offline" in done.stderr
    assert "started" not in done.stdout
    assert store.counts()["channels"] == 0


def test_a_previous_lineup_is_no_launch_refusal_any_more(synced, store, monkeypatch) -> None:
    # The run plans and stops at its approval gate with the diff instead (tests/cli/
    # test_approvals.py); only a bad limit or a missing key is refused before a run exists.
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    with store.engine.begin() as conn:
        conn.execute(
            t.channel.insert().values(
                id="old-ai", number=1001, name="Old", media_source_id=synced, ai_generated=True
            )
        )

    assert launch_refusal(provider="auto", limit=0) is None
    assert "--limit" in (launch_refusal(provider="offline", limit=-1) or "")


def test_run_config_carries_options_never_secrets(monkeypatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "sk-secret-value")

    config = lineup_run_config(
        limit=3, budget_usd=0.5, confirm_wipe=True, provider="anthropic", approval="required"
    )

    assert config["ops"]["analyze_library"]["config"] == {
        "limit": 3,
        "budget_usd": 0.5,
        "confirm_wipe": True,
        "provider": "anthropic",
        "approval": "required",
    }
    assert "sk-secret-value" not in json.dumps(config)
