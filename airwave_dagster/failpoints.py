"""Failpoints: named places in a build where a crash test can make the process die on the spot.

The crash matrix (`tests/integration/test_kill_points.py`, docs/durability.md) must kill a build
at exact moments, such as inside its commit transaction or between taking a claim and enabling
the row, which no outside signal can hit reliably. Production code marks those moments with
`reach(name, key=...)`; nothing happens unless `AIRWAVE_FAILPOINTS_DIR` names a directory.

Arming is a file in that directory, named after the point (`build.in_commit`) or after the point
and a key (`build.in_commit@103`: only the build of channel 103). The file holds how many times it
fires (empty means once). Each firing takes one charge under a lock shared by every process, so
"three times" means three hits in all, whichever processes make them; the file is removed with
its last charge. A firing appends `name key pid` to `fired.log` in the same directory, then sends
SIGKILL to the process itself: no `finally`, no `atexit`, no flush runs, exactly as when the
kernel's OOM killer or a power cut ends it. Open transactions die with their connection.

Unset (the default, and what every deployment should keep), `reach` costs one cached lookup.
"""

from __future__ import annotations

import fcntl
import functools
import os
import signal
from pathlib import Path

from airwave_dagster.settings import Settings, SettingsError

FIRED_LOG = "fired.log"
"""Every firing, one line `name key pid`, so a test can prove the kill happened where it meant."""
_LOCK = ".lock"

BUILD_CLAIMED = "build.claimed"
"""A channel's number is claimed (the row exists, disabled); no Plex or model work done yet."""
BUILD_BEFORE_COMMIT = "build.before_commit"
"""The build's work is done (pool resolved; the agent verified its filter); nothing committed."""
BUILD_IN_COMMIT = "build.in_commit"
"""Inside the commit transaction: definitions and schedule written, the row enabled, uncommitted."""
BUILD_COMMITTED = "build.committed"
"""The channel is committed (enabled, claim cleared); the step has not stored its output."""
ROLLBACK_IN_APPLY = "rollback.in_apply"
"""Inside a lineup rollback's transaction: the AI run's channels removed and the snapshot
re-inserted, uncommitted (keyed by the rolled-back lineup's root run id)."""
POINTS = (BUILD_CLAIMED, BUILD_BEFORE_COMMIT, BUILD_IN_COMMIT, BUILD_COMMITTED, ROLLBACK_IN_APPLY)


@functools.cache
def _directory() -> Path | None:
    try:
        return Settings.load().failpoints_dir
    except SettingsError:
        return None  # the process that reads settings for real reports it


def reach(name: str, *, key: object = None) -> None:
    """Die here if `name` (or `name@key`) is armed; otherwise return at once."""
    directory = _directory()
    if directory is None:
        return
    candidates = ([f"{name}@{key}"] if key is not None else []) + [name]
    try:
        lock = (directory / _LOCK).open("a")
    except FileNotFoundError:
        return  # no directory yet: nothing is armed
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fired = next((c for c in candidates if _take_charge(directory / c)), None)
        if fired is None:
            return
        with (directory / FIRED_LOG).open("a") as log:
            log.write(f"{name} {key if key is not None else '-'} {os.getpid()}\n")
    os.kill(os.getpid(), signal.SIGKILL)


def _take_charge(armed: Path) -> bool:
    """Use one charge of `armed` (caller holds the lock); False when it is not armed."""
    try:
        text = armed.read_text().strip()
    except FileNotFoundError:
        return False
    left = (int(text) if text else 1) - 1
    if left > 0:
        armed.write_text(str(left))
    else:
        armed.unlink()
    return True


def arm(directory: Path, name: str, *, key: object = None, times: int = 1) -> None:
    """Arm `name` (for `key` only, when given) to fire `times` times (tests call this)."""
    if name not in POINTS:
        raise ValueError(f"unknown failpoint {name!r}; known: {', '.join(POINTS)}")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / (f"{name}@{key}" if key is not None else name)
    with (directory / _LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        target.write_text(str(times))


def fired(directory: Path) -> list[tuple[str, str, int]]:
    """What fired so far, in order: (name, key, pid)."""
    try:
        lines = (directory / FIRED_LOG).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [(name, key, int(pid)) for name, key, pid in (line.split() for line in lines)]
