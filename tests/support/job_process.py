"""`ai_lineup` in a process of its own, as a run worker: `python -m tests.support.job_process`.

Concurrent runs need concurrent run workers; threads of the test process would share one
environment (each run here gets its own database) and one set of signal handlers. The process
executes the bound job with `dg.execute_job` on the test's Dagster instance (passed as a
serialised `InstanceRef`), so its steps go through the production executor, and it can be killed
whole like a crashed worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg

RUN_LABEL_TAG = "airwave-test/run"
"""Tag naming each run started here, so a test finds a run before it has finished."""


def start(
    instance: dg.DagsterInstance,
    run_config: Mapping[str, Any],
    *,
    label: str,
    tmp: Path,
    env: Mapping[str, str],
) -> subprocess.Popen[bytes]:
    """Start a run worker process (leader of its own session) for one `ai_lineup` run.

    Args:
        instance: The instance the run is stored in (its ref is handed over).
        run_config: The run's config.
        label: Value of `RUN_LABEL_TAG` on the run.
        tmp: Where the request and the process's output are written.
        env: The process's environment (the database the run writes to, the settings).
    """
    from dagster_shared.serdes import serialize_value

    request = tmp / f"{label}.json"
    request.write_text(
        json.dumps({"instance_ref": serialize_value(instance.get_ref()), "run_config": run_config})
    )
    with (tmp / f"{label}.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.job_process", str(request), label],
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def output(tmp: Path, label: str) -> str:
    """What the run worker process `label` printed (for assertion messages)."""
    return (tmp / f"{label}.log").read_text(errors="replace")[-4000:]


def labelled_run(instance: dg.DagsterInstance, label: str) -> dg.DagsterRun | None:
    """The run started under `label`, once it exists."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={RUN_LABEL_TAG: label}), limit=1)
    return runs[0] if runs else None


def main() -> None:
    """Execute the run described by the request file; exit 0 only if it succeeded."""
    from dagster._core.instance.ref import InstanceRef
    from dagster_shared.serdes import deserialize_value

    from airwave_dagster.definitions import ai_lineup_job

    request = json.loads(Path(sys.argv[1]).read_text())
    ref = deserialize_value(request["instance_ref"], InstanceRef)
    with (
        dg.DagsterInstance.from_ref(ref) as instance,
        dg.execute_job(
            dg.reconstructable(ai_lineup_job),
            instance=instance,
            run_config=request["run_config"],
            tags={RUN_LABEL_TAG: sys.argv[2]},
        ) as result,
    ):
        sys.stdout.write(f"run {result.run_id} success={result.success} pid={os.getpid()}\n")
    sys.exit(0 if result.success else 1)


if __name__ == "__main__":
    main()
