"""What every `airwave` verb shares: the consoles, errors, the bootstrap call, reports, progress."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console
from rich.table import Table

from airwave_dagster.cli import environment
from airwave_dagster.cli.outages import patiently
from airwave_dagster.settings import Settings, SettingsError

if TYPE_CHECKING:
    from airwave_dagster.cli import launcher, starts
    from airwave_dagster.cli.webserver import Webserver


class ExitCode(IntEnum):
    """The exit codes of every `airwave` command (README, "Exit codes")."""

    OK = 0
    RUN_FAILED = 1
    USAGE = 2  # click's own code for a bad option or argument; also an ambiguous run-id prefix
    INPUT_REFUSED = 3  # a lineup file, setting or value that was read and refused
    CONFLICT = 4  # the run or the database is in a state that forbids the request
    NOT_FOUND = 5  # no such run
    UNAVAILABLE = 6  # the database stayed unreachable while the command waited (outages.py)


def _console(*, stderr: bool) -> Console:
    if (sys.stderr if stderr else sys.stdout).isatty():
        return Console(stderr=stderr)
    # Piped or captured there is no width to fit, and whatever reads the output (a script, a
    # test, grep) wants whole lines: a hard wrap at 80 columns split "at\nrevision 0006" in a
    # checkout with a long path. Tables still take only the width their cells need.
    return Console(stderr=stderr, width=1_000_000, soft_wrap=True)


stdout = _console(stderr=False)
stderr = _console(stderr=True)


@dataclass(frozen=True)
class Snapshot:
    """How far a run has got, as its trace rows tell it."""

    built: int
    failed: int = 0
    total: int | None = None  # None until the plan is known
    phase: str | None = None  # the step running now, for jobs with several long phases
    done: str = "built"  # what `built` counts; a dry-run builds nothing (`DRY_RUN_DONE`)

    @property
    def remaining(self) -> int | None:
        """Channels neither built nor failed yet."""
        return None if self.total is None else max(self.total - self.built - self.failed, 0)

    def line(self, elapsed: float) -> str:
        """The snapshot as one plain line (for logs and pipes)."""
        parts = [f"phase {self.phase}"] if self.phase else []
        of = "?" if self.total is None else str(self.total)
        parts.append(f"channels {self.done} {self.built}/{of}, failed {self.failed}")
        if self.remaining is not None:
            parts.append(f"remaining {self.remaining}")
        parts.append(f"elapsed {_clock(elapsed)}")
        return "; ".join(parts)


DRY_RUN_DONE = "checked (would create)"
"""`Snapshot.done` of a dry-run import: each channel's pool was resolved, nothing was written."""

Progress = Callable[[], Snapshot]
"""Reads the run's progress; called about twice a second while a command waits."""


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


def error(message: str) -> None:
    """Print `error: <message>` on stderr (the caller chooses the exit code)."""
    stderr.print(f"[bold red]error:[/] {message}", highlight=False)


def fail(message: str, code: int = ExitCode.RUN_FAILED) -> NoReturn:
    """Print `error: <message>` on stderr and exit with `code`."""
    error(message)
    sys.exit(code)


def permitted(permission: str | None) -> str:
    """The principal of this CLI process, refused here (exit 4) unless it holds `permission`.

    Called before the command creates or changes anything, so a refusal leaves no trace. The
    principal is the OS user mapped by the permissions policy (docs/security.md); None checks
    nothing (the run to act on does not exist; the command says so in its own words).
    """
    from airwave_dagster.permissions import (
        PermissionDenied,
        PermissionsError,
        cli_principal,
        cli_require,
    )

    try:
        return cli_principal() if permission is None else cli_require(permission)
    except PermissionDenied as denied:
        fail(str(denied), ExitCode.CONFLICT)
    except PermissionsError as invalid:
        fail(str(invalid), ExitCode.INPUT_REFUSED)


DEFAULT_UI = "http://127.0.0.1:3000"
"""Where `airwave dev` serves the UI unless told otherwise (`--port`)."""


def run_id(text: str) -> str:
    """The run `text` names: a whole id, or a prefix only one run's id starts with.

    Call after `prepare`, which exports Dagster's storage. A prefix that matches nothing comes
    back as typed, for the command to say "no run" in its own words; an ambiguous one ends the
    command here with the candidates and exit 2 (usage: the argument does not name one run).
    """
    from airwave_dagster.cli import run_ids

    try:
        return run_ids.resolve(text)
    except run_ids.AmbiguousRunId as problem:
        fail(str(problem), ExitCode.USAGE)


def run_page(run_id: str, target: object | None = None) -> str:
    """The run's page in the Dagster UI: on the webserver `target` submits to, else `make dev`'s."""
    from airwave_dagster.cli.webserver import Webserver, WebserverTarget

    base = DEFAULT_UI
    if isinstance(target, WebserverTarget):
        base = target.server.url
    elif isinstance(target, Webserver):
        base = target.url
    return f"{base}/runs/{run_id}"


