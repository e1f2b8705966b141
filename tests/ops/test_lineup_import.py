"""Ops of `import_lineup` invoked directly: the report step's completeness guard and rendering."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from airwave_dagster.domain.import_plan import InstanceState, plan_import
from airwave_dagster.domain.lineup_file import parse_lineup
from ops.lineup_import.checkpoints import (
    OUTCOME_COLUMNS,
    ChannelResult,
    ImportLineupConfig,
    ImportReport,
    InlineLineupConfig,
    LineupFileConfig,
    PackagesResult,
    PlannedImport,
    failure_message,
    outcome_rows,
    outcome_table,
)
from ops.lineup_import.ops import _read_lineup, summarize_import
from resources.database import DatabaseResource
from resources.lineup_files import LineupFilesResource
from tests.support import lineups

pytestmark = pytest.mark.postgres


def _planned(count: int) -> PlannedImport:
    data = lineups.genre_lineup(count)
    plan = plan_import(parse_lineup(json.dumps(data).encode(), source="x.json"), InstanceState())
    return PlannedImport(
        plan=plan, lineup_name="x.json", lineup_sha256="0" * 64, source_id="s", dry_run=False
    )


def _result(number: int, name: str = "c") -> ChannelResult:
    return ChannelResult(
        number=number, original_number=number, name=name, package_key=None, status="created"
    )


def _context(url: str, instance: dg.DagsterInstance) -> dg.OpExecutionContext:
    # The Postgres instance: without one Dagster makes an ephemeral in-memory SQLite instance.
    return dg.build_op_context(resources={"database": DatabaseResource(url=url)}, instance=instance)


def test_report_fails_naming_channels_without_a_build_result(
    clean_db: str, dagster_instance: dg.DagsterInstance
) -> None:
    planned = _planned(3)
    packages = PackagesResult(created=["genres"], reused=[], would_create=[])

    with pytest.raises(dg.Failure) as missing:
        summarize_import(_context(clean_db, dagster_instance), planned, packages, [_result(100)])

    assert "2 planned channel(s) have no build result: 101, 102" in str(missing.value.description)


RENUMBERED = "101 is taken by a channel already on this server; 105 was the next free number"


def test_report_table_marks_renumbering_and_dry_runs() -> None:
    channels = [
        _result(105, "Rock | Roll").model_copy(
            update={
                "original_number": 101,
                "number_reassigned": True,
                "pool_size": 12,
                "renumber_reason": RENUMBERED,
            }
        ),
        _result(7).model_copy(update={"dry_run": True, "disabled": True}),
        _result(9).model_copy(update={"status": "failed", "reason": "number 9 was taken"}),
    ]
    report = ImportReport(
        lineup_name="x.json",
        dry_run=False,
        packages_created=0,
        packages_reused=0,
        channels_created=1,
        channels_skipped=0,
        channels_disabled=1,
        channels_failed=1,
        channels_reassigned=1,
        channels=channels,
    )

    rows = outcome_rows(report)

    assert [tuple(row.values()) for row in rows] == [
        ("7", "c", "", "would create (disabled)", None, None, ""),
        ("9", "c", "", "failed", None, None, "number 9 was taken"),
        ("105 (was 101)", "Rock | Roll", "", "created", 12, None, RENUMBERED),
    ]
    table = outcome_table(report)
    assert table.schema is not None
    assert tuple(column.name for column in table.schema.columns) == OUTCOME_COLUMNS
    assert [record.data["status"] for record in table.records] == [
        "would create (disabled)",
        "failed",
        "created",
    ]


def test_dry_run_counts_say_what_would_be_created() -> None:
    report = ImportReport(
        lineup_name="x.json",
        dry_run=True,
        packages_created=4,
        packages_reused=0,
        channels_created=13,
        channels_skipped=0,
        channels_disabled=1,
        channels_failed=0,
        channels_reassigned=1,
        channels=[],
    )

    counts = report.counts()

    assert counts["packages_to_create"] == 4
    assert counts["channels_to_create"] == 13
    assert "channels_created" not in counts and "packages_created" not in counts


def _file(path: str) -> ImportLineupConfig:
    return ImportLineupConfig(lineup=LineupFileConfig(path=path))


def test_unreadable_lineup_path_is_a_clear_failure(tmp_path) -> None:
    files = LineupFilesResource(directory=str(tmp_path / "elsewhere"))
    with pytest.raises(dg.Failure, match=r"missing\.json: cannot read the lineup file") as failed:
        _read_lineup(_file(str(tmp_path / "missing.json")), files)
    assert f"tried {tmp_path / 'missing.json'} " in str(failed.value.description)


def test_a_relative_path_is_read_from_the_home_and_a_missing_one_names_both_paths(
    tmp_path,
) -> None:
    home = tmp_path / "home"
    (home / "lineups").mkdir(parents=True)
    (home / "lineups" / "friday.json").write_text('{"version": 1}')
    files = LineupFilesResource(directory=str(home))

    data, name = _read_lineup(_file("lineups/friday.json"), files)

    assert data == b'{"version": 1}'
    assert name == "lineups/friday.json", "messages keep the path as it was given"
    with pytest.raises(dg.Failure) as missing:
        _read_lineup(_file("lineups/monday.json"), files)
    description = str(missing.value.description)
    assert description.startswith("lineups/monday.json: cannot read the lineup file (")
    assert f"tried {home / 'lineups' / 'monday.json'} " in description
    assert f"resolved against the airwave home, {home})" in description


def test_inline_content_is_read_as_given() -> None:
    inline = ImportLineupConfig(lineup=InlineLineupConfig(content="{}", name="up.json"))
    unnamed = ImportLineupConfig(lineup=InlineLineupConfig(content="{}"))
    files = LineupFilesResource(directory="/nonexistent")

    assert _read_lineup(inline, files) == (b"{}", "up.json")
    assert _read_lineup(unnamed, files) == (b"{}", "<inline lineup>")


def test_a_failed_build_names_the_channel_the_cause_and_the_resume_command() -> None:
    channel = _planned(2).plan.creates()[1]
    message = failure_message(channel, "OperationalError: server closed the connection", "r-1")
    assert message.startswith(f'channel {channel.assigned_number} "{channel.name}"')
    assert "failed: OperationalError: server closed the connection." in message
    assert "`airwave runs resume r-1`" in message
