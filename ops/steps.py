"""What every op module shares: the versioned op, mapping keys, step identity, the executor."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg

from airwave_dagster.run_tags import CODE_VERSION_TAG
from resources.stores.claims import Claimant


def versioned_op(version: str, **kwargs: Any) -> Callable[[Callable[..., Any]], dg.OpDefinition]:
    """`dg.op` with a code version, mirrored into the op's tags so each run records it.

    Dagster keeps op tags in the run's job snapshot but not code versions, and the version guard
    (`airwave_dagster.durability.versions`) compares these tags between a run and its resume.

    Args:
        version: The code version of the op; bump it when its behaviour or output type changes.
        **kwargs: Passed to `dg.op` (name, out, retry_policy, …); extra tags are merged.
    """
    tags = {**kwargs.pop("tags", {}), CODE_VERSION_TAG: version}
    decorator = dg.op(code_version=version, tags=tags, **kwargs)

    def wrap(fn: Callable[..., Any]) -> dg.OpDefinition:
        return decorator(fn)

    return wrap


def mapping_key(number: int) -> str:
    """The dynamic-output mapping key of a channel number (Dagster allows `[A-Za-z0-9_]` only)."""
    return f"ch_{number}"


def step_key(context: dg.OpExecutionContext) -> str:
    """The step key as Dagster writes it: `build_channel[ch_101]` for a mapped step."""
    key = context.get_mapping_key()
    name = context.op_handle.name
    return f"{name}[{key}]" if key else name


def trace_identity(context: dg.OpExecutionContext) -> dict[str, Any]:
    """The columns that key a trace row: this run, this step, this attempt (1-based)."""
    return {
        "run_id": context.run_id,
        "step_key": step_key(context),
        "attempt": context.retry_number + 1,
    }


def claimant(context: dg.OpExecutionContext) -> Claimant:
    """This attempt of this step of this run, as the holder of a channel claim."""
    return Claimant(
        run_id=context.run_id, step_key=step_key(context), attempt=context.retry_number + 1
    )


def fan_out_executor(
    max_concurrent: int, start_method: str = "forkserver"
) -> dg.ExecutorDefinition:
    """The multiprocess executor bounding a job's mapped steps to `max_concurrent` at once.

    A sliding window, not waves: a new step starts as soon as one ends. forkserver preloads the
    code location once, so a step costs about a third of a spawned one (docs/dagster-notes.md).

    Args:
        max_concurrent: Steps running at once.
        start_method: "forkserver" (default) or "spawn" (benchmarks compare the two).
    """
    method: Mapping[str, object] = (
        {"forkserver": {"preload_modules": ["airwave_dagster.definitions"]}}
        if start_method == "forkserver"
        else {"spawn": {}}
    )
    return dg.multiprocess_executor.configured(
        {"max_concurrent": max_concurrent, "start_method": dict(method)}
    )