def show_run_page(run_id: str, target: object | None = None) -> None:
    """Say on stderr where the UI shows a run this command started (stdout stays the report's)."""
    stderr.print(f"run {run_id} in the Dagster UI: {run_page(run_id, target)}", highlight=False)


def prepare(*, plex: bool = False, migrate: bool = True) -> environment.Environment:
    """Resolve and export the runtime environment; with `plex`, also the Plex server.

    A setting that cannot be used ends the command with its variable's name, not a traceback
    (the permissions file with its path and key paths); with `plex`, a configured server is
    checked first (`check_plex`), before the database.
    """
    from airwave_dagster.permissions import PermissionsError, load_policy

    try:
        load_policy()  # a broken permissions file is a setting that cannot be used
    except (SettingsError, PermissionsError) as problem:
        fail(str(problem), ExitCode.INPUT_REFUSED)
    if plex:
        check_plex()
    try:
        env = environment.prepare(migrate=migrate)
        if plex:
            environment.ensure_plex(env.home)
    except SettingsError as problem:
        fail(str(problem), ExitCode.INPUT_REFUSED)
    return env


def prepare_to_start() -> Webserver | None:
    """Prepare a command that starts runs; the webserver of this home that will take them, if any.

    With a webserver up, its own processes run the runs in the environment it was started with,
    and it ran the migrations when it started: this process only needs the database (for the
    idempotency slot), so it answers without Alembic, Plex or Dagster. Without one, the command
    starts a code server of its own, which needs all of it (`console.target_for`).
    """
    from airwave_dagster.cli import webserver

    try:
        server = webserver.find(environment.dagster_home())
    except SettingsError as problem:
        fail(str(problem), ExitCode.INPUT_REFUSED)
    if server is not None:
        _refuse_other_settings(server)
        check_plex()
    env = prepare(plex=server is None, migrate=server is None)
    if server is not None and server.database is not None:
        where = f"database {server.database}, Plex {server.plex_url or 'unset'}"
        whose = f" (those of the webserver on port {server.port})"
    else:
        where = f"database {environment.redact(env.database_url)}, Plex {Settings.load().plex_url}"
        whose = ""
    stderr.print(f"runs use {where}{whose}", highlight=False, markup=False)
    return server


def _refuse_other_settings(server: Webserver) -> None:
    """End the command when its explicit settings name another database or Plex than the server's.

    A webserver of this home takes the command's runs and runs them with the settings it was
    started with: a `PLEX_URL=… airwave import` would otherwise resolve every pool against the
    server's Plex without a word (issue 27, item 3).
    """
    from airwave_dagster.cli import webserver

    settings = Settings.load()
    differ: list[str] = []
    if (
        settings.database_url
        and server.database_digest is not None
        and webserver.database_digest(settings.database_url) != server.database_digest
    ):
        differ.append(
            f"AIRWAVE_DATABASE_URL is {environment.redact(settings.database_url)}, "
            f"the server's is {server.database}"
        )
    if settings.plex_url and server.database is not None:
        theirs = (server.plex_url or "").rstrip("/")
        if settings.plex_url.rstrip("/") != theirs:
            differ.append(f"PLEX_URL is {settings.plex_url}, the server's is {theirs or 'unset'}")
    if differ:
        fail(
            f"the webserver of this home (port {server.port}) would run this command's runs with "
            f"its own settings, and they differ: {'; '.join(differ)}. Unset them to use the "
            "server's, or stop it (`airwave dev` / `airwave serve`) to run with yours",
            ExitCode.INPUT_REFUSED,
        )


def check_plex() -> None:
    """Refuse a configured Plex that is unreachable or refuses the token: exit 3, under 1 s.

    Runs before anything is started or launched (`plex_check`). The bundled emulator needs no
    check: the bootstrap starts it and waits until it answers. Attached, the token may come from
    Airwave's media source rather than `PLEX_TOKEN`, which only the bootstrap resolves.
    """
    from airwave_dagster.cli import plex_check

    settings = Settings.load()
    if not settings.plex_url or settings.attached:
        return
    token = settings.plex_token.get_secret_value() if settings.plex_token else None
    refusal = plex_check.problem(settings.plex_url, token)
    if refusal is not None:
        fail(refusal, ExitCode.INPUT_REFUSED)


@contextmanager
def target_for(server: Webserver | None) -> Iterator[starts.Target]:
    """`server` (found by `prepare_to_start`), else a code server started for this block.

    Without a webserver the code server started here launches the run, and must outlive it when
    no daemon runs: callers wait for the run inside the block.
    """
    if server is not None:
        from airwave_dagster.cli.webserver import WebserverTarget

        yield WebserverTarget(server)
        return
    from airwave_dagster.cli import launcher

    dagster_instance = instance()
    with launcher.workspace(dagster_instance) as context:
        yield launcher.CodeServerTarget(dagster_instance, context)


