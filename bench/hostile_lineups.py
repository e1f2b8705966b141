"""Worst-case cost of validating and planning hostile lineup files (issue 13).

Each case is generated in memory, written to a temporary file and measured in a fresh Python
process (so one case's peak memory never inflates the next): wall and CPU time of `parse_lineup`
plus `plan_import` against an empty instance, the process's peak resident memory,
the outcome (accepted, refused, or another exception escaping) and the size of the refusal message.
Memory is the process's peak resident set (VmHWM) and, for reference, that peak just before
the measured step (the interpreter, pydantic, the domain modules and the file's bytes).

Run from the repository root::

    .venv/bin/python -m bench.hostile_lineups            # every case
    .venv/bin/python -m bench.hostile_lineups many-zeros # one case

To measure another checkout (for example the code before the fix), put it first on the path:
`PYTHONPATH=/path/to/checkout .venv/bin/python -m bench.hostile_lineups`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

LIMIT = 10 * 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent


def _channel(number: int, name: str, **extra: Any) -> dict[str, Any]:
    return {"number": number, "name": name, **extra}


def _file(channels: list[Any], packages: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"version": 1, "packages": packages or [], "channels": channels, **extra}


def one_number() -> bytes:
    """20,000 distinct channels all numbered 1: the planner renumbers 19,999 of them."""
    channels = [_channel(1, f"Channel {i}") for i in range(20_000)]
    return json.dumps(_file(channels)).encode()


def unknown_package_keys() -> bytes:
    """2,000 packages and 2,000 channels each naming a package key the file lacks."""
    packages = [{"key": f"package-{i}", "name": f"P {i}"} for i in range(2_000)]
    channels = [_channel(i + 1, f"C {i}", packageKey=f"pakcage-{i}") for i in range(2_000)]
    return json.dumps(_file(channels, packages)).encode()


def long_key() -> bytes:
    """One 600 KB unknown package key over 30,000 packages."""
    packages = [{"key": f"package-{i}", "name": f"P {i}"} for i in range(30_000)]
    channels = [_channel(1, "C", packageKey="k" * 600_000)]
    return json.dumps(_file(channels, packages)).encode()


def wide_unknown_key() -> bytes:
    """An unknown 30,000-character key holding a 50,000-element array."""
    return json.dumps(_file([], **{"x" * 30_000: [0] * 50_000})).encode()


def many_zeros() -> bytes:
    """`"channels": [0, 0, ...]` filling the size limit."""
    head = b'{"version": 1, "packages": [], "channels": ['
    count = (LIMIT - len(head) - 2) // 2
    return head + b",".join([b"0"] * count) + b"]}"


def huge_integer() -> bytes:
    """An integer literal of 5,000 digits."""
    return b'{"version": 1, "packages": [], "channels": [], "n": ' + b"9" * 5_000 + b"}"


def many_valid_channels() -> bytes:
    """As many minimal, distinct, valid channels as fit under the size limit."""
    parts: list[bytes] = []
    size = 60
    index = 0
    while size < LIMIT - 100:
        part = json.dumps(_channel(index + 1, f"C{index}")).encode()
        parts.append(part)
        size += len(part) + 1
        index += 1
    return b'{"version": 1, "packages": [], "channels": [' + b",".join(parts) + b"]}"


def full_valid_file() -> bytes:
    """The costliest file accepted: 20,000 channels (the limit), 20,000 filter nodes (the limit)
    and long descriptions filling the size limit."""
    channels = []
    for index in range(20_000):
        definition: dict[str, Any] = {"kind": "PREDICATE"}
        if index < 4_000:
            conditions = [
                {"type": "condition", "id": f"{j}", "field": "genre", "op": "is", "value": f"G{j}"}
                for j in range(4)
            ]
            definition["plexFilter"] = {
                "mediaTypes": ["movie"],
                "filter": {"type": "group", "combinator": "or", "children": conditions},
            }
        channels.append(
            _channel(1 + index % 500, f"Channel {index}", definitions=[definition], description="")
        )
    data = json.dumps(_file(channels)).encode()
    pad = (LIMIT - len(data) - 1_000) // len(channels)
    for channel in channels:
        channel["description"] = "d" * pad
    data = json.dumps(_file(channels)).encode()
    assert len(data) < LIMIT, len(data)
    return data


def many_definitions() -> bytes:
    """Half a million bare PREDICATE definitions on one channel."""
    definitions = ",".join(['{"kind": "PREDICATE"}'] * 450_000)
    text = (
        '{"version": 1, "packages": [], "channels": [{"number": 1, "name": "C", "definitions": ['
        + definitions
        + "]}]}"
    )
    return text.encode()


def deep_filter_children() -> bytes:
    """One filter group with 400,000 invalid children (numbers instead of nodes)."""
    children = ",".join(["1"] * 400_000)
    text = (
        '{"version": 1, "packages": [], "channels": [{"number": 1, "name": "C", "definitions": '
        '[{"kind": "PREDICATE", "plexFilter": {"filter": {"type": "group", "children": ['
        + children
        + "]}}}]}]}"
    )
    return text.encode()


CASES: dict[str, Callable[[], bytes]] = {
    "one-number": one_number,
    "unknown-package-keys": unknown_package_keys,
    "long-key": long_key,
    "wide-unknown-key": wide_unknown_key,
    "many-zeros": many_zeros,
    "huge-integer": huge_integer,
    "many-valid-channels": many_valid_channels,
    "many-filter-children": deep_filter_children,
    "full-valid-file": full_valid_file,
    "many-definitions": many_definitions,
}

_MEASURE = r"""
import json, sys, time
from pathlib import Path
from airwave_dagster.domain.import_plan import InstanceState, plan_import
from airwave_dagster.domain.lineup_file import parse_lineup
from airwave_dagster.domain.errors import AirwaveError

