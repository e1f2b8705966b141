"""Run-worker heartbeats: how a run whose worker is on another machine is seen to have died.

The run launcher's health check asks the operating system about the run worker's pid, which only
works when the worker runs on this machine (airwave_dagster/durability/run_launcher.py). A worker
elsewhere — a code server in another container, on another host — instead writes a beat every
`BEAT_SECONDS` while it orchestrates the run: its host, pid and the time, in the key-value table of
Dagster's run storage (Postgres, shared by every process of the deployment; one row per run, kept
after the run as a record of where it ran). A beat older than `STALE_SECONDS` on a run still in
progress means its worker stopped: killed, its machine gone, or cut off from the database.

The beat is written by the executor of the fan-out jobs around the run's orchestration
(`ops/steps.py`), so it covers the multiprocess and the celery executor alike; step processes and
celery workers do not beat (their steps are covered by channel claims and the broker's redelivery).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

BEAT_SECONDS = 10.0
STALE_SECONDS = 60.0
"""Six missed beats: long enough for a busy machine or a database failover, short enough that a
dead remote run is failed (and retried) within about a minute."""
_KEY_PREFIX = "airwave/run_worker_heartbeat/"


@dataclass(frozen=True)
class Beat:
    """The last sign of life of a run's worker."""

    host: str
    pid: int
    at: float
    ended: bool = False

    def stale_reason(self, now: float, stale_after: float = STALE_SECONDS) -> str | None:
        """Why the worker counts as gone at `now`, or None while its beat is fresh."""
        age = now - self.at
        if age <= stale_after:
            return None
        return (
            f"run worker {self.pid} on {self.host} sent no heartbeat for {age:.0f} s "
            f"(every {BEAT_SECONDS:.0f} s expected)"
        )


def _key(run_id: str) -> str:
    return f"{_KEY_PREFIX}{run_id}"


def record(instance: Any, run_id: str, *, ended: bool = False, at: float | None = None) -> None:
    """Write this process's beat for `run_id` (`at` defaults to now)."""
    beat = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "at": time.time() if at is None else at,
        "ended": ended,
    }
    instance.run_storage.set_cursor_values({_key(run_id): json.dumps(beat)})


def last_beat(instance: Any, run_id: str) -> Beat | None:
    """The run's last beat, or None when its worker never wrote one."""
    raw = instance.run_storage.get_cursor_values({_key(run_id)}).get(_key(run_id))
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return Beat(str(data["host"]), int(data["pid"]), float(data["at"]), bool(data["ended"]))
    except (ValueError, KeyError, TypeError):
        return None


@contextmanager
def beating(instance: Any, run_id: str, every: float = BEAT_SECONDS) -> Iterator[None]:
    """Beat for `run_id` every `every` seconds while the block runs, then write a last, ended one.

    A beat that cannot be written (the database restarting) is skipped, not raised: a missing
    beat is exactly what the health check measures, and the run itself decides its own fate.
    """
    stop = threading.Event()

    def beat_until_stopped() -> None:
        while not stop.wait(every):
            try:
                record(instance, run_id)
            except Exception:  # the next beat tries again
                continue

    record(instance, run_id)
    thread = threading.Thread(target=beat_until_stopped, name="airwave-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every + 5)
        try:
            record(instance, run_id, ended=True)
        except Exception:  # the run's own outcome matters more than its last beat
            pass
