"""The `airwave` script's exit: no interpreter teardown, but nothing a normal exit does is lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path

atexit.register(lambda: print("exit handler ran", file=sys.stderr))
if len(sys.argv) > 2 and sys.argv[1] == "--thread":
    marker = Path(sys.argv[2])
    del sys.argv[1:3]
    # A non-daemon thread still working when the command returns: the exit must wait for it.
    threading.Thread(target=lambda: (time.sleep(1.0), marker.write_text("done"))).start()
sys.argv[0] = "airwave"
from airwave_dagster.cli import entry
entry()
"""


def _airwave(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=120
    )


def test_the_whole_output_is_delivered_and_exit_handlers_run() -> None:
    done = _airwave("schema")  # a large document on a pipe: buffered until the exit flushes it
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["title"]
    assert "exit handler ran" in done.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [(("--no-such-option",), 2), (("runs", "show"), 2), (("--version",), 0)],
)
def test_exit_codes_are_the_commands(args: tuple[str, ...], code: int) -> None:
    done = _airwave(*args)
    assert done.returncode == code, done.stderr
    assert "exit handler ran" in done.stderr


def test_a_running_non_daemon_thread_is_waited_for(tmp_path: Path) -> None:
    marker = tmp_path / "thread.txt"
    done = _airwave("--thread", str(marker), "--version")
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "done"