data = Path(sys.argv[1]).read_bytes()
def high_water():
    # VmHWM belongs to this process image; ru_maxrss would carry the parent's peak over exec.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")

base = high_water()
start = time.perf_counter()
cpu = time.process_time()
outcome, message = "accepted", ""
try:
    plan_import(parse_lineup(data, source="hostile.json"), InstanceState())
except AirwaveError as error:
    outcome, message = "refused", str(error)
except Exception as error:
    outcome, message = "ESCAPED " + type(error).__name__, str(error)
seconds = time.perf_counter() - start
cpu = time.process_time() - cpu
peak = high_water()
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_mb": peak / 1024, "base_mb": base / 1024,
                  "outcome": outcome,
                  "message_bytes": len(message.encode("utf-8", "surrogatepass"))}))
"""


def measure(name: str) -> dict[str, Any]:
    """Measure one case in a fresh interpreter."""
    data = CASES[name]()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{name}.json"
        path.write_bytes(data)
        done = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(path)],
            capture_output=True,
            text=True,
            check=False,
            # Run outside the repository so `-c` does not put this checkout first on the path:
            # the code measured is the one PYTHONPATH names (this checkout by default).
            cwd=folder,
            env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT)},
        )
    if done.returncode != 0:
        return {"case": name, "outcome": f"crashed: {done.stderr.strip()[-200:]}"}
    return {"case": name, "file_bytes": len(data), **json.loads(done.stdout)}


def main(names: list[str]) -> None:
    """Print one line per case: wall and CPU time, peak memory, outcome and message size."""
    header = (
        f"{'case':<22} {'file':>10} {'wall s':>7} {'cpu s':>6} {'peak MB':>8} {'base MB':>8} "
        f"{'message':>11}"
    )
    print(f"{header}  outcome")
    for name in names or list(CASES):
        row = measure(name)
        if "seconds" not in row:
            print(f"{name:<22} {row['outcome']}")
            continue
        print(
            f"{name:<22} {row['file_bytes']:>10,} {row['seconds']:>7.2f} {row.get('cpu', 0):>6.2f} "
            f"{row['peak_mb']:>8.0f} "
            f"{row['base_mb']:>8.0f} {row['message_bytes']:>11,}  {row['outcome']}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
