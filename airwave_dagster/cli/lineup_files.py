"""`airwave import`, `export` and `schema`: lineup files in and out of the project database."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from airwave_dagster.cli import console, environment, starts
from airwave_dagster.cli.lineup_check import refuse_invalid_lineup
from airwave_dagster.run_tags import (
    DRY_RUN_TAG,
    IMPORT_LINEUP_JOB,
    LINEUP_TAG,
    PLAN_IMPORT_OP,
    import_key,
)

if TYPE_CHECKING:
    from resources.stores import Stores


def _report_for(run_id: str) -> dict[str, Any] | None:
    """The run's report: the stored output of its job's report op, from any run of its tree."""
    from resources.io_manager import stored_report

    return stored_report(console.instance(), run_id, environment.exported_database_url())


def _progress(stores: Stores, run_ids: list[str]) -> console.Snapshot:
    """Channels built and failed so far over a run tree (a resume replays its parent's plan).

    A dry-run builds nothing: its channels count as checked (would create), as its plan row says.
    """
    dry_run = False
    total: int | None = None
    built: set[int] = set()
    failed: set[int] = set()
    for run_id in run_ids:
        for row in stores.channels.traces(run_id):
            if row["phase"] == "plan" and row["output"]:
                total = row["output"]["counts"]["toCreate"]
                dry_run = bool(row["dry_run"])
            elif row["phase"] == "channel" and row["step_name"] == "buildChannel":
                # Every failed attempt is traced; a channel counts as failed only until a later
                # attempt builds it.
                (failed if row["status"] == "failed" else built).add(row["channel_number"])
    return console.Snapshot(
        built=len(built),
        failed=len(failed - built),
        total=total,
        done=console.DRY_RUN_DONE if dry_run else "built",
    )


def import_progress(instance: Any, run_id: str) -> console.Progress:
    """The progress reader of an `import_lineup` run and of the runs that resume it."""
    from airwave_dagster.cli import launcher

    stores = environment.open_project_stores()
    return lambda: _progress(
        stores, [r.run_id for r in launcher.run_tree(instance, run_id)] or [run_id]
    )


def _import_run_config(
    content: str, name: str, *, dry_run: bool, select: list[int] | None
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "lineup": {"inline": {"content": content, "name": name}},
        "dry_run": dry_run,
    }
    if select is not None:
        config["selected_numbers"] = select
    return {
        "ops": {PLAN_IMPORT_OP: {"config": config}},
        # The run worker shares this terminal; the CLI shows progress itself, and the full event
        # log stays in the UI.
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }


def _read_lineup_text(path: Path) -> tuple[bytes, str]:
    """The file's bytes and text, or the end of the command with the parser's words."""
    from airwave_dagster.domain.errors import AirwaveError
    from airwave_dagster.domain.lineup_file import check_lineup_size, parse_lineup

    try:
        check_lineup_size(path.stat().st_size, source=path.name)
    except AirwaveError as error:
        console.fail(str(error), console.ExitCode.INPUT_REFUSED)
    raw = path.read_bytes()
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError:
        # The content travels inline in the run config, which must be text; the parser words
        # the problem the same way the plan step would (byte offset and line).
        try:
            parse_lineup(raw, source=path.name)
        except AirwaveError as error:
            console.fail(str(error), console.ExitCode.INPUT_REFUSED)
        raise


def run_import(
    target: starts.Target,
    path: Path,
    *,
    dry_run: bool,
    select: list[int] | None,
    wait: bool,
    as_json: bool,
    force: bool = False,
    idempotency_key: str | None = None,
) -> int:
    """Start an `import_lineup` run of the file at `path`; with `wait`, print its report.

    A start while a run exists for the same idempotency key (by default the file's content and
    options, see `run_tags.import_key`) returns that run, unless `force`; a failed one is resumed.
    Callers hold `target` open until this returns (a code server of the command's own must
    outlive the run).

    Returns:
        The process exit code (0 on success).
    """
    raw, content = _read_lineup_text(path)
    run_config = _import_run_config(content, path.name, dry_run=dry_run, select=select)
    tags = {LINEUP_TAG: path.name, DRY_RUN_TAG: str(dry_run).lower()}
    key = idempotency_key or import_key(raw, dry_run=dry_run, select=select)
    try:
        started = starts.start(
            target,
            environment.open_run_starts(),
            job_name=IMPORT_LINEUP_JOB,
            run_config=run_config,
            tags=tags,
            key=key,
            force=force,
            # A dry-run answers for the database as it is now, never with an earlier answer.
            answers_now=dry_run,
        )
    except starts.LaunchRefused as error:
        console.fail(str(error), console.ExitCode.CONFLICT)
    run = started.run
    console.show_run_page(run.run_id, target)
    if not started.created:
        console.stderr.print(
            f"run {run.run_id} already imports this content ({run.status}); "
            "returning it (--force starts another)",
            highlight=False,
        )
    elif run.parent_run_id is not None:
        console.stderr.print(
            f"run {run.parent_run_id} imported this content and failed, died or was canceled; "
            f"resuming it as run {run.run_id}",
            highlight=False,
        )
    if not wait:
        console.stdout.print(
            f"{'started' if started.created else 'existing'} run {run.run_id}", highlight=False
        )
        return console.ExitCode.OK
    from airwave_dagster.cli import launcher

    instance = console.instance()
    console.stderr.print(f"run {run.run_id}: waiting for it to finish", highlight=False)
    console.wait_showing_progress(
        instance, run.run_id, import_progress(instance, run.run_id), target
    )
    finished = launcher.follow(instance, run.run_id)
    if finished.run_id != run.run_id:
        console.stderr.print(
            f"run {run.run_id} was resumed as run {finished.run_id}", highlight=False
        )
    report = _report_for(finished.run_id)
    if finished.status.value != "SUCCESS" or report is None:
        for message in launcher.failure_messages(instance, finished.run_id):
            console.stderr.print(message, highlight=False, markup=False)
        if as_json:
            print(json.dumps({"run_id": finished.run_id, "status": finished.status.value}))
        console.stderr.print(
            f"run {finished.run_id} ended {finished.status.value}", highlight=False
        )
        return console.ExitCode.RUN_FAILED
    if as_json:
        print(json.dumps({"run_id": finished.run_id, "status": "SUCCESS", "report": report}))
    else:
        console.print_import_report(report)
        console.stdout.print(f"run {finished.run_id}: SUCCESS", highlight=False)
    return 0


class NumberList(click.ParamType):
    """Comma-separated channel numbers (`101,102`), checked before anything starts."""

    name = "NUMBERS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, list):
            return value
        try:
            numbers = [int(part) for part in str(value).split(",") if part.strip()]
        except ValueError:
            self.fail(f"takes comma-separated channel numbers, got {value!r}", param, ctx)
        if not numbers or any(n < 0 for n in numbers):
            self.fail(f"takes comma-separated channel numbers, got {value!r}", param, ctx)
        return numbers


def _writable_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """`--output`: its folder must exist, so a typo fails before the database is read."""
    if value is not None and not value.parent.is_dir():
        raise click.BadParameter(f"{value.parent} is not an existing folder", ctx, param)
    if value is not None and value.is_dir():
        raise click.BadParameter(f"{value} is a folder; name a file", ctx, param)
    return value


@click.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Plan and resolve pools; write nothing.")
@click.option(
    "--select", "select", type=NumberList(), help="Only these file channel numbers, e.g. 101,102."
)
@click.option("--wait", is_flag=True, help="Show progress and print the report at the end.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (implies --wait).")
@click.option("--force", is_flag=True, help="Start a new run even if one exists for this content.")
@click.option(
    "--idempotency-key",
    help="Starts with the same key return the same run (default: the file's content hash).",
)
def import_command(
    path: Path,
    dry_run: bool,
    select: list[int] | None,
    wait: bool,
    as_json: bool,
    force: bool,
    idempotency_key: str | None,
) -> None:
    """Import a lineup file as a Dagster run of `import_lineup` (visible in the UI)."""
    refuse_invalid_lineup(path)  # before Postgres, the emulator or a run is started
    server = console.prepare_to_start()
    with console.target_for(server) as target:
        code = run_import(
            target,
            path,
            dry_run=dry_run,
            select=select,
            wait=wait or as_json,
            as_json=as_json,
            force=force,
            idempotency_key=idempotency_key,
        )
    sys.exit(code)


@click.command("export")
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    callback=_writable_file,
    help="Write here instead of stdout.",
)
def export_command(output: Path | None) -> None:
    """Export every package and channel as a lineup v1 file."""
    from airwave_dagster.domain.lineup_file import dump_lineup

    console.prepare()
    text = dump_lineup(environment.open_project_stores().channels.export_lineup())
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        try:
            output.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        except OSError as error:
            console.fail(f"{output}: cannot write ({error.strerror})", console.ExitCode.CONFLICT)
        console.stderr.print(f"wrote {output}", highlight=False)


@click.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of lineup files (v1)."""
    from airwave_dagster.domain.lineup_file import lineup_json_schema

    print(json.dumps(lineup_json_schema(), indent=2))
