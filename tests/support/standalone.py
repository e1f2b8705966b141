"""The CLI as a user runs it without `airwave dev`: its own homes, no daemon, killable whole.

The Dagster storage is a schema of its own (`dagster_alone`): the shared `airwave dev` of other
tests keeps its daemon heartbeat in the default schema, and a daemon seen there would take the
run through its queue and its own, still living, code server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from airwave_dagster import settings
from airwave_dagster.cli import environment, launcher
from tests.support import lineups
from tests.support.dagster_dev import AIRWAVE, STALE_SECONDS, wait_for
from tests.support.homes import query, user_env
from tests.support.schemas import fresh_schema

CHANNELS = 8
SCHEMA = "dagster_alone"


@pytest.fixture
def alone(
    clean_db: str, slow_plex: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """The environment of a user running the CLI with no daemon, and an instance on it."""
    fresh_schema(clean_db, SCHEMA)  # runs of earlier tests would answer its idempotency keys
    env = user_env(
        tmp_path,
        **{
            settings.DAGSTER_PG_URL_ENV: environment.with_search_path(clean_db, SCHEMA),
            settings.PLEX_URL_ENV: slow_plex.url,
            settings.PLEX_TOKEN_ENV: slow_plex.token,
            "AIRWAVE_CLAIM_STALE_SECONDS": STALE_SECONDS,
        },
    )
    for name in ("DAGSTER_HOME", "AIRWAVE_HOME", settings.DAGSTER_PG_URL_ENV):
        monkeypatch.setenv(name, env[name])
    instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
    assert not launcher.daemon_running(instance), "a daemon serves this test's private storage"
    yield {"env": env, "instance": instance, "tmp": tmp_path}
    instance.dispose()


def airwave(env: dict[str, str], *args: str, timeout: float = 300) -> Any:
    return subprocess.run(
        [AIRWAVE, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def descendants(root: int) -> set[int]:
    """Every process below `root`, from /proc (code servers may leave the process group)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[-1].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        children = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= children
        frontier = children
    return found


def kill_tree(root: int) -> None:
    """SIGKILL `root`'s process group and every process below it, as a power cut would."""
    victims = descendants(root)
    try:
        os.killpg(root, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def build_keys(
    instance: Any, run_id: str, kind: dg.DagsterEventType, prefix: str = "build_channel["
) -> set[str]:
    """Step keys of the run's `kind` events whose step starts with `prefix` (the builds)."""
    return {
        record.dagster_event.step_key
        for record in instance.all_logs(run_id, of_type=kind)
        if record.dagster_event is not None
        and (record.dagster_event.step_key or "").startswith(prefix)
    }


CHANNELS_WITH_CLAIMS = (
    "SELECT c.number, c.name, c.enabled, k.run_id AS claim_run_id FROM public.channel c "
    "LEFT JOIN airwave_dagster.channel_claim k ON k.channel_id = c.id"
)
"""Every channel row with the run holding its claim (NULL: not claimed); add WHERE/ORDER BY."""


def channel_number(step_key: str) -> int:
    """The channel number of a build step key (`build_channel[ch_103]` → 103)."""
    return int(step_key.split("[ch_")[1].rstrip("]"))


def claim_ledger(database_url: str, run_ids: list[str]) -> Counter[int]:
    """Attempts per channel that started its expensive part (the importer's claim rows)."""
    rows = query(
        database_url,
        'SELECT "channelNumber" AS channel_number FROM public.import_trace '
        """WHERE "runId" = ANY(:ids) AND phase = 'claim'""",
        {"ids": run_ids},
    )
    return Counter(row.channel_number for row in rows)


def start_waiting_import(
    env: dict[str, str], tmp: Path, name: str
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """`airwave import FILE --wait --json` of the 8-channel lineup, in a session of its own.

    Returns the process (its output goes to `<tmp>/import.log`), the lineup file and the log.
    """
    path = lineups.write(tmp, lineups.genre_lineup(CHANNELS), name)
    log = tmp / "import.log"
    with log.open("wb") as output:
        cli = subprocess.Popen(
            [AIRWAVE, "import", str(path), "--wait", "--json"],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return cli, path, log


def kill_import_mid_fan_out(alone: dict[str, Any]) -> tuple[str, Path, set[int], set[int]]:
    """Start `airwave import --wait`, SIGKILL all of it mid fan-out.

    Returns the run id, the lineup file, the channel numbers whose build had succeeded and those
    in flight at the kill.
    """
    instance = alone["instance"]
    cli, path, log = start_waiting_import(alone["env"], alone["tmp"], "alone.json")
    try:
        run = wait_for(
            lambda: next(iter(instance.get_runs(limit=1)), None), 120, "the import's run"
        )

        def in_flight() -> bool:
            assert cli.poll() is None, log.read_text(errors="replace")[-3000:]
            done = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_SUCCESS)
            started = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_START)
            return len(done) >= 2 and bool(started - done)

        wait_for(in_flight, 180, "two builds done and more in flight", poll=0.05)
        kill_tree(cli.pid)
    finally:
        cli.wait(timeout=30)
    done = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_SUCCESS)
    started = build_keys(instance, run.run_id, dg.DagsterEventType.STEP_START)

    def numbers(keys: set[str]) -> set[int]:
        return {channel_number(key) for key in keys}

    time.sleep(1.0)  # let the kernel reap; nothing of the run may write after this
    status = instance.get_run_by_id(run.run_id).status
    # The bug this guards: nothing is left to end the run, so without a command it stays so.
    assert status == dg.DagsterRunStatus.STARTED, status
    return run.run_id, path, numbers(done), numbers(started - done)


def assert_exactly_once(
    database_url: str,
    run_ids: list[str],
    done: set[int],
    in_flight: set[int],
    *,
    ledger_complete: bool = True,
) -> dict[str, int]:
    """Every planned channel once, enabled, unclaimed; work repeated only where it was killed.

    `ledger_complete=False` where Postgres itself went away: claim rows are trace rows, written
    best effort (`AirwaveStore.record_trace`), so an outage can swallow one while the build goes
    on; the ledger then proves no repeat, not that every build was recorded.
    """
    planned = sorted(c["number"] for c in lineups.genre_lineup(CHANNELS)["channels"])
    channels = query(database_url, CHANNELS_WITH_CLAIMS + " ORDER BY c.number")
    work = claim_ledger(database_url, run_ids)
    assert [row.number for row in channels] == planned, "every planned channel exactly once"
    assert all(row.enabled for row in channels)
    assert all(row.claim_run_id is None for row in channels), "no claim left behind"
    if ledger_complete:
        assert sorted(work) == planned, (dict(work), run_ids)
    else:
        assert set(work) <= set(planned), (dict(work), run_ids)
    repeated = {number: count - 1 for number, count in work.items() if count > 1}
    assert not set(repeated) & done, f"a build that had finished ran again: {repeated}"
    assert set(repeated) <= in_flight, repeated
    return {"channels": len(channels), "duplicate_builds": sum(repeated.values())}


def claims_held(database_url: str, run_id: str) -> int:
    """Channel rows still claimed by `run_id`."""
    rows = query(
        database_url,
        "SELECT count(*) AS n FROM airwave_dagster.channel_claim WHERE run_id = :run",
        {"run": run_id},
    )
    return int(rows[0].n)
