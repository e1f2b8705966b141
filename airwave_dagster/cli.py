"""The `airwave` command line: import and export lineups, inspect runs, run the UI and the demo."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from airwave_dagster import environment

# Reports are tables; keep them readable when piped or captured (no terminal width to go by).
stdout = Console(width=None if sys.stdout.isatty() else 140)
stderr = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

DEMO_LINEUP = Path(__file__).resolve().parent / "data" / "demo_lineup.json"


def _instance() -> Any:
    import dagster as dg

    return dg.DagsterInstance.get()


def _fail(message: str, code: int = 1) -> None:
    stderr.print(f"[bold red]error:[/] {message}", highlight=False)
    sys.exit(code)


def _report_for(run_id: str) -> dict[str, Any] | None:
    """The run's report: the stored output of its job's report op, from any run of its tree."""
    from airwave_dagster.reports import stored_report

    return stored_report(_instance(), run_id)


def _progress(run_id: str) -> tuple[int, int | None]:
    from resources.database import AirwaveStore, engine_for

    store = AirwaveStore(engine_for(os.environ[environment.DATABASE_URL_ENV]))
    done = 0
    total: int | None = None
    for row in store.traces(run_id):
        if row["phase"] == "plan" and row["output"]:
            total = row["output"]["counts"]["to_create"]
        elif row["phase"] == "channel" and row["step_name"] == "buildChannel":
            done += 1
    return done, total


def _print_report(report: dict[str, Any]) -> None:
    title = "Dry-run report (nothing was written)" if report["dry_run"] else "Import report"
    table = Table(title=f"{title}: {report['lineup_name']}")
    for column in ("#", "channel", "package", "status", "pool", "slots", "note"):
        table.add_column(column, justify="right" if column in ("#", "pool", "slots") else "left")
    for c in sorted(report["channels"], key=lambda c: c["number"]):
        status = c["status"]
        if status == "created":
            status = ("would create" if c["dry_run"] else "created") + (
                " (disabled)" if c["disabled"] else ""
            )
        number = str(c["number"])
        if c["number_reassigned"]:
            number += f" (was {c['original_number']})"
        table.add_row(
            number,
            c["name"],
            c["package_key"] or "",
            status,
            "" if c["pool_size"] is None else str(c["pool_size"]),
            "" if c["schedule_slots"] is None else str(c["schedule_slots"]),
            c["reason"] or "",
        )
    stdout.print(table)
    stdout.print(
        f"packages created {report['packages_created']}, reused {report['packages_reused']}; "
        f"channels created {report['channels_created']}, skipped {report['channels_skipped']}, "
        f"disabled {report['channels_disabled']}, failed {report['channels_failed']}, "
        f"renumbered {report['channels_reassigned']}",
        highlight=False,
    )


def _run_import(
    path: Path,
    *,
    dry_run: bool,
    select: list[int] | None,
    wait: bool,
    as_json: bool,
    force: bool = False,
    idempotency_key: str | None = None,
) -> int:
    from airwave_dagster import launcher

    if not path.exists():
        _fail(f"{path}: no such file")
    from airwave_dagster.domain.errors import AirwaveError
    from airwave_dagster.domain.lineup_file import check_lineup_size

    try:
        check_lineup_size(path.stat().st_size, source=path.name)
    except AirwaveError as error:
        _fail(str(error))
    raw = path.read_bytes()
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        # The content travels inline in the run config, which must be text; the parser words
        # the problem the same way the plan step would (byte offset and line).
        from airwave_dagster.domain.lineup_file import parse_lineup

        try:
            parse_lineup(raw, source=path.name)
        except AirwaveError as error:
            _fail(str(error))
        raise
    config: dict[str, Any] = {
        "lineup_json": content,
        "lineup_name": path.name,
        "dry_run": dry_run,
    }
    if select is not None:
        config["selected_numbers"] = select
    run_config = {
        "ops": {"plan_import_lineup": {"config": config}},
        # The run worker shares this terminal; the CLI shows progress itself, and the full event
        # log stays in the UI.
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    tags = {"airwave/lineup": path.name, "airwave/dry_run": str(dry_run).lower()}
    key = idempotency_key or import_key(raw, dry_run=dry_run, select=select)
    instance = _instance()
    with launcher.workspace(instance) as context:
        try:
            run, created = launcher.start_idempotent(
                instance,
                context,
                key=key,
                job_name="import_lineup",
                run_config=run_config,
                tags=tags,
                force=force,
            )
        except launcher.LaunchRefused as error:
            _fail(str(error))
        if not created:
            stderr.print(
                f"run {run.run_id} already imports this content ({run.status.value}); "
                "returning it (--force starts another)",
                highlight=False,
            )
        if not wait:
            stdout.print(
                f"{'started' if created else 'existing'} run {run.run_id}", highlight=False
            )
            return 0
        stderr.print(f"run {run.run_id}: waiting for it to finish", highlight=False)
        last: tuple[int, int | None] = (-1, None)
        while True:
            current = instance.get_run_by_id(run.run_id)
            if current is not None and current.is_finished:
                break
            progress = _progress(run.run_id)
            if progress != last and progress[1] is not None:
                stderr.print(f"  channels built: {progress[0]}/{progress[1]}", highlight=False)
                last = progress
            time.sleep(0.5)
    finished = launcher.follow(instance, run.run_id)
    if finished.run_id != run.run_id:
        stderr.print(f"run {run.run_id} was resumed as run {finished.run_id}", highlight=False)
    report = _report_for(finished.run_id)
    if finished.status.value != "SUCCESS" or report is None:
        for message in launcher.failure_messages(instance, finished.run_id):
            stderr.print(message, highlight=False, markup=False)
        if as_json:
            print(json.dumps({"run_id": finished.run_id, "status": finished.status.value}))
        stderr.print(f"run {finished.run_id} ended {finished.status.value}", highlight=False)
        return 1
    if as_json:
        print(json.dumps({"run_id": finished.run_id, "status": "SUCCESS", "report": report}))
    else:
        _print_report(report)
        stdout.print(f"run {finished.run_id}: SUCCESS", highlight=False)
    return 0


@click.group()
def main() -> None:
    """Airwave: numbered, always-on TV channels from a Plex library, run on Dagster."""


def _prepare(*, plex: bool = False) -> environment.Environment:
    env = environment.prepare()
    if plex:
        environment.ensure_plex(env.home)
    return env


def import_key(content: bytes, *, dry_run: bool, select: list[int] | None) -> str:
    """The default idempotency key of an import: its content and what it was asked to do."""
    import hashlib

    digest = hashlib.sha256(content).hexdigest()
    selection = ",".join(map(str, sorted(select))) if select is not None else "all"
    return f"import_lineup:{digest}:{'dry-run' if dry_run else 'write'}:{selection}"


@main.command("import")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="Plan and resolve pools; write nothing.")
@click.option("--select", "select", help="Only these file channel numbers, e.g. 101,102.")
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
    select: str | None,
    wait: bool,
    as_json: bool,
    force: bool,
    idempotency_key: str | None,
) -> None:
    """Import a lineup file as a Dagster run of `import_lineup` (visible in the UI)."""
    numbers: list[int] | None = None
    if select is not None:
        try:
            numbers = [int(part) for part in select.split(",") if part.strip()]
        except ValueError:
            _fail(f"--select takes comma-separated channel numbers, got {select!r}")
    refuse_invalid_lineup(path)  # before Postgres, the emulator or a run is started
    _prepare(plex=True)
    sys.exit(
        _run_import(
            path,
            dry_run=dry_run,
            select=numbers,
            wait=wait or as_json,
            as_json=as_json,
            force=force,
            idempotency_key=idempotency_key,
        )
    )


@main.command("export")
@click.option("--output", type=click.Path(path_type=Path), help="Write here instead of stdout.")
def export_command(output: Path | None) -> None:
    """Export every package and channel as a lineup v1 file."""
    from airwave_dagster.domain.lineup_file import dump_lineup
    from resources.database import AirwaveStore, engine_for

    env = _prepare()
    text = dump_lineup(AirwaveStore(engine_for(env.database_url)).export_lineup())
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        output.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        stderr.print(f"wrote {output}", highlight=False)


@main.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of lineup files (v1)."""
    from airwave_dagster.domain.lineup_file import lineup_json_schema

    print(json.dumps(lineup_json_schema(), indent=2))


