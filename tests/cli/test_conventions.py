"""CLI conventions that need no database: exit codes, option types, unwrapped output, progress."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from airwave_dagster.cli import main
from airwave_dagster.cli.console import ExitCode, Snapshot
from airwave_dagster.cli.webserver import _first_paragraph, announce, find


def test_exit_codes_are_the_documented_ones() -> None:
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0,
        "RUN_FAILED": 1,
        "USAGE": 2,
        "INPUT_REFUSED": 3,
        "CONFLICT": 4,
        "NOT_FOUND": 5,
        "UNAVAILABLE": 6,
    }


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["export", "--output", "/missing/dir/x.json"], "/missing/dir is not an existing folder"),
        (["import", "/missing/lineup.json"], "does not exist"),
        (["import", "README.md", "--select", "101,abc"], "comma-separated channel numbers"),
        (["runs", "list", "--limit", "0"], "--limit"),
        (["lineup", "--budget-usd", "-1"], "--budget-usd"),
        (["dev", "--port", "70000"], "--port"),
    ],
)
def test_bad_values_are_usage_errors_before_any_bootstrap(args: list[str], words: str) -> None:
    # CliRunner runs the command in this process: a bootstrap would start Postgres, so a usage
    # error that is not raised first would show up as a slow test or a database error.
    result = CliRunner().invoke(main, args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert words in result.output
    assert "Traceback" not in result.output


def test_piped_output_is_never_hard_wrapped(tmp_path: Path) -> None:
    script = (
        "from airwave_dagster.cli import console\n"
        "console.stdout.print('migrated ' + '/very/long/checkout' * 20 + ' at revision 0006')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.stdout.count("\n") == 1
    assert done.stdout.rstrip().endswith("at revision 0006")


def test_progress_lines_name_built_failed_remaining_and_elapsed() -> None:
    line = Snapshot(built=3, failed=1, total=8, phase="building channels").line(75)
    assert line == (
        "phase building channels; channels built 3/8, failed 1; remaining 4; elapsed 1:15"
    )
    assert Snapshot(built=0).line(0) == "channels built 0/?, failed 0; elapsed 0:00"


def test_a_stale_announcement_finds_no_webserver(tmp_path: Path) -> None:
    announce(tmp_path, 9, "postgresql://127.0.0.1/db", None)  # this process; port 9 serves nothing
    assert find(tmp_path) is None
    (tmp_path / "airwave-webserver.json").write_text('{"port": 3000, "pid": 999999999}')
    assert find(tmp_path) is None
    assert find(tmp_path / "nowhere") is None


def test_graphql_errors_are_worded_without_the_exception_class() -> None:
    message = "airwave_dagster.durability.versions.CodeVersionChanged: op changed\n\nStack: …"
    assert _first_paragraph(message) == "op changed"
    assert _first_paragraph("plain words") == "plain words"