def instance() -> Any:
    """The Dagster instance of `$DAGSTER_HOME` (the one the UI shows)."""
    # Imported here: `airwave --help` and `airwave schema` should not pay for loading Dagster.
    import dagster as dg

    return dg.DagsterInstance.get()


def wait_showing_progress(
    instance: Any,
    run_id: str,
    progress: Progress,
    target: starts.Target | None = None,
) -> None:
    """Block until the run finishes, showing its progress on stderr.

    On a terminal this is a live `rich` display (built / failed / remaining, elapsed, ETA, the
    current phase, or "queued" while the run waits in the queue); piped, one plain line whenever
    the numbers change. Never on stdout, which belongs to the report (and to `--json`). A queued
    run that nothing takes is launched through `target` (`Target.take_if_unserved`).
    """
    from airwave_dagster.durability import wakeups

    started = time.monotonic()
    watch = _watch(instance, run_id, target)
    # Polled every 0.5 s, and at once when a run ends (durability/wakeups.py).
    with wakeups.pauses(instance) as pause:
        if stderr.is_terminal:
            _live_progress(watch, progress, started, pause)
            return
        last: tuple[bool, Snapshot] | None = None
        while (queued := _queued_or_finished(watch)) is not None:
            now = (queued, patiently(progress, waiting_for=f"run {run_id}"))
            if now != last:
                line = "queued" if queued else now[1].line(time.monotonic() - started)
                stderr.print(f"  {line}", highlight=False)
                last = now
            pause(0.5)


def _watch(instance: Any, run_id: str, target: starts.Target | None) -> launcher.RunWatch:
    from airwave_dagster.cli import launcher

    return launcher.RunWatch(
        instance, run_id, target.take_if_unserved if target is not None else None
    )


def _queued_or_finished(watch: launcher.RunWatch) -> bool | None:
    """None once the run stopped (or is gone); else whether it still waits in the queue."""
    from airwave_dagster.suspension import has_stopped

    current = watch.run()
    if current is None or has_stopped(current):
        return None
    return bool(current.status.value in ("QUEUED", "NOT_STARTED"))


def _live_progress(
    watch: launcher.RunWatch,
    progress: Progress,
    started: float,
    pause: Callable[[float], None],
) -> None:
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=stderr, transient=False) as display:
        task = display.add_task("queued", total=None, counts="")
        while (queued := _queued_or_finished(watch)) is not None:
            now = patiently(progress, waiting_for=f"run {watch.run_id}")
            counts = f"{now.done} {now.built}, failed {now.failed}"
            if now.remaining is not None:
                counts += f", remaining {now.remaining}"
            display.update(
                task,
                description="queued"
                if queued
                else now.phase or ("building" if now.total is not None else "planning"),
                completed=now.built + now.failed,
                total=now.total,
                counts=counts,
            )
            pause(0.5)
        display.update(task, description="finished")


def print_markdown(text: str) -> None:
    """A Markdown document on stdout: rendered on a terminal, the text itself when piped.

    Piped or redirected, the Markdown is what a script or a file wants (and `--json` carries it
    unchanged); a person at a terminal reads headings, lists and tables, not `|---:|`.
    """
    if stdout.is_terminal:
        from rich.markdown import Markdown

        stdout.print(Markdown(text))
    else:
        stdout.file.write(text)
        stdout.file.flush()


def print_import_report(report: dict[str, Any]) -> None:
    """The report of an `import_lineup` run: one row per channel, then the totals.

    The rows and the counts come from the same formatter as the run page's table metadata, so
    the terminal and the UI word a dry-run alike ("would create", "channels_to_create").
    """
    # Imported here: the checkpoint models load Dagster, which `airwave --help` should not pay.
    from ops.lineup_import.checkpoints import OUTCOME_COLUMNS, ImportReport, outcome_rows

    parsed = ImportReport.model_validate(report)
    title = "Dry-run report (nothing was written)" if parsed.dry_run else "Import report"
    table = Table(title=f"{title}: {parsed.lineup_name}")
    for column in OUTCOME_COLUMNS:
        table.add_column(
            column, justify="right" if column in ("number", "pool", "slots") else "left"
        )
    for row in outcome_rows(parsed):
        table.add_row(
            *("" if row[column] is None else str(row[column]) for column in OUTCOME_COLUMNS)
        )
    stdout.print(table)
    counts = ", ".join(
        f"{name.replace('_', ' ')} {value}" for name, value in parsed.counts().items()
    )
    stdout.print(counts, highlight=False)
