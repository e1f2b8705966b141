"""Re-execution with edited config: the one rule that decides which changes a resume may carry.

The edit is a partial run config merged over the parent run's (`merge`). Every config path whose
value differs is a change (`changed_paths`), and a change is allowed when no step whose stored
output the resume replays has read that path:

- `ops.<op>…` is read by that op (and, for a graph, by every op inside it);
- `resources.<key>…` is read by every op (resources and IO managers serve every step);
- `execution…` and `loggers…` are read only by the run being launched (its executor and its
  log sinks), never by a step of an earlier run.

So a change to an op that has not completed anywhere in the run tree (it failed, was cut off, or
never ran) is allowed, as is the executor's concurrency; a change to an op whose output the resume
would replay is refused, naming the path and the op, because the replayed output was made with
the old value and the run would claim a config it did not run with (docs/durability.md,
"Re-execution with edited config"). The version guard is untouched: it still refuses changed code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._config.snap import ConfigSchemaSnapshot
from dagster._config.validate import validate_config_from_snap

RUN_LEVEL_SECTIONS = frozenset({"execution", "loggers"})
"""Top-level run config sections read only by the run being launched, never by a replayed step."""

EVERY_OP = "*"


class InvalidRunConfig(dg.DagsterError):
    """The merged run config does not validate against the job's config schema."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = list(messages)
        super().__init__("the run config is invalid: " + "; ".join(self.messages))


class ConfigChangeRefused(dg.DagsterInvariantViolationError):
    """A config change that completed steps already used: resuming with it would be a lie."""


def merge(base: Mapping[str, Any], partial: Mapping[str, Any]) -> dict[str, Any]:
    """`partial` over `base`: mappings merge key by key, any other value replaces the old one."""
    merged = dict(base)
    for key, value in partial.items():
        old = merged.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            merged[key] = merge(old, value)
        else:
            merged[key] = value
    return merged


def changed_paths(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Dotted paths of the leaves whose value differs (added, removed or replaced), sorted.

    A list is one value: a changed element changes the list's path.
    """
    return [".".join(path) for path in _changes(before, after, ())]


_ABSENT = object()


def _changes(before: Any, after: Any, prefix: tuple[str, ...]) -> Iterable[tuple[str, ...]]:
    # An absent section against a mapping is an empty one, so an added section lists its leaves.
    if before is _ABSENT and isinstance(after, Mapping):
        before = {}
    if after is _ABSENT and isinstance(before, Mapping):
        after = {}
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in sorted(set(before) | set(after), key=str):
            yield from _changes(
                before.get(key, _ABSENT), after.get(key, _ABSENT), (*prefix, str(key))
            )
    elif before is not after and before != after:
        yield prefix


def readers(path: str) -> str | None:
    """The op handle (or handle prefix) whose steps read `path`; `EVERY_OP`; None: the new run.

    `ops.import.ops.plan.config.x` is read by the op `import.plan`; `ops.import.config` by every
    op inside the graph `import`.
    """
    parts = path.split(".")
    if parts[0] in RUN_LEVEL_SECTIONS:
        return None
    if parts[0] != "ops" or len(parts) < 2:
        return EVERY_OP
    handle = [parts[1]]
    rest = parts[2:]
    while len(rest) >= 2 and rest[0] == "ops":
        handle.append(rest[1])
        rest = rest[2:]
    return ".".join(handle)


def op_handle(step_key: str) -> str:
    """The op handle of a step key (`build_channel[ch_101]` → `build_channel`)."""
    return step_key.split("[", 1)[0]


def refusals(changes: Sequence[str], settled_steps: Iterable[str]) -> dict[str, list[str]]:
    """Each change some replayed step read → the ops of those steps (empty: all allowed).

    Args:
        changes: Changed config paths (`changed_paths`).
        settled_steps: Step keys whose stored outputs the new run replays instead of running.
    """
    settled = sorted({op_handle(key) for key in settled_steps})
    refused: dict[str, list[str]] = {}
    for path in changes:
        reader = readers(path)
        if reader is None:
            continue
        used = [
            op
            for op in settled
            if reader == EVERY_OP or op == reader or op.startswith(reader + ".")
        ]
        if used:
            refused[path] = used
    return refused


def refusal_message(run_id: str, refused: Mapping[str, Sequence[str]]) -> str:
    """What a refused change tells the user: each path, the ops that used it, what to do."""
    lines = [
        f"{path}: already used by {', '.join(ops)}, which completed in run {run_id}'s tree"
        for path, ops in refused.items()
    ]
    return (
        f"Refusing to resume run {run_id} with this config: "
        + "; ".join(lines)
        + ". The resume would replay their stored outputs, made with the old value. Start a new "
        "run with the new config instead, or resume with a config that leaves these paths as "
        "they are."
    )


def validate(
    schema: ConfigSchemaSnapshot, root_config_key: str | None, run_config: Mapping[str, Any]
) -> None:
    """Raise `InvalidRunConfig` with Dagster's own words when `run_config` does not validate."""
    if root_config_key is None:
        return
    result = validate_config_from_snap(schema, root_config_key, dict(run_config))
    if not result.success:
        raise InvalidRunConfig([error.message for error in result.errors or ()])


def check_change(
    run_id: str,
    parent_config: Mapping[str, Any],
    new_config: Mapping[str, Any],
    settled_steps: Iterable[str],
) -> list[str]:
    """The changed paths of an allowed change; `ConfigChangeRefused` for any other."""
    changes = changed_paths(parent_config, new_config)
    refused = refusals(changes, settled_steps)
    if refused:
        raise ConfigChangeRefused(refusal_message(run_id, refused))
    return changes


def changed_tag(changes: Sequence[str]) -> str:
    """The value of `CONFIG_CHANGED_TAG`: the changed paths, comma-separated, cut to fit a tag."""
    value = ",".join(changes)
    return value if len(value) <= 4000 else value[:3997] + "..."
