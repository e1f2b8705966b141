"""Riding out an unreachable database while a command waits for a run."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

OUTAGE_PATIENCE_SECONDS = 600.0
"""How long a command waiting for a run keeps reading through an unreachable database."""
_POLL_SECONDS = 2.0


class DatabaseUnreachable(RuntimeError):
    """The database stayed unreachable for `OUTAGE_PATIENCE_SECONDS` while a command waited."""


def _storage_errors() -> tuple[type[BaseException], ...]:
    """What a read raises while Postgres is down or restarting (imported late: Dagster is heavy)."""
    import sqlalchemy.exc
    from dagster_postgres.utils import DagsterPostgresException

    return (
        DagsterPostgresException,
        sqlalchemy.exc.OperationalError,
        sqlalchemy.exc.InterfaceError,
    )


def innermost(error: BaseException) -> str:
    """The first line of the innermost error of a chain: the driver's words, not a wrapper's."""
    while error.__cause__ is not None:
        error = error.__cause__
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def _say(message: str) -> None:
    # Plain stderr, not the rich console: the console module imports this one, and a live
    # progress display redirects stderr above itself, so the line is never lost.
    print(message, file=sys.stderr, flush=True)


def patiently(read: Callable[[], T], *, waiting_for: str) -> T:
    """`read()`, retried while the database is unreachable, for up to `OUTAGE_PATIENCE_SECONDS`.

    A command waiting for a run only reads its state: a Postgres restart must not end it with a
    traceback while the run rides the outage out, or fails and can be resumed. dagster-postgres
    retries each connection for about 11 s; this outlasts longer outages, says so once on
    stderr, and raises `DatabaseUnreachable` (exit code 6) with the driver's error when the
    database stays away. The run itself is never touched.

    Args:
        read: One read of the database (run status, progress counts, the run tree).
        waiting_for: What the command waits for, for the messages ("run 1234…").
    """
    unreachable_since: float | None = None
    while True:
        attempted = time.monotonic()
        try:
            value = read()
        except _storage_errors() as problem:
            now = time.monotonic()
            if unreachable_since is None:
                # From the start of the read that failed: it already spent dagster-postgres'
                # own retries.
                unreachable_since = attempted
                _say(
                    f"the database is unreachable ({innermost(problem)}); still waiting for "
                    f"{waiting_for}, for up to {OUTAGE_PATIENCE_SECONDS:.0f} s"
                )
            elif now - unreachable_since >= OUTAGE_PATIENCE_SECONDS:
                raise DatabaseUnreachable(
                    f"the database stayed unreachable for {now - unreachable_since:.0f} s while "
                    f"waiting for {waiting_for} ({innermost(problem)}); the run is not affected "
                    "by this command ending: `airwave runs show RUN_ID` once Postgres is back"
                ) from problem
            time.sleep(_POLL_SECONDS)
            continue
        if unreachable_since is not None:
            lasted = time.monotonic() - unreachable_since
            _say(f"the database is reachable again after {lasted:.0f} s")
        return value
