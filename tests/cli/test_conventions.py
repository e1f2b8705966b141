"""CLI conventions that need no database: exit codes, option types, unwrapped output, progress."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from airwave_dagster.cli import console, lineup_files, main
from airwave_dagster.cli.console import DRY_RUN_DONE, ExitCode, Snapshot
from airwave_dagster.cli.runs import runs_table, started_cell, status_cell
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
    announce(tmp_path, 9, "postgresql://u@127.0.0.1:9/db", None)  # nothing serves on port 9
    assert find(tmp_path) is None
    (tmp_path / "airwave-webserver.json").write_text('{"port": 3000, "pid": 999999999}')
    assert find(tmp_path) is None
    assert find(tmp_path / "nowhere") is None


def test_graphql_errors_are_worded_without_the_exception_class() -> None:
    message = "airwave_dagster.durability.versions.CodeVersionChanged: op changed\n\nStack: …"
    assert _first_paragraph(message) == "op changed"
    assert _first_paragraph("plain words") == "plain words"


def test_help_lists_every_command_with_its_whole_first_sentence() -> None:
    # Click derives a summary cut to the width left over ("and continue its..."); issue 27.11.
    for args in ([], ["runs"], ["db"], ["approvals"]):
        output = CliRunner().invoke(main, [*args, "--help"], terminal_width=80).output
        listed = output.split("Commands:")[1]
        assert "..." not in listed, output
    listing = " ".join(CliRunner().invoke(main, ["--help"], terminal_width=80).output.split())
    assert "Approve the lineup a run stopped at, and continue its run tree" in listing
    assert "Run the Dagster UI, daemon and code server as `dg dev` does" in listing


def test_runs_table_keeps_start_times_on_one_line_and_shows_dry_runs() -> None:
    rows = [
        {
            "run_id": f"{n}" * 8 + "-1111-2222-3333-444455556666",
            "job": "import_lineup",
            "status": "SUSPENDED" if n == 3 else "SUCCESS",
            "airwave_status": "awaiting-approval" if n == 3 else None,
            "start_time": 1_796_000_000.0 + n,
            "started_by": "alice",
            "dry_run": dry_run,
            "lineup": "a-rather-long-lineup-file-name.json",
            "parent": "",
        }
        for n, dry_run in ((1, "true"), (2, "false"), (3, None))
    ]
    narrow = Console(width=110, file=io.StringIO(), color_system=None)
    narrow.print(runs_table(rows))
    text = narrow.file.getvalue()  # type: ignore[attr-defined]
    assert text.count("2026-11-30 00:53") == 3, text
    assert "dry run" in text
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if "-4444" in line}
    assert [lines[r["run_id"]].split("│")[6].strip() for r in rows] == ["yes", "no", ""]
    assert [lines[r["run_id"]].split("│")[5].strip() for r in rows] == ["alice"] * 3
    # A run stopped at an approval gate waits; Dagster's FAILURE is not what the list says.
    statuses = [lines[r["run_id"]].split("│")[3].strip() for r in rows]
    assert statuses == ["SUCCESS", "SUCCESS", "AWAITING"], text  # "APPROVAL" on the next line
    assert status_cell("SUSPENDED", "awaiting-approval") == "AWAITING APPROVAL"
    assert status_cell("FAILURE", "awaiting-approval") == "AWAITING APPROVAL"  # before SUSPENDED
    assert status_cell("FAILURE", None) == "FAILURE"
    assert started_cell(None) == ""


def test_a_dry_run_progress_never_says_built() -> None:
    class Traces:
        def traces(self, run_id: str) -> list[dict[str, object]]:
            plan = {"phase": "plan", "output": {"counts": {"toCreate": 2}}, "dry_run": True}
            channel = {
                "phase": "channel",
                "step_name": "buildChannel",
                "status": "created",
                "channel_number": 101,
            }
            return [plan, channel]

    class Stores:
        channels = Traces()

    snapshot = lineup_files._progress(Stores(), ["r"])  # type: ignore[arg-type]
    assert snapshot.done == DRY_RUN_DONE
    line = snapshot.line(3)
    assert "built" not in line
    assert "channels checked (would create) 1/2" in line


def test_the_ai_report_is_rendered_on_a_terminal_and_plain_when_piped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    markdown = (
        "## AI lineup report (offline)\n\n- Channels: 2 built\n\n| # | channel |\n|---:|---|\n"
    )
    terminal = Console(width=80, file=io.StringIO(), force_terminal=True, color_system=None)
    monkeypatch.setattr(console, "stdout", terminal)
    console.print_markdown(markdown)
    shown = terminal.file.getvalue()  # type: ignore[attr-defined]
    assert "AI lineup report (offline)" in shown
    assert "##" not in shown and "|---" not in shown and "- Channels" not in shown
    monkeypatch.setattr(console, "stdout", Console(file=None, force_terminal=False))
    console.print_markdown(markdown)
    assert capsys.readouterr().out == markdown
