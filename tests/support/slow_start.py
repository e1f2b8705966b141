"""An instance whose run workers start slowly, as on a loaded machine, for the start_run tests.

A code server answers `start_run` only once the run worker it started has built its instance and
read its run. On a quiet machine with the forkserver preloaded that takes well under a second, so
a short gRPC deadline alone no longer makes `start_run` time out (CI saw the fault test pass
through without a single timeout). Naming this class in a test's `dagster.yaml`
(`instance_with_slow_worker_start`) makes every run worker take `WORKER_START_DELAY_SECONDS`
longer to report itself; every other process (webserver, daemon, code server, step workers)
builds its instance as usual.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import yaml

from airwave_dagster.cli import environment
from airwave_dagster.durability.instance import AirwaveInstance

WORKER_START_DELAY_SECONDS = 5.0
"""Longer than the 1 s deadline the fault test gives every gRPC call, with margin."""

_RUN_WORKER_ENTRY = "_run_in_subprocess"
"""The function of `dagster._grpc.impl` a code server's run worker builds its instance in."""


def _in_run_worker_start() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == _RUN_WORKER_ENTRY and "dagster" in frame.f_code.co_filename:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class SlowWorkerStartInstance(AirwaveInstance):
    """`AirwaveInstance`, built `WORKER_START_DELAY_SECONDS` late in a starting run worker."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if _in_run_worker_start():
            time.sleep(WORKER_START_DELAY_SECONDS)
        super().__init__(*args, **kwargs)


def instance_with_slow_worker_start(dagster_home: Path) -> None:
    """Point `dagster_home/dagster.yaml` (the project's) at `SlowWorkerStartInstance`.

    Every process that loads the instance must import this module: run the servers with the
    checkout on PYTHONPATH (`checkout_on_pythonpath`).
    """
    config = yaml.safe_load(environment.packaged_config("dagster.yaml"))
    config["instance_class"] = {"module": __name__, "class": SlowWorkerStartInstance.__name__}
    (dagster_home / "dagster.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def checkout_on_pythonpath(env: dict[str, str]) -> dict[str, str]:
    """`env` with this checkout first on PYTHONPATH, so `tests.support` imports in any process."""
    checkout = str(Path(__file__).resolve().parents[2])
    rest = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": checkout if not rest else f"{checkout}:{rest}"}
