"""The local check `airwave import` runs on a lineup file before it starts anything.

Size, UTF-8, JSON and the full v1 validation run in this process, before Postgres, the Plex
emulator or a Dagster run is started: a refused file is answered in well under a second, and
creates no run. Kept free of dagster, sqlalchemy and the environment module for that reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

from airwave_dagster.cli.console import ExitCode


def refuse_invalid_lineup(path: Path) -> None:
    """Exit with `ExitCode.INPUT_REFUSED`, listing every problem, if the lineup file is invalid.

    A path that cannot be read is left to the import itself, which reports it.

    Args:
        path: The lineup file named on the command line.
    """
    from airwave_dagster.domain.errors import AirwaveError
    from airwave_dagster.domain.lineup_file import check_lineup_size, parse_lineup

    try:
        size = path.stat().st_size
    except OSError:
        return
    try:
        # By size first, so a huge file is never read into memory.
        check_lineup_size(size, source=path.name)
        parse_lineup(path.read_bytes(), source=path.name)
    except AirwaveError as error:
        print(f"error: {error}", file=sys.stderr)
        print("input refused: nothing was started or written", file=sys.stderr)
        sys.exit(ExitCode.INPUT_REFUSED)
    except OSError:
        return
