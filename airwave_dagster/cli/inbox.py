"""`airwave inbox`: what the upload sensor did with the files dropped into the inbox."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import click

from airwave_dagster.cli import console
from airwave_dagster.settings import Settings

_ERROR_SUFFIX = ".error.txt"


def _when(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@dataclass(frozen=True)
class Rejection:
    """One file the sensor refused, when, and its reason (every problem, by JSON path)."""

    file: str
    rejected_at: str
    reason: str


@dataclass(frozen=True)
class InboxState:
    """The inbox as its files tell it."""

    inbox: str
    waiting: list[str]
    rejected: list[Rejection]
    rejected_total: int
    processed_total: int


def inbox_state(inbox: Path, limit: int) -> InboxState:
    """Waiting files, the newest `limit` rejections, and how many files were taken or refused.

    A rejection is the `<name>.error.txt` the sensor writes beside a file it moved to
    `rejected/` (sensors/lineup_upload.py); the same outcome is an observation of the
    `lineup_inbox` asset in the UI.
    """
    waiting = (
        sorted(p.name for p in inbox.glob("*.json") if p.is_file() and not p.is_symlink())
        if inbox.is_dir()
        else []
    )
    folder = inbox / "rejected"
    errors = sorted(
        folder.glob(f"*{_ERROR_SUFFIX}") if folder.is_dir() else [],
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    processed = inbox / "processed"
    return InboxState(
        inbox=str(inbox),
        waiting=waiting,
        rejected=[
            Rejection(
                file=error.name[: -len(_ERROR_SUFFIX)],
                rejected_at=_when(error),
                reason=error.read_text(encoding="utf-8", errors="replace").strip(),
            )
            for error in errors[:limit]
        ],
        rejected_total=len(errors),
        processed_total=len(list(processed.iterdir())) if processed.is_dir() else 0,
    )


@click.command("inbox")
@click.option(
    "--limit", default=10, show_default=True, type=click.IntRange(1), help="Rejections shown."
)
@click.option("--json", "as_json", is_flag=True, help="Print the state as JSON.")
def inbox_command(limit: int, as_json: bool) -> None:
    """List the upload inbox: files waiting, and the newest rejections with their reasons."""
    state = inbox_state(Settings.load().resolved_inbox(), limit)
    if as_json:
        print(json.dumps(asdict(state), indent=2))
        return
    out = console.stdout
    out.print(f"inbox {state.inbox}", highlight=False, markup=False)
    out.print(
        f"waiting: {', '.join(state.waiting) or 'none'}; processed: {state.processed_total}; "
        f"rejected: {state.rejected_total}",
        highlight=False,
        markup=False,
    )
    for entry in state.rejected:
        out.print(
            f"\n{entry.rejected_at}  {entry.file}\n  {entry.reason}", highlight=False, markup=False
        )
