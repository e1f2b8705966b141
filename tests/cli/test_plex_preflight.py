"""Connecting a real Plex: the token is optional, and a wrong URL or token is refused at once.

A self-hoster sets `PLEX_URL` (and perhaps `PLEX_TOKEN`) and runs `airwave import` or `airwave
lineup`. Before any run is launched the CLI asks the server once; a refusal exits 3 with the
cause and never shows the token. The commands run as subprocesses and exit at the preflight,
before any Dagster process starts; the tokenless path is tried on an emulator that allows
requests without a token, as a real server on its local network may.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from airwave_dagster import settings
from airwave_dagster.cli import environment, plex_check
from airwave_dagster.cli.console import ExitCode
from airwave_dagster.data import DEMO_LINEUP
from airwave_dagster.definitions import production_resources
from airwave_dagster.emulators.plex import EmulatorHandle, start_emulator
from resources.plex import PlexAuthError, PlexClient
from tests.support.homes import user_env

AIRWAVE = str(Path(sys.executable).parent / "airwave")
SECRET = "wrong-secret-token-4711"


@pytest.fixture(scope="module")
def open_plex() -> Iterator[EmulatorHandle]:
    """A small server that answers requests without a token (and refuses a wrong one)."""
    with start_emulator(items=60, seed=3, allow_without_token=True) as handle:
        yield handle


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _airwave(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    done = subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    return done, time.perf_counter() - started


def _plex_env(tmp_path: Path, dagster_url: str, url: str, token: str | None) -> dict[str, str]:
    # The test database (exported by its fixture) with the CLI tests' own Dagster storage
    # (tests/cli/conftest.py), should a command get as far as looking for a daemon there.
    env = user_env(
        tmp_path, **{settings.DAGSTER_PG_URL_ENV: dagster_url, settings.PLEX_URL_ENV: url}
    )
    env.pop(settings.PLEX_TOKEN_ENV, None)
    env.pop(settings.API_KEY_ENV, None)
    if token is not None:
        env[settings.PLEX_TOKEN_ENV] = token
    return env


@pytest.mark.postgres
@pytest.mark.plex
@pytest.mark.parametrize(
    ("command", "token", "words"),
    [
        (("import", str(DEMO_LINEUP), "--dry-run"), None, "needs a token"),
        (("import", str(DEMO_LINEUP), "--dry-run"), SECRET, "refused the token"),
        (("lineup", "--provider", "offline"), SECRET, "refused the token"),
    ],
    ids=["import-no-token", "import-wrong-token", "lineup-wrong-token"],
)
def test_a_token_the_server_refuses_is_answered_at_once_with_exit_3(
    tmp_path: Path,
    clean_db: str,
    cli_dagster_url: str,
    plex_emulator: EmulatorHandle,
    command: tuple[str, ...],
    token: str | None,
    words: str,
) -> None:
    env = _plex_env(tmp_path, cli_dagster_url, plex_emulator.url, token)

    done, elapsed = _airwave(env, *command)

    assert done.returncode == ExitCode.INPUT_REFUSED == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert words in done.stderr and settings.PLEX_TOKEN_ENV in done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "started run" not in done.stdout
    assert elapsed < 30, elapsed  # a loose bound: the shared machine; the check itself is below


@pytest.mark.postgres
def test_an_unreachable_url_is_answered_at_once_with_exit_3(
    tmp_path: Path, clean_db: str, cli_dagster_url: str
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    env = _plex_env(tmp_path, cli_dagster_url, url, SECRET)

    done, _elapsed = _airwave(env, "import", str(DEMO_LINEUP), "--dry-run")

    assert done.returncode == ExitCode.INPUT_REFUSED, done.stderr
    assert f"Plex is unreachable at {url}" in done.stderr
    assert settings.PLEX_URL_ENV in done.stderr
    assert SECRET not in done.stderr


def test_a_server_that_never_answers_is_refused_in_under_a_second() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts the connection in the kernel, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"

        started = time.perf_counter()
        refusal = plex_check.problem(url, SECRET)
        elapsed = time.perf_counter() - started

    assert refusal is not None and "no answer within" in refusal
    assert elapsed < 1.0, elapsed


def test_a_url_that_is_not_plex_or_carries_the_token_is_shown_without_it() -> None:
    url = f"http://user:pw@127.0.0.1:{_closed_port()}/?X-Plex-Token={SECRET}"

    refusal = plex_check.problem(url, SECRET)

    assert refusal is not None
    assert SECRET not in refusal and "pw" not in refusal
    assert plex_check.problem("nas:32400", None) is not None


def test_a_server_that_allows_access_without_a_token_needs_none(
    open_plex: EmulatorHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(settings.PLEX_URL_ENV, open_plex.url)
    monkeypatch.delenv(settings.PLEX_TOKEN_ENV, raising=False)
    configured = settings.Settings.load()

    # What `airwave import` does before it starts a run: no traceback, the server answers.
    assert environment.ensure_plex(settings=configured) == (open_plex.url, "")
    assert plex_check.problem(open_plex.url, None) is None
    # What the run does: the resource binds with PLEX_TOKEN unset and reads the libraries.
    plex = production_resources(configured)["plex"]
    with dg.build_resources({"plex": plex}) as resources:
        libraries = resources.plex.get_client().libraries()
    assert [library.key for library in libraries] == ["1", "2"]
    assert os.environ.get(settings.PLEX_TOKEN_ENV) is None


def test_the_open_emulator_still_refuses_a_wrong_token(open_plex: EmulatorHandle) -> None:
    with pytest.raises(PlexAuthError):
        PlexClient(open_plex.url, SECRET).libraries()
    assert "refused the token" in (plex_check.problem(open_plex.url, SECRET) or "")
    assert plex_check.problem(open_plex.url, open_plex.token) is None