@main.group("db")
def db_group() -> None:
    """The project database."""


@db_group.command("upgrade")
def db_upgrade() -> None:
    """Create the schemas and apply every migration (idempotent)."""
    from resources.migrations import current_revisions

    env = _prepare()
    stdout.print(
        f"database {environment.redact(env.database_url)} at revision "
        f"{', '.join(sorted(current_revisions(env.database_url))) or 'none'}",
        highlight=False,
    )


@db_group.command("stop")
def db_stop() -> None:
    """Stop the private PostgreSQL server and the Plex emulator started by this project."""
    stopped = environment.stop_private_postgres()
    environment.stop_plex_emulator()
    stdout.print("stopped the private PostgreSQL" if stopped else "no private PostgreSQL running")


@main.command("plex-emulator")
@click.option("--port", default=32400, show_default=True)
@click.option("--items", default=environment.DEMO_LIBRARY_ITEMS, show_default=True)
@click.option("--seed", default=environment.DEMO_LIBRARY_SEED, show_default=True)
@click.option("--latency-ms", default=0.0, show_default=True, help="Added to every request.")
@click.option("--token", default=environment.EMULATOR_TOKEN, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
def plex_emulator_command(
    port: int, items: int, seed: int, latency_ms: float, token: str, host: str
) -> None:
    """Serve a synthetic Plex library for the real plexapi client (foreground)."""
    from airwave_dagster.plex_emulator import run_emulator

    run_emulator(port=port, items=items, seed=seed, latency_ms=latency_ms, token=token, host=host)


@main.command("dev")
@click.option("--port", default=3000, show_default=True)
def dev_command(port: int) -> None:
    """Run the Dagster UI, daemon and code server on 127.0.0.1 (private Postgres by default)."""
    env = _prepare(plex=True)
    stderr.print(
        f"Dagster UI on http://127.0.0.1:{port} (DAGSTER_HOME={env.dagster_home})",
        highlight=False,
    )
    # A shell that started us in the background may have left SIGINT/SIGTERM ignored; dagster dev
    # would inherit that and could then only be killed (notes/dagster-findings.md §0.3).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    dagster = str(Path(sys.executable).parent / "dagster")
    os.chdir(environment.project_root())
    os.execv(
        dagster,
        [dagster, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
    )


@main.command("demo")
def demo_command() -> None:
    """Import the bundled example lineup: a dry-run, then for real."""
    env = _prepare(plex=True)
    stdout.print(
        f"[bold]Airwave demo[/]: database {environment.redact(env.database_url)}, "
        f"Plex {os.environ[environment.PLEX_URL_ENV]}",
        highlight=False,
    )
    stdout.print("\n[bold]1. Dry-run import[/] (plans and resolves every pool, writes nothing)")
    if _run_import(DEMO_LINEUP, dry_run=True, select=None, wait=True, as_json=False, force=True):
        sys.exit(1)
    stdout.print("\n[bold]2. Import[/]")
    if _run_import(DEMO_LINEUP, dry_run=False, select=None, wait=True, as_json=False, force=True):
        sys.exit(1)
    stdout.print(
        f"\n[bold]3. Offline AI lineup[/] (planned and verified without a model; {DEMO_LIMIT} "
        "channels built, `airwave lineup --confirm-wipe --wait` builds them all)"
    )
    if run_lineup(provider="offline", confirm_wipe=True, wait=True, limit=DEMO_LIMIT):
        sys.exit(1)
    stdout.print(
        "\nOpen the Dagster UI with [bold]make dev[/] (http://127.0.0.1:3000) to see the runs; "
        "`airwave export` prints the imported lineup.",
        highlight=False,
    )


from airwave_dagster.cli_check import refuse_invalid_lineup  # noqa: E402
from airwave_dagster.cli_guide import guide_command  # noqa: E402 (registered after main exists)
from airwave_dagster.cli_lineup import DEMO_LIMIT, lineup_command, run_lineup  # noqa: E402
from airwave_dagster.cli_runs import runs_group  # noqa: E402

main.add_command(guide_command)
main.add_command(lineup_command)
main.add_command(runs_group)
